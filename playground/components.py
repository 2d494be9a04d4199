"""Page components that differ from gradio's own in one respect each."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from playground.race_handlers import user_error


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
