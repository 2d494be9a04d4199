"""Step-through of a race: pause, next / previous step, slow motion.

A race's position is a number of steps of ``pass_core.race.race_order``: the panes, charts and metrics after
position n show ``events_upto(events, n)``, the state after the race's first n steps on the shared compute
clock. ``StepControl`` carries the visitor's buttons from the page to a live race (the race's generator polls
it between steps, so a paused race computes nothing); no Gradio and no model here.
"""

from __future__ import annotations

import queue
import threading
import time

from pass_core.decoding.events import StepEvent
from pass_core.registry import METHODS, tree_entry_nodes
from playground.race_charts import short_name
from playground.race_panes import newest_step_css

#: Slow motion: the page's range for the delay per step, in seconds.
MAX_STEP_DELAY_S = 2.0
#: Stop waits at most this long for the race to reach its next frame, then as long for it to end after it met Stop
#: (``StepControl.stop``), seconds.
STOP_WAIT_S = 3.0
NEXT, PREVIOUS, RESUME = "next", "previous", "resume"


class StepControl:
    """The step-through buttons of one visitor, shared between the page's button handlers and the live race.

    Thread-safe: the buttons call ``pause``, ``move`` and ``set_delay`` from Gradio's worker threads while the
    race's generator calls ``paused``, ``delay_s`` and ``wait_move`` from its own.

    Attributes:
        paused: True from Pause (or Next / Previous) until Resume.
        delay_s: slow motion, seconds of wall time the race waits after each step (0 = full speed); never
            counted as compute time.
    """

    def __init__(self, delay_s: float = 0.0):
        self._moves: queue.Queue[str] = queue.Queue()
        self._lock = threading.Lock()
        self._shown = threading.Event()  # set: the state after the last press is on the page
        self._shown.set()
        self.paused = False
        self.stopped = False  # Stop was pressed: the race yields no frame of its own after that
        self._ended = threading.Event()  # set: the race yields nothing more (it has ended)
        self.stop_frame_due = False  # the race met Stop before Stop answered: it yields Stop's frame, then ends
        self._answered = False  # Stop answered itself (the race had not met it in time): the race just ends
        self.last_state: dict | None = None  # the ``render`` state of the last frame the race yielded
        self.delay_s = 0.0
        self.set_delay(delay_s)

    def yielding(self, state) -> bool:
        """The race is about to yield a frame whose ``render`` state is ``state`` (a heartbeat's ``gr.skip()``, also
        a dict, is not a state: Stop on a race paused for over a second once found no race in it): remember it as
        what the page will show. False once Stop was pressed: the race must not yield it; it then yields Stop's own
        frame instead when ``stop_frame_due`` (``page_guards.stopped_frame``: Stop's line and trace, in the race's
        own stream), and ends."""
        with self._lock:
            if self.stopped:
                self.stop_frame_due = not self._answered
                return False
            if isinstance(state, dict) and "events" in state:  # a heartbeat's gr.skip() is a dict too
                self.last_state = state
            return True

    def stop(self, wait_s: float = STOP_WAIT_S) -> tuple[bool, dict | None]:
        """Stop: the race yields no frame of its own after this. Returns (answered, state).

        answered True: the race met Stop at its next frame and answers it in its own stream (``yielding``), so no
        frame it sent before can reach the page after Stop's line (gradio sends a race's frames and Stop's reply on
        different connections: Stop's line once arrived first and a race frame then replaced it); returns once the
        race has ended, at most ``wait_s`` seconds after it met Stop. answered False: the race ended by itself, or
        did not reach its next frame within ``wait_s`` seconds (a long step: it then ends there without a frame);
        ``state`` is the ``render`` state of the last frame it yielded (None before any), for Stop's own reply."""
        with self._lock:
            self.stopped = True
        self._ended.wait(wait_s)
        with self._lock:
            if not self.stop_frame_due:
                self._answered = True
                return False, self.last_state
        self._ended.wait(wait_s)  # the race is making Stop's frame (a trace to write)
        return True, self.last_state

    def end(self) -> None:
        """The race has ended (finished, stopped, refused or closed): nothing more comes from it."""
        self._ended.set()

    def set_delay(self, delay_s) -> None:
        """Slow motion. Raises ValueError unless 0 <= delay_s <= ``MAX_STEP_DELAY_S`` (seconds)."""
        try:
            delay = float(delay_s)
        except (TypeError, ValueError):
            raise ValueError(f"slow motion (delay per step) must be a number of seconds, got {delay_s!r}") from None
        if not 0.0 <= delay <= MAX_STEP_DELAY_S:
            raise ValueError(f"slow motion (delay per step) must be between 0 and {MAX_STEP_DELAY_S:g} s, "
                             f"got {delay_s!r}")
        self.delay_s = delay

    def pause(self) -> None:
        """Stop after the step being computed; the race waits for ``move``."""
        with self._lock:
            if not self.paused:  # the race shows a paused frame after its current step
                self._shown.clear()
            self.paused = True

    def move(self, direction: str) -> None:
        """A button press: ``NEXT`` or ``PREVIOUS`` (pauses the race first) or ``RESUME``.

        ``RESUME`` unpauses and drops the presses not acted on yet: a paused race runs on at its next poll
        (``paused_updates``), a running one just goes on (queued, a Resume pressed while the race ran cut every
        later slow-motion wait short; one pressed before a Pause took effect left Pause waiting ``STEP_WAIT_S``).

        Raises:
            ValueError: another direction.
        """
        if direction not in (NEXT, PREVIOUS, RESUME):
            raise ValueError(f"unknown step-through move {direction!r}")
        with self._lock:
            self.paused = direction != RESUME
            if not self.paused:
                while not self._moves.empty():
                    self._moves.get_nowait()
                self._shown.set()  # nothing more to show for a Pause still waiting
                return
            self._shown.clear()  # the race shows the step asked for (``shown``)
            self._moves.put(direction)

    def shown(self) -> None:
        """The race has put the state after the last Pause / Next / Previous on the page (or has ended)."""
        self._shown.set()

    def wait_shown(self, timeout_s: float) -> bool:
        """Wait until ``shown`` (at most ``timeout_s`` seconds): the page's step buttons stay busy until the step
        they asked for is on the page, so a second press acts on that step. True when it was shown."""
        return self._shown.wait(timeout_s)

    def wait_move(self, timeout_s: float) -> str | None:
        """The next Next / Previous press, waiting at most ``timeout_s`` seconds; None when there was none (then
        ``paused`` False means a Resume)."""
        try:
            return self._moves.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of wall time (slow motion), cut short by a Pause, a move or Stop."""
        end = time.monotonic() + seconds
        self.sleep_until(lambda: end)

    def sleep_until(self, end) -> None:
        """Wait until ``end()`` (a ``time.monotonic()`` time, read again every 50 ms: slow motion's step start plus
        the delay the slider says now, so that a delay changed during a wait takes effect in it: a 2 s wait went on
        for 1.6 s after the slider was set to 0.2 s), cut short by a Pause, a move or Stop."""
        while not self.paused and self._moves.empty() and not self.stopped:
            left = end() - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(0.05, left))


def step_position(position: int | None, total: int, direction: str) -> int:
    """The position after a Next / Previous press on a recorded race of ``total`` steps.

    Args:
        position: the position shown now (None: the whole race, i.e. ``total``).
        direction: ``NEXT`` (one more step, at most ``total``; from the whole race the first step, so a finished
            race or a replay is walked through from its start: Next went to its last step, and a teacher pressed
            Previous 120 times to reach the start) or ``PREVIOUS`` (one fewer, at least 1).
    """
    if position is None and direction == NEXT:
        return min(1, total)
    now = total if position is None else position
    return min(total, now + 1) if direction == NEXT else max(min(1, total), now - 1)


def step_line(events: dict[str, list[StepEvent]], order: list[tuple[str, int]], position: int, live: bool,
              finished: bool = True) -> str:
    """Markdown for the run line while stepping: where the race stands and what the last step was.

    Args:
        events: name -> the events recorded so far.
        order: ``race_order(events)``.
        position: steps shown (1..len(order)).
        live: the race is still running (paused): Next computes the next step.
        finished: (not live) the race ended by itself; False: it was stopped (Stop, or a stopped race's trace).
    """
    if not order or position < 1:
        return "**Paused** before the first step."
    name, index = order[position - 1]
    event = events[name][index]
    label = short_name(name)  # "ParallelSpec +tree8" for a tree entry
    tokens = len(event.new_token_ids)
    last = not live and position == len(order)  # a finished race's last step: Next has nothing more to show
    ended = "finished" if finished else "stopped"
    where = (f"step {position} of the {len(order)} computed so far of the race" if live else
             f"step {position} of {len(order)}, the {ended} race's last" if last else
             f"step {position} of {len(order)} of the {'' if finished else 'stopped '}race")
    whole = "how it finished" if finished else "where it was stopped"
    return (f"**Paused** after {where}: {label} step "
            f"{event.step} ({tokens} new token{'s' * (tokens != 1)}, {event.step_s * 1000:.1f} ms; outlined in its "
            f"pane). " + (f"*Previous step* moves back one step; *Resume* shows the whole race and {whole}."
                          if last else "*Next step* and *Previous step* move one step on the shared compute clock; "
                          + ("*Resume* runs on." if live else "*Resume* shows the whole race.")))


def newest_css(events: dict, order: list[tuple[str, int]], position: int) -> str:
    """The outline of the step the step-through stopped after (``race_panes.newest_step_css``): step ``position``
    of ``order`` (``race_order(events)``), in its method's pane, or in its tree entry's pane. "" before the first
    step."""
    if not 1 <= position <= len(order):
        return ""
    name, index = order[position - 1]
    tree_base = name.partition("+")[0] if tree_entry_nodes(name) is not None else None  # "pass+tree8": "pass"
    pane = f"pane-{name}" if name in METHODS else f"pane-{tree_base}-tree" if tree_base else None
    return newest_step_css(events[name][index], pane) if pane else ""


PAUSE_IDLE_S = 300.0  # a paused race resumes by itself after 5 minutes without a step-through press
HEARTBEAT_S = 1.0  # a paused race yields a no-op update this often: gradio then notices a closed tab and ends it


def paused_updates(control: StepControl, events: dict, frame, no_op):
    """The page updates of a paused live race: ``frame(position)`` (``render`` at that position) now, then one
    per Next / Previous press while recorded steps remain. Returns (the race computes its next step) on Resume,
    or on Next at the newest step (the race then stops again after it, still paused). The page runs one race at a
    time: every ``HEARTBEAT_S`` seconds without a press it yields a heartbeat (``no_op()``, gradio's ``gr.skip``,
    for every output: nothing changes on the page) so that gradio, which only looks for a closed tab when a handler
    yields, ends the race of a closed tab within seconds and frees the slot (and after Stop one at once: the race then
    ends without yielding it, ``StepControl.yielding``); after ``PAUSE_IDLE_S`` seconds without a
    press the race resumes by itself (a tab left open)."""
    total = position = sum(map(len, events.values()))
    first = frame(position)
    yield first
    control.shown()  # gradio asks for the next update once it has sent this one
    heartbeat = (no_op(),) * len(first)
    idle_since = beat = time.monotonic()
    while True:
        move = control.wait_move(timeout_s=0.1)
        now = time.monotonic()
        if move is None:
            if not control.paused:  # Resume
                return
            if now - idle_since > PAUSE_IDLE_S:
                control.move(RESUME)  # nobody pressed anything for a while: free the race's slot
            elif control.stopped or now - beat >= HEARTBEAT_S:
                beat = now
                yield heartbeat
            continue
        idle_since = now
        if move == NEXT and position == total:
            return
        if move in (NEXT, PREVIOUS):
            position = step_position(position, total, move)
            yield frame(position)
            control.shown()
