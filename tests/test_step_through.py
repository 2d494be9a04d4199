"""Step-through and the token inspector (issue 12 items 1-2), driven as handler functions on the tiny model:
the race's order is reproducible from its events, a paused race computes nothing and Next / Previous move one
step on the shared compute clock, slow motion shows every step, and the inspector shows the clicked token's step
with the event's own numbers."""

from __future__ import annotations

import re
import threading
import time

import gradio as gr
import pytest

from playground import page, stepping
from pass_core.decoding.events import TOKEN_LABELS
from pass_core.teaching.race import events_upto, race, race_order
from pass_core.registry import METHODS
from playground import race_charts as charts
from playground import race_panes as panes
from playground.stepping import MAX_STEP_DELAY_S, NEXT, PREVIOUS, RESUME, StepControl, step_position
from playground.teaching import INSPECTOR_HINT, inspect_selection, inspector_markdown, token_namer
from playground.race_handlers import SLOW_MOTION_CHART_GAP_S
from playground.race_inputs import RaceRequest
from test_app import OUTPUT_NAMES, opening, run


def race_events(tiny, temperature=1.0, max_new_tokens=16):
    final = run(tiny, temperature=temperature, max_new_tokens=max_new_tokens, update_interval_s=0.0, inspect=True)
    return final[-1]["state"]["events"]


def test_race_order_reproduces_the_live_order(tiny):
    from pass_core.decoding.settings import DecodeSettings

    settings = DecodeSettings(num_lookahead=2, temperature=1.0, max_new_tokens=14, seed=3)
    decoders = {key: METHODS[key].decode(tiny, "Hello there", settings, METHODS[key].find_files(tiny, 2)[0])
                for key in page.DEFAULT_RACE}
    live, events = [], {key: [] for key in decoders}
    for name, event in race(decoders):
        live.append((name, len(events[name])))
        events[name].append(event)
    assert race_order(events) == live
    assert len({name for name, _ in live[:6]}) == 3  # the steps interleave: the test would see a wrong order
    for n in (0, 1, 5, len(live)):
        upto = events_upto(events, n)
        assert sum(map(len, upto.values())) == n
        assert all(upto[k] == events[k][:len(upto[k])] for k in events)  # prefixes
    assert events_upto(events, None) == events and events_upto(events, 10**6) == events


def test_step_position_and_control_limits():
    assert step_position(None, 10, PREVIOUS) == 9 and step_position(None, 10, NEXT) == 1  # the whole race: from 1
    assert step_position(1, 10, PREVIOUS) == 1 and step_position(4, 10, NEXT) == 5
    control = StepControl()
    for bad in (-0.1, MAX_STEP_DELAY_S + 0.01, "fast", None):
        with pytest.raises(ValueError, match="slow motion"):
            control.set_delay(bad)
    with pytest.raises(ValueError, match="unknown step-through move"):
        control.move("sideways")
    control.move(NEXT)
    assert control.paused and control.wait_move(0.01) == NEXT and control.wait_move(0.01) is None
    control.move(RESUME)
    assert not control.paused


def test_resume_supersedes_earlier_presses_and_keeps_slow_motion():
    """Resume pressed while the race runs leaves its slow-motion waits whole (queued, it cut every later wait to 0 s
    for the rest of the race); Pause then Resume before the race polls answers Pause at once (it waited 10 s) and
    leaves no press behind; Next then Resume leaves no Next for the next Pause to act on."""
    control = StepControl(delay_s=0.3)
    control.move(RESUME)  # the race is running: nothing to resume
    for _ in range(2):
        start = time.monotonic()
        control.sleep(control.delay_s)
        assert time.monotonic() - start >= 0.25
    control.pause()
    control.move(RESUME)
    assert control.wait_shown(0.01) and not control.paused and control.wait_move(0.01) is None
    control.move(NEXT)
    control.move(RESUME)
    assert control.wait_move(0.01) is None
    control.pause()  # a paused race: Resume ends ``paused_updates`` (the race computes on)
    frames = stepping.paused_updates(control, {"ar": []}, lambda position: ("frame", position), lambda: "skip")
    assert next(frames) == ("frame", 0)
    control.move(RESUME)
    assert list(frames) == []


def pane_values(out: dict) -> dict:
    return {key: out[f"{key}_tokens"] for key in page.DEFAULT_RACE}


def test_paused_race_steps_next_and_previous(tiny):
    control = StepControl()
    control.pause()  # paused from the start: the race stops after its first step
    outs = page.race_handler(tiny, RaceRequest("Hello there", 2, 1.0, 0, 1.0, 16, 0, True, False), update_interval_s=0.0,
                            inspect=True, control=control)
    frame = lambda: dict(zip(OUTPUT_NAMES, next(outs), strict=True))  # noqa: E731
    opening(outs)
    first = frame()
    assert first["state"]["position"] == 1 and first["run_info"].startswith("**Paused** after step 1 of the 1 computed so far")
    computed = sum(map(len, first["state"]["events"].values()))
    assert computed == 1
    steps = [first]
    for _ in range(2):  # Next twice at the newest step: the race computes exactly one more step each time
        control.move(NEXT)
        steps.append(frame())
    events = steps[-1]["state"]["events"]
    assert sum(map(len, events.values())) == 3 and steps[-1]["state"]["position"] == 3
    order, grew = race_order(events), []
    for n in (1, 2):  # each Next added exactly that step's tokens to its method's pane, and nothing elsewhere
        name, index = order[n]
        grown = events_upto(events, n + 1)
        for key in page.DEFAULT_RACE:
            assert pane_values(steps[n])[key] == panes.highlighted_tokens(grown[key]), (n, key)
            if key != name:
                assert pane_values(steps[n])[key] == pane_values(steps[n - 1])[key], (n, key)
        before, after = panes.pane_text(pane_values(steps[n - 1])[name]), panes.pane_text(pane_values(steps[n])[name])
        # the step's tokens as the pane shows them: rejected drafts too, their whitespace made visible
        added = "".join(t.text if t.committed else panes.visible_text(t.text) for t in events[name][index].tokens)
        assert after == before + added, (n, name, before, added, after)
        grew.append(added)
    assert any(grew), "the two steps added no text: the check above saw nothing"
    control.move(PREVIOUS)  # back one step: nothing computed, the panes as after step 2
    back = frame()
    assert back["state"]["position"] == 2 and pane_values(back) == pane_values(steps[1])
    assert sum(map(len, back["state"]["events"].values())) == 3
    assert "step 2 of the 3 computed so far" in back["run_info"]
    control.move(NEXT)  # forward again to a recorded step: still nothing computed
    assert pane_values(frame()) == pane_values(steps[2])
    control.move(RESUME)
    rest = [dict(zip(OUTPUT_NAMES, out, strict=True)) for out in outs]
    assert "Finished" in rest[-1]["run_info"] and rest[-1]["state"]["position"] is None
    full = run(tiny, temperature=1.0, max_new_tokens=16, update_interval_s=0.0, inspect=True)[-1]
    for key in page.DEFAULT_RACE:  # pausing changed nothing of the output (same seed, same tokens)
        assert rest[-1][f"{key}_tokens"] == full[f"{key}_tokens"], key


def test_a_paused_race_computes_nothing(tiny):
    control = StepControl()
    control.pause()
    outs = page.race_handler(tiny, RaceRequest("Hello there", 2, 0.0, 0, 1.0, 16, 0), update_interval_s=0.0, control=control)
    opening(outs)
    next(outs)
    got = []
    worker = threading.Thread(target=lambda: got.append(next(outs)), daemon=True)
    worker.start()
    worker.join(0.5)
    assert worker.is_alive() and not got  # waiting for a button, not computing
    control.move(RESUME)
    worker.join(30)
    assert got


def test_slow_motion_shows_every_step(tiny):
    control = StepControl(delay_s=0.02)
    start = time.monotonic()
    outs = [dict(zip(OUTPUT_NAMES, o, strict=True)) for o in page.race_handler(
        tiny, RaceRequest("Hello there", 2, 0.0, 0, 1.0, 12, 0), update_interval_s=10.0, control=control)]
    elapsed = time.monotonic() - start
    steps = sum(map(len, outs[-1]["state"]["events"].values()))
    # the figures in frames of their own (a redraw held a step's panes back in the browser): the step's frame, then
    # one with the same panes and the figures, at most once per SLOW_MOTION_CHART_GAP_S: the first step, then on time
    # (the opening clears the previous race's figures before any step: not a step's redraw)
    middle = outs[1:-1]
    drawn = [i for i, out in enumerate(middle) if out["latency"] != gr.skip()]
    assert len(outs) == 1 + steps + len(drawn) + 1  # the opening, one update per step (the 10 s interval would
    # allow one) and per redraw, the last
    assert elapsed >= 0.02 * steps
    assert all(out["ar_tokens"] is not None for out in outs)  # the panes show every step
    assert drawn and drawn[0] == 1 and len(drawn) <= 1 + elapsed / SLOW_MOTION_CHART_GAP_S, (drawn, elapsed)
    for i in drawn:  # right after a step's frame, showing that step
        assert middle[i - 1]["latency"] == gr.skip()
        assert middle[i]["state"]["events"] == middle[i - 1]["state"]["events"]
        assert middle[i]["ar_tokens"] == middle[i - 1]["ar_tokens"]
    assert outs[-1]["latency"] != gr.skip() and outs[-1]["theory"] != gr.skip()


def test_a_slow_motion_delay_changed_during_a_wait_takes_effect_in_it(tiny):
    """The slider moved from 2 s to 0.05 s during the wait after the first step: the second step comes about 0.2 s
    after the first, not 2 s (the wait's end was fixed when it began: helper 77 measured 1.6 s after the change)."""
    control = StepControl(delay_s=MAX_STEP_DELAY_S)
    outs = page.race_handler(tiny, RaceRequest("Hello there", 2, 0.0, 0, 1.0, 6, 0), update_interval_s=10.0,
                             control=control)
    opening(outs)
    steps = []  # (time, steps shown) of each frame
    for out in outs:
        steps.append((time.monotonic(), sum(map(len, dict(zip(OUTPUT_NAMES, out))["state"]["events"].values()))))
        if len(steps) == 1:
            threading.Timer(0.2, control.set_delay, args=(0.05,)).start()
        if steps[-1][1] >= 2:
            break
    outs.close()
    first = next(t for t, n in steps if n == 1)
    second = next(t for t, n in steps if n == 2)
    assert second - first < 1.0, (second - first, steps)


def test_step_buttons_after_the_race_render_from_the_state(tiny):
    final = run(tiny, max_new_tokens=10, update_interval_s=0.0)[-1]
    state = final["state"]
    total = sum(map(len, state["events"].values()))
    back = dict(zip(OUTPUT_NAMES, page.render_state(state, True, step_position(None, total, PREVIOUS)), strict=True))
    assert back["state"]["position"] == total - 1 and f"step {total - 1} of {total} of the race" in back["run_info"]
    assert back["state"]["events"] == state["events"]  # the whole race stays in the state
    shown = events_upto(state["events"], total - 1)
    for key in page.DEFAULT_RACE:
        assert back[f"{key}_tokens"] == panes.highlighted_tokens(shown[key])
    assert sum(back[f"{key}_tokens"] != final[f"{key}_tokens"] for key in page.DEFAULT_RACE) == 1  # the last step
    forward = dict(zip(OUTPUT_NAMES, page.render_state(back["state"], True, step_position(total - 1, total, NEXT)),
                       strict=True))  # Next from there: the whole race again, from the state alone
    assert forward["state"]["position"] == total
    for key in page.DEFAULT_RACE:
        assert forward[f"{key}_tokens"] == final[f"{key}_tokens"], key
    # back at the end, the run line says it is the finished race's last step and offers no Next (it read as any
    # paused step: "Paused after step 209 of 209 ... Next step ...", and the race seemed unfinished)
    end = forward["run_info"]
    assert f"step {total} of {total}, the finished race's last" in end and "*Next step*" not in end, end
    assert "*Next step*" in back["run_info"]
    # Next on the whole finished race (or a replay): its first step, to walk it through from the start (it went to
    # the last step, and a teacher pressed Previous a hundred times to reach the start)
    first = dict(zip(OUTPUT_NAMES, page.render_state(state, True, step_position(None, total, NEXT)), strict=True))
    assert first["state"]["position"] == 1 and f"after step 1 of {total} of the race" in first["run_info"]
    shown = events_upto(state["events"], 1)
    assert [key for key in page.DEFAULT_RACE if first[f"{key}_tokens"] == panes.highlighted_tokens(shown[key])] \
        == list(page.DEFAULT_RACE)


def test_inspector_shows_the_events_numbers_for_a_rejected_draft(tiny):
    events = race_events(tiny)
    decode = token_namer(events)
    for key in ("pass", "parallelspec"):
        entries = panes.pane_entries(events[key])
        index = next(i for i, (_, label, _) in enumerate(entries) if label == TOKEN_LABELS["rejected"])
        e, t = entries[index][2]
        event = events[key][e]
        text, figure = inspect_selection(events[key], key, index, True, decode)
        draft = next(d for d in event.drafts if d.decision == "rejected")
        row = next(line for line in text.splitlines() if line.startswith(f"| d_{draft.position}"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert [float(c) for c in cells[2:6]] == pytest.approx(
            [draft.q, draft.p, min(1, draft.p / draft.q), draft.u], abs=5e-4), (key, row)
        assert cells[6] == "rejected" and draft.u >= min(1, draft.p / draft.q)
        assert ("(LA_" in row) == (key == "pass")
        assert f"step {event.step}" in text and "verification" in text
        assert [trace.name for trace in figure.data] == [f"p_{draft.position}", f"q_{draft.position} (the draft's law)"]
        resampled = next(i for i, (_, label, _) in enumerate(entries) if label == TOKEN_LABELS["resampled"])
        _, figure = inspect_selection(events[key], key, resampled, True, decode)
        names = [trace.name for trace in figure.data]
        assert names == ["p", "q", "residual norm(max(0, p − q))"], key
    entries = panes.pane_entries(events["pass"])
    for mark in [i for i, (_, label, _) in enumerate(entries) if label is None][:3]:  # a mark: the step after it
        e = entries[mark + 1][2][0]
        text, figure = inspect_selection(events["pass"], "pass", mark, True)
        assert text.startswith(f"Selected: the mark before step {events['pass'][e].step}.") and figure is None
        assert inspector_markdown(events["pass"][e], METHODS["pass"].label, lookahead=True) in text
    assert inspect_selection(events["pass"], "pass", 10**6, True) == (INSPECTOR_HINT, None)


def test_pane_entries_match_the_pane(tiny):
    events = race_events(tiny)
    for show in (True, False):
        for key, evs in events.items():
            entries = panes.pane_entries(evs, show)
            assert [(text, label) for text, label, _ in entries] == panes.highlighted_tokens(evs, show)
            for text, label, where in entries:
                if where is not None:
                    token = evs[where[0]].tokens[where[1]]
                    assert TOKEN_LABELS[token.label] == label
                    # a committed newline shows a mark before its line break (gradio draws a bare one unseen)
                    assert text == (token.text.replace("\n", "↵\n", 1) if token.committed
                                    else panes.visible_text(token.text))


def test_inspector_names_tokens_of_a_trace_without_the_model(tiny):
    events = race_events(tiny, max_new_tokens=8)
    decode = token_namer(events)
    some = events["pass"][1].tokens[0]
    assert decode(some.token_id) == some.text
    assert re.fullmatch(r"#\d+", decode(10**7))
    assert token_namer(events, lambda i: "model")(10**7) == "model"


def test_a_paused_race_left_alone_resumes_by_itself(tiny, monkeypatch):
    """The page runs one race at a time: a race paused in a tab that was closed must not hold that slot for ever."""
    from playground import stepping

    monkeypatch.setattr(stepping, "PAUSE_IDLE_S", 0.3)
    control = StepControl()
    control.pause()
    start = time.monotonic()
    outs = [dict(zip(OUTPUT_NAMES, o, strict=True)) for o in page.race_handler(
        tiny, RaceRequest("Hello there", 2, 0.0, 0, 1.0, 8, 0), update_interval_s=0.0, control=control)]
    assert "Finished" in outs[-1]["run_info"] and not control.paused
    assert time.monotonic() - start >= 0.3


def test_step_buttons_before_any_race_say_what_to_do(tiny):
    demo = page.build_demo(tiny)
    steppers = [fn.fn for fn in demo.fns.values() if getattr(fn.fn, "__name__", "") == "handler"
                and len(fn.outputs) == len(OUTPUT_NAMES)]
    assert len(steppers) == 4  # Pause, Previous, Next, Resume
    for fn in steppers:
        out = dict(zip(OUTPUT_NAMES, fn(None, True), strict=True))
        assert out["run_info"] == page.NOTHING_TO_STEP and "Run a race" in out["run_info"]


def test_the_newest_step_is_outlined_by_counting_its_boxes_with_and_without_rejected_drafts(tiny):
    """A step-through frame outlines the last N token boxes of the newest step's pane, N counted as gradio draws
    them (a newline splits a box, an empty piece has none, a blank one has one: the panes keep gradio's
    ``show_whitespaces``), once with the rejected drafts shown and once without; the whole race outlines nothing
    (the browser checks: ``test_browser.py::test_step_through_and_token_inspector``,
    ``test_browser.py::test_the_outline_covers_whitespace_tokens_of_a_replayed_step``)."""
    from pass_core.decoding.events import StepEvent, TokenRecord

    assert panes.drawn_pieces("a\nb") == 2 and panes.drawn_pieces("\n") == 0 and panes.drawn_pieces("") == 0
    # a blank piece has its box (it had none here, and the outline began a token or two late)
    assert panes.drawn_pieces(" \u00a0") == panes.drawn_pieces("\t") == panes.drawn_pieces("\u200b") == 1
    assert panes.drawn_pieces("x\n\n ") == 2
    # " a", "↵\n" and the blank " ": three boxes; the rejected draft "b" one more
    committed = [TokenRecord(1, " a", "accepted"), TokenRecord(2, "\n", "exact"), TokenRecord(3, " ", "resampled")]
    event = StepEvent("pass", 1, (*committed[:2], TokenRecord(4, "b", "rejected"), committed[2]))
    css = panes.newest_step_css(event, "pane-pass")
    assert ("body:not(.hide-rejected) #pane-pass .token-container:nth-last-child(-n+4 of .token-container)" in css
            and "body.hide-rejected #pane-pass .token-container:nth-last-child(-n+3 of .token-container)" in css), css
    assert panes.newest_step_css(None, "pane-pass") == ""
    from playground.stepping import newest_css

    tree = {"parallelspec+tree8": [event], "pass+banana": [event]}  # a tree entry's step: in its tree pane
    assert "#pane-parallelspec-tree .token-container" in newest_css(tree, [("parallelspec+tree8", 0)], 1)
    assert newest_css(tree, [("pass+banana", 0)], 1) == "" == newest_css(tree, [("parallelspec+tree8", 0)], 0)
    events = race_events(tiny)
    order = race_order(events)
    name, index = order[4]
    out = dict(zip(OUTPUT_NAMES, page.render_state(
        {"events": events, "greedy": False, "fused": False, "finished": True, "note": "", "show": {}}, True, 5),
        strict=True))
    assert out["newest_step"] == panes.newest_step_css(events[name][index], f"pane-{name}") != ""
    whole = page.render_state({"events": events, "greedy": False, "fused": False, "finished": True, "note": "",
                               "show": {}}, True, None)
    assert dict(zip(OUTPUT_NAMES, whole, strict=True))["newest_step"] == ""


def test_a_toggle_mid_race_rerenders_the_tree_panes_and_leaves_a_paused_races_heartbeat_alone(tiny):
    """The "show rejected drafts" toggle changed mid-race: each race update is re-rendered for it
    (``with_panes_for``), the tree entries' panes too (their rejected drafts, hidden by the page's CSS but still boxes
    on the page, put the newest step's outline on the wrong boxes); a paused race's heartbeat (``gr.skip()`` for
    every output, a dict too) passes as it is (it raised KeyError: the race died and Next did nothing more)."""
    from pass_core.decoding.events import StepEvent, TokenRecord
    from playground.race_handlers import with_panes_for
    from playground.tree_race import TREE_PANES

    events = race_events(tiny)
    tokens = (TokenRecord(1, "a", "accepted"), TokenRecord(2, "b", "rejected"), TokenRecord(3, "c", "resampled"))
    events["parallelspec+tree8"] = [StepEvent("parallelspec+tree8", 1, tokens, step_s=0.01)]
    state = {"events": events, "greedy": False, "fused": False, "finished": False, "note": "", "show": {}}
    frame = page.render_state(state, True, None)
    out = dict(zip(OUTPUT_NAMES, frame, strict=True))
    assert TOKEN_LABELS["rejected"] in {label for _, label in out["parallelspec_tree_tokens"]["value"]}
    hidden = dict(zip(OUTPUT_NAMES, with_panes_for(frame, False), strict=True))
    tree_pane = hidden["parallelspec_tree_tokens"]
    assert tree_pane["visible"] and [text for text, _ in tree_pane["value"]] == ["a", "c"], tree_pane
    assert hidden["pass_tokens"] == panes.highlighted_tokens(events["pass"], False)
    assert all(hidden[name] == out[name] for name in OUTPUT_NAMES if not name.endswith("_tokens")), "only panes change"
    assert len(TREE_PANES) == sum(name.endswith("_tree_tokens") for name in OUTPUT_NAMES)
    heartbeat = (gr.skip(),) * len(frame)
    assert with_panes_for(heartbeat, False) == heartbeat


def test_a_lesson_sets_the_next_races_slow_motion_not_the_live_races(demo):
    """Choosing a lesson sets the slow-motion slider (``.change``): chosen while a race ran, the live race went on at
    the lesson's full speed. Only the visitor's own move of the slider (``.input``) reaches the live race."""
    from types import SimpleNamespace

    from playground.page_guards import slow_motion_handler

    delays, control = {}, StepControl(delay_s=0.3)
    request = SimpleNamespace(session_hash="tab")
    slow_motion_handler(delays, {"tab": control}, live=False)(0.0, request)  # a lesson's value
    assert delays["tab"] == 0.0 and control.delay_s == 0.3  # the next race's; the live one keeps its pace
    slow_motion_handler(delays, {"tab": control})(0.1, request)  # the visitor's own
    assert delays["tab"] == 0.1 and control.delay_s == 0.1
    (slider,) = [b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "slow-motion"]
    wired = {t[1] for fn in demo.fns.values() for t in fn.targets if t[0] == slider._id}
    assert wired == {"change", "input"}, wired
