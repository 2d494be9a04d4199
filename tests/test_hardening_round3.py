"""Hardening, round 3: non-finite numbers, files without their checksum, traces that lie or overflow, uploads
too large or too deep, a paused race in a closed tab, out-of-range draft ids and a damaged training checkpoint.
Each test failed before its fix (tiny models only; the browser test is marked ``browser``)."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import gradio as gr
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from pass_core.decoding.sampling import logits_to_probs
from pass_core.decoding.settings import GREEDY_BELOW, DecodeSettings
from pass_core.decoding.verification import verify_drafts
from pass_core.drafters.files import read_model_file, tensors_checksum
from pass_core.drafters.lookahead.embeddings import LookaheadEmbeddings
from pass_core.drafters.parallelspec.model import ParallelDrafter
from pass_core.registry import METHODS
from pass_core.teaching.trace import MAX_TRACE_BYTES, load_trace, make_trace, save_trace
from playground import page, race_handlers, stepping
from playground.stepping import RESUME, StepControl
from servers import REPO, free_port
from test_app import API_OUTPUT_NAMES, OUTPUT_NAMES, opening
from test_browser import open_settings
from tiny import tiny_loaded
from playground.race_inputs import RaceRequest


def tokens(events) -> list[int]:
    return [i for e in events for i in e.new_token_ids]


# --- 1. a tiny non-zero temperature decodes greedily, never NaN ----------------------------------------------

@pytest.mark.parametrize("temperature", [1e-38, 1e-40, 5e-324, 1e-6])
def test_a_tiny_temperature_decodes_greedily_in_every_method(tiny, temperature):
    """Before: 20 / 1e-38 overflowed float32 and every method raised "probability tensor contains either inf,
    nan or element < 0". Now a temperature below GREEDY_BELOW is greedy: each method's output equals T = 0."""
    for key, method in METHODS.items():
        greedy = tokens(method.decode(tiny, "Hello there", DecodeSettings(max_new_tokens=12, num_lookahead=3)))
        tiny_t = tokens(method.decode(tiny, "Hello there", DecodeSettings(max_new_tokens=12, num_lookahead=3,
                                                                           temperature=temperature)))
        assert tiny_t == greedy, key
    assert DecodeSettings(temperature=temperature).greedy  # the greedy check and the margins say so too


def test_the_greedy_threshold_and_no_nan_just_above_it():
    assert DecodeSettings(temperature=GREEDY_BELOW / 2).greedy and not DecodeSettings(temperature=GREEDY_BELOW).greedy
    logits = torch.tensor([[30.0, 29.99, -80.0, 0.0], [1e4, -1e4, 5.0, 5.0]])
    probs = logits_to_probs(logits, DecodeSettings(temperature=GREEDY_BELOW, top_k=3, top_p=0.9))
    assert bool(torch.isfinite(probs).all()) and torch.allclose(probs.sum(-1), torch.ones(2))


# --- 2. NaN / inf in files, in the trainers and in the loop --------------------------------------------------

def resave(path, out, change) -> None:
    """Copy a model file with ``change(tensors)`` applied and a *valid* checksum (only finiteness can catch it)."""
    with safe_open(str(path), framework="pt") as handle:
        meta = dict(handle.metadata())
    tensors = load_file(str(path))
    change(tensors)
    meta["sha256"] = tensors_checksum(tensors)
    save_file(tensors, str(out), metadata=meta)


@pytest.mark.parametrize("kind", ["lookahead", "drafter"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_file_holding_nan_or_inf_is_refused_by_name(tiny, tmp_path, kind, bad):
    """Before: a look-ahead file of NaN rows loaded as "trained" and greedy PaSS emitted token 0, labelled
    accepted; a ParallelSpec drafter with one NaN tensor raised torch's bare error at T = 1."""
    made = LookaheadEmbeddings.initialise(tiny, 3, "mean") if kind == "lookahead" else ParallelDrafter.initialise(tiny, 3)
    good = made.save(tmp_path / "good.safetensors")
    name = "lookahead" if kind == "lookahead" else sorted(k for k, t in load_file(str(good)).items()
                                                          if t.is_floating_point())[0]

    def poison(tensors):
        tensors[name] = tensors[name].clone()
        tensors[name].view(-1)[0] = bad

    resave(good, tmp_path / "bad.safetensors", poison)
    cls = LookaheadEmbeddings if kind == "lookahead" else ParallelDrafter
    with pytest.raises(ValueError, match="holds NaN or inf") as err:
        cls.load(tmp_path / "bad.safetensors", tiny)
    assert str(tmp_path / "bad.safetensors") in str(err.value) and name in str(err.value)


def test_saving_non_finite_weights_is_refused_and_writes_nothing(tiny, tmp_path):
    from pass_core.training.checkpoint import save_checkpoint

    la = LookaheadEmbeddings.initialise(tiny, 2, "mean")
    la.weight[1, 3] = float("nan")
    with pytest.raises(ValueError, match="'lookahead' holds NaN or inf"):
        la.save(tmp_path / "la.safetensors")
    drafter = ParallelDrafter.initialise(tiny, 3)
    with torch.no_grad():
        next(drafter.parameters()).view(-1)[0] = float("inf")
    with pytest.raises(ValueError, match="holds NaN or inf"):
        drafter.save(tmp_path / "drafter.safetensors")
    param = torch.nn.Parameter(torch.tensor([1.0, float("nan")]))
    with pytest.raises(ValueError, match="diverged by step 7"):
        save_checkpoint(tmp_path / "x.ckpt.safetensors", {"param": param}, torch.optim.Adam([param]), 7,
                        type("Args", (), {})())
    assert list(tmp_path.iterdir()) == []
    la.weight[1, 3] = 0.0  # a finite file is written, readable by all like the shipped ones (safetensors: 0600)
    assert oct(la.save(tmp_path / "la.safetensors").stat().st_mode & 0o777) == "0o644"


def test_a_diverging_training_run_saves_no_checkpoint(tiny_folder, tmp_path, monkeypatch):
    """An optimizer whose steps turn the weights into NaN (as a diverging run does; a huge --lr does not, since the
    model's RMSNorm makes huge but finite embeddings harmless and their gradients vanish): the trainer stops at its
    first checkpoint with a message (CLI: exit 2) instead of writing NaN there and then into the look-ahead file."""
    from test_train import run_train

    adam = torch.optim.Adam

    class Diverging(adam):
        def step(self, closure=None):
            super().step(closure)
            with torch.no_grad():
                for group in self.param_groups:
                    for param in group["params"]:
                        param.mul_(float("nan"))

    monkeypatch.setattr(torch.optim, "Adam", Diverging)
    with pytest.raises(ValueError, match="Training diverged by step 2: the tensor 'param' holds NaN or inf, so no "
                       "checkpoint was written. Train again with a lower learning rate, or lower values of the "
                       "options that scale the loss or the updates if you raised them \\(--position-decay"):
        run_train(tiny_folder, tmp_path, "--steps", "6")
    assert not (tmp_path / "la.safetensors").exists() and not (tmp_path / "la.ckpt.safetensors").exists()


@pytest.mark.parametrize("fused", [False, True])
def test_non_finite_logits_stop_the_loop_instead_of_a_wrong_output(tiny, fused):
    """Look-ahead embeddings holding NaN in memory (no file check can see them): their rows share the passes
    with the real rows, and 0 x NaN in attention made the real rows' logits NaN. Before: greedy PaSS emitted
    token 0 again and again, labelled exact / accepted. Now the target pass refuses non-finite logits."""
    la = LookaheadEmbeddings.initialise(tiny, 3, "mean")
    la.weight[2] = float("nan")
    settings = DecodeSettings(max_new_tokens=12, num_lookahead=3, fused=fused)
    with pytest.raises(ValueError, match="logits hold NaN or inf"):
        list(METHODS["pass"].decode(tiny, "Hello there", settings, la))


def test_a_drafter_with_nan_weights_in_memory_gives_a_clear_error_when_sampling(tiny):
    drafter = ParallelDrafter.initialise(tiny, 3)
    with torch.no_grad():
        for p in drafter.parameters():
            p.fill_(float("nan"))
    with pytest.raises(ValueError, match="Cannot draw a token"):
        list(METHODS["parallelspec"].decode(tiny, "Hello there", DecodeSettings(max_new_tokens=8, temperature=1.0),
                                            drafter))


# --- 3. the checksum is not optional -------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["lookahead", "drafter"])
def test_a_file_without_its_checksum_is_refused(tiny, tmp_path, kind):
    """Before: an altered file whose sha256 key was deleted loaded and raced."""
    made = LookaheadEmbeddings.initialise(tiny, 3, "mean") if kind == "lookahead" else ParallelDrafter.initialise(tiny, 3)
    good = made.save(tmp_path / "good.safetensors")
    with safe_open(str(good), framework="pt") as handle:
        meta = {k: v for k, v in handle.metadata().items() if k != "sha256"}
    save_file(load_file(str(good)), str(tmp_path / "unsigned.safetensors"), metadata=meta)
    cls = LookaheadEmbeddings if kind == "lookahead" else ParallelDrafter
    with pytest.raises(ValueError, match="carries no checksum") as err:
        cls.load(tmp_path / "unsigned.safetensors", tiny)
    assert str(tmp_path / "unsigned.safetensors") in str(err.value)


def test_every_shipped_file_passes_the_checks():
    from pass_core.drafters.shipped import assets_dir

    files = sorted(assets_dir().glob("*/*.safetensors"))
    assert len(files) >= 4
    for path in files:
        with safe_open(str(path), framework="pt") as handle:
            fmt = handle.metadata()["format"]
        read_model_file(path, "shipped file", fmt)  # checksum present and matching, every tensor finite


# --- 4. replay compares embedding signatures, not names ------------------------------------------------------

def test_replay_decodes_token_ids_with_the_page_model_only_when_the_signatures_match(tiny, demo, tmp_path):
    settings = DecodeSettings(max_new_tokens=6, num_lookahead=2)
    events = {key: list(METHODS[key].decode(tiny, "Hello there", settings)) for key in ("ar", "pass")}
    trace = make_trace(tiny, "Hello there", settings, events)
    own = save_trace(trace, tmp_path / "own.json")
    data = json.loads(own.read_text())
    other = make_trace(tiny_loaded(seed=1), "x", settings, events)
    data["model"]["signature"] = other.signature  # another model's trace under this model's name
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(data))
    replay = next(fn.fn for fn in demo.fns.values() if fn.api_name == "replay")
    assert dict(zip(OUTPUT_NAMES, replay(str(own), True)))["state"]["own_model"] is True
    assert dict(zip(OUTPUT_NAMES, replay(str(forged), True)))["state"]["own_model"] is False
    replay_only = page.build_demo(page.ModelHolder.without_model())
    replay = next(fn.fn for fn in replay_only.fns.values() if fn.api_name == "replay")
    assert dict(zip(OUTPUT_NAMES, replay(str(own), True)))["state"]["own_model"] is False


# --- 5 and 6. traces with absurd numbers, too large or too deep ----------------------------------------------

@pytest.fixture(scope="module")
def trace_dict(tiny):
    settings = DecodeSettings(max_new_tokens=4, num_lookahead=2)
    events = {key: list(METHODS[key].decode(tiny, "Hi", settings)) for key in ("ar", "pass")}
    from pass_core.teaching.trace import trace_to_dict

    return trace_to_dict(make_trace(tiny, "Hi", settings, events))


@pytest.mark.parametrize("field", ["seed", "max_new_tokens", "num_lookahead", "temperature"])
@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_a_trace_with_non_finite_settings_is_refused_naming_file_and_field(trace_dict, tmp_path, field, value):
    """Before: seed / max_new_tokens / num_lookahead = Infinity raised an uncaught OverflowError."""
    data = json.loads(json.dumps(trace_dict))
    data["settings"][field] = value
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(data))  # Python writes Infinity / NaN, as a hand-edited file may hold
    with pytest.raises(ValueError, match=f"'settings.{field}' is .*not a finite number") as err:
        load_trace(path)
    assert str(path) in str(err.value)
    with pytest.raises(gr.Error, match=f"odd.json.*settings.{field}"):
        page.replay_handler(str(path))


def test_absurd_but_finite_trace_numbers_are_refused_by_name(trace_dict, tmp_path):
    data = json.loads(json.dumps(trace_dict))
    data["settings"]["max_new_tokens"] = 10**400
    data["settings"]["seed"] = 1e300
    path = tmp_path / "big.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="'settings' is malformed .*must be between"):
        load_trace(path)
    data = json.loads(json.dumps(trace_dict))
    data["methods"]["ar"]["events"][0]["step_s"] = float("inf")
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"'methods.ar.events\[0\].step_s' is inf"):
        load_trace(path)


def test_a_deeply_nested_or_huge_trace_is_refused_by_name(trace_dict, tmp_path):
    """Before: 1,000 levels of nesting raised RecursionError out of load_trace; any size was read."""
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 1000 + "]" * 1000)
    with pytest.raises(ValueError, match="nests deeper than a trace ever does") as err:
        load_trace(deep)
    assert str(deep) in str(err.value)
    data = json.loads(json.dumps(trace_dict))
    nested = 0
    for _ in range(100):  # deep, yet within Python's recursion limit: the reader's own depth limit refuses it
        nested = [nested]
    data["model"]["signature"] = nested
    deep.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="nests deeper"):
        load_trace(deep)
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as handle:
        handle.truncate(MAX_TRACE_BYTES + 1)  # sparse: the size is checked before anything is read
    with pytest.raises(ValueError, match="a trace may be at most 32 MB") as err:
        load_trace(huge)
    assert str(huge) in str(err.value)
    data = json.loads(json.dumps(trace_dict))
    data["prompt"] = "x" * 100_001  # the 50 MB upload of the report held a 50-million-character prompt
    huge.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="the field 'prompt' has 100,001 characters; a race takes at most 100,000"):
        load_trace(huge)


def test_app_launches_with_an_upload_limit(monkeypatch):
    import app

    seen = {}
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: seen.update(kwargs))
    for name in ("GRADIO_SERVER_PORT", "GRADIO_SERVER_NAME"):
        monkeypatch.delenv(name, raising=False)
    app.main(["--replay-only"])
    assert seen["max_file_size"] == MAX_TRACE_BYTES
    assert (seen["server_name"], seen["server_port"]) == ("127.0.0.1", 7860)
    app.main(["--replay-only", "--port", "7999", "--host", "0.0.0.0"])  # a helper tried --port: refused then
    assert (seen["server_name"], seen["server_port"]) == ("0.0.0.0", 7999)
    monkeypatch.setenv("GRADIO_SERVER_PORT", "7123")
    app.main(["--replay-only"])
    assert seen["server_port"] == 7123


def test_a_port_out_of_range_or_in_use_is_named_without_a_traceback(monkeypatch, capsys):
    """``--port -1`` or ``70000`` aborted the process (an OverflowError in the bind, then "terminate called"); a port
    in use, or a ``--host`` that is not this machine's, ended in gradio's traceback "Cannot find empty port" (found
    by a bad-input helper). Each is now one error line naming the options."""
    import socket

    import app

    for bad in ("-1", "70000", "http"):
        with pytest.raises(SystemExit) as exit_:
            app.main(["--replay-only", "--port", bad])
        assert exit_.value.code == 2 and "argument --port" in capsys.readouterr().err, bad
    import os
    import subprocess
    import sys
    from pathlib import Path

    # GRADIO_SERVER_PORT=abc: gradio's int('abc') traceback while being imported, before --port was parsed
    done = subprocess.run([sys.executable, str(Path(app.__file__))], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "GRADIO_SERVER_PORT": "abc"})
    assert (done.returncode, done.stderr) == (1, "error: GRADIO_SERVER_PORT='abc' is not a port: set it to a whole "
                                                 "number from 1 to 65535, or unset it and give --port.\n")
    monkeypatch.setattr(gr.Blocks, "block_thread", lambda self: None)  # a launch that worked returns at once
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(SystemExit) as exit_:
            app.main(["--replay-only", "--host", "127.0.0.1", "--port", str(port)])
    err = capsys.readouterr().err
    assert exit_.value.code == 1 and f"error: --host 127.0.0.1 --port {port}: cannot serve there" in err, err
    assert "Traceback" not in err


def test_the_server_keeps_the_races_of_at_most_state_sessions_visitors(trace_dict, tmp_path, monkeypatch):
    """Each visitor's session holds its race's events; gradio kept 10,000 sessions (a closed tab's for an hour), so
    the server grew by 9 MB per visitor replaying a 3.3 MB trace, without end. ``launch_options`` caps them at
    ``page.STATE_SESSIONS`` (here patched to 2): the third visitor's replay drops the first's race."""
    from gradio_client import handle_file
    from servers import local_client

    from pass_core.runtime.holder import ModelHolder

    assert page.launch_options()["state_session_capacity"] == page.STATE_SESSIONS
    guide = " ".join((REPO / "docs" / "guide.md").read_text(encoding="utf-8").split())
    assert f"keeps the race (or replay) of the {page.STATE_SESSIONS} visitors who used the page last" in guide
    monkeypatch.setattr(page, "STATE_SESSIONS", 2)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace_dict), encoding="utf-8")
    demo, port = page.build_demo(ModelHolder.without_model()), free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                **page.launch_options())
    try:
        held = []
        for _ in range(3):
            local_client(f"http://127.0.0.1:{port}/").predict(handle_file(str(path)), True,
                                                                      api_name="/replay")
            held.append(sum(any(isinstance(v, dict) and "events" in v for v in session.state_data.values())
                            for session in demo.state_holder.session_data.values()))
        assert held == [1, 2, 2]  # sessions holding a replayed race
    finally:
        demo.close()


def test_uploads_over_the_limit_and_bad_traces_through_the_api(app_server, trace_dict, tmp_path):
    """Against ``python app.py``: an upload over the limit is refused at the door; a trace holding Infinity or
    nested 1,000 deep is refused naming the file and the field, with no traceback in the server log."""
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError
    from servers import local_client

    big = tmp_path / "big.json"
    big.write_bytes(b" " * (MAX_TRACE_BYTES + 1024))
    odd = tmp_path / "odd.json"
    data = json.loads(json.dumps(trace_dict))
    data["settings"]["seed"] = float("inf")
    odd.write_text(json.dumps(data))
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 1000 + "]" * 1000)
    mark = app_server.log_mark()
    client = local_client(app_server.url)
    with pytest.raises(Exception, match="(?i)size|large|413"):
        client.predict(handle_file(str(big)), True, api_name="/replay")
    with pytest.raises(AppError, match=r"'odd.json'.*'settings.seed' is inf"):
        client.predict(handle_file(str(odd)), True, api_name="/replay")
    with pytest.raises(AppError, match="'deep.json' is not a trace: its JSON nests deeper"):
        client.predict(handle_file(str(deep)), True, api_name="/replay")
    log = app_server.log_since(mark)
    assert "Traceback" not in log, log[-3000:]


# --- 7. a paused race yields a heartbeat, so a closed tab frees the race slot --------------------------------

def test_a_paused_race_yields_a_heartbeat(tiny):
    """Before: a paused race yielded nothing until a button press or PAUSE_IDLE_S (300 s), so gradio could not
    see that its tab had closed. Now it yields gr.skip() for every output about once a second."""
    control = StepControl()
    control.pause()
    outs = page.race_handler(tiny, RaceRequest("Hello there", 2, 0.0, 0, 1.0, 16, 0), update_interval_s=0.0, control=control)
    opening(outs)
    first = next(outs)
    got: list = []
    worker = threading.Thread(target=lambda: got.append((next(outs), time.monotonic())), daemon=True)
    start = time.monotonic()
    worker.start()
    worker.join(5.0)
    try:
        assert got, "a paused race yielded nothing for 5 s: a closed tab would keep the race slot"
        beat, when = got[0]
        assert len(beat) == len(first) and all(value == gr.skip() for value in beat)
        assert when - start < 3.0
    finally:
        control.move(RESUME)
    worker.join(30)
    final = dict(zip(OUTPUT_NAMES, list(outs)[-1], strict=True))
    assert "Finished" in final["run_info"]


def test_a_paused_race_in_a_closed_tab_frees_the_race_slot_at_once(monkeypatch):
    """The page's race runs one at a time. A race paused in a tab that then closes (the event stream dropped,
    as a browser does) used to hold the slot for PAUSE_IDLE_S = 300 s; the next race now starts at once."""
    import httpx
    from servers import local_client

    created: list[StepControl] = []

    class PausedFirst(StepControl):
        def __init__(self, delay_s=0.0):
            super().__init__(delay_s)
            if not created:
                self.pause()
            created.append(self)

    monkeypatch.setattr(page, "StepControl", PausedFirst)
    demo, port = page.build_demo(tiny_loaded(seed=0), untrained_drafters=True), free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                **page.launch_options())
    url = f"http://127.0.0.1:{port}/"
    try:
        fn_index = next(i for i, fn in demo.fns.items() if fn.api_name == "race")
        body = {"data": ["Hello there", 2, 0.0, 0, 1.0, 200, 0, True, False, ["ar", "pass"], True, False, 0],
                "fn_index": fn_index, "session_hash": "closed-tab", "event_data": None, "trigger_id": None}
        httpx.post(url + "gradio_api/queue/join", json=body, timeout=30).raise_for_status()
        with httpx.stream("GET", url + "gradio_api/queue/data?session_hash=closed-tab", timeout=30) as stream:
            for line in stream.iter_lines():
                if "process_generating" in line and "Paused" in line:
                    break  # the paused frame is on the "page"; now the tab closes
        assert created and created[0].paused
        start = time.monotonic()
        job = local_client(url).submit("Hi", 2, 0.0, 0, 1.0, 4, 0, True, False, ["ar", "pass"],
                                                api_name="/race")
        result = dict(zip(API_OUTPUT_NAMES, job.result(timeout=30), strict=True))
        assert "Finished" in result["run_info"] and time.monotonic() - start < 30
        assert created[0].paused  # the closed tab's race never resumed: it was ended, not timed out
    finally:
        if created:
            created[0].move(RESUME)  # a broken version's paused race must not outlive the test
        demo.close()


@pytest.mark.browser
def test_closing_a_tab_with_a_paused_race_lets_the_next_visitor_race(chromium, monkeypatch):
    """In Chromium: race, Pause, close the tab; a new tab's 4-token race finishes within seconds (before:
    after PAUSE_IDLE_S, here shortened to 60 s so that a broken version fails instead of hanging)."""
    fast = race_handlers.race

    def slow_race(decoders):
        for item in fast(decoders):
            time.sleep(0.2)  # a slow race keeps the page light: the Pause click lands even on a busy machine
            yield item

    monkeypatch.setattr(race_handlers, "race", slow_race)
    monkeypatch.setattr(stepping, "PAUSE_IDLE_S", 60.0)
    demo, port = page.build_demo(tiny_loaded(seed=0), untrained_drafters=True), free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                **page.launch_options())
    contexts = []
    try:
        def new_tab():
            contexts.append(chromium.new_context(viewport={"width": 1400, "height": 800}))
            tab = contexts[-1].new_page()
            tab.goto(f"http://127.0.0.1:{port}/")
            tab.get_by_text("Ready:").first.wait_for(timeout=60_000)
            open_settings(tab)
            return tab

        def race_on(tab, max_new_tokens):
            tab.get_by_role("textbox", name="prompt", exact=True).fill("Hello there")
            tab.locator("#input-max_new_tokens input").fill(str(max_new_tokens))
            tab.get_by_role("button", name="Run").click()

        first = new_tab()
        race_on(first, 200)
        first.locator("#pane-pass .token.highlighted").first.wait_for(timeout=30_000)
        # dispatched, not clicked: while a race redraws the page the button may never count as "stable"
        first.locator("#pause-button").dispatch_event("click")
        first.locator("#run-line").get_by_text("Paused after step").first.wait_for(timeout=60_000)
        first.close()  # the tab goes; its race stays paused
        start = time.monotonic()
        second = new_tab()
        race_on(second, 4)
        second.get_by_text("Finished.").first.wait_for(timeout=30_000)
        assert time.monotonic() - start < 40
    finally:
        for context in contexts:
            context.close()
        demo.close()


# --- 8. out-of-range draft ids raise ------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [-1, -259, 259, 260])
def test_out_of_range_draft_ids_raise(bad):
    """Before: -1 was verified silently as token V-1 (torch indexes from the end)."""
    V = 259
    q = torch.full((2, V), 1.0 / V)
    p = torch.full((3, V), 1.0 / V)
    with pytest.raises(ValueError, match=f"between 0 and {V - 1}.*proposed \\[{bad}\\]"):
        verify_drafts(torch.tensor([3, bad]), q, p, torch.Generator().manual_seed(0))
    assert verify_drafts(torch.tensor([3, V - 1]), q, p, torch.Generator().manual_seed(0)).num_accepted >= 0


# --- 9. a damaged checkpoint ends --resume with a message ----------------------------------------------------

@pytest.mark.parametrize("damage", ["garbage", "truncated", "other"])
def test_a_damaged_checkpoint_is_named_with_how_to_start_afresh(tiny_folder, tmp_path, capsys, damage):
    """Before: --resume ended in a raw SafetensorError traceback. A file that is no checkpoint at all (bytes, or a
    safetensors file of other tensors) is named so, with what works: it was called damaged, with the advice to run
    without --resume, which then refused it as no checkpoint (helper 68)."""
    from safetensors.torch import save_file

    from pass_core.training import lookahead as train_mod
    from pass_core.training.checkpoint import checkpoint_path
    from test_train import TEXT, run_train

    run_train(tiny_folder, tmp_path, "--steps", "4", "--stop-at", "2")
    ckpt = checkpoint_path(tmp_path / "la.safetensors")
    data = ckpt.read_bytes()
    ckpt.write_bytes(b"\x00garbage" * 10 if damage == "garbage" else data[: len(data) // 2])
    if damage == "other":
        save_file({"x": torch.zeros(2)}, str(ckpt))
    (tmp_path / "data.txt").write_text(TEXT)
    code = train_mod.main(["--model", str(tiny_folder), "--num-lookahead", "2", "--out", str(tmp_path / "la.safetensors"),
                           "--data", str(tmp_path / "data.txt"), "--steps", "4", "--eval-prompts", "0",
                           "--eval-sequences", "0", "--gen-tokens", "8", "--resume"])
    err = capsys.readouterr().err
    assert code == 2 and str(ckpt) in err and "Traceback" not in err
    if damage == "truncated":
        assert "without --resume" in err, err
    else:
        assert "is not a training checkpoint" in err and "Give --out another name, or move that file" in err, err


def test_drafter_checkpoints_of_two_outputs_of_the_same_name_differ(tmp_path):
    """Two runs writing m.safetensors in two folders keep two checkpoints: keyed by the name alone, run B's
    --resume continued run A (its folder, seed and steps), found by a helper."""
    from pass_core.training.checkpoint import drafter_checkpoint_path

    a, b = (drafter_checkpoint_path(tmp_path / run / "m.safetensors") for run in ("runA", "runB"))
    assert a != b and a.parent == b.parent and a.name.startswith("m-") and a.suffix == ".pt"
    assert drafter_checkpoint_path(tmp_path / "runA" / ".." / "runA" / "m.safetensors") == a  # the same file


def test_a_damaged_drafter_checkpoint_is_named_before_the_data(tiny_folder, tmp_path, monkeypatch):
    """A damaged ``--resume`` checkpoint of the drafter trainer, or one of another k, is refused by name once the model
    has loaded, before the training data is made (it was read after the data: minutes to hours of work, then the
    refusal)."""
    from pass_core.training import parallelspec
    from pass_core.training.checkpoint import drafter_checkpoint_path

    out = tmp_path / "d.safetensors"
    ckpt = drafter_checkpoint_path(out)
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    ckpt.write_bytes(b"PK\x03\x04 not a zip")
    monkeypatch.setattr(parallelspec, "_split", lambda *a, **k: pytest.fail("training data was made"))
    try:
        with pytest.raises(ValueError, match="without --resume") as err:
            parallelspec.main(["--model", str(tiny_folder), "--out", str(out), "--resume", "--threads", "1"])
        assert str(ckpt) in str(err.value)
        ckpt.write_bytes(b"garbage")  # torch's message goes on to advise weights_only=False: only its first line
        with pytest.raises(ValueError, match="without --resume") as err:
            parallelspec.main(["--model", str(tiny_folder), "--out", str(out), "--resume", "--threads", "1"])
        assert "UnpicklingError" in str(err.value) and "weights_only" not in str(err.value), err.value
        # a checkpoint of another k: named with the k that continues it (a raw state_dict error, after the data),
        # from its shape when it keeps no options (written before they were kept)
        saved = {"drafter": {"masks": torch.zeros(4, 8)}, "optimizer": {}, "step": 3, "history": "[]",
                 "generator": torch.Generator().get_state(), "train_s": 1.0}
        torch.save(saved, ckpt)
        with pytest.raises(ValueError, match="was written by a run with --num-draft 5 \\(this run: 3\\), so --resume "
                                             "cannot continue from it. Give the same to continue it, or start"):
            parallelspec.main(["--model", str(tiny_folder), "--out", str(out), "--resume", "--threads", "1"])
        # another model of the same shapes, other feature layers or another draft vocabulary continued unsaid (or
        # failed in load_state_dict after the data): each option is named
        options = {"model": "other-model", "num_draft": 3, "feature_layers": [-1, 1], "draft_vocab": 100}
        torch.save({**saved, "drafter": {"masks": torch.zeros(2, 8)}, "args": json.dumps(options)}, ckpt)
        with pytest.raises(ValueError) as err:
            parallelspec.main(["--model", str(tiny_folder), "--out", str(out), "--resume", "--threads", "1"])
        assert (f"--model other-model (this run: {tiny_folder}), --feature-layers -1 1 (this run: -1), "
                "--draft-vocab 100 (this run: 8192), so --resume cannot continue from it. Give the same") in \
            str(err.value), err.value
    finally:
        ckpt.unlink()


def test_closing_a_tab_stops_its_lab(tiny, monkeypatch):
    """A lab kept running after its tab had closed, holding the page's one lab slot for minutes (found by a
    teacher-persona helper: a new tab's lab waited "queue: 1/1"). The page's unload now stops that session's lab at
    its next run, as *Stop lab* does; another session's lab runs on. The lab's runs are slowed by 0.02 s each until the tab closes, so
    that a lab that is not stopped would run on for seconds; then the other lab ends at full speed."""
    from playground import lab_handlers

    real, slow = lab_handlers.run_lab, threading.Event()
    slow.set()

    def slow_lab(*args, progress, **kwargs):
        def feed(done, total):
            if slow.is_set():
                time.sleep(0.02)
            progress(done, total)
        return real(*args, progress=feed, **kwargs)

    monkeypatch.setattr(lab_handlers, "run_lab", slow_lab)
    demo = page.build_demo(tiny)
    lab = next(fn.fn for fn in demo.fns.values() if fn.api_name == "lab")
    unload = next(fn.fn for fn in demo.fns.values() if fn.name == "on_unload")

    class Visitor:
        def __init__(self, session):
            self.session_hash, self.result = session, None

        def start(self, runs):
            thread = threading.Thread(target=lambda: setattr(self, "result", lab("ab", runs, None, self)))
            thread.start()
            return thread

    stop_lab = next(fn.fn for fn in demo.fns.values() if fn.name == "on_stop_lab")
    assert stop_lab(None, Visitor("idle")) == lab_handlers.NO_LAB  # no lab runs in that tab: a note, nothing else
    gone, stopped, staying = Visitor("gone"), Visitor("stopped"), Visitor("staying")
    threads = [visitor.start(30) for visitor in (gone, stopped, staying)]  # 30 runs x 8 = 240 runs each, 5 s or more
    time.sleep(1.0)
    start = time.monotonic()
    unload(gone)  # its tab closed
    assert stop_lab(None, stopped) == gr.skip()  # Stop lab pressed: the lab's own answer follows (a lab had no
    # Stop: a visitor waited minutes or closed the tab)
    slow.clear()  # a lab that missed the unload or Stop lab runs on to its end (4.5 s measured) and returns its table
    for visitor, thread in zip((gone, stopped), threads):
        thread.join(timeout=30)
        assert time.monotonic() - start < 2.0 and visitor.result[1] == lab_handlers.LAB_STOPPED
        # no chart: the previous lab's, with its verdicts, stood over "it gives no verdict" (a new-user helper)
        assert visitor.result[0] == {"__type__": "update", "value": None, "visible": False}
    staying_thread = threads[2]
    staying_thread.join(timeout=120)
    assert staying.result is not None and "✗ fail" in staying.result[1]  # the other visitor's lab ended as usual


def test_a_race_beside_a_lab_says_so(tiny, monkeypatch):
    """A race does not wait for a lab (minutes), and the lab runs in the page's own process, so the race's busy line
    (other programs' CPU time) never counted it: a race beside a lab looked like a race alone (a teacher-persona
    helper ran both). Its run line now ends with ``LAB_BESIDE`` while and after a lab ran; a race alone has none."""
    from playground import lab_handlers, race_slots

    slots = race_slots.RaceSlots()
    before = slots.labs_started
    assert not slots.lab_beside(before)
    with slots.lab("a") as stop:
        assert slots.lab_beside(before) and not stop.is_set()
        slots.close("a")  # its tab closed: the lab stops at its next run
        assert stop.is_set()
    assert slots.lab_beside(before) and not slots.lab_beside(slots.labs_started)  # one ran since; none now
    frame = ("pane", "Racing…", gr.skip())
    assert lab_handlers.with_lab_note(frame, 1)[1] == "Racing…  \n" + lab_handlers.LAB_BESIDE
    assert lab_handlers.with_lab_note(frame, 2) == frame  # a skipped run line stays skipped

    started, release = threading.Event(), threading.Event()

    def held_lab(*args, progress, **kwargs):  # a lab that runs until the race has ended
        started.set()
        release.wait(timeout=60)
        return real(*args, progress=progress, **kwargs)

    real = lab_handlers.run_lab
    monkeypatch.setattr(lab_handlers, "run_lab", held_lab)
    demo = page.build_demo(tiny, untrained_drafters=True)
    lab = next(fn.fn for fn in demo.fns.values() if fn.api_name == "lab")
    on_run = next(fn.fn for fn in demo.fns.values() if fn.api_name == "race")
    alone = dict(zip(OUTPUT_NAMES, list(on_run("Hi", 2, 0.0, 0, 1.0, 4, 0, True, False, ["ar", "pass"]))[-1]))
    assert "Finished" in alone["run_info"] and lab_handlers.LAB_BESIDE not in alone["run_info"]
    visitor = type("Request", (), {"session_hash": "teacher"})()
    thread = threading.Thread(target=lambda: lab("ab", 30, None, visitor))
    thread.start()
    try:
        assert started.wait(timeout=30)
        beside = dict(zip(OUTPUT_NAMES, list(on_run("Hi", 2, 0.0, 0, 1.0, 4, 0, True, False, ["ar", "pass"]))[-1]))
        # a race stopped beside the lab: Stop's line (its last frame) says so too (it did not)
        handlers = {getattr(fn.fn, "__name__", ""): fn.fn for fn in demo.fns.values()}
        handlers["on_slow_motion"](0.05, visitor)  # a frame per step: Stop comes after the fourth
        frames = []
        with ThreadPoolExecutor(1) as pool:
            for out in on_run("Hello there", 2, 0.0, 0, 1.0, 40, 0, True, False, ["ar", "pass"], request=visitor):
                frames.append(dict(zip(OUTPUT_NAMES, out)))
                if len(frames) == 4:
                    stopping = pool.submit(handlers["on_stop"], None, visitor)
            stopping.result(timeout=30)
    finally:
        release.set()
        thread.join(timeout=120)
    assert "Finished" in beside["run_info"] and beside["run_info"].endswith(lab_handlers.LAB_BESIDE)
    stopped = frames[-1]["run_info"]
    assert stopped.startswith(page.STOPPED_NOTE) and stopped.endswith(lab_handlers.LAB_BESIDE), stopped
