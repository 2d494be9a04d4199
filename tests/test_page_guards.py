"""The page's guards around a race, driven as handler functions on the tiny model: the busy-machine line beside
the metrics, a pass-cost curve that is not physical refused (greyed, not fed to the cost view, the what-if panel or
cost-aware draft lengths) with a re-measure button, busy step buttons that take one press at a time, a trace after
Stop, a warning before a long prefill, and a note for a visitor whose race waits for another. Last, a race on a
machine whose every core is busy.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import gradio as gr
import pytest

from pass_core import registry
from pass_core.runtime import machine_load, pass_cost
from pass_core.runtime.machine_load import CpuSample, MachineLoad, busy_line, load_between
from pass_core.teaching.trace import load_trace
from playground import page, page_guards, race_guards, race_slots
from playground.stepping import NEXT, StepControl
from playground.whatif import MACHINE, NO_MACHINE_CURVE, whatif_view
from test_app import OUTPUT_NAMES, PANES, opening, run
from playground.race_inputs import RaceRequest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"




def is_skip(value) -> bool:
    return value == gr.skip()


# --- the busy verdict -------------------------------------------------------------------------------------------

def test_busy_verdict_reads_other_programs_cpu_time():
    """Other programs' cores = the machine's busy CPU time minus this process's, over the wall time; busy only when
    they took half a core or more while every core was busy, over at least ``MIN_WALL_S``."""
    start = CpuSample(wall_s=100.0, own_cpu_s=10.0, busy_s=1000.0, total_s=2000.0, cpus=2)
    contended = CpuSample(wall_s=102.0, own_cpu_s=11.0, busy_s=1003.9, total_s=2004.0, cpus=2)  # 2.9 s by others
    load = load_between(start, contended)
    assert load.own_cores == pytest.approx(0.5) and load.other_cores == pytest.approx(1.45)
    assert load.saturated and load.busy
    line = busy_line(load)
    assert "busy during this race" in line and "timings are unreliable" in line
    # the race's own measurement first, then the 1-minute load average named as such (it lags: "load 0.6" beside
    # "1.0 cores" read as a contradiction)
    assert ("(other programs took 1.4 of 2 cores on average during it; 1-minute load average "
            f"{load.load_average:.1f}, which lags by a minute)") in line, line
    without = busy_line(MachineLoad(2.0, 1.0, None, None, 3.2, 2))  # no /proc/stat: the load average alone
    assert "(1-minute load average 3.2 on 2 cores)" in without, without
    assert "a browser showing this page on the same machine counts too" in line  # the warning on every page race
    alone = CpuSample(wall_s=102.0, own_cpu_s=13.8, busy_s=1003.9, total_s=2004.0, cpus=2)  # the race used it all
    assert load_between(start, alone).other_cores == pytest.approx(0.05) and not load_between(start, alone).busy
    idle_cores = CpuSample(wall_s=102.0, own_cpu_s=11.0, busy_s=1002.2, total_s=2004.0, cpus=2)  # 45 % busy
    assert not load_between(start, idle_cores).busy and busy_line(load_between(start, idle_cores)) == ""
    assert not MachineLoad(0.2, 0.5, 1.5, True, 3.0, 2).busy  # too short to tell
    # over a few clock ticks the counters' rounding (10 ms a tick) read as more cores than the machine has
    ticks = CpuSample(wall_s=100.02, own_cpu_s=10.0, busy_s=1000.05, total_s=2000.06, cpus=2)
    assert load_between(start, ticks).other_cores == 2.0  # was 2.5 (2.19 of 2 in a full run's pass-cost test)
    # without /proc/stat: the load average beyond the race's own cores and the cores left to others
    assert MachineLoad(2.0, 1.0, None, None, 3.2, 2).busy and not MachineLoad(2.0, 1.0, None, None, 1.3, 2).busy


# --- the pass-cost curve ----------------------------------------------------------------------------------------

def curve(c: list[float], one_ms: float = 10.0) -> dict:
    return {"widths": list(range(1, len(c) + 1)), "ms": [one_ms * x for x in c], "c": c, "cache_len": 200,
            "repeats": 3, "device": "cpu", "dtype": "float32", "threads": 1, "load_average_1min": 0.1, "cores": 2}


GOOD = curve([1.0, 1.3, 1.6, 1.9])
NOT_PHYSICAL = curve([1.0, 0.6, 1.2, 1.4])  # a 2-token pass cheaper than a 1-token one


def test_measured_idle_curves_are_physical_and_broken_ones_are_refused():
    """Every curve measured on an idle machine in experiments/ passes (CPU float32 dips of 18 % included); a wider
    pass below 0.9 one-token passes, or a dip beyond noise, is refused with the width named."""
    measured = [json.loads((EXPERIMENTS / name).read_text())["pass_cost"]
                for name in ("cpu-backend-fp32-t2.json", "cpu-backend-fp32-t1.json", "cpu-backend-bf16-t1.json",
                             "cpu-backend-onednn-t2.json", "cpu-pass-cost.json")]
    measured += list(json.loads((EXPERIMENTS / "gpu-h200-pass-cost.json").read_text()).values())
    assert all(pass_cost.curve_problem(m) is None for m in measured if isinstance(m, dict) and "c" in m)
    assert pass_cost.curve_problem(GOOD) is None
    assert "c(2) = 0.60" in pass_cost.curve_problem(NOT_PHYSICAL)
    dip = pass_cost.curve_problem(curve([1.0, 1.5, 2.0, 1.2]))  # 40 % below c(3): a busy machine's spike
    assert dip and "c(4) = 1.20" in dip and "c(3)" in dip


@pytest.fixture
def measured(monkeypatch):
    """The curves ``measure_pass_cost`` returns from now on, in turn (``measured.append``), for every model; the
    cache of curves starts empty."""
    queue: list[dict] = []
    monkeypatch.setattr(pass_cost, "_CURVES", {})
    monkeypatch.setattr(pass_cost, "_GOOD", {})
    monkeypatch.setattr(pass_cost, "measure_pass_cost", lambda *a, **k: queue.pop(0))
    return queue


def test_a_refused_curve_at_start_up_is_measured_again(tiny, measured, monkeypatch):
    """A teacher's app refused its start-up curve on an idle machine (c(16) 30 % below c(14)), so the cost chart,
    the what-if panel and lesson 5 had no curve until *Re-measure*. Start-up now measures once more when its first
    curve is not physical (only once: a busy machine's start would take a measurement longer each time)."""
    from pass_core.runtime import holder as holder_module

    monkeypatch.setattr(holder_module, "load_model", lambda *a, **k: tiny)
    measured += [NOT_PHYSICAL, GOOD, NOT_PHYSICAL]
    holder = holder_module.ModelHolder("tiny", methods=("ar",)).start()
    assert holder.wait(timeout_s=60) is tiny and holder.error is None
    curves = pass_cost.pass_cost_curves(tiny)
    assert curves.used is GOOD and curves.refused is None and measured == [NOT_PHYSICAL]  # stopped at the good one


#: Two start-up curves of the embedded model on this project's Intel Xeon CI machine (one thread, 2026-12-03): a pass
#: over 16 tokens some 30 % cheaper than one over 15, both times (the matrix kernels' shapes, not noise).
XEON_CURVES = [curve([1.0, 1.28, 1.40, 1.66, 1.82, 1.72, 1.85, 1.86, 2.09, 2.51, 2.60, 2.64, 2.97, 2.90, 3.06, 2.22]),
               curve([1.0, 1.33, 1.45, 1.55, 1.66, 1.84, 2.07, 2.00, 2.25, 2.64, 2.44, 2.61, 2.87, 2.95, 2.91, 2.13])]


def part(full: dict, widths: list[int]) -> dict:
    """``full`` measured at ``widths`` only (c relative to width 1, which ``widths`` holds)."""
    return dict(full, widths=widths, ms=[full["ms"][w - 1] for w in widths], c=[full["c"][w - 1] for w in widths])


def test_a_dip_measured_twice_is_the_machines_and_a_dip_elsewhere_is_refused(tiny, measured, monkeypatch):
    """On the Intel Xeons every start-up curve was refused (c(16) below c(15) beyond noise's 25 %), twice, so the
    cost chart, the what-if panel and cost-aware draft lengths had no curve there. A dip that the measurement before
    showed at the same width is now the machine's; a dip at another width is still refused. Start-up checks a dip
    by measuring its widths only (1, 15 and 16: 12 passes, not a whole curve's 64), and measures the whole curve
    again when the check does not find the dip."""
    from pass_core.runtime import holder as holder_module

    assert pass_cost.dips(XEON_CURVES[0]) == [(16, 15)] and pass_cost.dips(XEON_CURVES[1]) == [(16, 14)]
    assert "c(16) = 2.22" in pass_cost.curve_problem(XEON_CURVES[0])  # alone: refused, as before
    monkeypatch.setattr(holder_module, "load_model", lambda *a, **k: tiny)
    asked = []
    pop = pass_cost.measure_pass_cost
    monkeypatch.setattr(pass_cost, "measure_pass_cost", lambda loaded, widths, **k: asked.append(widths) or pop())
    measured += [dict(XEON_CURVES[0]), part(XEON_CURVES[1], [1, 15, 16])]
    holder_module.ModelHolder("tiny", methods=("ar",)).start().wait(timeout_s=60)
    curves = pass_cost.pass_cost_curves(tiny)
    assert [list(w) for w in asked] == [list(pass_cost.DEFAULT_WIDTHS), [1, 15, 16]] and measured == []
    assert curves.refused is None and curves.used["c"] == XEON_CURVES[0]["c"]
    assert curves.used["confirmed_dips"] == [16] and registry.usable_pass_cost(tiny) is curves.used
    final = run(tiny, max_new_tokens=6)[-1]  # the cost view draws it and says why it dips
    assert final["state"]["show"]["curve"] is curves.used and "refused" not in final["cost_text"]
    assert "cheaper here at w = 16 (measured twice)" in final["cost_text"]
    elsewhere = curve(XEON_CURVES[1]["c"][:8] + [1.3] + XEON_CURVES[1]["c"][9:])  # c(9) far below c(8) this time
    measured.append(elsewhere)
    again = pass_cost.pass_cost_curves(tiny, remeasure=True)
    assert again.refused is elsewhere and "c(9) = 1.30" in again.problem and again.used is curves.used
    # the whole curve measured twice (Re-measure) confirms the dip too
    measured.append(dict(XEON_CURVES[1]))
    assert pass_cost.pass_cost_curves(tiny, remeasure=True).used["confirmed_dips"] == [16]
    # a dip the check does not find again (a busy moment's spike at c(15)): the whole curve once more
    monkeypatch.setattr(pass_cost, "_CURVES", {})
    monkeypatch.setattr(pass_cost, "_GOOD", {})
    asked.clear()
    measured += [dict(XEON_CURVES[0]), part(curve([1.0] + [1.1 * w ** 0.5 for w in range(2, 17)]), [1, 15, 16]),
                 dict(XEON_CURVES[1])]
    assert pass_cost.pass_cost_curves(tiny).refused is not None
    assert pass_cost.confirm_or_remeasure(tiny).used["c"] == XEON_CURVES[1]["c"] and measured == []
    assert [len(w) for w in asked] == [16, 3, 16]
    # a busy moment's spike at c(2) (every wider width dips below it), then one at c(5) (widths 6..16 dip): not
    # the same dips, so the second is refused too (it was taken as confirmed, a subset of the first's widths)
    smooth = [1.0 + 0.1 * w for w in range(16)]
    spiked_2, spiked_5 = (curve(smooth[:i] + [6.0] + smooth[i + 1:]) for i in (1, 4))
    measured += [spiked_2, spiked_5]
    assert pass_cost.pass_cost_curves(tiny, remeasure=True).refused is spiked_2
    again = pass_cost.pass_cost_curves(tiny, remeasure=True)
    assert again.refused is spiked_5 and "confirmed_dips" not in spiked_5 and measured == []


def test_remeasure_counts_its_passes(tiny, monkeypatch):
    """*Re-measure pass cost* showed "0.0%" until it ended (about 15 s on the embedded model): now it counts the
    passes of the measurement, up to their total."""
    monkeypatch.setattr(pass_cost, "_CURVES", {})
    monkeypatch.setattr(pass_cost, "_GOOD", {})
    monkeypatch.setattr(pass_cost, "curve_problem", lambda curve: None)  # a busy CPU's curve was refused here
    calls = []
    shown, text, _ = page_guards.remeasure_outputs(tiny, None, lambda value, desc=None, unit=None: calls.append(
        (value, desc, unit)))
    # before any race: the curve alone, drawn, and its text speaks of no method's lines (there are none yet)
    assert shown["visible"] is True and [t.name for t in shown["value"].data][0].startswith("c(w)")
    assert "These lines average" not in text and "A race puts each drafting method's tokens" in text
    counts = [value for value, _, _ in calls[1:]]
    total = 4 * len(pass_cost.DEFAULT_WIDTHS)  # three timed rounds and the warm-up, every width
    assert calls[0][0] == (0, None) and counts == [(i, total) for i in range(1, total + 1)]
    assert {desc for _, desc, _ in calls} == {"measuring the pass cost of this machine"} and calls[-1][2] == "passes"


def test_a_refused_curve_is_greyed_and_the_last_good_one_used(tiny, measured):
    measured += [GOOD, NOT_PHYSICAL]
    final = run(tiny, max_new_tokens=6)[-1]
    assert final["state"]["show"]["curve"] is GOOD and "refused" not in final["cost_text"]
    shown, text, state = page_guards.remeasure_outputs(tiny, final["state"])  # the re-measure button
    fig = shown["value"]  # a figure: its plot shown (``plot_boxes.shown_plot``)
    assert shown["visible"] is True
    assert "not physical and was refused" in text and "c(2) = 0.60" in text and "last physical curve" in text
    assert "These lines average every step" in text  # after a race: the methods' lines are drawn
    grey = [t for t in fig.data if t.name.startswith("refused")]
    assert len(grey) == 1 and list(grey[0].y) == NOT_PHYSICAL["c"]
    assert list(next(t for t in fig.data if t.name.startswith("c(w)")).y) == GOOD["c"]  # the black line: GOOD
    assert state["show"]["curve"] is GOOD  # the what-if panel's "this machine" and step-through read this one
    assert registry.usable_pass_cost(tiny) is GOOD  # cost-aware draft lengths and tree sizes too
    again = run(tiny, max_new_tokens=6)[-1]  # a race after the refusal: greyed again, the good one in use
    assert again["state"]["show"]["curve"] is GOOD and "was refused" in again["cost_text"]
    measured.append(curve([1.0, 1.1, 1.2, 1.3]))
    _, text, state = page_guards.remeasure_outputs(tiny, again["state"])  # a physical curve replaces both
    assert "refused" not in text and state["show"]["curve"]["c"] == [1.0, 1.1, 1.2, 1.3]


def test_without_a_physical_curve_nothing_reads_it(tiny, measured):
    measured.extend([NOT_PHYSICAL] * (1 + pass_cost.REMEASURE_TRIES))  # cost-aware lengths measure again first
    final = run(tiny, max_new_tokens=6)[-1]
    assert final["state"]["show"]["curve"] is None and "no physical curve" in final["cost_text"]
    assert whatif_view(0.6, 3, MACHINE, "", 0.1, final["state"]) == (None, NO_MACHINE_CURVE)
    # measured and refused, not only "measured once the model has loaded" (a visitor waited for a measurement that
    # had come): where the refusal is explained
    assert "is refused (*Pass cost on this machine* says why)" in NO_MACHINE_CURVE
    # for the page and the command line alike (a CLI user read "Press *Re-measure pass cost*", asterisks and all)
    with pytest.raises(gr.Error, match=r"not physical.*\(on the page: the Re-measure pass cost button; on the "
                                       r"command line: the same command again\)"):
        run(tiny, max_new_tokens=6, auto_drafts=True)
    assert not measured  # it did measure again, REMEASURE_TRIES times, before giving up


# --- step buttons -----------------------------------------------------------------------------------------------

def test_step_buttons_wait_for_their_step_and_take_one_press_at_a_time(tiny, demo):
    """Next on a paused live race: the button's handler waits (``wait_shown``) until the race has put that step
    on the page; on the page every step button is marked busy at the press and takes one press at a time."""
    control = StepControl()
    control.pause()
    outs = page.race_handler(tiny, RaceRequest("Hello there", 2, 0.0, 0, 1.0, 12, 0), update_interval_s=0.0, control=control)
    opening(outs)
    first = dict(zip(OUTPUT_NAMES, next(outs), strict=True))
    assert first["state"]["position"] == 1
    next(outs)  # gradio asks for the next update once the first is sent: the first step is shown
    assert control.wait_shown(0)
    control.move(NEXT)
    assert not control.wait_shown(0.2)  # the race has not shown step 2 yet: the button stays busy
    second = dict(zip(OUTPUT_NAMES, next(outs), strict=True))
    assert second["state"]["position"] == 2
    next(outs)
    assert control.wait_shown(0)
    outs.close()
    for elem_id in ("pause-button", "previous-button", "next-button", "resume-button"):
        button = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == elem_id)
        fns = [fn for fn in demo.fns.values() if any(t[0] == button._id for t in fn.targets)]
        assert any(fn.js and "aria-busy" in fn.js and fn.fn is None for fn in fns), elem_id
        modes = [fn.trigger_mode for fn in fns if fn.fn is not None]  # the step's handler (and Previous / Next's
        assert modes and set(modes) == {"once"}, (elem_id, modes)  # reset of a tree node's inspector)


# --- Stop, a long prefill, a race that waits --------------------------------------------------------------------

def test_stop_offers_the_trace_of_what_was_produced(tiny, demo, tmp_path):
    outs = page.race_handler(tiny, RaceRequest("Hello there", 2, 0.0, 0, 1.0, 40, 0), update_interval_s=0.0)
    opening(outs)
    frames = [dict(zip(OUTPUT_NAMES, next(outs), strict=True)) for _ in range(5)]
    outs.close()  # Stop cancels the race: gradio closes its generator
    state = frames[-1]["state"]
    note, path, stopped = page_guards.stop_outputs(tiny, state)
    assert note.startswith(page.STOPPED_NOTE) and "Download trace" in note
    # each method's line of what it had produced stays (Stop's line took the place of the run line's)
    produced = {key: sum(len(e.new_token_ids) for e in evs) for key, evs in state["events"].items()}
    for key, tokens in produced.items():
        assert f"**{registry.METHODS[key].short_name}** {tokens} token" in note, (key, note)
    trace = load_trace(path)
    assert trace.prompt == "Hello there" and trace.settings.max_new_tokens == 40
    assert {k: [e.new_token_ids for e in v] for k, v in trace.events.items()} == \
        {k: [e.new_token_ids for e in v] for k, v in state["events"].items()}
    assert sum(map(len, trace.events.values())) == 5  # the steps produced, not a whole race
    _, path, back = page_guards.stop_outputs(tiny, dict(state, position=2))  # Previous, Previous, Stop
    stepped_back = load_trace(path)
    assert sum(map(len, stepped_back.events.values())) == 2  # the steps the panes show (it held all 5)
    # and the stopped state holds those steps only: Resume after it showed the 3 steps the trace lacks
    assert sum(map(len, back["events"].values())) == 2 and back["position"] is None
    # each frame's state holds the steps that frame showed, not the race's growing lists: Stop pressed while the
    # third frame is on the page offers those 3 steps (a shared dict once offered steps the panes never showed)
    assert [sum(map(len, f["state"]["events"].values())) for f in frames] == [1, 2, 3, 4, 5]
    assert page_guards.stop_outputs(tiny, None)[0] == page_guards.NOTHING_TO_STOP  # no race: nothing stopped
    assert is_skip(page_guards.stop_outputs(tiny, None)[1])  # and nothing to download
    assert all(map(is_skip, page_guards.stop_outputs(tiny, dict(state, finished=True))))  # a finished race stays
    # the page's state after Stop is marked stopped: the step buttons speak of a stopped race (Resume said
    # "Racing…", Pause "the finished race's last"), and Stop again writes no second trace
    assert stopped["stopped"] and stopped["events"] == state["events"] and not state.get("stopped")
    total = sum(map(len, state["events"].values()))
    lines = {position: dict(zip(OUTPUT_NAMES, page.render_state(stopped, True, position), strict=True))["run_info"]
             for position in (None, total, total - 1)}
    assert lines[None].startswith(page.STOPPED_NOTE), lines[None]  # Resume
    assert f"step {total} of {total}, the stopped race's last" in lines[total], lines[total]
    assert "where it was stopped" in lines[total]
    assert f"step {total - 1} of {total} of the stopped race" in lines[total - 1]  # Previous
    assert all(map(is_skip, page_guards.stop_outputs(tiny, stopped)))
    replay = dict(state, show=dict(state["show"], guards={}))  # a stopped race's trace, replayed: no source
    assert all(map(is_skip, page_guards.stop_outputs(tiny, replay)))  # its lines stay (Stop wrote "Stopped.")
    button = next(b for b in demo.blocks.values() if isinstance(b, gr.Button) and b.value == "Stop")
    stop = next(fn for fn in demo.fns.values() if (button._id, "click") in [tuple(t) for t in fn.targets] and fn.fn)
    assert "trace-download" in [getattr(o, "elem_id", None) for o in stop.outputs]
    assert any(isinstance(o, gr.State) for o in stop.outputs)  # the state marked stopped


def live_race(tiny, control, width: int):
    """The frames a live race yields, as ``page.build_demo``'s race handler yields them: until Stop, then Stop's
    own frame (``page_guards.stopped_frame``)."""
    for out in page.race_handler(tiny, RaceRequest("Hello there", 2, 0.0, 0, 1.0, 40, 0), update_interval_s=0.0,
                                 control=control):
        if not control.yielding(out[-1]):
            if control.stop_frame_due:
                yield page_guards.stopped_frame(tiny, control, width)
            break
        yield out
    control.end()


def test_a_live_race_answers_stop_in_its_own_stream_with_the_trace_of_its_last_frame(tiny):
    """Stop pressed while a race runs: the race's next frame is not yielded; the race yields Stop's line and the
    trace of the last frame it did yield (a frame yielded after Stop's trace was made once put 13 more AR tokens on
    the page) as its own last frame, and Stop's reply changes nothing. Stop's line reaches the page in the race's
    stream, after every frame of the race: when Stop replied with it, a race frame sent just before Stop once
    arrived after Stop's reply and replaced its line (the run line kept "Racing…", also after a fix that made Stop
    wait for the race's next frame)."""
    demo = page.build_demo(tiny, untrained_drafters=True)
    handlers = {getattr(fn.fn, "__name__", ""): fn.fn for fn in demo.fns.values()}
    on_run = next(fn.fn for fn in demo.fns.values() if fn.api_name == "race")
    visitor, frames = type("Request", (), {"session_hash": "visitor"})(), []
    handlers["on_slow_motion"](0.05, visitor)  # every step a frame: Stop comes after the fourth
    with ThreadPoolExecutor(1) as pool:
        for out in on_run("Hello there", 2, 0.0, 0, 1.0, 40, 0, True, False, ["ar", "pass"], request=visitor):
            frames.append(out)
            if len(frames) == 4:  # gradio sends this frame while Stop is pressed (Stop's own thread)
                stopping = pool.submit(handlers["on_stop"], None, visitor)
                time.sleep(0.3)
                assert not stopping.done()  # Stop waits: the race has not answered yet
        reply = stopping.result(timeout=5)
    assert all(map(is_skip, reply))  # Stop's own reply changes nothing: the race has answered
    assert len(frames) == 5
    last = dict(zip(OUTPUT_NAMES, frames[-1], strict=True))
    assert last["run_info"].startswith(page.STOPPED_NOTE) and "Download trace" in last["run_info"]
    assert last["state"]["stopped"] and last["state"]["events"] == frames[3][-1]["events"]
    shown = frames[3][-1]["events"]
    # every pane, metric and chart drawn anew from those steps (the charts redraw on every 4th update only: after
    # Stop they stood some steps behind the panes and the metric boxes)
    assert [name for name, value in last.items() if is_skip(value)] == ["lookahead"]
    assert {name: last[name] for name in PANES} == {name: frames[3][OUTPUT_NAMES.index(name)] for name in PANES}
    drawn = {trace["name"]: trace["y"][-1] for trace in last["cumulative"]["value"]["data"] if len(trace["y"])}
    assert drawn == {registry.METHODS[key].short_name: sum(t.committed for e in evs for t in e.tokens)
                     for key, evs in shown.items()}, drawn
    assert {k: [e.new_token_ids for e in v] for k, v in load_trace(last["trace"]).events.items()} == \
        {k: [e.new_token_ids for e in v] for k, v in shown.items()}
    control = StepControl()
    control.stop(wait_s=0.0)
    assert control.yielding(gr.skip()) is False  # a heartbeat after Stop is not yielded either


def test_stop_answers_itself_for_a_race_that_ended_or_has_not_reached_its_next_frame(tiny):
    """Stop's wait is bounded (a race in a long step, or one whose generator gradio has closed): Stop then answers
    with the trace of the last frame the race yielded, and the race ends at its next frame without yielding it
    or a frame of Stop's. A race that has ended answers nothing: Stop's reply is at once; a visitor whose race waits
    for another visitor's is told that it will not start."""
    start = time.monotonic()
    assert StepControl().stop(wait_s=0.2) == (False, None) and 0.2 <= time.monotonic() - start < 2
    control, frames = StepControl(), []
    race = live_race(tiny, control, len(OUTPUT_NAMES))
    frames = [next(race) for _ in range(3)]
    answered, state = control.stop(wait_s=0.1)  # the race is not asked for its next frame meanwhile
    assert not answered and state is frames[-1][-1]
    assert list(race) == [] and not control.stop_frame_due  # it ends without another frame
    ended = StepControl()
    ended.yielding(frames[0][-1])
    ended.end()
    start = time.monotonic()
    assert ended.stop(wait_s=5) == (False, frames[0][-1]) and time.monotonic() - start < 0.5
    slots = page.RaceSlots()
    slots.running = 1
    slots.on_run(type("Request", (), {"session_hash": "second"})())
    on_stop = page_guards.stop_handler(type("Holder", (), {"loaded": tiny})(), {}, slots)
    second = type("Request", (), {"session_hash": "second"})()
    assert on_stop(None, second)[0] == page_guards.STOPPED_WAITING and not slots.leave("second")
    assert on_stop(None, second)[0] == page_guards.NOTHING_TO_STOP  # pressed again: it waits no more


def test_stop_on_a_race_paused_for_a_while_offers_the_trace_of_its_paused_frame(tiny, monkeypatch):
    """A paused race yields a heartbeat (gr.skip(), a dict) every ``HEARTBEAT_S``: Stop after one offered no trace
    (the heartbeat was kept as the race's last state). A race stopped before its first frame says so."""
    from playground import stepping

    monkeypatch.setattr(stepping, "HEARTBEAT_S", 0.05)
    control = StepControl()
    control.pause()
    race = live_race(tiny, control, len(OUTPUT_NAMES))
    frames = [next(race) for _ in range(6)]
    states = [f[-1] for f in frames if not is_skip(f[-1])]
    assert states and all(map(is_skip, frames[-1]))  # heartbeats after the paused frame
    with ThreadPoolExecutor(1) as pool:
        stopping = pool.submit(control.stop, 5.0)
        last = dict(zip(OUTPUT_NAMES, next(race), strict=True))
        assert list(race) == [] and stopping.result(timeout=5)[0]
    assert "Download trace" in last["run_info"]
    assert {k: [e.new_token_ids for e in v] for k, v in load_trace(last["trace"]).events.items()} == \
        {k: [e.new_token_ids for e in v] for k, v in states[-1]["events"].items()}
    early = page_guards.stopped_frame(tiny, StepControl(), len(OUTPUT_NAMES))
    assert early[-3] == page_guards.STOPPED_BEFORE_START and is_skip(early[-4])
    ended = StepControl()  # a last frame of a race already finished: Stop's frame changes nothing (gr.skip() is a
    ended.last_state = dict(states[-1], finished=True)  # dict too: it was drawn as a race state, a KeyError)
    assert all(map(is_skip, page_guards.stopped_frame(tiny, ended, len(OUTPUT_NAMES))))


def test_stop_ends_a_paused_or_slow_race_at_once(tiny, monkeypatch):
    """A paused race and a slow-motion wait end at Stop, not at their next heartbeat or after their delay (both a
    minute here, so that the old behaviour cannot pass on a busy machine)."""
    from playground import stepping

    monkeypatch.setattr(stepping, "HEARTBEAT_S", 60.0)
    monkeypatch.setattr(stepping, "MAX_STEP_DELAY_S", 60.0)
    for control in (StepControl(), StepControl(delay_s=60.0)):
        if not control.delay_s:
            control.pause()
        outs = page.race_handler(tiny, RaceRequest("Hello there", 2, 0.0, 0, 1.0, 40, 0), update_interval_s=0.0,
                                 control=control)
        assert control.yielding(next(outs)[-1])
        with ThreadPoolExecutor(1) as pool:
            ahead = pool.submit(next, outs)  # paused: waits for a press; slow motion: waits 60 s after the step
            time.sleep(0.2)
            start = time.monotonic()
            control.stop(wait_s=0.0)
            assert not control.yielding(ahead.result(timeout=10)[-1])  # the race's next frame is not shown...
            assert time.monotonic() - start < 5, control.delay_s  # ...and it came at once, not after a minute
        outs.close()


def test_stop_reaches_a_full_speed_race_at_its_next_step_not_its_next_update(tiny):
    """A race at full speed yields a frame every 0.5-2.5 s (``UPDATE_INTERVAL_S`` .. ``MAX_UPDATE_GAP_S``), and Stop
    took effect at the next one (1-2.3 s after the press, helper 75): after Stop the race yields at its next step.
    With updates 1,000 s apart, the frame after Stop holds one step more than the frame before it."""
    control = StepControl()
    outs = page.race_handler(tiny, RaceRequest("Hello there", 2, 0.0, 0, 1.0, 40, 0), update_interval_s=1000.0,
                             control=control)
    first, second = next(outs), next(outs)  # "Racing…" with empty panes, then the first step (no update before it)
    assert control.yielding(first[-1]) and control.yielding(second[-1])
    steps = sum(map(len, second[-1]["events"].values()))
    control.stop(wait_s=0.0)
    after = next(outs)
    assert sum(map(len, after[-1]["events"].values())) == steps + 1  # not the whole race, at its end
    assert not control.yielding(after[-1])  # the page shows Stop's frame instead (``page_guards.stopped_frame``)
    outs.close()


def test_a_long_prompt_is_warned_about_before_its_prefill(tiny, monkeypatch, measured):
    measured.append(GOOD)  # 4.75 ms per token in its widest pass: the estimate is tokens x 4.75 ms
    monkeypatch.setattr(race_guards, "LONG_PREFILL_TOKENS", 60)  # the tiny model holds 512 positions
    outs = run(tiny, prompt="a long prompt " * 8, max_new_tokens=4, update_interval_s=0.0)
    first = outs[0]
    assert not any(first["state"]["events"].values())  # before any step
    tokens = int(first["run_info"].split("Long prompt: ")[1].split(" tokens")[0].replace(",", ""))
    assert tokens > 60 and "for each of the 3 methods" in first["run_info"]
    assert f"up to about {tokens * 4.75e-3:.1f} s on this machine" in first["run_info"]  # an upper estimate
    assert race_guards.prefill_warning(2642, 2, {"widths": [1, 16], "ms": [80.0, 366.4]}).count("up to about 61 s")
    assert "Long prompt" not in outs[-1]["run_info"]
    trees = run(tiny, prompt="a long prompt " * 8, max_new_tokens=4, update_interval_s=0.0,
                methods=["ar", "pass", "parallelspec"], tree_nodes=4)[0]["run_info"]  # each tree entry prefills too
    assert "for each of the 3 methods and 2 token trees" in trees, trees
    assert "Long prompt" not in run(tiny, prompt="short", max_new_tokens=4, update_interval_s=0.0)[0]["run_info"]
    # a prompt the context cannot hold: refused before any update, so no "Racing…" and no prefill warning, with the
    # room the run itself keeps (16 + 2 L positions; the page counted 16 and the run then refused other numbers)
    updates = page.race_handler(tiny, RaceRequest("a long prompt " * 200, 2, 0.0, 0, 1.0, 4, 0, True, False))
    with pytest.raises(page.gr.Error, match="with 20 more positions kept free for drafts: more than the model's "
                                            "context of 512 positions. Shorten the prompt to at most 488 tokens"):
        next(updates)


def test_a_second_visitor_is_told_that_another_race_runs(tiny):
    """A Run pressed during another visitor's race is told it waits, and counted; a Run the validator refuses is
    neither (it was counted as waiting until its tab closed: later visitors read one more waiting before them)."""
    slots = race_slots.RaceSlots()
    visitor = lambda name: type("Request", (), {"session_hash": name})()  # noqa: E731
    assert is_skip(slots.on_run(visitor("b")))  # nothing races: Run starts at once
    slots.start("a")
    assert is_skip(slots.on_run(visitor("a"))) and not slots.leave("a")  # its own race: no note, no wait
    waits = slots.on_run(visitor("b"))
    assert "Another race is running on this server: yours starts when it ends" in waits and "more" not in waits
    # a race ahead may be paused: how long it can hold the slot (a visitor waited 44 s and more, not told why)
    assert "A race its visitor paused resumes by itself after 5 minutes without a step-through press" in waits
    assert "1 more waiting before yours" in slots.on_run(visitor("c"))
    slots.leave("b")  # b closed its tab
    assert "1 more waiting" not in slots.on_run(visitor("c"))
    slots.end("a")
    assert is_skip(slots.on_run(visitor("c")))
    # the page's first answer to Run: a Run the validator refuses (max new tokens 0) is not counted as waiting (it
    # was, until its tab closed: later visitors read one more waiting before them)
    demo = page.build_demo(tiny)
    race = next(fn for fn in demo.fns.values() if fn.api_name == "race")
    press = next(fn for fn in demo.fns.values() if fn.targets == race.targets and fn.name == "on_press")
    assert not press.queue and [c._id for c in press.inputs] == [c._id for c in race.inputs]  # what the validator reads
    cells = dict(zip(press.fn.__code__.co_freevars, (cell.cell_contents for cell in press.fn.__closure__)))
    cells["slots"].start("a")
    good = ["Hi", 2, 0.0, 0, 1.0, 8, 0, True, False, ["ar", "prompt-lookup"], True, False, 0]
    assert all(map(is_skip, press.fn(visitor("r"), *good[:5], 0, *good[6:]))) and not cells["slots"].leave("r")
    assert "yours starts when it ends" in press.fn(visitor("w"), *good)[0] and cells["slots"].leave("w")
    cells["slots"].start("w")  # Run during the visitor's own race (gradio ignores it): it emptied the inspector
    assert all(map(is_skip, press.fn(visitor("w"), *good))) and cells["slots"].racing(visitor("w"))
    # as gradio calls it: the request at its parameter's place, the values after it (``*values, request`` took the
    # request for a value and the session for None, so Stop never found the waiting race)
    from gradio.helpers import special_args
    args, *_ = special_args(press.fn, list(good), type("Request", (), {"session_hash": "x", "username": None})())
    assert args[1:] == good and getattr(args[0], "session_hash", None) == "x"


def test_a_waiting_race_that_stop_withdrew_never_starts(tiny):
    """Stop on a waiting race says it will not start, and the page then cancels it in gradio's queue; a Stop before
    gradio's page knew the queued event sent that cancel without the event's id (422) or none, and the race ran
    later (seen in the second-tab browser test on a loaded machine). Now the race itself, leaving the queue with the
    withdrawn Run's values, ends before it starts; a Run after the Stop with other values races, and one with the
    same values asks for that race again."""
    from playground.page_guards import STOPPED_WAITING

    visitor = lambda name: type("Request", (), {"session_hash": name, "username": None})()  # noqa: E731
    slots = race_slots.RaceSlots()
    first, second = ("Hi", 4), ("Hi", 6)
    slots.start("a")  # another visitor races
    assert not slots.withdraw("w") and not slots.withdrawn(visitor("w"), first)  # not waiting: nothing withdrawn
    slots.on_run(visitor("w"), first)
    assert slots.withdraw("w") and slots.withdrawn(visitor("w"), first)  # it leaves the queue: it does not start
    assert not slots.withdrawn(visitor("w"), first)  # the mark is used once: a later race of the same values runs
    slots.on_run(visitor("w"), first)
    slots.withdraw("w")
    slots.on_run(visitor("w"), second)  # Run with other values after the Stop (the cancel may not have landed)
    assert slots.withdrawn(visitor("w"), first) and not slots.withdrawn(visitor("w"), second)
    slots.on_run(visitor("w"), first)
    slots.withdraw("w")
    slots.on_run(visitor("w"), first)  # the same race asked for again: it runs
    assert not slots.withdrawn(visitor("w"), first)
    slots.on_run(visitor("w"), first)
    slots.withdraw("w")
    slots.close("w")  # the tab closed: nothing kept for it
    assert not slots.withdrawn(visitor("w"), first)
    # the page's handlers: Run, Stop while waiting, then the race leaves the queue and yields nothing
    demo = page.build_demo(tiny)
    fns = {fn.name: fn for fn in demo.fns.values()}
    race = next(fn for fn in demo.fns.values() if fn.api_name == "race")
    cells = dict(zip(fns["on_press"].fn.__code__.co_freevars,
                     (cell.cell_contents for cell in fns["on_press"].fn.__closure__)))
    cells["slots"].start("a")
    good = ["Hi", 2, 0.0, 0, 1.0, 8, 0, True, False, ["ar", "prompt-lookup"], True, False, 0]
    assert "yours starts when it ends" in fns["on_press"].fn(visitor("w"), *good)[0]
    assert fns["on_stop"].fn(None, request=visitor("w"))[0] == STOPPED_WAITING
    assert list(race.fn(*good, request=visitor("w"))) == []


def test_stop_while_the_model_loads_withdraws_that_race(tiny):
    """Run while the model loads: the race waits ("Waiting for the model to load…") and Stop says it will not start.
    Where the page's cancel misses it in gradio's queue, the race, once the model has loaded, now ends without
    starting (it raced: only a race leaving the queue looked at Stop's withdrawal); a Run of the same values after
    it races."""
    from playground.page_guards import STOPPED_WAITING
    from pass_core.runtime.holder import ModelHolder

    holder = ModelHolder(tiny.name, methods=("ar",))  # not started: loading until the test says it has loaded
    demo = page.build_demo(holder)
    fns = {fn.name: fn for fn in demo.fns.values()}
    race = next(fn for fn in demo.fns.values() if fn.api_name == "race")
    visitor = type("Request", (), {"session_hash": "w", "username": None})()
    good = ["Hi", 2, 0.0, 0, 1.0, 8, 0, True, False, ["ar", "prompt-lookup"], True, False, 0]
    fns["on_press"].fn(visitor, *good)
    waiting = race.fn(*good, request=visitor)
    assert next(waiting)[-3] == "Waiting for the model to load…"
    assert fns["on_stop"].fn(None, request=visitor)[0] == STOPPED_WAITING
    holder.loaded = tiny
    holder._done.set()  # the load ends
    assert next(waiting, None) is None  # the withdrawn race ends: no frame, no race
    fns["on_press"].fn(visitor, *good)  # the same race asked for again: it races
    again = race.fn(*good, request=visitor)
    assert next(again)[-3] != "Waiting for the model to load…"  # its first frame: the panes of its methods
    cells = dict(zip(fns["on_press"].fn.__code__.co_freevars,
                     (cell.cell_contents for cell in fns["on_press"].fn.__closure__)))
    assert cells["slots"].racing(visitor)
    again.close()
    assert not cells["slots"].racing(visitor)


def listeners_before(demo, main, elem_id: str) -> list:
    """The listeners of ``main``'s trigger that write the element ``elem_id``, each checked to be added before
    ``main``: the browser runs a click's listeners in the order they were added, each to its end, so one added after
    a race answers once the race has finished."""
    ids = {block._id for block in demo.blocks.values() if getattr(block, "elem_id", None) == elem_id}
    found = [fn for fn in demo.fns.values() if fn.targets == main.targets and fn is not main
             and ids & {block._id for block in fn.outputs}]
    assert all(fn._id < main._id for fn in found), f"a listener for #{elem_id} runs after {main.api_name} ends"
    return found


def test_run_and_replay_clear_the_token_inspector_and_run_asks_the_lesson_again(tiny):
    """The inspector kept a token of the race before, two races later: Run and Replay now reset it at once. The
    lesson strip showed the race before's numbers while the next race ran: Run now puts the chosen lesson's question
    back before the race starts (a first fix, wired after the race's listener, answered after the race and hid its
    numbers)."""
    from playground.lessons import LESSON_HINT, LESSONS, lesson_markdown

    demo = page.build_demo(tiny, untrained_drafters=True)  # the lessons' methods offered, as for the embedded model
    race_values = ["Hello there", 2, 0.0, 0, 1.0, 8, 0, True, False, ["ar", "prompt-lookup"], True, False, 0]
    for api_name in ("race", "replay"):
        main = next(fn for fn in demo.fns.values() if fn.api_name == api_name)
        clear = listeners_before(demo, main, "inspector-text")
        assert len(clear) == 1 and not clear[0].queue, api_name
        request = [None] if api_name == "race" else []  # Run's: the request, then the values its validator reads
        values = race_values if api_name == "race" else []
        assert len(clear[0].inputs) == len(values), api_name
        hint, plot = clear[0].fn(*request, *values)[-2:]
        assert hint == page.INSPECTOR_HINT and plot["value"] is None and plot["visible"] is False  # no empty box
        if api_name == "race":  # a Run the validator refuses (max new tokens 0) races nothing: the inspected token
            assert all(map(is_skip, clear[0].fn(None, *race_values[:5], 0, *race_values[6:])))  # stays
    race = next(fn for fn in demo.fns.values() if fn.api_name == "race")
    ask = listeners_before(demo, race, "lesson-text")
    assert len(ask) == 1 and not ask[0].queue
    title = LESSONS[1].title
    # (the request first, as gradio passes it; None: a tab with no race running)
    choice, text, raced = ask[0].fn(None, title, *LESSONS[1].values())  # Run with the lesson's settings: the
    assert is_skip(choice) and text == lesson_markdown(title) and "This run:" not in text  # question again
    assert raced == title  # the race is the lesson's: its end answers the lesson
    # no lesson chosen: the strip shows its hint (a note that put a lesson aside stayed, race after race, speaking
    choice, text, raced = ask[0].fn(None, None, *LESSONS[1].values())  # of an earlier race: a teacher helper)
    assert is_skip(choice) and text == LESSON_HINT and raced is None


def test_a_race_with_other_settings_puts_the_lesson_aside(tiny):
    """A lesson stayed chosen through races of other methods and settings and answered with their numbers (a
    teacher-persona helper: lesson 2's "This run:" quoted a later race's AR at 0.25 tokens/s). A Run whose inputs
    differ from the chosen lesson's now unselects it and says what changed, so the race's end answers nothing; a Run
    with the lesson's own inputs (methods in any order; another max new tokens, seed or rejected-drafts toggle) keeps
    it."""
    from playground.lessons import LESSONS, lesson_changes

    demo = page.build_demo(tiny, untrained_drafters=True)  # the lessons' methods offered, as for the embedded model
    race = next(fn for fn in demo.fns.values() if fn.api_name == "race")
    ask = listeners_before(demo, race, "lesson-text")[0]
    radio = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lesson-choice")
    assert [block._id for block in ask.outputs][0] == radio._id
    lesson = LESSONS[1]  # prompt, L, temperature, top-k, top-p, max new tokens, seed, rejected, fused, methods, ...
    same = lesson.values()
    same[5], same[6], same[7], same[9] = 12, 7, False, list(reversed(same[9]))  # a shorter race, other draws
    assert lesson_changes(lesson.title, same) == []
    assert is_skip(ask.fn(None, lesson.title, *same, 0.5)[0])  # 0.5: slow motion
    other = lesson.values()
    other[0], other[2], other[9], other[12] = "Hi", 0.7, ["ar", "parallelspec"], "8"
    assert lesson_changes(lesson.title, other) == ["prompt", "temperature", "methods", "token tree"]
    choice, text, raced = ask.fn(None, lesson.title, *other, 0.0)
    assert choice is None and text == (f"*This race changed the prompt, temperature, methods and token tree from "
                                       f"lesson “{lesson.title}”, so it is not that lesson's race and the lesson is "
                                       "put aside. Pick the lesson again to set its race up.*")
    # a slow motion left on by the lesson is named: it slowed the next races unnoticed (a phone-persona helper)
    assert raced is None
    assert ask.fn(None, lesson.title, *other, 0.5)[1] == text[:-1] + (" Slow motion is still 0.5 s per step (set it "
                                                                       "to 0 for full speed).*")
    refused = list(other)
    refused[5] = 100_000  # max new tokens out of range: the Run races nothing, so the strip stays (it put the
    assert all(map(is_skip, ask.fn(None, lesson.title, *refused, 0.0)))  # lesson aside, a phone-persona helper found)
    odd = lesson.values()
    odd[2], odd[9] = None, [1, "ar"]  # values no page sends (an API client's): named, never an exception
    assert lesson_changes(lesson.title, odd) == ["temperature", "methods"]
    lab = next(one for one in LESSONS if one.lab)  # answered by the lab, whatever a race runs
    assert lesson_changes(lab.title, other) == [] and lesson_changes("no such lesson", other) == []


def test_a_replay_puts_a_race_lesson_aside_and_redraws_an_open_what_if_panel(demo):
    """A trace replayed while a race lesson was chosen left the strip quoting that lesson's last race ("This run:
    ... Highest tokens/s: AR") beside the replay's own run line (a new-user helper). Once a replay has succeeded,
    a race lesson is now unselected and the strip says why; the lab's lesson (answered by the lab) and no lesson
    change nothing. The what-if panel, if open, redraws with the replay's numbers as it does after a race."""
    from playground.lessons import LESSONS

    replay = next(i for i, fn in demo.fns.items() if fn.api_name == "replay")
    after = {fn.name: fn for fn in demo.fns.values() if fn.trigger_after == replay and fn.trigger_only_on_success}
    assert [getattr(o, "elem_id", None) for o in after["aside_by_replay"].outputs] == ["lesson-choice", "lesson-text"]
    assert [getattr(o, "elem_id", None) for o in after["whatif_view"].outputs] == ["whatif-plot", "whatif-text"]
    race_lesson, lab_lesson = LESSONS[1], next(one for one in LESSONS if one.lab)
    assert after["aside_by_replay"].fn(race_lesson.title) == (
        None, f"*A replayed trace is on show, not the race of lesson “{race_lesson.title}”, so the lesson is put "
              "aside. Pick the lesson again to set its race up.*")
    for title in (lab_lesson.title, None):
        assert all(map(is_skip, after["aside_by_replay"].fn(title))), title


def test_a_lesson_that_asks_for_slow_motion_sets_it(demo):
    """Lesson 2 asked the class to set slow motion to 0.5 s and left the slider at 0: choosing it now sets the
    slider (whose change listener sets the visitor's delay); every other lesson sets it back to 0 (a delay left on
    from lesson 2 made the next lessons' races take minutes)."""
    from playground.lessons import LESSONS

    radio = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lesson-choice")
    slider = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "slow-motion")
    choose = next(fn for fn in demo.fns.values() if (radio._id, "input") in [tuple(t) for t in fn.targets])
    at = [block._id for block in choose.outputs].index(slider._id)
    assert any((slider._id, "change") in [tuple(t) for t in fn.targets] for fn in demo.fns.values())
    delays = {lesson.title: lesson.slow_motion_s for lesson in LESSONS}
    assert delays[LESSONS[1].title] == 0.5 and "**slow motion** at 0.5 s per step (set for you)" in LESSONS[1].predict
    assert all(delay == 0 for title, delay in delays.items() if title != LESSONS[1].title)
    for lesson in LESSONS:  # the lab's lesson sets no race, slow motion included
        set_to = choose.fn(lesson.title)[at]
        assert is_skip(set_to) if lesson.lab else set_to == lesson.slow_motion_s, lesson.title
    assert is_skip(choose.fn("no such lesson")[at])


def test_the_inspector_plot_shows_only_with_a_selected_token(tiny, demo):
    """The inspector's plot box stood empty (230 px) under its hint until a token was clicked: it is hidden now,
    shown with the clicked token's figure, hidden again for a click on no token."""
    plot = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "inspector-plot")
    pane = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "pane-pass")
    select = next(fn for fn in demo.fns.values() if (pane._id, "select") in [tuple(t) for t in fn.targets] and fn.fn)
    assert plot.visible is False
    state = run(tiny, max_new_tokens=6, inspect=True)[-1]["state"]  # the page's races carry the inspector's data
    text, shown = select.fn(state, True, gr.SelectData(None, {"index": 0, "value": None}))
    assert text.startswith("Selected:") and shown["visible"] is True and shown["value"] is not None
    text, hidden = select.fn(None, True, gr.SelectData(None, {"index": 0, "value": None}))
    assert text == page.INSPECTOR_HINT and hidden["visible"] is False


def test_a_token_clicked_in_a_tree_pane_moves_the_tree_figure_to_its_step(tiny, demo, fixed_pass_cost):
    """A token of an earlier tree step clicked in a tree pane: the inspector showed its node, while the tree figure
    above it kept the newest step's tree, and the chooser that step's nodes (helper 70). The figure and the chooser
    move to the clicked step, the chooser naming the clicked node; a step mark moves them to the step it opens (as
    the inspector); a click on a chain step (PaSS's first, before any tree) leaves them."""
    from playground.race_panes import pane_entries
    from playground.tree_race import pane_click, pane_node

    pane = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "pane-pass-tree")
    select = next(fn for fn in demo.fns.values() if (pane._id, "select") in [tuple(t) for t in fn.targets] and fn.fn)
    state = run(tiny, methods=["ar", "pass"], tree_nodes=8, max_new_tokens=24, inspect=True)[-1]["state"]
    events = state["events"]["pass+tree8"]
    trees = [j for j, e in enumerate(events) if e.tree_parents]
    assert len(trees) >= 2, "the race made fewer than two tree steps"
    entries = pane_entries(events, True)
    index = next(i for i, (_, _, hit) in enumerate(entries) if hit and hit[0] == trees[0]  # a node (not PaSS's exact
                 and pane_node(events[hit[0]], hit[1]) is not None)  # token, nor the step mark)
    assert pane_click(events, "pass+tree8", index, True)[0] == trees[0]
    text, _, figure, chooser = select.fn(state, True, gr.SelectData(None, {"index": index, "value": None}))
    step = events[trees[0]].step
    assert text.startswith("Selected:") and f"step {step}" in text
    titles = [a.text for a in figure["value"].layout.annotations if "PaSS" in (a.text or "")]
    assert titles and all(f"step {step}<br>" in t for t in titles), titles  # not the newest tree step
    assert chooser["choices"] and all(value.endswith(f"|{step}") for _, value in chooser["choices"]), chooser
    # the chooser names the clicked token's node (it stood empty under the figure: helper 73)
    hit = entries[index][2]
    node = pane_node(events[hit[0]], hit[1])
    assert chooser["value"] == f"pass+tree8|{node}|{step}" in dict(map(reversed,
                                                                                           chooser["choices"]))
    # a step mark before a later tree step: the inspector shows that step, and the figure moves there too (it
    # stayed on the step clicked before: helper 73)
    mark = next(i for i, (_, label, where) in enumerate(entries) if where is None and entries[i + 1][2][0] == trees[1])
    text, _, figure, chooser = select.fn(state, True, gr.SelectData(None, {"index": mark, "value": None}))
    later = events[trees[1]].step
    assert text.startswith(f"Selected: the mark before step {later}.")
    titles = [a.text for a in figure["value"].layout.annotations if "PaSS" in (a.text or "")]
    assert titles and all(f"step {later}<br>" in t for t in titles), titles
    assert chooser["value"] is None and all(value.endswith(f"|{later}") for _, value in chooser["choices"])
    steps = [pane_click(events, "pass+tree8", i, True)[0] for i in range(len(entries))]
    chain = next(i for i, step in enumerate(steps) if step is not None and not events[step].tree_parents)
    outputs = select.fn(state, True, gr.SelectData(None, {"index": chain, "value": None}))
    assert is_skip(outputs[2]) and outputs[3] == {"__type__": "update", "value": None}  # the chooser emptied


def test_a_race_waits_for_a_pass_cost_measurement_and_a_measurement_is_refused_during_a_race():
    """A race pressed one second after *Re-measure pass cost* used to run beside the measurement: the curve came
    out non-physical and the race slower, and neither said why. Now the race waits for the measurement's end."""
    import threading

    slots, started = race_slots.RaceSlots(), threading.Event()
    with slots.measurement():
        assert slots.measuring
        with pytest.raises(race_slots.MeasurementRefused, match="being measured already"):
            with slots.measurement():
                pass
        racer = threading.Thread(target=lambda: (slots.start("a"), started.set()))
        racer.start()
        assert not started.wait(0.3)  # the race waits while the measurement runs
    assert started.wait(5) and slots.running == 1 and not slots.measuring
    with pytest.raises(race_slots.MeasurementRefused, match="A race is running: re-measure the pass cost after it ends"):
        with slots.measurement():
            pass
    slots.end("a")
    with slots.measurement():  # no race: measured at once
        pass
    racer.join()
    assert "pass cost is being measured" in race_slots.MEASURING_NOTE


def test_a_tab_closed_while_its_race_waits_for_a_measurement_leaves_nothing_behind(tiny):
    """The page's race handler: a race that waits for a pass-cost measurement says so; its tab closed there (gradio
    closes the generator at that frame) leaves no step control, toggle or race slot behind (they stayed until the
    server stopped)."""
    demo = page.build_demo(tiny, untrained_drafters=True)
    on_run = next(fn.fn for fn in demo.fns.values() if fn.api_name == "race")
    cells = dict(zip(on_run.__code__.co_freevars, (cell.cell_contents for cell in on_run.__closure__)))
    controls, show_now, slots = cells["controls"], cells["show_now"], cells["slots"]
    slots.measuring = True
    race = on_run("Hello there", 2, 0.0, 0, 1.0, 8, 0, True, False, ["ar", "pass"],
                  request=type("Request", (), {"session_hash": "S"})())
    assert next(race)[-3] == race_slots.MEASURING_NOTE and "S" in controls and "S" in show_now
    race.close()
    assert not controls and not show_now and slots.running == 0


def test_a_refused_remeasure_warns_and_leaves_the_cost_view_as_it_was():
    """A refused *Re-measure pass cost* raised gr.Error: gradio then kept an "Error" badge on the cost panel through
    every later race (seen in Chromium). Now it warns (a toast) and sends no update."""
    from types import SimpleNamespace

    slots = race_slots.RaceSlots()
    with gr.Blocks() as demo:
        wire = page_guards.remeasure_button()
        state, plot, md = gr.State(None), gr.Plot(), gr.Markdown()
        holder = SimpleNamespace(loaded=None)
        wire(holder, state, plot, md, slots)
    handler = next(fn.fn for fn in demo.fns.values() if fn.fn.__name__ == "on_remeasure")
    with pytest.warns(UserWarning, match="The model has not loaded yet"):
        assert handler(None, progress=None) == (gr.skip(),) * 3  # no update: the cost view stays
    holder.loaded = object()
    slots.start("a")
    with pytest.warns(UserWarning, match="A race is running"):
        assert handler(None, progress=None) == (gr.skip(),) * 3  # no update: the cost view stays
    slots.end("a")


# --- on a machine whose every core is busy ---------------------------------------------------------------------

def every_core_busy(real_sample):
    """``machine_load.sample`` on a machine whose every core is busy all the time (as with a busy loop on each core):
    the kernel's counters really read (``/proc/stat``, this process's ``os.times``), the idle ticks read as none."""
    def sample(stat_path: str = "/proc/stat"):
        real = real_sample(stat_path)
        assert real.total_s is not None, "no /proc/stat here: the busy verdict would use the load average"
        return machine_load.CpuSample(real.wall_s, real.own_cpu_s, real.total_s, real.total_s, real.cpus)
    return sample


def test_a_race_under_load_says_so_and_keeps_a_refused_curve_out(tiny, measured, monkeypatch):
    """A short race on a machine whose cores are all busy (``every_core_busy``; a busy loop on each core did the
    same at the cost of two cores for seconds, and of the other test worker's time): the run line under the metrics
    says that the machine was busy, and the race's non-physical curve is greyed and fed to neither the cost view
    nor the what-if panel. ``test_busy_verdict_reads_other_programs_cpu_time`` checks the verdict's arithmetic."""
    measured.append(NOT_PHYSICAL)
    monkeypatch.setattr(machine_load, "sample", every_core_busy(machine_load.sample))
    start = time.monotonic()
    # long enough for a verdict (MIN_WALL_S) on a fast machine too
    final = run(tiny, max_new_tokens=96, update_interval_s=0.0)[-1]
    took = time.monotonic() - start
    assert took >= 2 * machine_load.MIN_WALL_S, f"the race took {took:.2f} s: too short for a verdict, race longer"
    assert "The machine was busy during this race" in final["run_info"] and "timings are unreliable" in final["run_info"]
    assert final["state"]["show"]["curve"] is None and "not physical and was refused" in final["cost_text"]
    assert whatif_view(0.6, 3, MACHINE, "", 0.1, final["state"]) == (None, NO_MACHINE_CURVE)


def test_a_paused_race_is_not_called_busy_for_what_ran_while_it_waited(tiny, monkeypatch):
    """Other programs that fill every core only while a race is paused (a teacher's browser, say) do not make it a
    busy race: the race computed nothing then (``LoadMeter.pause``). The counters are simulated: both cores busy
    with other programs inside the pause's window, idle otherwise; this process's own CPU time is real. Counted over
    the whole wall time, the 3-s pause alone made the race busy (others about 2 cores, every core saturated)."""
    import os

    from playground.stepping import RESUME, StepControl

    window, clock = [float("inf"), float("inf")], {"last": None, "others": 0.0, "total": 0.0}

    def sample(stat_path: str = "/proc/stat"):
        now, own = time.monotonic(), sum(os.times()[:2])
        if clock["last"] is not None:
            clock["total"] += 2 * (now - clock["last"])
            clock["others"] += 2 * max(0.0, min(now, window[1]) - max(clock["last"], window[0]))
        clock["last"] = now
        return CpuSample(now, own, clock["others"] + own, 1e6 + clock["total"], 2)  # only differences count

    monkeypatch.setattr(machine_load, "sample", sample)
    control = StepControl()
    control.pause()  # the race stops after its first step
    outs = page.race_handler(tiny, RaceRequest("Hello there", 2, 1.0, 0, 1.0, 8, 0, True, False),
                             update_interval_s=0.0, control=control)
    opening(outs)
    assert "Paused" in dict(zip(OUTPUT_NAMES, next(outs), strict=True))["run_info"]
    window[0] = time.monotonic()
    time.sleep(3.0)
    window[1] = time.monotonic()
    control.move(RESUME)
    final = dict(zip(OUTPUT_NAMES, list(outs)[-1], strict=True))
    assert "Finished" in final["run_info"] and "busy" not in final["run_info"], final["run_info"]


def test_a_run_beyond_the_context_changes_nothing_and_a_lesson_answers_only_its_own_race(tiny):
    """A Run refused because the prompt and max new tokens overrun the model's context (the validator checks it once
    the model is loaded) was counted as waiting for another tab's race and put the chosen lesson aside: both checks
    now ask what the validator asks. A lesson chosen while another race ran was answered with that race's numbers
    when it finished (another prompt, other methods): the strip now answers only the race started for the lesson."""
    from playground.lessons import LESSONS

    demo = page.build_demo(tiny, untrained_drafters=True)  # the lessons' methods offered, as for the embedded model
    race = next(fn for fn in demo.fns.values() if fn.api_name == "race")
    press = listeners_before(demo, race, "inspector-text")[0]
    ask = listeners_before(demo, race, "lesson-text")[0]
    lesson = LESSONS[0]
    values = lesson.values()
    values[5] = 600  # max new tokens: in range, but 600 + the prompt overrun the tiny model's 512 positions
    assert all(map(is_skip, press.fn(None, *values)))  # not counted as waiting, the inspector kept
    assert all(map(is_skip, ask.fn(None, lesson.title, *values, 0.0)))  # the lesson kept
    answer = next(fn for fn in demo.fns.values() if getattr(fn.fn, "__name__", "") == "after_race")
    state = run(tiny, max_new_tokens=6, methods=list(lesson.methods))[-1]["state"]
    assert "This run:" in answer.fn(lesson.title, state, lesson.title)  # the race started for the lesson
    assert is_skip(answer.fn(lesson.title, state, None))  # a race started before the lesson was chosen
    assert is_skip(answer.fn(lesson.title, state, LESSONS[1].title))


def test_stop_before_the_first_step_offers_no_trace(tiny):
    """Stop after the race's opening frame ("Racing…", empty panes: a long prefill) offered a trace of no steps,
    which the page's own Replay refused ("no method has events"), under "Stopped. The panes show what each method
    had produced"; now it says the race produced nothing and offers no trace."""
    outs = page.race_handler(tiny, RaceRequest("Hello there", 2, 0.0, 0, 1.0, 8, 0, True, False))
    try:
        first = opening(outs)
        line, path, state = page_guards.stop_outputs(tiny, first["state"])
    finally:
        outs.close()
    assert line == page_guards.STOPPED_BEFORE_START and is_skip(path) and state["stopped"]
    assert all(map(is_skip, page_guards.stop_outputs(tiny, state)))  # a second Stop changes nothing


def test_stop_lab_withdraws_a_lab_waiting_in_the_queue():
    """Tab B's Run lab waited behind tab A's lab; B's Stop lab said no lab was running, and B's lab then ran all its
    runs and gave verdicts. Run lab's unqueued listener now marks the lab as waiting (bad inputs, refused by the
    validator, do not), and Stop lab withdraws it, saying so at once: it stops at its first run. With no lab, Stop
    lab's note stands under the last lab's table (a ``gr.Info`` said it, which an unqueued listener never shows)."""
    from playground.lab_handlers import LAB_WITHDRAWN, NO_LAB, lab_presser, lab_stopper

    slots = race_slots.RaceSlots()
    press, stop = lab_presser(slots), lab_stopper(slots)
    tab = type("Request", (), {"session_hash": "b"})()
    press("Once upon a time", 5, request=tab)  # N = 5: refused by the validator, never queued
    assert not slots.stop_lab("b")
    press("Once upon a time", 30, request=tab)
    assert stop("", request=tab) == LAB_WITHDRAWN
    with slots.lab("b") as flag:
        assert flag.is_set()  # the withdrawn lab stops at its first run
    with slots.lab("b") as flag:
        assert not flag.is_set()  # the next Run lab runs
        assert is_skip(stop("| table |", request=tab))  # a running lab answers itself (``LAB_STOPPED``)
    table = "| method | TV |\n|---|---|"
    once = stop(table, request=tab)  # no lab now, running or waiting
    assert once == f"{table}\n\n{NO_LAB}" and stop(once, request=tab) == once  # the table kept, one note
    assert stop(None, request=tab) == NO_LAB
