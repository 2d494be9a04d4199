"""Who races and who waits, across the page's sessions (``RaceSlots``, wired by ``page.build_demo``): the race runs
one at a time, a visitor whose Run waits is told why, Stop on a waiting race withdraws it, a race and a pass-cost
measurement never run together, and a session's lab can be stopped. Thread-safe; no tensors."""

from __future__ import annotations

import contextlib
import threading

import gradio as gr

from playground.stepping import PAUSE_IDLE_S

RACE_RUNNING = ("A race is running: re-measure the pass cost after it ends (measuring now would slow the race and "
                "distort the curve).")


class MeasurementRefused(RuntimeError):
    """*Re-measure pass cost* is refused now (a race runs, another measurement runs, or no model is loaded)."""


#: How long gradio's queue sleeps, seconds, when it has no event to start (``Queue.sleep_when_free``) and no
#: progress to send (``progress_update_sleep_when_free``). gradio's own 1 ms and 10 ms kept an idle page's server at
#: 8.0-8.8 % of a core (2.4-2.6 % with these), and AR on the embedded model beside an idle queue ran 2.54 s
#: for 32 tokens against 2.45 s with these (mean of 4, one torch thread, Intel Xeon, 2026-12-07). A click now waits
#: up to 20 ms more to start, a progress bar up to 50 ms more to move: below what a person notices.
QUEUE_IDLE_S = 0.02
PROGRESS_IDLE_S = 0.05


def calm_queue(demo: gr.Blocks, max_size: int) -> gr.Blocks:
    """``demo.queue(max_size=max_size)``, then its idle polling set to ``QUEUE_IDLE_S`` and ``PROGRESS_IDLE_S``
    (gradio has no option for them; an attribute a later gradio lacks is left alone: the page works as before,
    and ``tests/test_app.py`` fails). Returns ``demo``."""
    demo.queue(max_size=max_size)
    queue = demo._queue
    for name, seconds in (("sleep_when_free", QUEUE_IDLE_S), ("progress_update_sleep_when_free", PROGRESS_IDLE_S)):
        if hasattr(queue, name):
            setattr(queue, name, seconds)
    return demo


#: The run line of a race that waits for a pass-cost measurement to end.
MEASURING_NOTE = ("⏳ **The pass cost is being measured: your race starts when it ends** (a race beside it would "
                  "distort both).")


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
        self._lab_pending: set = set()  # sessions whose Run lab waits in the queue (``lab_pressed``) ...
        self._lab_withdrawn: set = set()  # ... and those of them that Stop lab withdrew
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
            self._lab_pending.discard(session)
            if session in self._lab_withdrawn:  # Stop lab pressed while it waited: it stops at its first run
                self._lab_withdrawn.discard(session)
                stop.set()
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

    def lab_pressed(self, session) -> None:
        """``session`` pressed Run lab and its inputs are fine: its lab waits in the queue until ``lab`` starts it."""
        with self._lock:
            if session not in self._labs:  # (gradio ignores a second Run lab while the tab's lab runs)
                self._lab_pending.add(session)

    def stop_lab(self, session) -> str:
        """``session``'s lab, if one runs, stops at its next run (*Stop lab*, or its tab closed); one still waiting in
        the queue stops at its first (it ran all its runs and gave verdicts). Returns "running", "waiting" or ""
        (none)."""
        with self._lock:
            if session in self._labs:
                self._labs[session].set()
                return "running"
            if session in self._lab_pending:
                self._lab_pending.discard(session)
                self._lab_withdrawn.add(session)
                return "waiting"
            return ""

    def close(self, session) -> None:
        """``session`` closed its tab: it waits no more, nothing is kept for it, and its lab stops (``stop_lab``: a
        closed tab's lab held the one lab slot for minutes)."""
        self.leave(session)
        with self._lock:
            self._pressed.pop(session, None)
            self._withdrawn.pop(session, None)
        self.stop_lab(session)

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
                " The spinner shows your place in the queue; its time is gradio's guess. A race its visitor paused "
                f"resumes by itself after {PAUSE_IDLE_S / 60:.0f} minutes without a step-through press.")
