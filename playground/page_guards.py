"""The page's guards around a race, wired by ``page.build_demo``: Stop that leaves a trace of what was produced (a
live race answers it in its own stream of frames, ``stopped_frame``; a waiting race leaves the queue), step buttons
that show they work and take one press at a time, a note for a visitor whose race waits for another, and the
re-measure button of the pass-cost curve (with a progress indicator). Plain functions (tests call them without a
browser); no tensors: traces from ``pass_core.teaching.trace``, curves from ``pass_core.runtime.pass_cost``."""

from __future__ import annotations

import contextlib
import threading

import gradio as gr

from pass_core.decoding.metrics import summarize
from pass_core.runtime.pass_cost import measured_pass_cost_curves, pass_cost_curves
from pass_core.teaching.race import events_upto
from pass_core.teaching.trace import make_trace, save_trace
from playground.cost_charts import cost_view
from playground.plot_boxes import shown_plot
from playground.race_guards import finish
from playground.race_text import compute_line
from playground.scrolling import busy_js

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
RACE_RUNNING = ("A race is running: re-measure the pass cost after it ends (measuring now would slow the race and "
                "distort the curve).")


class MeasurementRefused(RuntimeError):
    """*Re-measure pass cost* is refused now (a race runs, another measurement runs, or no model is loaded)."""


#: The run line of a race that waits for a pass-cost measurement to end.
MEASURING_NOTE = ("⏳ **The pass cost is being measured: your race starts when it ends** (a race beside it would "
                  "distort both).")


def stop_outputs(loaded, state) -> tuple:
    """Stop's (run line, trace download, page state): ``STOPPED_NOTE`` and, for a race stopped before its end
    (``state``: ``race_handlers.render``'s dict), a trace of the steps it had produced (``pass_core.teaching.trace``),
    each method's line of what it had produced (``race_text.compute_line``: Stop's line took their place) and the
    race's busy line (``race_guards``); the state marked stopped (``stopped``; its run line's headline
    ``STOPPED_NOTE``), so that the step buttons speak of a stopped race (they said "Racing…", or "the finished
    race's last") and a second Stop changes nothing. A race stepped back to an earlier position: the trace holds
    the steps up to it, the ones the panes show. No race yet: ``NOTHING_TO_STOP``; a finished or stopped race, or
    a replay: nothing changes (``gr.skip()`` for all three; Stop once put "Stopped." over a replay's lines)."""
    if not state:
        return NOTHING_TO_STOP, gr.skip(), gr.skip()
    guards = (state.get("show") or {}).get("guards") or {}
    if state.get("finished") or state.get("stopped") or loaded is None or not guards.get("source"):
        return gr.skip(), gr.skip(), gr.skip()  # the run line keeps its lines (Stop is unqueued: no toast)
    from playground.trace_files import trace_path  # the race's own folder and name for traces
    finish(guards)
    prompt, settings = guards["source"]
    shown = events_upto(state["events"], state.get("position"))  # stepped back: the steps the panes show
    path = save_trace(make_trace(loaded, prompt, settings, shown, guards.get("machine_load")), trace_path())
    done = compute_line({key: summarize(evs, key) if evs else None for key, evs in shown.items()})  # the race's
    stopped = dict(state, stopped=True, show=dict(state["show"], headline=STOPPED_NOTE))
    return "  \n".join(filter(None, (STOPPED_NOTE + STOPPED_TRACE, done, guards.get("load")))), str(path), stopped


def stopped_frame(loaded, control, width: int) -> tuple:
    """The last frame of a live race that met Stop (``StepControl.stop_frame_due``), one value per output of the
    race (``width`` of them, ending with the trace download, run line, drafter line and state): Stop's line, the
    trace of the steps of the race's last frame and its state marked stopped (``stop_outputs``), ``gr.skip()``
    everywhere else."""
    line, path, state = (stop_outputs(loaded, control.last_state) if control.last_state is not None
                         else (STOPPED_BEFORE_START, gr.skip(), gr.skip()))
    return (gr.skip(),) * (width - 4) + (path, line, gr.skip(), state)


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


class RaceSlots:
    """Who races and who waits, across the page's sessions: the race runs one at a time (``concurrency_limit=1``),
    so a visitor who presses Run during another's race is told why nothing moves yet; and a race and a pass-cost
    measurement never run together (each would distort the other's timings). Thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self.running = 0
        self.measuring = False
        self._waiting: set = set()
        self._racing: set = set()  # the sessions whose race runs
        self._labs: dict = {}  # session -> its running lab's stop flag
        self._pressed: dict = {}  # session -> the values of its last Run (``on_run``)
        self._withdrawn: dict = {}  # session -> the values of its waiting race that Stop said will not start
        self.labs_started = 0

    def start(self, session) -> None:
        """A race of ``session`` starts (it has left the queue), once no pass-cost measurement runs (it waits for
        one to end); call ``end`` after it, whatever happens."""
        with self._changed:
            self._changed.wait_for(lambda: not self.measuring)
            self.running += 1
            self._racing.add(session)
            self._waiting.discard(session)

    @contextlib.contextmanager
    def measurement(self):
        """Hold while the pass cost is measured: races that start meanwhile wait for its end.

        Raises:
            MeasurementRefused: a race is running (``RACE_RUNNING``), or another measurement is.
        """
        with self._changed:
            if self.running:
                raise MeasurementRefused(RACE_RUNNING)
            if self.measuring:
                raise MeasurementRefused("The pass cost is being measured already: its chart updates when it ends.")
            self.measuring = True
        try:
            yield
        finally:
            with self._changed:
                self.measuring = False
                self._changed.notify_all()

    def end(self, session) -> None:
        """The race of ``session`` (``start``) has ended."""
        with self._changed:
            self.running -= 1
            self._racing.discard(session)
            self._changed.notify_all()

    def racing(self, request) -> bool:
        """True while the race of ``request``'s session runs (``start`` to ``end``)."""
        with self._lock:
            return getattr(request, "session_hash", None) in self._racing

    def waits(self, session) -> None:
        """``session``'s race waits before it starts (for the model to load): Stop tells it that it will not start."""
        with self._lock:
            self._waiting.add(session)

    def leave(self, session) -> bool:
        """``session`` closed its tab, or its model load failed: it waits no more. True when it was waiting."""
        with self._lock:
            waiting = session in self._waiting
            self._waiting.discard(session)
            return waiting

    def withdraw(self, session) -> bool:
        """Stop while ``session``'s race waits: it waits no more, and that race (its last Run's values) will not
        start (``withdrawn``), even where the page's cancel misses it in gradio's queue (a Stop before gradio's page
        knew the queued event sent the cancel without the event's id, or none; the race ran later). True if waiting."""
        with self._lock:
            if session not in self._waiting:
                return False
            self._waiting.discard(session)
            if session in self._pressed:
                self._withdrawn[session] = self._pressed[session]
            return True

    def withdrawn(self, request, values: tuple) -> bool:
        """A race of ``request``'s session leaves the queue with its Run's ``values``: True when it is the race
        that Stop withdrew (``withdraw``), which must not start. Any race that leaves the queue clears the mark; a
        Run of the same values after the Stop clears it first (``on_run``: that race is wanted again)."""
        with self._lock:
            return self._withdrawn.pop(getattr(request, "session_hash", None), None) == values

    @contextlib.contextmanager
    def lab(self, session):
        """Hold while the lab of ``session`` runs; yields its stop flag, which ``close`` sets. A race does not wait
        for a lab (a lab takes minutes), so ``lab_beside`` tells a race that one shared the CPU with it."""
        stop = threading.Event()
        with self._lock:
            self._labs[session] = stop
            self.labs_started += 1
        try:
            yield stop
        finally:
            with self._lock:
                if self._labs.get(session) is stop:
                    del self._labs[session]

    def lab_beside(self, started_before: int) -> bool:
        """A lab runs now, or one started since ``labs_started`` was ``started_before`` (read at a race's start):
        the lab runs in this process, so the race's busy line (other programs' CPU time) does not count it."""
        with self._lock:
            return bool(self._labs) or self.labs_started != started_before

    def close(self, session) -> None:
        """``session`` closed its tab: it waits no more, and its lab stops at its next run (a closed tab's lab held
        the one lab slot for minutes)."""
        self.leave(session)
        with self._lock:
            self._pressed.pop(session, None)
            self._withdrawn.pop(session, None)
            if session in self._labs:
                self._labs[session].set()

    def on_run(self, request: gr.Request = None, values: tuple = ()):
        """A Run that will race (the page's ``on_press`` asks the validator's checks first), with the values it
        races (for ``withdraw``): a note in the run line when another race is running, else no change."""
        session = getattr(request, "session_hash", None)
        with self._lock:
            if session in self._withdrawn and self._withdrawn[session] == values:  # the withdrawn race, wanted again
                del self._withdrawn[session]
            self._pressed[session] = values
            if not self.running or session in self._racing:  # its own race (gradio ignores a Run then): no note
                return gr.skip()
            self._waiting.add(session)
            ahead = len(self._waiting) - 1
        return ("⏳ **Another race is running on this server: yours starts when it ends**" +
                (f" ({ahead} more waiting before yours)." if ahead > 0 else ".") +
                " The spinner shows your place in the queue.")


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
    cost_md, slots)``, to call once those exist. A press while a race runs is refused (``RACE_RUNNING``): a
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
    private = dict(api_visibility="private", queue=False)
    button.click(None, None, None, js=busy_js(button.elem_id, True), **private)
    button.click(handler, inputs, outputs, trigger_mode="once", show_progress="hidden", **private).then(
        None, None, None, js=busy_js(button.elem_id, False, echo), **private)
