"""Page components that differ from gradio's own in one respect each, and a setting's number box with its slider."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from pass_core.decoding.settings import SETTING_RANGES
from playground.race_handlers import user_error
from playground.race_inputs import NUMERIC_INPUTS
from playground.race_view import INSTANT, setting_range


def trace_file(**kwargs) -> gr.File:
    """A ``gr.File`` (``kwargs`` as for it) for the trace to replay, whose file-type check answers like every other
    visitor mistake (``race_handlers.user_error``: shown to the visitor with the file's name, no traceback in the
    server log) instead of with gradio's own error, which logs a traceback. The check is wrapped on the instance: a
    ``gr.File`` subclass would make gradio write a ``.pyi`` file next to this module at import."""
    component = gr.File(**kwargs)
    preprocess = component.preprocess

    def quiet_preprocess(payload):
        try:
            return preprocess(payload)
        except gr.Error as err:
            name = Path(getattr(payload, "orig_name", None) or getattr(payload, "path", None) or "the file").name
            raise user_error(f"{name!r} is not a trace: upload a .json trace written by this page's "
                             "Download trace or by python -m pass_core.generate --trace FILE.") from err

    component.preprocess = quiet_preprocess
    return component


def numeric_input(name: str) -> gr.Number:
    """A race setting's number box (``NUMERIC_INPUTS``, ``SETTING_RANGES``), with a slider to drag within its range
    unless it is the seed (two billion seeds: nothing to drag): ``number_box``."""
    label, step, hint = NUMERIC_INPUTS[name]
    lo, hi, default = SETTING_RANGES[name]
    info = setting_range(name) + (f"; {hint}" if hint else "")
    return number_box(label, default, step, info, f"input-{name}", None if name == "seed" else (lo, hi))


def number_box(label: str, default, step, info: str, elem_id: str, drag: tuple | None = None) -> gr.Number:
    """A number box and (``drag`` = (low, high)) a slider beside it to drag within that range, kept in step in the
    browser both ways (a value set by a lesson or a replay too). The box has no minimum or maximum of its own, so
    it keeps a value typed out of range for the validator to refuse by name; the slider's own box, which clamps
    typed values silently (the lab's N = 10 became 30 without a word), is hidden."""
    with gr.Row(equal_height=True):
        box = gr.Number(default, label=label, info=info, step=step, elem_id=elem_id, min_width=200)
        if drag is not None:
            aid = gr.Slider(*drag, value=default, step=step, label=label, show_label=False,
                            elem_classes="range-aid", buttons=[])
            sync = dict(js="(v) => v", **INSTANT)
            aid.input(None, aid, box, **sync)
            box.change(None, box, aid, **sync)  # typed, or set by a lesson or a replay
    return box
