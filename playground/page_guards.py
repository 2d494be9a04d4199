"""The page's guards around a race, wired by ``page.build_demo``: Stop that leaves a trace of what was produced (a
live race answers it in its own stream of frames, ``stopped_frame``; a waiting race is withdrawn: ``race_slots``),
step buttons that show they work and take one press at a time, slow motion's delay, and the re-measure button of
the pass-cost curve (with a progress indicator). Plain functions (tests call them without a browser); no tensors:
traces from ``pass_core.teaching.trace``, curves from ``pass_core.runtime.pass_cost``."""

from __future__ import annotations

import gradio as gr

from pass_core.decoding.metrics import summarize
from pass_core.runtime.pass_cost import measured_pass_cost_curves, pass_cost_curves
from pass_core.teaching.race import events_upto
from playground.cost_charts import cost_view
from playground.plot_boxes import shown_plot
from playground.race_guards import finish
from playground.race_text import compute_line
from playground.race_view import INSTANT
from playground.race_slots import MeasurementRefused, RaceSlots
from playground.race_handlers import render_state, user_error
from playground.scrolling import busy_js
from playground.stepping import StepControl

STOPPED_NOTE = "**Stopped.** The panes show what each method had produced when you pressed Stop."
STOPPED_TRACE = " *Download trace* gives exactly those steps."
#: Stop's answer on a page where no race has run (it used to say "Stopped." and that the panes show the race).
NOTHING_TO_STOP = "Nothing to stop: no race is running. Press **Run** to start one."
#: Stop's answer when the race had not shown its first frame (the panes may still show the previous race).
STOPPED_BEFORE_START = ("**Stopped** before the race's first step: it produced nothing. What the panes and *Download "
                        "trace* hold, if anything, is from before.")
#: Stop's answer to a visitor whose race was waiting (the model loading, another visitor's race): it will not start.
STOPPED_WAITING = ("**Stopped.** Your race was waiting (for the model to load, or for another visitor's race to end): "
                   "it will not start.")
#: How long a step button waits for a live race to show the step it asked for (the button stays busy meanwhile).
STEP_WAIT_S = 10.0
def stop_outputs(loaded, state) -> tuple:
    """Stop's (run line, trace download, page state): ``STOPPED_NOTE`` and, for a race stopped before its end
    (``state``: ``race_handlers.render``'s dict), a trace of the steps it had produced (``pass_core.teaching.trace``),
    each method's line of what it had produced (``race_text.compute_line``: Stop's line took their place) and the
    race's busy line (``race_guards``); the state marked stopped (``stopped``; its run line's headline
    ``STOPPED_NOTE``), so that the step buttons speak of a stopped race (they said "Racing…", or "the finished
    race's last") and a second Stop changes nothing. A race stepped back to an earlier position: the trace holds
    the steps up to it, the ones the panes show. A race with no step yet: ``STOPPED_BEFORE_START``, no trace. No
    race yet: ``NOTHING_TO_STOP``; a finished or stopped race, or
    a replay: nothing changes (``gr.skip()`` for all three; Stop once put "Stopped." over a replay's lines)."""
    if not state:
        return NOTHING_TO_STOP, gr.skip(), gr.skip()
    guards = (state.get("show") or {}).get("guards") or {}
    if state.get("finished") or state.get("stopped") or loaded is None or not guards.get("source"):
        return gr.skip(), gr.skip(), gr.skip()  # the run line keeps its lines (Stop is unqueued: no toast)
    from playground.trace_files import save_race_trace  # the race's own folder and name for traces
    finish(guards)
    if not any(state.get("events", {}).values()):  # its opening "Racing…" frame: no step yet (a long prefill), so
        return STOPPED_BEFORE_START, gr.skip(), dict(state, stopped=True)  # no trace (it offered one of no steps)
    prompt, settings = guards["source"]
    shown = events_upto(state["events"], state.get("position"))  # stepped back: the steps the panes show
    path = save_race_trace(loaded, prompt, settings, shown, guards.get("machine_load"))
    done = compute_line({key: summarize(evs, key) if evs else None for key, evs in shown.items()})  # the race's
    # the state holds what the trace holds: Resume after Stop on a stepped-back race showed steps past the trace
    stopped = dict(state, events=shown, position=None, stopped=True, show=dict(state["show"], headline=STOPPED_NOTE))
    return "  \n".join(filter(None, (STOPPED_NOTE + STOPPED_TRACE, done, guards.get("load")))), str(path), stopped


def stopped_frame(loaded, control, width: int, show_rejected: bool = True) -> tuple:
    """The last frame of a live race that met Stop (``StepControl.stop_frame_due``), one value per output of the
    race (``width`` of them, ending with the trace download, run line, drafter line and state): Stop's line, the
    trace of the steps of the race's last frame and its state marked stopped (``stop_outputs``), with every pane,
    metric, chart, the theory and the cost view drawn anew from those steps (``race_handlers.render_state``; the
    charts redraw on every ``CHART_EVERY``-th update only, and stood behind the panes and metrics after Stop).
    ``show_rejected``: the toggle now. Before the race's first frame: ``STOPPED_BEFORE_START``, ``gr.skip()``
    everywhere else."""
    if control.last_state is None:
        return (gr.skip(),) * (width - 3) + (STOPPED_BEFORE_START, gr.skip(), gr.skip())
    line, path, state = stop_outputs(loaded, control.last_state)
    drawn = (render_state(state, show_rejected, state.get("position"))[:width - 4] if "events" in state
             else (gr.skip(),) * (width - 4))  # a race already finished or stopped: ``stop_outputs`` changed nothing
    return (*drawn, path, line, gr.skip(), state)


def slow_motion_handler(delays: dict, controls: dict, live: bool = True):
    """Slow motion's handler: the delay (seconds after each step, ``StepControl.set_delay``) of the visitor's
    races, kept in ``delays`` (session -> seconds) and, with ``live``, given to the live race in ``controls``
    (session -> ``StepControl``) at once: the visitor's own move of the slider; a lesson that sets it (chosen
    mid-race, it put the live race to full speed) sets the next race's only. Raises gr.Error naming a bad value (the
    slider's value reaches it unprocessed)."""
    def on_slow_motion(delay_s, request: gr.Request = None):
        session = getattr(request, "session_hash", None)
        try:
            StepControl().set_delay(delay_s)
        except ValueError as err:
            raise user_error(str(err)) from err
        delays[session] = float(delay_s)
        if live and session in controls:
            controls[session].set_delay(delay_s)
    return on_slow_motion


def stop_handler(holder, controls: dict, slots=None):
    """Stop's handler. A live race answers Stop in its own stream (``StepControl.stop``, ``stopped_frame``): Stop's
    reply then changes nothing. Otherwise Stop answers: a race still waiting for another visitor's is told it will
    not start (the page then cancels it: ``page.build_demo``), else ``stop_outputs`` of the last frame the race
    yielded (the page's state when no race is live)."""
    def on_stop(state=None, request: gr.Request = None):
        session = getattr(request, "session_hash", None)
        control = controls.get(session)
        if control is not None:
            answered, shown = control.stop()
            if answered:
                return gr.skip(), gr.skip(), gr.skip()
            state = shown if shown is not None else state
        elif slots is not None and slots.withdraw(session):
            return STOPPED_WAITING, gr.skip(), gr.skip()
        return stop_outputs(holder.loaded, state)
    return on_stop


def remeasure_outputs(loaded, state, progress=None) -> tuple:
    """Measure this machine's pass-cost curve again (``pass_cost_curves(remeasure=True)``: a curve that is not
    physical is refused and the last physical one kept) and redraw the cost view. ``state``: the page's race
    (``race_handlers.render``'s dict, or None): its curve and refused curve are replaced, so the what-if panel
    and step-through read the new ones. Returns (cost figure, cost markdown, state)."""
    def passes(done: int, total: int) -> None:  # a count of passes, not a bar stuck at 0 % for 15 s
        progress((done, total), desc="measuring the pass cost of this machine", unit="passes")

    if progress is not None:
        progress((0, None), desc="measuring the pass cost of this machine", unit="passes")
    curves = pass_cost_curves(loaded, remeasure=True, progress=passes if progress is not None else None)
    refused = (curves.refused, curves.problem) if curves.refused is not None else None
    events, revision = {}, "remeasure"
    if state:
        show = dict(state["show"], curve=curves.used,
                    guards=dict(state["show"].get("guards") or {}, refused=refused))
        state = dict(state, show=show)
        events, revision = events_upto(state["events"], state.get("position")), show["revision"]
    figure, text = cost_view(events, curves.used, revision, refused)
    return shown_plot(figure), text, state


def machine_curve(holder) -> dict | None:
    """This machine's pass-cost curve for the holder's model as measured so far (``CostCurves.used``: the last
    physical one), or None (no model yet, or nothing measured). Measures nothing."""
    curves = measured_pass_cost_curves(holder.loaded) if holder.loaded is not None else None
    return curves.used if curves is not None else None


def remeasure_button():
    """The "Re-measure pass cost" button, placed where this is called; returns ``wire(holder, state, cost_plot,
    cost_md, slots)``, to call once those exist. A press while a race runs is refused (``race_slots.RACE_RUNNING``): a
    warning says why and the cost view stays as it was (a ``gr.Error`` left gradio's "Error" badge on the cost
    panel through every later race)."""
    button = gr.Button("Re-measure pass cost", size="sm", elem_id="remeasure-button")

    def wire(holder, state, cost_plot, cost_md, slots: RaceSlots):
        def on_remeasure(state, progress=gr.Progress()):
            try:
                if holder.loaded is None:
                    raise MeasurementRefused("The model has not loaded yet: re-measure once it has.")
                with slots.measurement():  # refused while a race runs; a race pressed meanwhile waits for its end
                    return remeasure_outputs(holder.loaded, state, progress)
            except MeasurementRefused as refused:
                gr.Warning(str(refused))
                return gr.skip(), gr.skip(), gr.skip()
        button.click(on_remeasure, state, [cost_plot, cost_md, state], concurrency_limit=1, show_progress="full",
                     show_progress_on=cost_md, api_visibility="private")  # one bar, over the sentences (the
        # chart is hidden until it has a figure: a bar over it would not be seen before the first race)
    return wire


def wire_step_button(button: gr.Button, handler, inputs, outputs, echo: bool = True) -> None:
    """A step-through button: busy from the press until its step is on the page (``scrolling.busy_js``; the handler
    of a live race waits for the race to show it, ``STEP_WAIT_S``), and one press at a time (``trigger_mode="once"``:
    a double click steps once). ``echo``: its answer is echoed under the buttons (False: the echo is cleared)."""
    button.click(None, None, None, js=busy_js(button.elem_id, True), **INSTANT)
    button.click(handler, inputs, outputs, trigger_mode="once", **INSTANT).then(
        None, None, None, js=busy_js(button.elem_id, False, echo), **INSTANT)
