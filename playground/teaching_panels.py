"""Teaching panels as Gradio blocks: the "What if…" accordion (sliders for alpha, k and the drafter's cost, a
cost-curve preset, and the chart and numbers of ``playground.whatif``). Layout and wiring only; the values come
from ``whatif.whatif_view``.

``build_demo`` (``playground/page.py``) calls ``whatif_accordion()`` where the accordion goes and the function it
returns once the race's ``gr.State`` exists (the panel reads this run's events and curve from it).
"""

from __future__ import annotations

import gradio as gr

from playground.whatif import K_MAX, MACHINE, PRESETS, TYPED_EXAMPLE, whatif_view

WHATIF_INTRO = ("Predicted tokens per step and speed-up over AR from three numbers: how often a draft is accepted "
                "(α), how many drafts a step verifies (k), and what a pass over w tokens costs, c(w), in AR steps. "
                "On a small model on a CPU a wide pass costs much more than a narrow one; on a GPU it costs about "
                "the same, which is why speculation pays there. After a race, this run's methods appear as "
                "diamonds (their own α and k).")


def whatif_accordion():
    """Lay out the accordion (closed) here; returns ``wire(state)``, to call once the race's state exists, which
    redraws the panel on opening it and on every control's change."""
    with gr.Accordion("What if…", open=False, elem_id="whatif") as accordion:
        gr.Markdown(WHATIF_INTRO)
        with gr.Row():
            alpha = gr.Slider(0, 1, value=0.6, step=0.01, label="draft acceptance α", elem_id="whatif-alpha",
                              min_width=220)
            k = gr.Slider(1, K_MAX, value=3, step=1, label="drafts per step k", elem_id="whatif-k", min_width=220)
            drafter_cost = gr.Slider(0, 1, value=0.05, step=0.01, label="drafter cost c_d (AR steps; chain only)",
                                     elem_id="whatif-drafter", min_width=220,
                                     info="ParallelSpec's one-layer drafter: a few hundredths")
        with gr.Row():
            preset = gr.Radio(list(PRESETS), value=MACHINE, label="cost curve c(w)", elem_id="whatif-preset",
                              min_width=220)
            typed = gr.Textbox(TYPED_EXAMPLE, label="c(w) typed in: c(1), c(2), …", elem_id="whatif-typed",
                               info="used with 'typed in'; divided by c(1)", min_width=220)
        plot = gr.Plot(label="predicted tokens per step and speed-up", elem_id="whatif-plot")
        text = gr.Markdown(elem_id="whatif-text")

    def wire(state: gr.State) -> None:
        gr.on([accordion.expand, alpha.release, k.release, drafter_cost.release, preset.change, typed.submit],
              whatif_view, [alpha, k, preset, typed, drafter_cost, state], [plot, text], queue=False,
              api_visibility="private", show_progress="hidden")

    return wire
