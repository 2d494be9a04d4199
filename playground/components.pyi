"""Page components that differ from gradio's own in one respect each."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from .race_handlers import user_error

from gradio.events import Dependency

class TraceFile(gr.File):
    """``gr.File`` for the trace to replay: a file of another type is refused like every other visitor mistake
    (``race_handlers.user_error``: shown to the visitor, named, no traceback in the server log) instead of by
    gradio's own check, which logs a traceback. Rendered by gradio's File component (``is_template``)."""

    is_template = True

    def preprocess(self, payload):
        """As ``gr.File.preprocess``. Raises gr.Error (not logged) for a file whose type is not in ``file_types``."""
        try:
            return super().preprocess(payload)
        except gr.Error as err:
            name = Path(getattr(payload, "orig_name", None) or getattr(payload, "path", "") or "the file").name
            raise user_error(f"{name!r} is not a trace: upload a .json trace written by this page's "
                             "Download trace or by python -m pass_core.generate --trace FILE.") from err
    from typing import Callable, Literal, Sequence, Any, TYPE_CHECKING
    from gradio.blocks import Block
    if TYPE_CHECKING:
        from gradio.components import Timer
        from gradio.components.base import Component