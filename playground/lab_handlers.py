"""The losslessness lab's handlers (the page's "Losslessness lab" tab): its run and its inputs' validation.
Gradio values (``gr.Error``, ``gr.validate``) but no layout and no tensors: the lab itself is
``pass_core.teaching.lab``, its figure and table ``playground.lab_view``.
"""

from __future__ import annotations

import functools

import gradio as gr

from pass_core.registry import METHODS
from pass_core.runtime.models import LoadedModel
from pass_core.teaching.lab import lab_prompt_ids, run_lab
from playground.race_handlers import user_error
from playground.race_inputs import lab_runs_problem, prompt_problem, whole
from playground.teaching import lab_figure, lab_markdown


class LabStopped(Exception):
    """*Stop lab* was pressed, or the lab's tab was closed: its runs stop (``lab_handler``'s ``stop``)."""


#: The lab's table after *Stop lab*: part of the runs gives no verdict.
LAB_STOPPED = ("**Stopped.** The lab ended before its N runs, so it gives no verdict (a part of the runs is not the "
               "sample its bounds were computed for). Press **Run lab** to run it again.")


def lab_handler(loaded: LoadedModel, prompt, runs, progress=None, decode=str, stop=None) -> tuple:
    """The losslessness lab (``pass_core.lab.run_lab``): ``runs`` seeded continuations with every method and the
    broken rule. ``progress``: a ``gr.Progress`` (or None), fed (runs done, runs in all); ``decode``: token id ->
    text for the chart; ``stop``: a ``threading.Event`` set by *Stop lab* or when the lab's tab closes: the lab ends
    at its next run, with no chart (None: the previous lab's verdicts stood over "no verdict") and the table
    ``LAB_STOPPED`` (a closed tab's lab held the page's one lab slot for minutes). Returns (``lab_figure``,
    ``lab_markdown``). Raises gr.Error for a bad prompt or N."""
    problem = prompt_problem(prompt) or lab_runs_problem(runs)
    if problem:
        raise user_error(problem)
    runs = whole(runs)

    def feed(done, total):
        if stop is not None and stop.is_set():
            raise LabStopped
        if progress is not None:  # not ``if progress``: a gr.Progress is falsy until it tracks something
            progress((done, total), desc="lab runs", unit="runs")

    try:
        result = run_lab(loaded, prompt, runs, progress=feed)
    except LabStopped:
        return None, LAB_STOPPED
    except (TypeError, ValueError) as err:
        raise user_error(str(err)) from err
    legend = {key: m.short_name for key, m in METHODS.items()}  # a phone cut "... sampling): TV 0.18" off
    return lab_figure(result, legend, decode), lab_markdown(result, {key: m.label for key, m in METHODS.items()})


#: *Stop lab*'s answer in the lab's table when no lab runs or waits (added under the last lab's table, which stays) ...
NO_LAB = "*Stop lab: no lab is running in this tab. Press **Run lab** to start one.*"
#: ... and when the tab's lab waits behind another tab's (its end, ``LAB_STOPPED``, comes when it reaches its turn).
LAB_WITHDRAWN = ("*Stop lab: your lab was waiting for another tab's lab; it stops at its first run, with no "
                 "verdict.*")


def lab_stopper(slots):
    """*Stop lab*'s handler: the visitor's lab ends at its next run (``RaceSlots.stop_lab``; its own answer,
    ``LAB_STOPPED``, follows), a waiting one at its first (``LAB_WITHDRAWN`` at once); with none, ``NO_LAB`` under
    the table (a ``gr.Info`` said so, which an unqueued listener never shows)."""
    def on_stop_lab(table=None, request: gr.Request = None):
        state = slots.stop_lab(getattr(request, "session_hash", None))
        if state == "running":
            return gr.skip()
        if state == "waiting":
            return LAB_WITHDRAWN
        kept = str(table or "").replace(NO_LAB, "").rstrip()  # one note, however many presses
        return f"{kept}\n\n{NO_LAB}" if kept else NO_LAB
    return on_stop_lab


def lab_presser(slots):
    """Run lab's first, unqueued listener: a lab whose inputs are fine waits in the queue (``RaceSlots.lab_pressed``),
    so that *Stop lab* pressed meanwhile withdraws it."""
    def on_lab_press(prompt, runs, request: gr.Request = None) -> None:
        if not any(lab_problems(prompt, runs)):  # a lab the validator refuses never joins the queue
            slots.lab_pressed(getattr(request, "session_hash", None))
    return on_lab_press


def validate_lab(prompt, runs, holder=None) -> list:
    """The lab's ``gr.validate`` per input, run by gradio before the request joins the queue (as
    ``validate_inputs`` for the race): a bad prompt or N is refused at once, also while the model loads or
    another lab runs. ``lab_handler`` checks the same again. ``holder``: the page's ``ModelHolder``; once its model
    has loaded, a prompt its context cannot hold is the prompt's problem too (it came back as the lab's error)."""
    problems = list(lab_problems(prompt, runs))
    loaded = holder.loaded if holder is not None and holder.ready else None
    if loaded is not None and problems[0] is None:
        try:
            lab_prompt_ids(loaded, prompt)
        except ValueError as err:
            problems[0] = str(err)
    return [gr.validate(problem is None, problem or "") for problem in problems]


def lab_validator(holder):
    """``validate_lab`` with the page's ``ModelHolder``, for the lab's ``validator=``."""
    return functools.partial(validate_lab, holder=holder)


def lab_problems(prompt, runs) -> tuple:
    """What refuses a lab, per input (None: fine): the prompt, then N."""
    return prompt_problem(prompt), lab_runs_problem(runs)


#: The run line's last line for a race that a losslessness lab ran beside (``page_guards.RaceSlots.lab_beside``).
LAB_BESIDE = ("⚠ **A losslessness lab ran on this server during this race:** the two shared the CPU, so these "
              "timings are slower than the race alone would be.")


def with_lab_note(frame: tuple, at: int) -> tuple:
    """``frame`` (a race update) with ``LAB_BESIDE`` added to its run line, output ``at`` (unless skipped)."""
    if not isinstance(frame[at], str) or LAB_BESIDE in frame[at]:
        return frame
    return (*frame[:at], frame[at] + "  \n" + LAB_BESIDE, *frame[at + 1:])
