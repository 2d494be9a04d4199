"""Every consumer offers every registered method: the app, the charts, ``pass_core.generate`` and
``pass_core.bench`` read ``pass_core.registry.METHODS`` and nothing else.

A fake extra method ("echo": AR's decoding under another key, name and colour) is registered for
the length of a test; each consumer must then offer it with no edit of its own.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import gradio as gr
import pytest

from pass_core import generate, registry
from pass_core.bench import run as bench
from pass_core.registry import BASELINE, METHODS
from playground import race_charts as charts
from playground import race_text

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from playground import page  # noqa: E402
from playground.race_inputs import RaceRequest

ECHO_COLOUR = "#123456"


@pytest.fixture
def echo(monkeypatch):
    """Register "echo" (decodes like AR) for one test; the registry is restored afterwards."""
    method = dataclasses.replace(METHODS["ar"], key="echo", label="Echo (test method)", short_name="Echo",
                                 colour=ECHO_COLOUR, description="AR under another name, for the registry test")
    monkeypatch.setitem(registry.METHODS, "echo", method)
    return method


def test_registry_records_are_complete_and_distinct():
    assert BASELINE == "ar" and next(iter(METHODS)) == BASELINE
    assert {"ar", "pass", "fixed-token", "parallelspec"} <= set(METHODS)
    for key, m in METHODS.items():
        assert m.key == key and m.label and m.short_name and m.description, key
        assert re.fullmatch(r"#[0-9A-Fa-f]{6}", m.colour), key
    for field in ("label", "short_name", "colour"):
        values = [getattr(m, field) for m in METHODS.values()]
        assert len(set(values)) == len(values), f"two methods share a {field}: {values}"
    assert registry.get_method("pass") is METHODS["pass"]
    with pytest.raises(ValueError, match="Unknown method 'medusa'"):
        registry.get_method("medusa")


def test_app_offers_every_registered_method(tiny, echo):
    demo = page.build_demo(tiny, untrained_drafters=True)  # the tiny model has no trained files: offer them anyway
    boxes = [c for c in demo.blocks.values() if isinstance(c, gr.CheckboxGroup) and c.label == "methods to race"]
    assert len(boxes) == 1
    assert [tuple(choice) for choice in boxes[0].choices] == [(m.label, key) for key, m in METHODS.items()]
    assert boxes[0].value == ["ar", "pass", "parallelspec"]  # the default selection
    panes = [c for c in demo.blocks.values() if isinstance(c, gr.HighlightedText)]
    tree_panes = [p for p in panes if p.elem_id.endswith("-tree")]  # one per tree-capable method, hidden
    assert [p.elem_id for p in tree_panes] == [f"pane-{key}-tree" for key, m in METHODS.items() if m.tree]
    assert not any(p.visible for p in tree_panes)
    panes = [p for p in panes if not p.elem_id.endswith("-tree")]
    assert [(p.elem_id, p.label) for p in panes] == [(f"pane-{key}", m.label) for key, m in METHODS.items()]
    assert [p.visible for p in panes] == [key in page.DEFAULT_RACE for key in METHODS]
    assert [u["visible"] for u in page.pane_visibility(["ar", "echo"])] == [key in ("ar", "echo") for key in METHODS]
    assert page.race_keys(["echo", "ar"]) == ("ar", "echo")
    assert page.validate_inputs("Hi", 2, 0.0, 0, 1.0, 8, 0, True, False, ["ar", "echo"])[-1]["is_valid"]


def test_app_races_a_registered_method(tiny, echo):
    outs = list(page.race_handler(tiny, RaceRequest("Hello there", 2, 0.0, 0, 1.0, 6, 0, True, False, ["echo", "ar"]),
                                 update_interval_s=0.0))
    final = outs[-1]
    panes = dict(zip(METHODS, final))
    assert panes["echo"] == panes["ar"] and panes["echo"]  # decodes like AR, in its own pane
    assert all(not panes[key] for key in METHODS if key not in ("ar", "echo"))
    texts = final[len(METHODS):]
    assert any("Echo output is identical to AR" in str(t) for t in texts)
    latency = next(t["value"] for t in texts if hasattr(t.get("value") if isinstance(t, dict) else None, "data"))
    assert [(tr.name, tr.line.color) for tr in latency.data] == [("AR", METHODS["ar"].colour), ("Echo", ECHO_COLOUR)]


def test_app_names_no_method_beyond_its_default_selection():
    source = "\n".join((REPO / name).read_text(encoding="utf-8") for name in ("app.py", "playground/race_handlers.py", "playground/race_inputs.py"))
    lines = [ln for ln in source.splitlines() if re.search(r"""["'](pass|fixed-token|parallelspec)["']""", ln)]
    assert lines == ['DEFAULT_RACE = ("ar", "pass", "parallelspec")'], lines


def test_charts_take_names_and_colours_from_the_registry(echo):
    from pass_core.decoding.events import StepEvent, TokenRecord
    from pass_core.decoding.metrics import summarize

    events = {key: [StepEvent(method=key, step=1, tokens=(TokenRecord(1, "a", "target"),), step_s=0.01)]
              for key in METHODS}
    for figure in (charts.latency_figure(events), charts.cumulative_figure(events)):
        assert [(t.name, t.line.color) for t in figure.data] == [(m.short_name, m.colour) for m in METHODS.values()]
    summaries = {key: summarize(evs, key) for key, evs in events.items()}
    hist = charts.acceptance_histogram_figure(summaries)
    assert [(t.name, t.marker.color) for t in hist.data] == \
        [(m.short_name, m.colour) for key, m in METHODS.items() if key != BASELINE]
    metrics = race_text.metric_texts(summaries)
    for m in METHODS.values():
        assert f"{m.short_name} " in metrics["tokens_per_s"], m.key
    assert charts.legend_names(METHODS, fused=True) == \
        {key: m.short_name + (" (fused)" if m.fusable else "") for key, m in METHODS.items()}


def test_generate_offers_every_registered_method(echo):
    parser = generate.build_parser()
    action = next(a for a in parser._actions if "--method" in a.option_strings)
    assert list(action.choices) == list(METHODS)
    assert parser.parse_args(["--method", "echo", "--prompt", "hi"]).method == "echo"


class _Reached(Exception):
    """Raised by the fake model loader: the command line was accepted."""


def test_bench_accepts_every_registered_method(echo, monkeypatch):
    def fake_load(*args, **kwargs):
        raise _Reached

    monkeypatch.setattr(bench, "load_model", fake_load)
    with pytest.raises(_Reached):
        bench.main(["--methods", ",".join(METHODS), "--no-progress"])
    with pytest.raises(SystemExit) as err:
        bench.main(["--methods", "ar,medusa", "--no-progress"])
    assert err.value.code == 2
    help_text = next(a for a in bench.build_parser()._actions if "--methods" in a.option_strings).help
    assert all(key in help_text for key in METHODS)


@pytest.mark.parametrize("prompt, message", [("   ", "The prompt is empty"), ("x" * 100_001, "the limit is 100,000")])
def test_generate_refuses_an_unusable_prompt_before_loading(prompt, message, monkeypatch, capsys):
    monkeypatch.setattr(generate, "load_model", lambda *a, **k: pytest.fail("must not load the model"))
    assert generate.main(["--prompt", prompt]) == 2
    assert message in capsys.readouterr().err


def test_tree_entry_names_read_back_and_nothing_else_reads_as_one():
    """One naming of a token-tree entry, shared by the race, the trace check and the page: every tree-capable
    method with N = 1..MAX_TREE_NODES reads back; a method's own key, another variant, a method without trees,
    N = 0, N over the maximum, a leading 0 and a non-ASCII digit do not."""
    from pass_core.decoding.settings import MAX_TREE_NODES
    from pass_core.registry import tree_entry, tree_entry_nodes

    trees = [key for key, m in METHODS.items() if m.tree]
    assert trees and all(tree_entry_nodes(tree_entry(key, n)) == n for key in trees for n in range(1, MAX_TREE_NODES + 1))
    not_tree = next(key for key, m in METHODS.items() if not m.tree)
    for name in ("pass", "pass+banana", "pass+fused", f"{not_tree}+tree8", "pass+tree0", "pass+tree08",
                 f"pass+tree{MAX_TREE_NODES + 1}", "pass+tree²", "pass+tree", "medusa+tree8", "+tree8"):
        assert tree_entry_nodes(name) is None, name
