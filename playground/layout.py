"""The page's layout: ``lay_out`` places every component of PaSS Playground and returns them by name.

Layout only: no event is wired here (``playground/page.py`` wires them to the handlers) and nothing is loaded. The
race tab holds the form, the step-through buttons, one token pane per method (``pass_core.registry.METHODS``), the
token-tree panel, the token inspector, the five metrics, the charts, the teaching panels and the traces; the
"Losslessness lab" tab holds the lab.
"""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from pass_core.decoding.metrics import METRIC_FORMULAS
from pass_core.decoding.settings import DecodeSettings
from pass_core.registry import METHODS
from pass_core.runtime.holder import ModelHolder
from pass_core.teaching.lab import MAX_RUNS
from pass_core.teaching.trace import MAX_TRACE_BYTES
from playground.components import number_box, numeric_input, trace_file
from playground.cost_charts import COST_WAITING
from playground.page_guards import machine_curve, remeasure_button
from playground.race_charts import pane_colours
from playground.race_inputs import EXAMPLES, LAB_MIN_RUNS, MethodOffer, hide_paths
from playground.race_view import INTRO, METRIC_LABELS, TITLE, help_text
from playground.stepping import MAX_STEP_DELAY_S
from playground.teaching import INSPECTOR_HINT, LAB_DEFAULT_RUNS, LAB_INTRO, LAB_PROMPT, LAB_WAITING
from playground.theory_view import THEORY_BEFORE_RACE
from playground.teaching_panels import lesson_strip, whatif_accordion
from playground.tree_race import tree_panel, tree_setting


#: The page's sections as a screen reader's heading keys (H) list them, each an ``<h2>`` hidden from sight (the page
#: had one heading, its title, so nothing led to the panes or the charts but reading the whole page: helper 69).
HEADINGS = ("Prompt and lessons", "Step-through", "Token panes", "Metrics", "Charts", "Losslessness lab")


def heading(text: str) -> None:
    """Place ``<h2>text</h2>`` (one of ``HEADINGS``), out of sight and in no room (``PAGE_CSS``: ``.sr-heading``)."""
    gr.HTML(f"<h2>{text}</h2>", elem_classes="sr-heading")


def lay_out(holder: ModelHolder, offer: MethodOffer, lookahead_text: str, help_template: str) -> SimpleNamespace:
    """Place the page's components (inside the caller's ``gr.Blocks``) and return them by name.

    Args:
        holder: the model (its headline and status fill the first lines; ``holder.ready`` starts the poll timer).
        offer: the methods offered and ticked (``race_inputs.method_offer``).
        lookahead_text: the first "Look-ahead embeddings / drafters" line.
        help_template: the "How to read this" text (``race_view.help_text`` fills it in).

    Returns:
        A namespace of the components, named as below (``panes`` and ``metrics`` are lists in ``METHODS`` and
        ``METRIC_LABELS`` order; ``tree`` is ``tree_race.tree_panel``'s; ``wire_lessons``, ``wire_remeasure``
        and ``wire_whatif`` are the panels' wiring functions).
    """
    gr.Markdown(TITLE, elem_id="page-title")
    status = gr.Markdown(hide_paths(holder.headline()), elem_id="status-line")
    with gr.Accordion("Model and drafters", open=False):  # folded: on a phone the prompt stays on screen
        gr.Markdown(INTRO)
        model_md = gr.Markdown(hide_paths(holder.status()), elem_id="model-line")
        lookahead_md = gr.Markdown(lookahead_text, elem_id="drafter-line")
    with gr.Tab("Race", id="race"):
        heading(HEADINGS[0])
        with gr.Row():
            with gr.Column(scale=3):
                prompt = gr.Textbox(label="prompt", lines=4, placeholder="Type a prompt, or pick an example below.",
                                    elem_id="input-prompt")
                with gr.Row():  # right under the prompt: on a phone the examples pushed Run to a second screen
                    run_btn = gr.Button("Run", variant="primary", elem_id="run-button")
                    stop_btn = gr.Button("Stop", variant="stop")
                    # pressed by the page after Stop's reply (``scrolling.CANCEL_RACE_JS``), never by a visitor
                    cancel_btn = gr.Button("cancel race", visible="hidden", elem_id="cancel-race")
                gr.Examples(examples=[[e] for e in EXAMPLES], inputs=[prompt], label="examples", elem_id="examples",
                            api_visibility="private")  # gradio made it callable: bad indexes logged tracebacks
                # placed under both columns, right above the panes (below: on a phone the lessons and Settings
                # stood between the step buttons and the tokens they outline); made here for the lessons' wiring
                slow_motion = gr.Slider(0, MAX_STEP_DELAY_S, value=0, step=0.05, elem_id="slow-motion",
                                        label="slow motion: delay per step (s)", render=False,
                                        info="0 = full speed; the wait is wall time, never counted as compute")
            with gr.Column(scale=2):  # on a phone this column comes after the prompt and Run
                # "Start here": presets, each with a question before Run (and, for lesson 2, slow motion)
                wire_lessons = lesson_strip(offer.keys, slow_motion)
        # folded: the empty panes come soon after the examples, so a first Run is seen to fill them. The whole
        # page's width, the numbers three a line on a desktop: in the lessons' column, unfolded, it stood some
        # 1,500 px tall beside an empty column and pushed the step buttons and panes as far down
        with gr.Accordion("Settings: methods, sampling, length, token tree", open=False, elem_id="settings"):
            methods = gr.CheckboxGroup([(METHODS[key].label, key) for key in offer.keys],
                                       value=list(offer.default), label="methods to race",
                                       info="any two or more" + (f". {offer.note}" if offer.note else ""),
                                       elem_id="methods")
            with gr.Row(elem_id="settings-numbers"):  # a column each: drafts and length, the draw, its truncation
                with gr.Column(min_width=300):
                    num_lookahead, max_new_tokens = numeric_input("num_lookahead"), numeric_input("max_new_tokens")
                with gr.Column(min_width=300):
                    temperature, seed = numeric_input("temperature"), numeric_input("seed")
                with gr.Column(min_width=300):
                    top_k, top_p = numeric_input("top_k"), numeric_input("top_p")
            with gr.Row(elem_id="settings-checks"):  # two a line on a phone (PAGE_CSS)
                show_rejected = gr.Checkbox(True, label="show rejected drafts")
                fused = gr.Checkbox(DecodeSettings().fused, label="fused step (extension)",
                                    info="beyond the paper, one forward pass per step: " +
                                         ", ".join(m.short_name for m in METHODS.values() if m.fusable))
                chat_template = gr.Checkbox(DecodeSettings().chat_template, label="chat template",
                                            info="wrap the prompt as a user turn (off: raw text)")
                auto_drafts = gr.Checkbox(DecodeSettings().auto_drafts,
                                          label="cost-aware draft lengths (extension)",
                                          info="each step verifies 0..L drafts, chosen from this "
                                               "machine's pass cost and the acceptance so far")
            tree_nodes = tree_setting()  # token trees beside the chains (playground/tree_race.py)
        heading(HEADINGS[1])
        with gr.Row():
            with gr.Column(scale=3):
                with gr.Row(elem_id="step-through"):  # step-through: the state after each step of the race
                    pause_btn = gr.Button("Pause", size="sm", elem_id="pause-button", min_width=90)
                    previous_btn = gr.Button("◀ Previous step", size="sm", elem_id="previous-button",
                                             min_width=90)
                    next_btn = gr.Button("Next step ▶", size="sm", elem_id="next-button", min_width=90)
                    resume_btn = gr.Button("Resume ▶▶", size="sm", elem_id="resume-button", min_width=90)
                    # Stop here too: Run scrolls the panes into view, and on a desktop Run and Stop then stand above it
                    steps_stop_btn = gr.Button("■ Stop", size="sm", variant="stop", elem_id="steps-stop-button",
                                               min_width=90)
                # the step buttons' answer under them (the run line, further down, says it in full): page_guards
                gr.HTML('<div id="step-echo-text" aria-live="polite"></div>', elem_id="step-echo", padding=False)
            with gr.Column(scale=2):
                slow_motion.render()
        heading(HEADINGS[2])
        with gr.Row(equal_height=True):
            panes = [gr.HighlightedText(label=m.label, color_map=pane_colours(key), show_legend=True,
                                        show_inline_category=False, combine_adjacent=False,
                                        elem_classes="token-pane", elem_id=f"pane-{key}",
                                        visible=key in offer.default,
                                        min_width=320)  # on a phone, one pane per line
                     for key, m in METHODS.items()]
        # the step-through's outline of the newest step: a <style> (stepping.newest_css), never shown itself
        newest_css = gr.HTML("", elem_id="newest-step", visible="hidden", padding=False)
        tree = tree_panel()  # the tree entries' panes (hidden until one races), the step's tree, a node chooser
        with gr.Accordion("Token inspector", open=True, elem_id="inspector"):
            inspector_md = gr.Markdown(INSPECTOR_HINT, elem_id="inspector-text")
            inspector_plot = gr.Plot(label="the selected token's distributions: target p, drafter q",
                                     elem_id="inspector-plot", visible=False)  # shown with a selected token
        heading(HEADINGS[3])
        greedy_md = gr.Markdown(elem_id="greedy-check")
        with gr.Row():
            metrics = [gr.Textbox(label=label, info=METRIC_FORMULAS[key], interactive=False, min_width=180)
                       for key, label in METRIC_LABELS.items()]
        run_md = gr.Markdown(elem_id="run-line")
        # every plot hidden until it has a figure (``plot_boxes.shown_plot``): six empty boxes stood here
        heading(HEADINGS[4])
        with gr.Row():  # each chart at least 420 px wide: on a phone they stack in one column
            latency_plot = gr.Plot(label="latency per step", min_width=420, visible=False, elem_id="latency-plot")
            cumulative_plot = gr.Plot(label="tokens vs compute time", min_width=420, visible=False,
                                      elem_id="cumulative-plot")
        with gr.Row():
            hist_plot = gr.Plot(label="accepted drafts per verification step", min_width=420, visible=False,
                                elem_id="histogram-plot")
            position_plot = gr.Plot(label="acceptance by position", min_width=420, visible=False,
                                    elem_id="positions-plot")
        with gr.Accordion("Theory beside measurement", open=True):
            theory_plot = gr.Plot(label="accepted drafts vs theory", visible=False,  # one line on a 390-px phone
                                  elem_id="theory-plot")
            theory_md = gr.Markdown(THEORY_BEFORE_RACE, elem_id="theory-sentences")
        with gr.Accordion("Pass cost on this machine", open=True):
            # the button first: the chart appears under it, so it stays where it was pressed (it moved down)
            wire_remeasure = remeasure_button()  # with a progress indicator; refused while a race runs
            cost_plot = gr.Plot(label="pass cost c(w) and steps", visible=False,  # one line on a phone
                                elem_id="cost-plot")
            cost_md = gr.Markdown(COST_WAITING, elem_id="cost-sentences")
        wire_whatif = whatif_accordion(lambda: machine_curve(holder))  # alpha, k and c(w) -> predicted speed-up
        with gr.Accordion("Traces: download a race, replay one without a model", open=True):
            with gr.Row(equal_height=True):
                trace_download = gr.DownloadButton("Download trace (JSON), after a race",
                                                   elem_id="trace-download")
                trace_upload = trace_file(label=f"trace to replay (.json, at most {MAX_TRACE_BYTES // 2**20} MB)",
                                          file_types=[".json"], type="filepath", elem_id="trace-upload",
                                          height=170)  # the row's height (gradio's default made all three 240 px)
                replay_btn = gr.Button("Replay", elem_id="replay-button")
        with gr.Accordion("How to read this", open=False):
            gr.Markdown(help_text(help_template), elem_id="how-to-read")
    with gr.Tab("Losslessness lab", id="lab"):
        heading(HEADINGS[5])
        gr.Markdown(LAB_INTRO)
        with gr.Row(equal_height=True):
            lab_prompt = gr.Textbox(LAB_PROMPT, label="prompt for the lab", lines=1, scale=3)
            with gr.Column(scale=2):
                lab_runs = number_box("runs N per method", LAB_DEFAULT_RUNS, 1,
                                      f"{LAB_MIN_RUNS}-{MAX_RUNS}; about 4 s per N on an idle 2-core CPU: N = "
                                      f"{LAB_DEFAULT_RUNS} takes about 3.5 minutes (embedded model), twice that "
                                      "on a busy one", "lab-runs",
                                      (LAB_MIN_RUNS, MAX_RUNS))
            with gr.Column(scale=1, min_width=120, elem_id="lab-buttons"):  # Run lab, and Stop lab under it
                lab_btn = gr.Button("Run lab", variant="primary", elem_id="lab-run")
                lab_stop_btn = gr.Button("Stop lab", variant="stop", elem_id="lab-stop")
        lab_plot = gr.Plot(label="empirical distributions vs the exact law", elem_id="lab-plot",
                           visible=False)  # shown with the first lab's chart: an empty plot box stood over the tab
        lab_md = gr.Markdown(LAB_WAITING, elem_id="lab-table")  # the progress bar shows over it
    state = gr.State(None)
    timer = gr.Timer(1.0, active=not holder.ready)
    return SimpleNamespace(
        status=status,
        model_md=model_md,
        lookahead_md=lookahead_md,
        prompt=prompt,
        run_btn=run_btn,
        stop_btn=stop_btn,
        steps_stop_btn=steps_stop_btn,
        cancel_btn=cancel_btn,
        pause_btn=pause_btn,
        previous_btn=previous_btn,
        next_btn=next_btn,
        resume_btn=resume_btn,
        slow_motion=slow_motion,
        wire_lessons=wire_lessons,
        methods=methods,
        num_lookahead=num_lookahead,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        max_new_tokens=max_new_tokens,
        seed=seed,
        show_rejected=show_rejected,
        fused=fused,
        chat_template=chat_template,
        auto_drafts=auto_drafts,
        tree_nodes=tree_nodes,
        panes=panes,
        newest_css=newest_css,
        tree=tree,
        inspector_md=inspector_md,
        inspector_plot=inspector_plot,
        greedy_md=greedy_md,
        metrics=metrics,
        run_md=run_md,
        latency_plot=latency_plot,
        cumulative_plot=cumulative_plot,
        hist_plot=hist_plot,
        position_plot=position_plot,
        theory_plot=theory_plot,
        theory_md=theory_md,
        cost_plot=cost_plot,
        cost_md=cost_md,
        wire_remeasure=wire_remeasure,
        wire_whatif=wire_whatif,
        trace_download=trace_download,
        trace_upload=trace_upload,
        replay_btn=replay_btn,
        lab_prompt=lab_prompt,
        lab_runs=lab_runs,
        lab_btn=lab_btn,
        lab_stop_btn=lab_stop_btn,
        lab_plot=lab_plot,
        lab_md=lab_md,
        state=state,
        timer=timer,
    )
