"""The losslessness lab's handlers (the page's "Losslessness lab" tab): its run and its inputs' validation.
Gradio values (``gr.Error``, ``gr.validate``) but no layout and no tensors: the lab itself is
``pass_core.teaching.lab``, its figure and table ``playground.teaching``.
"""

from __future__ import annotations

import gradio as gr

from pass_core.registry import METHODS
from pass_core.runtime.models import LoadedModel
from pass_core.teaching.lab import run_lab
from playground.race_handlers import user_error
from playground.race_inputs import lab_runs_problem, prompt_problem, whole
from playground.teaching import lab_figure, lab_markdown


def lab_handler(loaded: LoadedModel, prompt, runs, progress=None, decode=str) -> tuple:
    """The losslessness lab (``pass_core.lab.run_lab``): ``runs`` seeded continuations with every method and the
    broken rule. ``progress``: a ``gr.Progress`` (or None), fed (runs done, runs in all); ``decode``: token id ->
    text for the chart. Returns (``lab_figure``, ``lab_markdown``). Raises gr.Error for a bad prompt or N."""
    problem = prompt_problem(prompt) or lab_runs_problem(runs)
    if problem:
        raise user_error(problem)
    runs = whole(runs)
    # ``is not None``: a gr.Progress is falsy until it tracks something (its __len__), and was never fed
    feed = (lambda done, total: progress((done, total), desc="lab runs", unit="runs")) if progress is not None else None
    try:
        result = run_lab(loaded, prompt, runs, progress=feed)
    except (TypeError, ValueError) as err:
        raise user_error(str(err)) from err
    names = {key: m.label for key, m in METHODS.items()}
    return lab_figure(result, names, decode), lab_markdown(result, names)


def validate_lab(prompt, runs) -> list:
    """The lab's ``gr.validate`` per input, run by gradio before the request joins the queue (as
    ``validate_inputs`` for the race): a bad prompt or N is refused at once, also while the model loads or
    another lab runs. ``lab_handler`` checks the same again."""
    return [gr.validate(problem is None, problem or "")
            for problem in (prompt_problem(prompt), lab_runs_problem(runs))]
