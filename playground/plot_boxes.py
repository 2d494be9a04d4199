"""A figure output that shows its plot box only while it has a figure: an empty ``gr.Plot`` stands as a tall box
with a placeholder icon (before the first race the page had six of them, over the sentences that say what will
appear there)."""

from __future__ import annotations

import gradio as gr


def shown_plot(figure):
    """``figure`` as the update of a ``gr.Plot`` output: ``gr.skip()`` (or any other update) passes unchanged (no
    redraw); a Plotly figure is drawn and its plot shown; None (nothing to draw yet, e.g. no race or a trace without
    the machine's pass cost) empties the plot and hides it."""
    if isinstance(figure, dict):
        return figure
    return gr.update(value=figure, visible=figure is not None)
