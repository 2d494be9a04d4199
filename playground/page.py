"""The page: ``build_demo`` lays out PaSS Playground's components and wires them to the handlers.

Importing this module loads nothing and launches nothing (``app.py`` parses the command line and launches);
``ModelHolder`` loads the model in a background thread.

The handlers it calls live in ``playground/race_handlers.py``: the methods on
offer come from ``pass_core.registry.METHODS``,
decoding, timing and metrics from ``pass_core`` (step events, ``summarize``), figures, token
colours, display strings and the page's CSS from ``playground`` (``race_view``, ``race_charts``).
"""

from __future__ import annotations

from pathlib import Path

try:  # Hugging Face's `spaces` package (ZeroGPU); imported before anything touches CUDA
    import spaces
except ImportError:
    spaces = None
if not hasattr(spaces, "GPU"):  # absent, or only this repo's spaces/ folder seen as a namespace package
    spaces = None

import gradio as gr

from pass_core.decoding.events import METRIC_FORMULAS
from pass_core.teaching.lab import MAX_RUNS
from pass_core.runtime.holder import ModelHolder, ModelNotReady
from pass_core.runtime.models import LoadedModel
from pass_core.teaching.race import events_upto
from pass_core.registry import METHODS
from pass_core.decoding.settings import SETTING_RANGES, DecodeSettings
from playground.cost_charts import COST_WAITING
from playground.race_charts import pane_colours
from playground.race_inputs import (EXAMPLES, LAB_MIN_RUNS, NUMERIC_INPUTS, cap_for_zerogpu, hide_paths, method_offer,
                                    whole)
from playground.race_view import (HIDE_REJECTED_JS, INTRO, METRIC_LABELS, PAGE_CSS, TITLE, help_text,  # noqa: F401
                                     setting_range)
from playground.stepping import MAX_STEP_DELAY_S, NEXT, PREVIOUS, RESUME, StepControl, step_position
from playground.components import numeric_input, trace_file
from playground.page_guards import (STEP_WAIT_S, STOPPED_NOTE, RaceSlots, remeasure_button, stop_handler, stop_outputs,  # noqa: F401
                                    wire_step_button)
from playground.lab_handlers import lab_handler, validate_lab  # noqa: F401  (re-exported)
from playground.teaching_panels import lesson_strip, whatif_accordion, wire_panels
from playground.tree_race import tree_count, tree_panel, tree_setting, wire_tree
from playground.teaching import (INSPECTOR_HINT, LAB_DEFAULT_RUNS, LAB_INTRO, LAB_PROMPT, THEORY_BEFORE_RACE,
                                 inspect_selection, token_namer)
# the handlers, re-exported: tests and API users reach them as playground.page.<name>
from playground.race_handlers import (CHART_EVERY, DEFAULT_RACE, TRACES_KEPT, UPDATE_INTERVAL_S, drafters_for,  # noqa: F401
                           gpu_duration, pane_visibility, race_handler, race_keys, render, render_state,
                           replay_handler, rerender_panes, user_error, validate_inputs,
                           with_panes_for)

QUEUE_MAX_SIZE = 16
NOTHING_TO_STEP = "*Run a race or replay a trace first: the step-through moves through its steps.*"
LOAD_TIMEOUT_S = 600  # a Run pressed while the model loads waits this long at most
#: The "How to read this" help; ``help_text`` fills in the registered methods and the setting ranges.
HELP_TEMPLATE = (Path(__file__).resolve().parents[1] / "assets" / "help" / "how-to-read.md").read_text(encoding="utf-8")


def gpu(duration):
    """``spaces.GPU(duration=...)`` where the ``spaces`` package exists (ZeroGPU), else a no-op."""
    return spaces.GPU(duration=duration) if spaces is not None else (lambda fn: fn)


def build_demo(model: ModelHolder | LoadedModel, untrained_drafters: bool = False) -> gr.Blocks:
    """Build the page around a model (a ``LoadedModel``, or a ``ModelHolder`` that may still be loading, or
    ``ModelHolder.without_model()``: replay only). The methods offered are ``race_inputs.method_offer``'s for the
    model's name: those needing a trained file only where one ships for it, unless ``untrained_drafters``."""
    holder = model if isinstance(model, ModelHolder) else ModelHolder(model.name, loaded=model)
    offer = method_offer(None if holder.replay_only else holder.name, DEFAULT_RACE, untrained_drafters)

    def lookahead_line(num_lookahead, methods=offer.default) -> str:
        if holder.loaded is None:
            return "**Look-ahead embeddings / drafters:** chosen once the model has loaded."
        keys = [key for key in METHODS if key in set(methods or ())]
        try:
            settings = DecodeSettings(num_lookahead=whole(num_lookahead))
            return drafters_for(holder.loaded, keys, settings)[1]
        except (TypeError, ValueError) as err:
            return hide_paths(f"⚠ **Look-ahead embeddings / drafters:** {err}")

    def poll(num_lookahead, methods):
        return (hide_paths(holder.headline()), hide_paths(holder.status()), lookahead_line(num_lookahead, methods),
                gr.Timer(active=not holder.ready))

    # session -> the "show rejected drafts" toggle now, while that session's race runs: the race reads it at
    # every update, so a change made mid-race holds (the race's own input is the value at Run)
    show_now: dict[str, bool] = {}

    def on_toggle(state, show_rejected, request: gr.Request = None):
        session = getattr(request, "session_hash", None)
        if session in show_now:
            show_now[session] = bool(show_rejected)
        return rerender_panes(state, show_rejected)

    # session -> the step-through buttons of that session's live race, and its slow-motion delay (seconds). On
    # ZeroGPU the race runs in another process, which the buttons cannot reach: they act on the finished race.
    controls: dict[str, StepControl] = {}
    slots = RaceSlots()  # races run one at a time: who races, who waits (a note for the waiting)
    delays: dict[str, float] = {}

    @gpu(duration=gpu_duration)
    def run_on_device(*values, run_note="", control=None):
        yield from race_handler(holder.loaded, *values, run_note=run_note, inspect=True, control=control)

    def on_step(direction: str):
        def handler(state, show_rejected, request: gr.Request = None):
            control = controls.get(getattr(request, "session_hash", None))
            if control is not None:  # a live race: it computes, renders and yields the positions itself
                control.pause() if direction == "pause" else control.move(direction)
                control.wait_shown(STEP_WAIT_S)  # the button stays busy until the race shows the step
                return (gr.skip(),) * len(outputs)
            if not state:  # nothing to step through: say so in the run line, leave everything else as it is
                return (gr.skip(),) * (len(outputs) - 3) + (NOTHING_TO_STEP, gr.skip(), gr.skip())
            total = sum(map(len, state["events"].values()))
            if direction == RESUME:
                position = None
            elif direction == "pause":
                position = state.get("position") or total
            else:
                position = step_position(state.get("position"), total, direction)
            return render_state(state, show_rejected, position)
        return handler

    def on_slow_motion(delay_s, request: gr.Request = None):
        session = getattr(request, "session_hash", None)
        try:
            StepControl().set_delay(delay_s)
        except ValueError as err:
            raise user_error(str(err)) from err
        delays[session] = float(delay_s)
        if session in controls:
            controls[session].set_delay(delay_s)

    def on_select(key: str):
        def handler(state, show_rejected, evt: gr.SelectData):
            if not state or key not in state["events"] or not isinstance(evt.index, int):
                return INSPECTOR_HINT, None
            model_decode = holder.token_text if state.get("own_model", True) and holder.loaded else None
            events = events_upto(state["events"], state.get("position"))
            return inspect_selection(events[key], key, evt.index, show_rejected,
                                     token_namer(state["events"], model_decode))
        return handler

    def on_unload(request: gr.Request = None):
        delays.pop(getattr(request, "session_hash", None), None)
        slots.leave(getattr(request, "session_hash", None))

    def on_lab(prompt, runs, progress=gr.Progress()):
        try:
            loaded = holder.wait(timeout_s=LOAD_TIMEOUT_S)
        except ModelNotReady as err:
            raise user_error(str(err)) from err
        return lab_handler(loaded, prompt, runs, progress, decode=holder.token_text)

    def on_run(prompt, num_lookahead, temperature, top_k, top_p, max_new_tokens, seed, show_rejected, fused, methods,
               chat_template=True, auto_drafts=False, tree_nodes=0, request: gr.Request = None):
        if not holder.ready:
            yield (gr.skip(),) * (len(outputs) - 3) + ("Waiting for the model to load…", gr.skip(), gr.skip())
        try:
            holder.wait(timeout_s=LOAD_TIMEOUT_S)
        except ModelNotReady as err:
            raise user_error(str(err)) from err
        # ZeroGPU refuses a call that asks for more than the visitor's quota: cap the race to fit (and say so)
        max_new_tokens, note = (cap_for_zerogpu(max_new_tokens, methods, tree_count(methods, tree_nodes))
                                if spaces is not None else (max_new_tokens, ""))
        session = getattr(request, "session_hash", None)
        show_now[session] = bool(show_rejected)
        control = StepControl(delays.get(session, 0.0)) if spaces is None else None
        if control is not None:
            controls[session] = control
        slots.start(session)
        try:
            for out in run_on_device(prompt, num_lookahead, temperature, top_k, top_p, max_new_tokens, seed,
                                     show_rejected, fused, methods, chat_template, auto_drafts, tree_nodes,
                                     run_note=note, control=control):
                show = show_now.get(session, show_rejected)
                frame = out if show == bool(show_rejected) else with_panes_for(out, show)
                if control is not None and not control.yielding(frame[-1]):
                    return  # Stop: the panes keep the last frame, the one Stop's trace was made of
                yield frame
        finally:
            slots.end()
            show_now.pop(session, None)
            if controls.get(session) is control:
                controls.pop(session, None)

    with gr.Blocks(title="PaSS Playground") as demo:
        gr.Markdown(TITLE, elem_id="page-title")
        status = gr.Markdown(hide_paths(holder.headline()), elem_id="status-line")
        with gr.Accordion("Model and drafters", open=False):  # folded: on a phone the prompt stays on screen
            gr.Markdown(INTRO)
            model_md = gr.Markdown(hide_paths(holder.status()), elem_id="model-line")
            lookahead_md = gr.Markdown(lookahead_line(SETTING_RANGES["num_lookahead"][2]), elem_id="drafter-line")
        with gr.Tab("Race", id="race"):
            with gr.Row():
                with gr.Column(scale=3):
                    prompt = gr.Textbox(label="prompt", lines=4, placeholder="Type a prompt, or pick an example below.")
                    gr.Examples(examples=[[e] for e in EXAMPLES], inputs=[prompt], label="examples")
                    with gr.Row():
                        run_btn = gr.Button("Run", variant="primary")
                        stop_btn = gr.Button("Stop", variant="stop")
                    with gr.Row(elem_id="step-through"):  # step-through: the state after each step of the race
                        pause_btn = gr.Button("Pause", size="sm", elem_id="pause-button", min_width=90)
                        previous_btn = gr.Button("◀ Previous step", size="sm", elem_id="previous-button",
                                                 min_width=90)
                        next_btn = gr.Button("Next step ▶", size="sm", elem_id="next-button", min_width=90)
                        resume_btn = gr.Button("Resume ▶▶", size="sm", elem_id="resume-button", min_width=90)
                    slow_motion = gr.Slider(0, MAX_STEP_DELAY_S, value=0, step=0.05, elem_id="slow-motion",
                                            label="slow motion: delay per step (s)",
                                            info="0 = full speed; the wait is wall time, never counted as compute")
                with gr.Column(scale=2):  # on a phone this column comes after the prompt and Run
                    wire_lessons = lesson_strip(offer.keys)  # "Start here": presets, each with a question before Run
                    with gr.Accordion("Settings", open=True):
                        methods = gr.CheckboxGroup([(METHODS[key].label, key) for key in offer.keys],
                                                   value=list(offer.default), label="methods to race",
                                                   info="any two or more" + (f". {offer.note}" if offer.note else ""),
                                                   elem_id="methods")
                        (num_lookahead, temperature, top_k, top_p, max_new_tokens,
                         seed) = map(numeric_input, NUMERIC_INPUTS)
                        with gr.Row():
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
            with gr.Row(equal_height=True):
                panes = [gr.HighlightedText(label=m.label, color_map=pane_colours(key), show_legend=True,
                                            show_inline_category=False, combine_adjacent=False,
                                            elem_classes="token-pane", elem_id=f"pane-{key}",
                                            visible=key in offer.default,
                                            min_width=320)  # on a phone, one pane per line
                         for key, m in METHODS.items()]
            tree = tree_panel()  # the tree entries' panes (hidden until one races), the step's tree, a node chooser
            with gr.Accordion("Token inspector", open=True, elem_id="inspector"):
                inspector_md = gr.Markdown(INSPECTOR_HINT, elem_id="inspector-text")
                inspector_plot = gr.Plot(label="the distribution the selected token was drawn from",
                                         elem_id="inspector-plot")
            greedy_md = gr.Markdown(elem_id="greedy-check")
            with gr.Row():
                metrics = [gr.Textbox(label=label, info=METRIC_FORMULAS[key], interactive=False, min_width=180)
                           for key, label in METRIC_LABELS.items()]
            run_md = gr.Markdown(elem_id="run-line")
            with gr.Row():  # each chart at least 420 px wide: on a phone they stack in one column
                latency_plot = gr.Plot(label="latency per step", min_width=420)
                cumulative_plot = gr.Plot(label="tokens vs compute time", min_width=420)
            with gr.Row():
                hist_plot = gr.Plot(label="accepted drafts per verification step", min_width=420)
                position_plot = gr.Plot(label="acceptance by position", min_width=420)
            with gr.Accordion("Theory beside measurement", open=True):
                theory_plot = gr.Plot(label="accepted drafts per verification step: measured vs theory")
                theory_md = gr.Markdown(THEORY_BEFORE_RACE, elem_id="theory-sentences")
            with gr.Accordion("Pass cost on this machine", open=True):
                cost_plot = gr.Plot(label="cost of a pass over w tokens, and what each method yields per step")
                cost_md = gr.Markdown(COST_WAITING, elem_id="cost-sentences")
                wire_remeasure = remeasure_button()  # with a progress indicator; refused while a race runs
            wire_whatif = whatif_accordion()  # "What if…": alpha, k and a cost curve -> predicted speed-up
            with gr.Accordion("Traces: download a race, replay one without a model", open=True):
                with gr.Row(equal_height=True):
                    trace_download = gr.DownloadButton("Download trace (JSON), after a race",
                                                       elem_id="trace-download")
                    trace_upload = trace_file(label="trace to replay (.json)", file_types=[".json"], type="filepath",
                                           elem_id="trace-upload")
                    replay_btn = gr.Button("Replay", elem_id="replay-button")
            with gr.Accordion("How to read this", open=False):
                gr.Markdown(help_text(HELP_TEMPLATE), elem_id="how-to-read")
        with gr.Tab("Losslessness lab", id="lab"):
            gr.Markdown(LAB_INTRO)
            with gr.Row(equal_height=True):
                lab_prompt = gr.Textbox(LAB_PROMPT, label="prompt for the lab", lines=1, scale=3)
                lab_runs = gr.Slider(LAB_MIN_RUNS, MAX_RUNS, value=LAB_DEFAULT_RUNS, step=1, label="runs N per method",
                                     info=f"about {LAB_DEFAULT_RUNS} runs take a minute on a 2-core CPU "
                                          "(embedded model)", scale=2)
                lab_btn = gr.Button("Run lab", variant="primary", scale=1)
            lab_plot = gr.Plot(label="empirical distributions vs the exact law")
            lab_md = gr.Markdown(elem_id="lab-table")
        state = gr.State(None)
        timer = gr.Timer(1.0, active=not holder.ready)

        inputs = [prompt, num_lookahead, temperature, top_k, top_p, max_new_tokens, seed, show_rejected, fused, methods,
                  chat_template, auto_drafts]
        run_btn.click(slots.on_run, None, run_md, api_visibility="private", queue=False, show_progress="hidden")
        wire_remeasure(holder, state, cost_plot, cost_md, slots)
        outputs = [*panes, *metrics, greedy_md, latency_plot, cumulative_plot, hist_plot, position_plot, theory_plot,
                   theory_md, cost_plot, cost_md, *tree.outputs, trace_download, run_md, lookahead_md, state]
        # preprocess=False: every value reaches validate_inputs as sent, for it to refuse by name (a component's
        # own check, e.g. of the methods' choices, would answer an API caller with a bare "400 Bad Request")
        run_event = run_btn.click(on_run, [*inputs, tree_nodes], outputs, api_name="race", concurrency_limit=1,
                                  preprocess=False, show_progress="minimal", validator=validate_inputs)
        wire_panels(state, inputs, wire_lessons, wire_whatif, race=run_event)  # the teaching panels' events
        replay_btn.click(lambda path, show: replay_handler(path, show, holder.loaded), [trace_upload, show_rejected],
                         outputs, api_name="replay", concurrency_limit=4)
        for button, direction in ((pause_btn, "pause"), (previous_btn, PREVIOUS), (next_btn, NEXT),
                                  (resume_btn, RESUME)):
            wire_step_button(button, on_step(direction), [state, show_rejected], outputs)  # busy; one press at a time
        slow_motion.change(on_slow_motion, slow_motion, None, api_visibility="private", queue=False)
        for key, pane in zip(METHODS, panes):
            pane.select(on_select(key), [state, show_rejected], [inspector_md, inspector_plot],
                        api_visibility="private", queue=False)
        wire_tree(tree, holder, state, show_rejected, [inspector_md, inspector_plot])
        demo.unload(on_unload)
        # preprocess=False: N reaches validate_lab as sent, for it to refuse by name (the slider's own range check
        # answers "Value 5 is less than minimum value 10" and logs a traceback)
        lab_btn.click(on_lab, [lab_prompt, lab_runs], [lab_plot, lab_md], api_name="lab", concurrency_limit=1,
                      preprocess=False, validator=validate_lab)
        stop_btn.click(stop_handler(holder, controls), state, [run_md, trace_download],
                       cancels=[run_event], api_visibility="private", queue=False)  # with a trace of what was produced
        show_rejected.change(on_toggle, [state, show_rejected], panes, api_visibility="private", queue=False,
                             js=HIDE_REJECTED_JS)
        num_lookahead.change(lookahead_line, [num_lookahead, methods], lookahead_md, api_visibility="private",
                             trigger_mode="always_last", show_progress="hidden")
        methods.change(pane_visibility, methods, panes, api_visibility="private", queue=False)
        methods.change(lookahead_line, [num_lookahead, methods], lookahead_md, api_visibility="private")
        polled = [status, model_md, lookahead_md, timer]
        timer.tick(poll, [num_lookahead, methods], polled, api_visibility="private", show_progress="hidden",
                   queue=False)
        demo.load(poll, [num_lookahead, methods], polled, api_visibility="private", show_progress="hidden",
                  queue=False)
    demo.queue(max_size=QUEUE_MAX_SIZE)
    return demo
