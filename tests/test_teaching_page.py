"""The teaching views on the page (issue 12, items 3-5): theory beside measurement under the race's
charts, the losslessness lab tab, and traces (download, replay, ``--replay-only``), driven as handler
functions on the tiny model, through gradio_client against ``python app.py`` and against ``app.main`` with
``--replay-only`` in this process."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import sys
from pathlib import Path

import gradio as gr
import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from playground import page  # noqa: E402
from playground import race_handlers  # noqa: E402
from playground.replay import STOPPED_REPLAY  # noqa: E402
from playground import race_text  # noqa: E402
from playground import trace_files  # noqa: E402
from pass_core.registry import METHODS  # noqa: E402
from pass_core.teaching.trace import load_trace  # noqa: E402
from playground.theory_view import THEORY_NEEDS_AR  # noqa: E402
from test_app import API_OUTPUT_NAMES, DRAFTING, OUTPUT_NAMES, pane_text, run  # noqa: E402


def test_theory_sentence_for_each_drafting_method(tiny):
    final = run(tiny, temperature=1.0, max_new_tokens=16, update_interval_s=0.0)[-1]
    for key in DRAFTING:  # check_theory's sentence, with this run's numbers, one per drafting method
        assert f"{METHODS[key].short_name}: α = " in final["theory_text"], key
    assert "predicted speed-up" in final["theory_text"]
    names = {trace.name for trace in final["theory"]["value"].data}
    assert {n.split(":")[0] for n in names} == {METHODS[key].short_name for key in DRAFTING}
    assert any("theory (α =" in n for n in names) and any("measured" in n for n in names)
    without_ar = run(tiny, methods=["pass", "parallelspec"], update_interval_s=0.0)[-1]
    # nothing to draw: the plot is emptied and hidden (``plot_boxes.shown_plot``), its sentence says why
    assert without_ar["theory"] == gr.update(value=None, visible=False)
    assert without_ar["theory_text"] == THEORY_NEEDS_AR
    assert final["theory"]["visible"] is True


@pytest.mark.sampling
def test_lab_handler_passes_every_method_and_fails_the_broken_rule(tiny):
    """The tab's handler on the tiny model (runs of 3 tokens, as many as tests/test_lab.py's design asks): a ✓ row
    for each registered method, a ✗ row for the broken rule; the progress bar is fed every run (a ``gr.Progress`` is falsy while it tracks nothing:
    ``if progress`` once left the tab's bar unfed)."""
    from test_lab import lab_plan

    seen, runs = [], lab_plan(tiny).runs

    class Recorder(gr.Progress):  # falsy before it tracks anything, as gradio's own (the tab showed no bar)
        def __call__(self, value, **kw):
            seen.append(value)

    assert not Recorder()
    figure, table = page.lab_handler(tiny, "ab", runs, progress=Recorder())
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines() if line.startswith("| ")}
    for key, method in METHODS.items():
        assert "✓ pass" in rows[method.label], rows
    assert "✗ fail" in rows["broken rule: always accept"]
    assert seen[-1] == (runs * (len(METHODS) + 1),) * 2
    assert len(figure.data) == len(METHODS) + 2  # exact law + each method + the broken rule
    # the legend names each method as the race's charts do (on a phone the long names ran past the chart's edge)
    assert [t.name.split(": TV")[0] for t in figure.data[1:-1]] == [f"✓ {m.short_name}" for m in METHODS.values()]
    with pytest.raises(gr.Error, match="runs"):
        page.lab_handler(tiny, "ab", 10_000)


def test_the_lab_shows_its_progress_over_its_table(tiny):
    """The lab's chart is hidden until its first figure, and its table was empty (0 px tall, ``overflow: auto``):
    the progress bar gradio drew over both was clipped away, and the tab looked idle for minutes. The bar now shows
    over the table, which holds a line before the first lab (and, by the page's CSS, room for the bar: seen in
    headless Chromium, where the bar's middle was hit-tested on the page before and after)."""
    from playground.lab_view import LAB_WAITING

    demo = page.build_demo(tiny)
    (lab,) = [fn for fn in demo.fns.values() if fn.api_name == "lab"]
    (table,) = [c for c in demo.blocks.values() if getattr(c, "elem_id", None) == "lab-table"]
    assert [block._id for block in lab.show_progress_on or []] == [table._id] and lab.show_progress == "full"
    assert table.value == LAB_WAITING and "✗ fail" not in LAB_WAITING  # the tests wait for "✗ fail" as the end


def test_a_refused_replay_marks_the_upload_box_not_the_races_results(demo):
    """Replay without a file (or with a bad one) is refused with a toast and a small mark on the upload box: the mark
    stood on the run line, a red "Error" beside a finished race's "Finished. Highest tokens/s ...", as if that race
    had failed."""
    (replay,) = [fn for fn in demo.fns.values() if fn.api_name == "replay"]
    (upload,) = [c for c in demo.blocks.values() if getattr(c, "elem_id", None) == "trace-upload"]
    assert [block._id for block in replay.show_progress_on or []] == [upload._id]
    assert replay.show_progress == "minimal"  # a full mark covered the box's "Drop File Here" until closed


def test_a_trace_keeps_the_races_machine_load_and_its_replay_the_busy_line(tiny, tmp_path):
    """A race on a busy machine says its timings are unreliable; its replay showed the same timings without a word.
    The trace now records the race's load (the numbers, checked on reading; the page writes the line itself)."""
    from pass_core.runtime.machine_load import MachineLoad
    from pass_core.teaching.trace import save_trace

    final = run(tiny, max_new_tokens=6, update_interval_s=0.0)[-1]
    recorded = load_trace(final["trace"])
    assert recorded.machine_load is not None and recorded.machine_load.cores >= 1  # every race records its load
    busy = MachineLoad(wall_s=8.0, own_cores=1.0, other_cores=1.3, saturated=True, load_average=3.4, cores=2)
    assert busy.busy
    path = save_trace(dataclasses.replace(recorded, machine_load=busy), tmp_path / "busy.json")
    assert load_trace(path).machine_load == busy
    replay = dict(zip(OUTPUT_NAMES, page.replay_handler(str(path), True), strict=True))
    assert "The machine was busy during this race** (other programs took 1.3 of 2 cores on average during it; " \
           "1-minute load average 3.4, which lags by a minute)" in \
        replay["run_info"], replay["run_info"]
    quiet = dataclasses.replace(busy, other_cores=0.1)
    path = save_trace(dataclasses.replace(recorded, machine_load=quiet), tmp_path / "quiet.json")
    assert "busy" not in dict(zip(OUTPUT_NAMES, page.replay_handler(str(path), True), strict=True))["run_info"]
    data = json.loads(path.read_text(encoding="utf-8"))
    for field, value, message in (("cores", 0, "'machine_load.cores' is 0: a count of cores"),
                                  ("wall_s", -1, "'machine_load.wall_s' is -1: a number from 0"),
                                  ("saturated", "yes", "'machine_load.saturated' is 'yes': true, false or null"),
                                  ("saturated", 1, "'machine_load.saturated' is 1: true, false or null")):
        bad = json.loads(json.dumps(data))
        bad["machine_load"][field] = value
        with pytest.raises(ValueError, match=re.escape(message)):
            load_trace(bad)
    data["machine_load"] = {"busy": True}
    with pytest.raises(ValueError, match="'machine_load' must be an object with the fields wall_s, own_cores"):
        load_trace(data)
    del data["machine_load"]  # a trace without it (the command line's, or written before): replayed without it
    assert load_trace(data).machine_load is None


def test_a_race_trace_and_its_replay_name_the_model_without_the_servers_folders(tiny_folder):
    """A model loaded from a folder is named by its path: the page's trace (offered to every visitor) and its
    replay's run line named the server's whole folder ("/srv/models/tiny"); now its name only, as the page's model
    line does. A trace written elsewhere, by the command line, keeps its path in the file, not in its replay."""
    from pass_core.runtime.models import load_model
    from pass_core.teaching.trace import make_trace, save_trace

    loaded = load_model(str(tiny_folder))
    assert str(tiny_folder) in loaded.name  # the name holds the server's folder
    final = run(loaded, max_new_tokens=4, update_interval_s=0.0, methods=["ar", "pass"])[-1]
    assert load_trace(final["trace"]).model_name == tiny_folder.name
    cli = save_trace(make_trace(loaded, "Hello there", load_trace(final["trace"]).settings,
                                load_trace(final["trace"]).events), tiny_folder.parent / "cli-trace.json")
    for path in (final["trace"], cli):
        line = dict(zip(OUTPUT_NAMES, page.replay_handler(str(path), True, loaded), strict=True))["run_info"]
        line = line.replace("\\", "")  # markdown's escapes ("tiny\\-model0")
        assert f"Replay of a trace: {tiny_folder.name}, prompt" in line and str(tiny_folder.parent) not in line


def test_replay_of_a_race_trace_equals_the_race(tiny, tmp_path):
    frames = run(tiny, temperature=1.0, max_new_tokens=12, update_interval_s=0.0, inspect=True)
    final = frames[-1]
    path = final["trace"]
    # until the race ends there is no trace to download (the button held the race before's: Download gave it)
    assert frames[0]["trace"] is None and all(not isinstance(f["trace"], str) for f in frames[:-1])
    assert re.fullmatch(r"pass-playground-trace-\d{8}-\d{6}\.json", Path(path).name), path  # downloads differ
    trace = load_trace(path)
    assert trace.settings.inspect and set(trace.events) == set(page.DEFAULT_RACE)
    assert any(e.inspection for e in trace.events["pass"])  # the inspector's data is recorded
    replay = dict(zip(OUTPUT_NAMES, page.replay_handler(path, True), strict=True))
    assert replay["trace"] is None  # a replay's trace is the file chosen: no older race's to download beside it
    for key in METHODS:
        assert replay[f"{key}_tokens"] == final[f"{key}_tokens"], key
    for name in ("tokens_per_s", "speedup", "acceptance_rate", "greedy_check", "theory_text"):
        assert replay[name] == final[name], name  # the speed-up's "vs AR on float32" too: the trace records it
    assert "vs AR on float32" in final["speedup"]
    old = json.loads(Path(path).read_text(encoding="utf-8"))  # a trace written before traces recorded the backend
    for field in ("backend", "backend_chosen_by_measurement", "dtype"):
        del old["model"][field]
    (tmp_path / "old.json").write_text(json.dumps(old), encoding="utf-8")
    ratios, baseline, *notes = dict(zip(OUTPUT_NAMES, page.replay_handler(tmp_path / "old.json", True),
                                        strict=True))["speedup"].split("\n")
    assert [ratios, *notes] == [line for line in final["speedup"].split("\n") if not line.startswith("vs AR on")]
    assert baseline.startswith(race_text.UNKNOWN_BASELINE), baseline
    assert race_text.baseline_label("onednn", True, replayed=True) == ("vs AR on onednn (chosen by measurement: the "
                                                                        "fastest AR on the machine that recorded it)")
    assert "Replay of a trace" in replay["run_info"]
    # the page's Replay while this tab's race runs: refused (shown, then replaced by the race's frames, it looked lost)
    demo = page.build_demo(tiny, untrained_drafters=True)
    on_run = next(fn.fn for fn in demo.fns.values() if fn.api_name == "race")
    on_replay = next(fn.fn for fn in demo.fns.values() if fn.api_name == "replay")
    visitor, other = (type("Request", (), {"session_hash": name})() for name in ("racing", "other"))
    racing = on_run("Hello there", 2, 0.0, 0, 1.0, 40, 0, True, False, ["ar", "pass"], request=visitor)
    next(racing), next(racing)  # the race has started
    with pytest.raises(gr.Error, match="A race is running in this tab: press Stop first, then Replay"):
        on_replay(path, True, request=visitor)
    assert "Replay of a trace" in on_replay(path, True, request=other)[OUTPUT_NAMES.index("run_info")]  # another tab
    racing.close()
    assert "Replay of a trace" in on_replay(path, True, request=visitor)[OUTPUT_NAMES.index("run_info")]  # it ended


def test_a_bad_trace_gets_a_named_error(tmp_path):
    """The error names the file and what is wrong, and stays on the page until the visitor closes it (the run line
    keeps gradio's bare "Error" mark, which says nothing once a message with the default 10-s duration is gone)."""
    bad = tmp_path / "notes.json"
    bad.write_text("not json", encoding="utf-8")
    with pytest.raises(gr.Error, match="not a JSON trace") as refused:
        page.replay_handler(str(bad))
    assert refused.value.duration is None and "notes.json" in refused.value.message
    bad.write_text(json.dumps({"schema": "pass-playground-trace/0"}), encoding="utf-8")
    with pytest.raises(gr.Error, match="schema"):
        page.replay_handler(str(bad))
    with pytest.raises(gr.Error, match=r"Choose a trace file \(.json, at most 32 MB\) to replay first: a file of "
                                       r"another type or a larger"):
        page.replay_handler(None)
    for value in ("no", "false", None, [1]):  # through the API "no" showed the rejected drafts (as a race refuses it)
        with pytest.raises(gr.Error, match=re.escape(f"show rejected drafts must be true or false, got {value!r}")):
            page.replay_handler(str(bad), value)
    # a crafted file's values are shown as text: gradio shows an error's HTML (a link and a 600 x 300 image drew)
    bad.write_text(json.dumps({"schema": '<a href="//evil.example">fix</a><img src=x>'}), encoding="utf-8")
    with pytest.raises(gr.Error) as refused:
        page.replay_handler(str(bad))
    assert "&lt;a href=\"//evil.example\"&gt;fix&lt;/a&gt;&lt;img src=x&gt;" in refused.value.message, \
        refused.value.message


def test_a_token_id_beyond_the_vocabulary_is_refused_where_the_model_would_decode_it(tiny, tmp_path):
    """A trace recorded on the page's model is decoded with its tokenizer: an id at or beyond V is refused by name
    (a replay once showed "token id 1000000000" and a false greedy-check error). Replayed on no model, its own
    texts name the tokens and the id is never decoded."""
    final = run(tiny, max_new_tokens=6, update_interval_s=0.0)[-1]
    data = json.loads(Path(final["trace"]).read_text(encoding="utf-8"))
    data["methods"]["pass"]["events"][1]["tokens"][0]["token_id"] = tiny.vocab_size
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(gr.Error, match=rf"edited.json': the field 'methods.pass.events\[1\].tokens\[0\].token_id' is "
                                       rf"{tiny.vocab_size}: the trace's model has {tiny.vocab_size:,} tokens"):
        page.replay_handler(str(edited), True, tiny)
    assert "Replay of a trace" in dict(zip(OUTPUT_NAMES, page.replay_handler(str(edited), True, None)))["run_info"]
    page.replay_handler(final["trace"], True, tiny)  # the trace as recorded replays on its model


def test_the_replay_of_a_stopped_race_compares_so_far_and_ranks_nobody(tiny, tmp_path):
    """Stop's trace holds each method's steps up to Stop, of different lengths: its replay said "Finished.", named
    a winner and put "✗ PaSS: same first 14 tokens as AR, but different lengths" under a greedy race (found by a
    new-user helper). The finished race's replay keeps both."""
    final = run(tiny, max_new_tokens=16, update_interval_s=0.0)[-1]
    data = json.loads(Path(final["trace"]).read_text(encoding="utf-8"))
    for key, cut in (("ar", 5), ("pass", 2)):  # as Stop leaves them: AR 5 tokens, PaSS fewer, no last event
        data["methods"][key]["events"] = data["methods"][key]["events"][:cut]
    stopped = tmp_path / "stopped.json"
    stopped.write_text(json.dumps(data), encoding="utf-8")
    replay = dict(zip(OUTPUT_NAMES, page.replay_handler(str(stopped), True, tiny), strict=True))
    assert replay["run_info"].startswith(STOPPED_REPLAY) and "Highest" not in replay["run_info"]
    assert "✗" not in replay["greedy_check"] and "so far" in replay["greedy_check"], replay["greedy_check"]
    back = dict(zip(OUTPUT_NAMES, page.render_state(replay["state"], True, None), strict=True))  # Resume, Next...
    assert back["run_info"].startswith(STOPPED_REPLAY)
    whole = dict(zip(OUTPUT_NAMES, page.replay_handler(final["trace"], True, tiny), strict=True))
    assert whole["run_info"].startswith("**Finished.**") and "Highest" in whole["run_info"]
    data["methods"]["pass"]["events"] = []  # Stop during the first step: PaSS had none yet (its replay was refused)
    stopped.write_text(json.dumps(data), encoding="utf-8")
    early = dict(zip(OUTPUT_NAMES, page.replay_handler(str(stopped), True, tiny), strict=True))
    assert early["run_info"].startswith(STOPPED_REPLAY) and "✗" not in early["greedy_check"], early["greedy_check"]
    assert early["pass_tokens"] == [] and len(early["state"]["events"]["ar"]) == 5


def test_race_then_replay_through_gradio_client(app_server, tmp_path):
    from gradio_client import handle_file
    from servers import local_client

    client = local_client(app_server.url, download_files=str(tmp_path))
    raced = dict(zip(API_OUTPUT_NAMES, client.predict("Hello there", 2, 1.0, 0, 1.0, 12, 3, True, False,
                                                      list(page.DEFAULT_RACE), api_name="/race"), strict=True))
    trace_path = raced["trace"]
    trace = load_trace(trace_path)
    assert trace.settings.inspect  # races from the page record the inspector's data
    for key in page.DEFAULT_RACE:  # the guide's recipe for a pane's text gives the output (it kept rejected drafts
        value = raced[f"{key}_tokens"]  # and "↵": an API-user helper)
        value = value.get("value", value) if isinstance(value, dict) else value
        text = "".join(i["token"] for i in value if i["class_or_confidence"] not in (None, "rejected draft"))
        assert text.replace("↵\n", "\n") == "".join(t.text for e in trace.events[key] for t in e.tokens
                                                     if t.committed), key
    replayed = dict(zip(API_OUTPUT_NAMES, client.predict(handle_file(trace_path), True, api_name="/replay"),
                        strict=True))
    for key in page.DEFAULT_RACE:
        assert pane_text(replayed[f"{key}_tokens"]) == pane_text(raced[f"{key}_tokens"]), key
        assert replayed[f"{key}_tokens"] == raced[f"{key}_tokens"], key
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(Exception, match="not a JSON trace"):
        client.predict(handle_file(str(bad)), True, api_name="/replay")


@contextlib.contextmanager
def app_main_served(monkeypatch, *argv: str):
    """``app.main(argv)`` (what ``python app.py ARGV`` runs) in this process on a free port: its launch does not
    block; yields the page's URL and closes the server after. (``python app.py`` itself starts in a fresh
    interpreter once per run: ``app_server`` in conftest.py.)"""
    import app
    from servers import free_port

    port, launched = free_port(), []
    launch = gr.Blocks.launch

    def launch_in_background(demo, **kwargs):
        launched.append(demo)
        return launch(demo, **kwargs, prevent_thread_lock=True, quiet=True)

    monkeypatch.setenv("GRADIO_SERVER_PORT", str(port))
    monkeypatch.setattr(gr.Blocks, "launch", launch_in_background)
    app.main(list(argv))
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        for demo in launched:
            demo.close()


@pytest.mark.process  # an app server (in this process)
def test_replay_only_serves_a_trace_without_a_model(tiny, tmp_path, monkeypatch):
    """``app.py --replay-only`` with a model name that does not exist: nothing loads, the page serves at once,
    Run and the lab say a model is needed, and a trace recorded on the tiny model replays."""
    from gradio_client import handle_file
    from servers import local_client

    final = run(tiny, max_new_tokens=8, update_interval_s=0.0, inspect=True)[-1]
    with app_main_served(monkeypatch, "--model", "no-such-model", "--backend", "fp32", "--threads", "1",
                         "--replay-only") as url:
        client = local_client(url, download_files=str(tmp_path))
        replayed = dict(zip(API_OUTPUT_NAMES, client.predict(handle_file(final["trace"]), True,
                                                             api_name="/replay"), strict=True))
        for key in page.DEFAULT_RACE:
            assert pane_text(replayed[f"{key}_tokens"]) == pane_text(final[f"{key}_tokens"]), key
        with pytest.raises(Exception, match="--replay-only"):
            client.predict("Hi", 2, 0.0, 0, 1.0, 4, 0, True, False, ["ar", "pass"], api_name="/race")
        with pytest.raises(Exception, match="--replay-only"):
            client.predict("Hi", 30, api_name="/lab")


def test_trace_files_are_pruned_on_a_long_running_server(tmp_path, monkeypatch):
    """Each race writes its trace to a new folder; only the newest ``TRACES_KEPT`` folders stay."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(trace_files, "TRACES_KEPT", 2)
    made = []
    for _ in range(4):
        folder = trace_files._trace_folder()
        (folder / "pass-playground-trace.json").write_text("{}")
        made.append(folder)
    left = sorted((tmp_path / "pass-playground-traces").iterdir())
    assert len(left) == 3 and made[-1] in left and made[0] not in left  # 2 kept + the new one


def test_trace_pruning_passes_over_a_folder_another_process_removed(tmp_path, monkeypatch):
    """Every app process on a machine prunes the one traces folder: a folder listed and then removed by another
    process before its age is read is passed over, and the race's trace folder is still made (a full test run saw
    FileNotFoundError end a race there)."""
    import tempfile
    from pathlib import Path

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    root = tmp_path / "pass-playground-traces"
    root.mkdir()
    (root / "kept").mkdir()
    listed = Path.iterdir
    monkeypatch.setattr(Path, "iterdir", lambda self: [*listed(self), self / "removed-meanwhile"])
    folder = trace_files._trace_folder()
    assert folder.is_dir() and folder.parent == root and (root / "kept").is_dir()


def test_cost_view_after_a_race_and_auto_draft_lengths(tiny, fixed_pass_cost):
    """The race's last update draws the pass-cost curve (a fixed physical one: a busy CPU's measurement may be
    refused, tests/test_pass_cost.py checks the measurement) beside each drafting method's tokens and cost per step; with cost-aware draft lengths every step of a drafting method says which k it chose, and the
    inspector shows it. A replay has no curve and says so."""
    final = run(tiny, max_new_tokens=16, update_interval_s=0.0, auto_drafts=True)[-1]
    names = [trace.name for trace in final["cost"]["value"].data]
    assert names[0].startswith("c(w) (")
    for key in DRAFTING:
        assert f"{METHODS[key].short_name}: tokens per step" in " ".join(names), key
        assert f"**{METHODS[key].short_name}**:" in final["cost_text"], key
    assert "a one-token pass after 200 tokens takes" in final["cost_text"]
    events = final["state"]["events"]
    for key in DRAFTING:
        assert all(e.draft_choice.startswith("auto: k = ") for e in events[key]), key
    from playground.teaching import inspector_markdown
    assert "Draft length: auto: k = " in inspector_markdown(events["pass"][1], "PaSS", lookahead=True)
    replay = dict(zip(OUTPUT_NAMES, page.replay_handler(final["trace"], True), strict=True))
    assert replay["cost"] == gr.update(value=None, visible=False) and "does not carry the cost" in replay["cost_text"]
