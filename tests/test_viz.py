"""``playground`` (the UI package): the race's display helpers on hand-made events, the benchmark's HTML
report, and the rooms (``pass_core`` imports neither plotly nor gradio)."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pass_core.bench import run as bench
from pass_core.decoding.events import DraftRecord, StepEvent, TokenRecord
from pass_core.decoding.metrics import RunSummary, summarize
from pass_core.registry import METHODS
from playground import bench_html
from playground import race_charts as charts
from playground import race_panes as panes
from playground import race_text
from playground import race_inputs
from playground.race_view import empty_output_notes, race_view

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "pass_core"


def events_of(method: str, ids: list[int]) -> list[StepEvent]:
    return [StepEvent(method=method, step=i + 1, tokens=(TokenRecord(t, f"<{t}>", "target"),))
            for i, t in enumerate(ids)]


def summary(**fields) -> RunSummary:
    return RunSummary(**{**vars(summarize([])), **fields})


# --- race_charts ------------------------------------------------------------------------------

def test_greedy_check_points_at_first_divergence():
    same = race_text.greedy_check({"ar": events_of("ar", [1, 2, 3]), "pass": events_of("pass", [1, 2, 3])}, True, True)
    assert same == "✓ **Greedy check: PaSS output is identical to AR** (3 tokens)."
    message = race_text.greedy_check({"ar": events_of("ar", [1, 2, 3]), "pass": events_of("pass", [1, 5, 3])}, True, True)
    assert "PaSS differs from AR at token 1" in message and "<2>" in message and "<5>" in message
    assert "after `'<1>'`" in message  # the reference's text before the difference
    three = race_text.greedy_check({"ar": events_of("ar", [1, 2]), "pass": events_of("pass", [1, 2]),
                                 "parallelspec": events_of("parallelspec", [1, 2, 4])}, True, True)
    assert "PaSS output is identical" in three and "ParallelSpec: same first 2 tokens" in three
    assert "AR 2 tokens, ParallelSpec 3 tokens." in three  # both lengths with their unit ("ParallelSpec 3.")
    running = race_text.greedy_check({"ar": events_of("ar", [1, 2]), "pass": events_of("pass", [1])}, True, False)
    assert running.startswith("…") and "(1 token compared)" in running  # not "1 tokens"
    assert "by design" in race_text.greedy_check({"ar": [], "pass": []}, False, True)


def test_unreached_draft_position_draws_no_bar():
    """A position no verification reached has no conditional value: no bar, not a 0 % bar."""
    s = summary(method="pass", steps=3, per_position_unconditional=[0.5, 0.0, 0.0],
                per_position_conditional=[0.5, 0.0, None])
    conditional, unconditional = charts.position_acceptance_figure({"ar": None, "pass": s}).data
    assert list(conditional.y) == [0.5, 0.0, None] and list(unconditional.y) == [0.5, 0.0, 0.0]
    assert conditional.marker.color == METHODS["pass"].colour


def test_compute_line_counts_drafter_passes_apart():
    with_drafter = summary(method="parallelspec", tokens=40, steps=30, verification_steps=25, forward_passes=40,
                           drafter_passes=40, compute_time_s=1.0, ms_per_step=33.3)
    line = race_text.compute_line({"ar": summary(method="ar", tokens=40, steps=40, forward_passes=40),
                                "parallelspec": with_drafter, "pass": None})
    assert line.splitlines()[0].startswith("**AR** 40 tokens in 40 steps, 40 forward passes,")
    assert "**ParallelSpec** 40 tokens in 30 steps (25 verification steps), 40 target + 40 drafter passes" in line
    assert "PaSS" not in line  # no step yet
    assert "EOS" not in line
    ended = race_text.compute_line({"pass": summary(method="pass", tokens=37, steps=16, verification_steps=15,
                                                    forward_passes=32, finish_reason="eos")})
    assert ended.endswith("ms/step); it wrote the end-of-text token (EOS)"), ended


def test_metric_texts_use_the_speedup_and_short_names():
    ar = summary(method="ar", tokens=10, steps=10, tokens_per_s=20.0, tokens_per_forward_pass=1.0,
                 mean_accepted_tokens=1.0)
    ps = summary(method="pass", tokens=10, steps=4, tokens_per_s=30.0, accepted_drafts=3, judged_drafts=8,
                 drafted_tokens=12, acceptance_rate=3 / 8)
    texts = race_text.metric_texts({"ar": ar, "pass": ps, "parallelspec": None})
    # its baseline next; a method with no step yet says so ("–×" read as a broken number)
    assert texts["speedup"] == f"PaSS 1.50×  ·  ParallelSpec not yet\n{race_text.UNKNOWN_BASELINE}"
    assert texts["acceptance_rate"] == "PaSS 37.5% (3 of 8 judged drafts; 12 drafted)  ·  ParallelSpec –"
    assert texts["tokens_per_s"] == "AR 20.0  ·  PaSS 30.0  ·  ParallelSpec –"
    # mean accepted tokens per verification step: "–" for a drafting method without one (it read 2.00 after a
    # PaSS prefill of 2 tokens); AR keeps its 1.00
    prefill = summary(method="pass", tokens=2, steps=1, verification_steps=0, mean_accepted_tokens=2.0)
    verified = summary(method="parallelspec", tokens=5, steps=3, verification_steps=2, mean_accepted_tokens=2.0)
    shown = race_text.metric_texts({"ar": ar, "pass": prefill, "parallelspec": verified})["mean_accepted_tokens"]
    assert shown == "AR 1.00  ·  PaSS –  ·  ParallelSpec 2.00", shown


def test_rejected_css_selector_matches_the_rejected_colour():
    colour = charts.TOKEN_COLORS["rejected draft"]
    rgb = ", ".join(str(int(colour[i:i + 2], 16)) for i in (1, 3, 5))
    assert charts.rejected_css_selector() == f'.token-pane .token[style*="{rgb}"] .text'


def timed(method: str, ms: list[float], labels: tuple[str, ...] = ("target",)) -> list[StepEvent]:
    """One step per entry of ``ms`` (its ``step_s``), each with one token per label."""
    return [StepEvent(method=method, step=i + 1, step_s=t / 1000,
                      tokens=tuple(TokenRecord(i, f"<{i}{label[0]}>", label) for label in labels))
            for i, t in enumerate(ms)]


def race_figures(events, revision="race-1"):
    summaries = {key: summarize(evs, key) for key, evs in events.items()}
    return (charts.latency_figure(events, revision=revision), charts.cumulative_figure(events, revision=revision),
            charts.acceptance_histogram_figure(summaries, revision=revision),
            charts.position_acceptance_figure(summaries, revision=revision))


def test_a_tree_entry_is_told_apart_from_its_method_in_every_chart():
    """"PaSS" and "PaSS +tree8" shared one colour in every chart (their bars side by side looked like one): the tree
    entry takes a lighter tint of its method's colour, and its lines are dotted; its hatched (unconditional) bar is
    crossed, in its method's full colour (hatching in the tint was barely visible on white)."""
    events = {"pass": timed("pass", [60, 12], ("accepted", "bonus")),
              "pass+tree8": timed("pass+tree8", [70, 14], ("accepted", "accepted", "bonus"))}
    for figure in race_figures(events):
        by_name = {}
        for trace in figure.data:
            method = "pass+tree8" if "+tree8" in trace.name else "pass"
            line = trace.type == "scatter"
            look = trace.line.color if line else (trace.marker.pattern.fgcolor or trace.marker.color)
            by_name.setdefault(method, set()).add((look, trace.line.dash if line else trace.marker.pattern.shape))
            if trace.name.endswith("unconditional"):
                assert trace.marker.pattern.fgcolor == trace.marker.line.color == METHODS["pass"].colour, trace.name
        assert by_name["pass"].isdisjoint(by_name["pass+tree8"]), (figure.layout.xaxis.title.text, by_name)
    # a tree variant's colour: its method's, halfway to white
    assert charts.colour("pass") == METHODS["pass"].colour and charts.colour("pass+tree8") == "#80b8d8"


def test_the_default_races_lines_take_no_token_colour():
    """The default race's methods (AR, PaSS, ParallelSpec) draw their lines and bars in colours that no token label
    has: PaSS's line was green, the accepted drafts' colour, beside the panes (helper 84)."""
    from playground.race_inputs import DEFAULT_RACE

    tokens = {c.upper() for c in charts.TOKEN_COLORS.values()}
    assert len(DEFAULT_RACE) >= 3 and not {METHODS[k].colour.upper() for k in DEFAULT_RACE} & tokens


def test_every_figure_keeps_the_users_zoom_for_the_whole_race():
    """Issue 12 item 6: Plotly.react keeps zoom and hidden legend entries only while layout.uirevision is the
    same: constant within a race (every redraw), new for the next race."""
    events = {"ar": timed("ar", [50, 10]), "pass": timed("pass", [60, 12], ("accepted", "bonus"))}
    for figure in race_figures(events, "race-1"):
        assert figure.layout.uirevision == "race-1"
    more = {"ar": timed("ar", [50, 10, 11, 9]), "pass": timed("pass", [60, 12, 13], ("accepted", "bonus"))}
    assert [f.layout.uirevision for f in race_figures(more, "race-1")] == ["race-1"] * 4
    view = race_view(events, True, True, False, False, revision="race-7")
    assert [f.layout.uirevision for f in view.figures] == ["race-7"] * 4


def test_mid_race_charts_get_sensible_axes():
    """Issue 12 item 6: two steps at 782 and 784 ms drew a y axis 782-784 and an x axis -1..6: y now starts
    at 0 and the step axis spans steps up to at least MIN_STEPS_SHOWN."""
    events = {"ar": timed("ar", [900, 782, 784])}
    latency, cumulative, *_ = race_figures(events)
    assert latency.layout.yaxis.rangemode == "tozero"
    assert tuple(latency.layout.xaxis.range) == (charts.FIRST_PER_STEP - 0.5, charts.MIN_STEPS_SHOWN + 0.5)
    assert cumulative.layout.xaxis.rangemode == "tozero" and cumulative.layout.yaxis.rangemode == "tozero"
    long = {"ar": timed("ar", [1.0] * 25)}
    assert latency_range(long) == (1.5, 25.5)  # past the minimum the axis follows the race


def latency_range(events) -> tuple:
    return tuple(charts.latency_figure(events).layout.xaxis.range)


def test_latency_chart_leaves_out_the_prefill_step_and_the_run_line_states_it():
    """Issue 12 item 6: the first step holds the prompt prefill: it is stated apart, not drawn as a spike."""
    events = {"ar": timed("ar", [912.4, 10, 11]), "pass": timed("pass", [1500, 12], ("accepted", "bonus"))}
    ar, ps = charts.latency_figure(events).data
    assert list(ar.x) == [2, 3] and list(ar.y) == [10, 11] and list(ps.x) == [2]
    assert race_text.prefill_line(events) == ("**First step** (prompt prefill + first token, not in the latency "
                                           "chart): AR 912 ms  ·  PaSS 1,500 ms")
    assert race_text.prefill_line({"ar": []}) == ""
    assert "AR 912 ms" in race_view(events, True, True, False, False).run_line
    race = charts.cumulative_figure(events)
    assert len(race.data[0].x) == 4  # the race itself keeps every step (and 0)
    last = max(trace.x[-1] for trace in race.data)  # the slowest line ends inside the plot, not on its edge
    assert race.layout.xaxis.range[0] == 0 and race.layout.xaxis.range[1] == pytest.approx(1.03 * last)


def test_legends_sit_under_the_axes():
    """Issue 12 item 6: a legend above the plot wrapped over the axes on a phone; it now sits under the x axis."""
    for figure in race_figures({"ar": timed("ar", [5, 5]), "pass": timed("pass", [5, 5], ("accepted",))}):
        assert figure.layout.legend.yref == "container" and figure.layout.legend.yanchor == "bottom"
        assert figure.layout.legend.y == 0


def test_each_pane_legend_lists_only_the_labels_its_method_can_produce():
    """Issue 12 item 6: the AR pane listed all six labels; plain AR (no drafter) writes AR target tokens only."""
    assert list(charts.pane_colours("ar")) == ["AR target"]
    for key, method in METHODS.items():
        expected = {"AR target"} if method.drafter is None else \
            {"exact", "accepted draft", "rejected draft", "resampled", "bonus"}
        assert set(charts.pane_colours(key)) == expected, key
        assert all(charts.pane_colours(key)[label] == charts.TOKEN_COLORS[label] for label in expected)
    assert charts.pane_colours("unregistered") == charts.TOKEN_COLORS


def test_panes_mark_step_boundaries():
    """Issue 12 item 6: an unlabelled mark between two steps (none before the first, none for a step that
    adds no text), drawn as a bar by the page's CSS; the text without the marks is the output."""
    events = [StepEvent(method="pass", step=1, tokens=(TokenRecord(1, "A", "exact"),)),
              StepEvent(method="pass", step=2, tokens=(TokenRecord(2, "b", "accepted"), TokenRecord(3, "x", "rejected"),
                                                       TokenRecord(4, "c", "resampled"))),
              StepEvent(method="pass", step=3, tokens=(TokenRecord(5, "", "exact"),)),  # half a character
              StepEvent(method="pass", step=4, tokens=(TokenRecord(6, "é", "exact"),))]
    mark = (panes.STEP_MARK, None)
    assert panes.highlighted_tokens(events) == [("A", "exact"), mark, ("b", "accepted draft"), ("x", "rejected draft"),
                                                 ("c", "resampled"), mark, ("é", "exact")]
    assert panes.pane_text(panes.highlighted_tokens(events, show_rejected=False)) == "Abcé"
    assert mark not in panes.highlighted_tokens(events, step_marks=False)
    # the page's CSS draws the mark as a bar and keeps blank lines: tests/test_browser.py measures both in Chromium


def test_a_committed_newline_has_a_visible_coloured_piece():
    """gradio draws a newline as a line break of no width: an exact, accepted or resampled token "\n" had no colour
    and nothing to click (a step of 3 tokens showed 2). Each committed token shows ``NEWLINE_MARK`` before its first
    newline and keeps the line breaks; a rejected one stays one symbol; the pane's text is still the output."""
    tokens = (TokenRecord(1, "Hi", "exact"), TokenRecord(2, "\n", "accepted"), TokenRecord(3, "\n", "rejected"),
              TokenRecord(4, ".\n\n", "resampled"), TokenRecord(5, "\n  x", "bonus"))
    events = [StepEvent(method="pass", step=1, tokens=tokens)]
    assert panes.highlighted_tokens(events) == [("Hi", "exact"), ("↵\n", "accepted draft"), ("↵", "rejected draft"),
                                                 (".↵\n\n", "resampled"), ("↵\n  x", "bonus")]
    assert panes.pane_text(panes.highlighted_tokens(events, show_rejected=False)) == "Hi\n.\n\n\n  x"


# --- bench_html -------------------------------------------------------------------------------

def entry(speedup: float, rate: float | None, conditional: list) -> dict:
    return {"speedup": speedup, "speedup_min": speedup - 0.1, "speedup_max": speedup + 0.1,
            "acceptance_rate": rate, "per_position_conditional": conditional}


def fake_report() -> dict:
    """A small report as ``pass_core.bench`` builds it: AR, PaSS and the fixed-token baseline at L=3, T=0."""
    return {"command": "python -m pass_core.bench", "machine": {"cpu": "test", "gpu": None},
            "method_notes": {"pass L=3": "x <y>"},
            "summary": {"ar": {"L=3,T=0": entry(1.0, None, [])},
                        "pass": {"L=3,T=0": entry(0.8, 0.4, [0.5, 0.3, None])},
                        "fixed-token": {"L=3,T=0": entry(0.5, 0.1, [0.1, 0.0, 0.0])}}}


def test_html_report_has_the_figures(tmp_path):
    report = fake_report()
    figures = [make(report) for make in bench_html.FIGURES]
    assert [len(f.data) for f in figures] == [2, 2, 4, 2]
    lines = figures[0].data  # names and colours come from the registry
    assert [t.line.color for t in lines] == [METHODS["pass"].colour, METHODS["fixed-token"].colour]
    assert lines[0].name == f"{METHODS['pass'].short_name}, T=0"
    assert list(figures[3].data[0].y) == [0.5, 0.3, None]  # an unreached position is a gap, not a 0
    path = tmp_path / "r.html"
    bench_html.write_html(report, str(path))
    text = path.read_text(encoding="utf-8")
    assert "Speed-up vs number of look-ahead tokens L" in text and "fixed-token" in text
    assert "x &lt;y&gt;" in text and "cpu: test" in text and "gpu: None" not in text


def test_html_report_draws_a_baseline_without_drafts(tmp_path, capsys):
    """A report with ``--baselines hf-generate`` (per-position acceptance None: it drafts nothing) could not be drawn:
    "a field of the report is missing or malformed (TypeError ...)" for benchmark.md's own example."""
    report = fake_report()
    report["summary"]["hf-generate"] = {"L=3,T=0": entry(0.9, None, None)}
    (tmp_path / "hf.json").write_text(json.dumps(report), encoding="utf-8")
    assert bench_html.main([str(tmp_path / "hf.json"), str(tmp_path / "hf.html")]) == 0, capsys.readouterr().err
    figures = [make(report) for make in bench_html.FIGURES]
    assert len(figures[0].data) == 3 and len(figures[3].data) == 2  # a speed-up line, no per-position line


def _outside_env() -> dict:
    """The environment of a user outside the repository: the project installed, nothing on PYTHONPATH."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PASS_PLAYGROUND_ASSETS")}


@pytest.mark.process
def test_bench_writes_html_from_outside_the_repository(tmp_path, tiny_folder):
    """``python -m pass_core.bench ... --json`` then ``python -m playground.bench_html`` in a folder outside the
    repository: both come from the installed project, not from files at the repository root."""
    assert PACKAGE.parent not in tmp_path.resolve().parents
    (tmp_path / "suite.jsonl").write_text('{"category": "chat", "prompt": "Hello there"}\n', encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "pass_core.bench", "--suite", "suite.jsonl", "--model",
                           str(tiny_folder), "--methods", "ar,pass", "--num-lookahead", "2", "--max-new-tokens", "4",
                           "--json", "out.json", "--no-progress", "--backend", "fp32", "--threads", "1"],
                          cwd=tmp_path, env=_outside_env(), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = subprocess.run([sys.executable, "-m", "playground.bench_html", "out.json", "out.html"],
                          cwd=tmp_path, env=_outside_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (tmp_path / "out.html").read_text(encoding="utf-8")
    assert "Speed-up vs temperature" in html and "PaSS, " in html


def test_bench_html_refuses_a_report_nested_too_deeply(tmp_path, capsys):
    """Arrays nested 100,000 deep: a RecursionError traceback (helper 68); now one line, exit 2."""
    (tmp_path / "deep.json").write_text('{"summary": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    assert bench_html.main([str(tmp_path / "deep.json"), str(tmp_path / "deep.html")]) == 2
    assert "nested too deeply to be a benchmark report" in capsys.readouterr().err


def test_bench_html_command_line(tmp_path, capsys):
    assert bench_html.main(["only-one-argument"]) == 2
    assert "usage: python -m playground.bench_html" in capsys.readouterr().err
    assert bench_html.main(["--help"]) == 0  # was the usage as an error, exit 2
    assert capsys.readouterr().out.startswith("usage: python -m playground.bench_html BENCH.json OUT.html\n\nDraw")
    assert bench_html.main(["--help", "x"]) == 0 and "usage:" in capsys.readouterr().out  # "--help: No such file"
    assert bench_html.main(["", ""]) == 2 and "give a file name, not ''" in capsys.readouterr().err
    (tmp_path / "b.json").write_text(json.dumps(fake_report()), encoding="utf-8")
    assert bench_html.main([str(tmp_path / "b.json"), str(tmp_path / "b.html")]) == 0
    assert "Per-position acceptance" in (tmp_path / "b.html").read_text(encoding="utf-8")
    assert bench_html.main([str(tmp_path / "b.json"), str(tmp_path / "b.html")]) == 0  # its own page: replaced
    capsys.readouterr()
    (tmp_path / "notes.html").write_text("<html>my notes</html>", encoding="utf-8")  # another page: kept (it was
    assert bench_html.main([str(tmp_path / "b.json"), str(tmp_path / "notes.html")]) == 2  # replaced unsaid)
    assert "exists and is not a page written by python -m playground.bench_html" in capsys.readouterr().err
    assert (tmp_path / "notes.html").read_text(encoding="utf-8") == "<html>my notes</html>"


def test_bench_html_command_line_refuses_what_is_not_a_report(tmp_path, capsys, monkeypatch):
    assert bench_html.main([str(tmp_path / "missing.json"), str(tmp_path / "x.html")]) == 2  # bad input: 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'missing.json'}: No such file or directory\n"
    (tmp_path / "b.json").write_text(json.dumps(fake_report()), encoding="utf-8")  # a good report
    assert bench_html.main([str(tmp_path / "b.json"), str(tmp_path / "new" / "x.html")]) == 0  # its folder made,
    assert (tmp_path / "new" / "x.html").is_file()  # as generate --trace and bench --json make theirs
    capsys.readouterr()
    assert bench_html.main([str(tmp_path / "b.json"), str(tmp_path / "b.json" / "x.html")]) == 2
    assert capsys.readouterr().err == (f"error: OUT.html {tmp_path / 'b.json' / 'x.html'}: {tmp_path / 'b.json'} is a "
                                       "file, so no folder can be made there; choose another path.\n")
    assert bench_html.main([str(tmp_path / "b.json"), str(tmp_path / "out.json")]) == 2  # HTML in a .json file
    assert capsys.readouterr().err == (f"error: OUT.html {tmp_path / 'out.json'}: the figures are one HTML page: give a "
                                       "name ending in .html, e.g. bench.html\n")
    assert not (tmp_path / "out.json").exists()

    def full_disk(path, text):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(bench_html, "write_text_atomically", full_disk)
        assert bench_html.main([str(tmp_path / "b.json"), str(tmp_path / "y.html")]) == 1
    assert capsys.readouterr().err == f"error: {tmp_path / 'y.html'} could not be written: No space left on device\n"
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")  # exit 1 and Python's message alone
    assert bench_html.main([str(tmp_path / "bad.json"), str(tmp_path / "x.html")]) == 2
    assert capsys.readouterr().err == (f"error: {tmp_path / 'bad.json'}: not JSON (Expecting property name enclosed "
                                       "in double quotes: line 1 column 2 (char 1)); write one with python -m "
                                       "pass_core.bench --json\n")
    (tmp_path / "binary.json").write_bytes(b"\x00\xf3\xff PNG")  # the codec's "can't decode byte 0xf3" alone
    assert bench_html.main([str(tmp_path / "binary.json"), str(tmp_path / "x.html")]) == 2
    assert capsys.readouterr().err == (f"error: {tmp_path / 'binary.json'}: not a UTF-8 text file, so not JSON; write "
                                       "one with python -m pass_core.bench --json\n")
    (tmp_path / "other.json").write_text('{"a": 1}', encoding="utf-8")
    assert bench_html.main([str(tmp_path / "other.json"), str(tmp_path / "x.html")]) == 2
    (tmp_path / "gen.json").write_text('{"summary": {"method": "ar", "tokens": 3}}', encoding="utf-8")  # generate --json
    assert bench_html.main([str(tmp_path / "gen.json"), str(tmp_path / "x.html")]) == 2
    assert "not a benchmark report" in capsys.readouterr().err
    for empty in ('{"summary": {}}', '{"summary": {"pass": {}}}'):  # a 4.8 MB page of empty figures
        (tmp_path / "empty.json").write_text(empty, encoding="utf-8")
        assert bench_html.main([str(tmp_path / "empty.json"), str(tmp_path / "x.html")]) == 2
        assert "a benchmark report with no measured method in its 'summary' and no pass-cost curve" in \
            capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()
    # valid JSON with a field missing or of another type: named, no traceback (KeyError / TypeError before)
    for field, value in (("speedup", None), ("per_position_conditional", 5)):
        report = fake_report()
        if value is None:
            del report["summary"]["pass"]["L=3,T=0"][field]
        else:
            report["summary"]["pass"]["L=3,T=0"][field] = value
        (tmp_path / "odd.json").write_text(json.dumps(report), encoding="utf-8")
        assert bench_html.main([str(tmp_path / "odd.json"), str(tmp_path / "x.html")]) == 2, field
        assert "odd.json: a field of the report is missing or malformed" in capsys.readouterr().err, field
    report = fake_report()  # a setting that is not "L=..,T=..": Python's "dictionary update sequence element #0 ..."
    report["summary"]["pass"]["oops"] = report["summary"]["pass"].pop("L=3,T=0")
    (tmp_path / "odd.json").write_text(json.dumps(report), encoding="utf-8")
    assert bench_html.main([str(tmp_path / "odd.json"), str(tmp_path / "x.html")]) == 2
    assert "odd.json: the setting 'oops' in the summary is not of the form 'L=3,T=0.8'" in capsys.readouterr().err
    report = fake_report()  # a training curve whose points hold different numbers of positions (an IndexError)
    report["training"] = {"pass": {"curve": [{"positions": 1, "top1_agreement": [0.1, 0.2]},
                                             {"positions": 2, "top1_agreement": [0.1]}], "positions": 2}}
    (tmp_path / "odd.json").write_text(json.dumps(report), encoding="utf-8")
    assert bench_html.main([str(tmp_path / "odd.json"), str(tmp_path / "x.html")]) == 2
    assert "a field of the report is missing or malformed (IndexError" in capsys.readouterr().err
    # the HTML named as the report itself: refused, the report kept (it was replaced by the HTML, exit 0)
    kept = (tmp_path / "b.json").read_text(encoding="utf-8")
    assert bench_html.main([str(tmp_path / "b.json"), str(tmp_path / "b.json")]) == 2
    assert "b.json is the report itself: give the HTML file another name" in capsys.readouterr().err
    assert (tmp_path / "b.json").read_text(encoding="utf-8") == kept


def test_bench_html_option_points_to_the_ui_package(capsys):
    """pass_core never imports plotly, so the benchmark's old ``--html`` is refused with the two-step command."""
    for html in (["--html", "out.html"], ["--html"]):  # without a file name argparse said "expected one argument"
        with pytest.raises(SystemExit):
            bench.main(["--suite", "quick", *html])
        assert "python -m playground.bench_html BENCH.json OUT.html" in capsys.readouterr().err, html


# --- race_view: a run that shows nothing is explained ---------------------------------------

def ended(method: str, ids: list[int], texts: list[str], reason: str = "eos") -> list[StepEvent]:
    """A finished run: one step per token, the last one with ``reason``."""
    return [StepEvent(method=method, step=i + 1, tokens=(TokenRecord(t, text, "target"),),
                      finish_reason=reason if i == len(ids) - 1 else None)
            for i, (t, text) in enumerate(zip(ids, texts, strict=True))]


def test_empty_output_notes_name_the_method_and_the_reason():
    events = {"ar": ended("ar", [2], [""]), "pass": ended("pass", [5, 6], ["a", "b"]),
              "parallelspec": ended("parallelspec", [9, 2], ["", "\n"], reason="max_new_tokens"),
              "fixed-token": events_of("fixed-token", [7])}  # still running: nothing to say yet
    raw = empty_output_notes(events, chat_template=False)
    assert raw == ["⚠ **AR:** the model ended immediately (EOS as its first token); try with the chat template.",
                   "⚠ **ParallelSpec:** the model wrote no visible text (2 tokens, ended by max_new_tokens); "
                   "try with the chat template."]
    assert empty_output_notes({"ar": ended("ar", [2], ["x"])}, chat_template=True) == [
        "⚠ **AR:** the model ended immediately (EOS as its first token); try another prompt."]
    assert empty_output_notes({"ar": [], "pass": ended("pass", [5], ["hi"], reason="max_new_tokens")}) == []
    line = race_view(events, True, True, False, True, with_figures=False, chat_template=False, note="capped").run_line
    # the finish view (these hand-made steps verified no draft: it names no method), then the note and warnings
    assert line.startswith("**Finished.**  \n**No method verified a draft in this race**")
    assert "  \ncapped  \n⚠ **AR:** the model ended immediately" in line


# --- race_inputs: what the race accepts, and what it asks ZeroGPU for --------------------------

def test_setting_problems_name_the_setting_range_and_value():
    assert race_inputs.setting_problem("max_new_tokens", 96) is None
    assert race_inputs.setting_problem("max_new_tokens", 96.0) is None  # whole floats are accepted as ints
    assert race_inputs.setting_problem("max_new_tokens", 0) == "max new tokens must be between 1 and 1,024, got 0"
    assert race_inputs.setting_problem("seed", 2.5) == "seed must be a whole number, got 2.5"
    assert race_inputs.setting_problem("temperature", None) == ("temperature is empty or not a number: type a number "
                                                                "between 0 and 2")
    assert race_inputs.methods_problem(["ar", "pass"]) is None
    assert "'bogus'" in race_inputs.methods_problem(["ar", "bogus"])
    assert "at least two" in race_inputs.methods_problem("ar")  # a bare string is one key, not letters
    assert race_inputs.prompt_problem(" ") and race_inputs.prompt_problem(None) and not race_inputs.prompt_problem("Hi")
    assert "the limit is 100,000" in race_inputs.prompt_problem("x" * 100_001)  # refused before tokenising
    assert race_inputs.input_problems("Hi", 3, 0.0, 0, 1.0, 96, 0, ["ar", "pass"]) == [None] * 8


def test_zerogpu_arithmetic_fits_the_smallest_tier():
    """ZeroGPU checks the requested duration against the visitor's quota before it runs: an anonymous visitor
    has 2 minutes a day, so a race asks for 60 s at most, and max new tokens is capped to fit."""
    assert race_inputs.ZEROGPU_MAX_S == 60
    assert race_inputs.gpu_seconds(96, 3) == 35  # 20 s + 0.05 s x 96 tokens x 3 methods = 34.4 s, rounded up
    assert race_inputs.gpu_seconds(1024, 3) == 174  # the old request, far above the tier
    assert race_inputs.gpu_seconds(10, 1) == race_inputs.gpu_seconds(10, 2) == 21  # at least two methods race
    for methods in range(2, len(METHODS) + 3):
        cap = race_inputs.zerogpu_token_cap(methods)
        assert race_inputs.gpu_seconds(cap, methods) <= 60 < race_inputs.gpu_seconds(cap + 1, methods), methods
    assert [race_inputs.zerogpu_token_cap(n) for n in (2, 3, 4)] == [400, 266, 200]
    keys = ["ar", "pass", "parallelspec"]
    assert race_inputs.cap_for_zerogpu(96, keys) == (96, "")
    tokens, note = race_inputs.cap_for_zerogpu(1024, keys)
    assert tokens == 266 and "capped at 266** (asked: 1,024)" in note and "60 s" in note
    assert race_inputs.cap_for_zerogpu(0, keys) == (0, "")  # refused by name later, not capped
    assert race_inputs.zerogpu_duration(1024, keys) == 60 and race_inputs.zerogpu_duration(None, keys) == 60
    assert race_inputs.zerogpu_duration(*race_inputs.cap_for_zerogpu(1024, keys)[:1], keys) == 60


def test_hide_paths_keeps_file_names_only():
    hide = race_inputs.hide_paths
    assert hide("bad file /srv/app/assets/lookahead/la-3.safetensors (truncated)") == \
        "bad file la-3.safetensors (truncated)"
    assert hide("OSError: /root/.cache/huggingface/hub/models--x/snapshots/ab12/config.json missing") == \
        "OSError: config.json missing"
    assert hide("loaded 'C:\\Users\\me\\model.gguf'") == "loaded 'model.gguf'"
    for kept in ("see https://huggingface.co/docs/hub/spaces-zerogpu", "3/4 of drafts", "tiny-llama (0.1M, local)"):
        assert hide(kept) == kept


# --- rooms ------------------------------------------------------------------------------------

def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    return names | {(node.module or "").split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and not node.level}


def test_plotly_and_gradio_stay_in_their_rooms():
    """``pass_core`` (every subpackage) imports neither plotly nor gradio (nor the UI package); the UI package
    ``playground`` imports no torch or transformers."""
    core = sorted(PACKAGE.rglob("*.py"))
    ui = sorted((REPO / "playground").glob("*.py"))
    assert {p.parent.name for p in core} >= {"pass_core", "decoding", "drafters", "runtime", "teaching", "training",
                                             "bench"}, "the walk must see every subpackage"
    assert {f.name for f in ui} >= {"race_charts.py", "race_view.py", "race_inputs.py", "bench_html.py",
                                    "race_handlers.py", "page.py"}
    for path in core:
        assert not _imports(path) & {"gradio", "plotly", "playground"}, path
    for path in ui:
        assert not _imports(path) & {"torch", "transformers"}, path


def test_greedy_check_explains_near_ties_by_dtype():
    """A difference where the top two logits were 0.02 apart is a near-tie in bfloat16 and an error
    in float32; the page says which, with the margin."""
    def with_margins(method, ids, margins):
        return [StepEvent(method=method, step=i + 1, tokens=(TokenRecord(t, f"<{t}>", "target", margin=m),))
                for i, (t, m) in enumerate(zip(ids, margins))]

    events = {"ar": with_margins("ar", [1, 2, 3], [4.0, 0.02, 4.0]), "pass": with_margins("pass", [1, 5, 3], [4.0, 0.03, 4.0])}
    bf16 = race_text.greedy_check(events, True, True, "torch.bfloat16")
    assert "0.02 logits apart" in bf16 and "near-tie within bfloat16 rounding" in bf16 and "not an error" in bf16
    fp32 = race_text.greedy_check(events, True, True, "float32")
    assert "far beyond float32 rounding: this is an error" in fp32
    assert "logits apart" not in race_text.greedy_check({"ar": events_of("ar", [1, 2]), "pass": events_of("pass", [1, 3])},
                                                     True, True)  # no margins (sampling-era events): no claim


def test_theory_view_notes_and_lab_table():
    """theory_view says why it draws nothing (no AR; no verified drafts yet); lab_markdown marks each row
    against the bound; the lab and theory legends sit in the bottom margin (as the race's charts)."""
    from pass_core.teaching.lab import BROKEN, LabResult
    from playground import teaching, theory_view

    assert theory_view.theory_view({"pass": [], "parallelspec": []}) == (None, theory_view.THEORY_NEEDS_AR)
    assert theory_view.theory_view({"ar": [], "pass": []}) == (None, theory_view.THEORY_WAITING)
    # a drafting method has verified drafts, AR only its prefill: the note names what is missing (it said only
    # "once a drafting method has verified drafts", beside metrics that showed PaSS's accepted drafts)
    ar = timed("ar", [5, 5])
    draft = DraftRecord(1, 5, "x", q=0.5, p=0.5, u=0.3, decision="accepted")
    drafting = [dataclasses.replace(e, num_verified_drafts=1, drafts=(draft,))
                for e in timed("pass", [5, 5], ("accepted", "bonus"))]
    assert theory_view.theory_view({"ar": ar[:1], "pass": drafting})[0] is None
    assert "AR has run a step after its prefill" in theory_view.THEORY_WAITING
    assert theory_view.theory_view({"ar": ar, "pass": drafting})[0] is not None
    result = LabResult(exact={(1,): 0.5, (2,): 0.5}, empirical={"ar": {(1,): 0.5, (2,): 0.5}, BROKEN: {(1,): 1.0}},
                       tv={"ar": 0.0, BROKEN: 0.5}, bound=0.1, runs=100, depth=1)
    table = teaching.lab_markdown(result, {"ar": "AR"})
    assert "| AR | 0.000 | 0.100 | ✓ pass |" in table
    assert "| broken rule: always accept | 0.500 | 0.100 | ✗ fail |" in table
    figure = teaching.lab_figure(result, {"ar": "AR"})
    assert figure.layout.legend.yref == "container" and figure.layout.legend.y == 0
    assert figure.layout.yaxis.range[1] == pytest.approx(1.05)  # room above the tallest bar (1.0): it was cut there
    # outcomes that differ only by trailing spaces read apart ("I" and "I  " looked the same)
    texts = {1: "I", 2: "I  ", 3: "\n "}
    spaced = LabResult(exact={(1,): 0.4, (2,): 0.3, (3,): 0.3}, empirical={}, tv={}, bound=0.1, runs=10, depth=1)
    assert list(teaching.lab_figure(spaced, {}, decode=texts.get).data[0].x) == ["I", "I␣␣", "↵␣"]
    assert teaching.lab_figure(spaced, {}, decode=texts.get).layout.yaxis.range[1] == pytest.approx(0.44)
