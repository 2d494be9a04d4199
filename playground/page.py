"""The page: ``build_demo`` lays out PaSS Playground's components (``playground.layout.lay_out``) and wires them
to the handlers. Importing this module loads nothing and launches nothing (``app.py`` parses the command line and
launches); ``ModelHolder`` loads the model in a background thread.

Handlers: ``playground/race_handlers.py`` (a race takes a ``race_inputs.RaceRequest``, checked by ``race_checks``);
methods from ``pass_core.registry.METHODS``; figures, colours, texts, CSS and JS from ``race_view`` and ``scrolling``.
"""

from __future__ import annotations

import functools
from pathlib import Path

try:  # Hugging Face's `spaces` package (ZeroGPU); imported before anything touches CUDA
    import spaces
except ImportError:
    spaces = None

import gradio as gr

from pass_core.decoding.settings import SETTING_RANGES, DecodeSettings
from pass_core.registry import METHODS
from pass_core.runtime.holder import ModelHolder, ModelNotReady
from pass_core.runtime.models import LoadedModel
from pass_core.teaching.race import events_upto
from pass_core.teaching.trace import MAX_TRACE_BYTES
from playground.lab_handlers import lab_handler, lab_presser, lab_stopper, lab_validator, with_lab_note
from playground.layout import lay_out
from playground.page_guards import STEP_WAIT_S, STOPPED_NOTE, slow_motion_handler, stop_handler, stopped_frame, \
    wire_step_button  # noqa: F401  (STOPPED_NOTE re-exported)
from playground.race_slots import MEASURING_NOTE, RaceSlots, calm_queue
from playground.scrolling import CANCEL_RACE_JS, CLEAR_STEP_ECHO_JS, RUN_ECHO_JS, RUN_SCROLL_JS, \
    PAGE_JS, REPLAY_SCROLL_JS, SCROLL_TO_INSPECTOR_JS, SCROLL_TO_LAB_JS, SCROLL_TO_PANES_JS, STOP_ECHO_JS
from playground.plot_boxes import shown_plot
from playground.race_inputs import RaceRequest, cap_for_zerogpu, hide_paths, method_offer, methods_problem, \
    on_zerogpu, whole
from playground.idle_frames import app_middleware
from playground.race_view import (HIDE_REJECTED_JS, INSTANT, METRIC_LABELS, PAGE_CSS,  # noqa: F401  (re-exported)
                                  page_theme)
from playground.stepping import NEXT, PREVIOUS, RESUME, StepControl, step_position
from playground.teaching import INSPECTOR_HINT, inspect_selection, token_namer
from playground.teaching_panels import wire_panels
from playground.tree_race import inspector_outputs, tree_choice, tree_count, tree_pane_values, wire_tree
# the handlers, re-exported: tests and API users reach them as playground.page.<name>
from playground.race_handlers import (CHART_EVERY, DEFAULT_RACE, drafters_for, gpu_duration, pane_visibility,  # noqa
                                      preview_panes, race_handler, race_keys, render, render_state,
                                      replay_panes, rerender_panes, user_error, with_panes_for)
from playground.race_checks import race_problems, validate_inputs  # noqa: F401  (re-exported)
from playground.replay import download_hint, replay_handler, replay_listener  # noqa: F401  (re-exported)

spaces = spaces if on_zerogpu(spaces) else None  # None: no ZeroGPU (a CPU Space has the package too)
QUEUE_MAX_SIZE = 16
NOTHING_TO_STEP = "*Run a race or replay a trace first: the step-through moves through its steps.*"
LOAD_TIMEOUT_S = 600  # a Run pressed while the model loads waits this long at most
#: Visitors' sessions whose race or replay the server keeps (``launch``'s ``state_session_capacity``; gradio's 10,000
#: are kept an hour after a tab closes). A 3.3 MB trace's replay added 9 MB per visitor, without end (12 visitors: 508
#: -> 634 MB with gradio_client on a ``--replay-only`` server; with a cap of 4, 584 MB). Beyond the cap the session
#: used longest ago is dropped: its step-through then asks for a new race or replay.
STATE_SESSIONS = 100
#: The "How to read this" help; ``help_text`` fills in the registered methods and the setting ranges.
HELP_TEMPLATE = (Path(__file__).resolve().parents[1] / "assets" / "help" / "how-to-read.md").read_text(encoding="utf-8")


def launch_options() -> dict:
    """``gr.Blocks.launch``'s keyword arguments wherever the page is served: ``page_theme()``, ``PAGE_CSS``,
    ``PAGE_JS``, errors shown, uploads above a trace's maximum size refused, ``STATE_SESSIONS`` races kept, and
    ``idle_frames``' script in the page's HTML before Gradio's (an idle tab kept 12 % of a core busy)."""
    return dict(theme=page_theme(), css=PAGE_CSS, js=PAGE_JS, show_error=True, max_file_size=MAX_TRACE_BYTES,
                state_session_capacity=STATE_SESSIONS, app_kwargs=dict(middleware=app_middleware()))


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
        return hide_paths(holder.headline()), hide_paths(holder.status()), lookahead_line(num_lookahead, methods), \
            gr.Timer(active=not holder.ready)

    # session -> the "show rejected drafts" toggle now, while that session's race runs: the race reads it at
    # every update, so a change made mid-race holds (the race's own input is the value at Run)
    show_now: dict[str, bool] = {}

    def on_toggle(state, show_rejected, request: gr.Request = None):
        session = getattr(request, "session_hash", None)
        if session in show_now:
            show_now[session] = bool(show_rejected)
        return (*rerender_panes(state, show_rejected), *tree_pane_values(state, show_rejected))

    # session -> the step-through buttons of that session's live race, and its slow-motion delay (seconds); on ZeroGPU
    # the race runs in another process, out of the buttons' reach (they act on the finished race). slots: who races.
    controls: dict[str, StepControl] = {}
    delays: dict[str, float] = {}
    slots = RaceSlots()

    @gpu(duration=gpu_duration)
    def run_on_device(request: RaceRequest, run_note="", control=None):
        yield from race_handler(holder.loaded, request, run_note=run_note, inspect=True, control=control)

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
            position = (None if direction == RESUME else state.get("position") or total if direction == "pause"
                        else step_position(state.get("position"), total, direction))
            return render_state(state, show_rejected, position)
        return handler

    def refused(request, values) -> bool:  # a Run that starts nothing: the validator's refusal (the prompt beyond
        # the model's context too: it was counted as waiting), or a Run during the tab's own race (gradio ignores it)
        problems = race_problems(*values, offer=offer, loaded=holder.loaded if holder.ready else None)
        return any(p is not None for p in problems) or slots.racing(request)

    def on_press(request: gr.Request = None, *values) -> tuple:  # the request first: gradio puts it at its place
        """Run's first, unqueued answer (run line, inspector): a note when another visitor's race runs
        (``slots.on_run``) and the inspector's hint (it kept a token two races later); a ``refused`` Run changes
        neither (it was counted as waiting, cleared the inspector, or emptied it mid-race)."""
        return (gr.skip(),) * 3 if refused(request, values) else (slots.on_run(request, values),
                                                                   *inspector_outputs(INSPECTOR_HINT))

    def on_select(key: str):
        def handler(state, show_rejected, evt: gr.SelectData):
            if not state or key not in state["events"] or not isinstance(evt.index, int):
                return inspector_outputs(INSPECTOR_HINT)
            model_decode = holder.token_text if state.get("own_model", True) and holder.loaded else None
            events = events_upto(state["events"], state.get("position"))
            return inspector_outputs(*inspect_selection(events[key], key, evt.index, show_rejected,
                                                        token_namer(state["events"], model_decode)))
        return handler

    def on_unload(request: gr.Request = None):
        delays.pop(getattr(request, "session_hash", None), None)
        slots.close(getattr(request, "session_hash", None))  # its lab, if any, stops at its next run

    def on_lab(prompt, runs, progress=gr.Progress(), request: gr.Request = None):
        try:
            loaded = holder.wait(timeout_s=LOAD_TIMEOUT_S)
        except ModelNotReady as err:
            raise user_error(str(err)) from err
        with slots.lab(getattr(request, "session_hash", None)) as stop:
            figure, table = lab_handler(loaded, prompt, runs, progress, decode=holder.token_text, stop=stop)
        # the plot is hidden until the first lab (an empty plot box stood over the tab): shown with its chart
        return shown_plot(figure), table

    def on_run(prompt, num_lookahead, temperature, top_k, top_p, max_new_tokens, seed, show_rejected, fused, methods,
               chat_template=True, auto_drafts=False, tree_nodes=0, request: gr.Request = None):
        values = (prompt, num_lookahead, temperature, top_k, top_p, max_new_tokens, seed, show_rejected, fused,
                  methods, chat_template, auto_drafts, tree_nodes)
        if slots.withdrawn(request, values):
            return  # Stop said this waiting race will not start (the page's cancel of it may not have landed)
        tree_nodes, session = tree_choice(tree_nodes), getattr(request, "session_hash", None)  # "8": an API client
        problem = methods_problem(methods, offer)
        if problem and problem != methods_problem(methods):  # a method this page leaves out, asked for by the API
            raise user_error(problem)
        if not holder.ready:  # Stop meanwhile withdraws this race (``slots.withdraw``): it will not start
            slots.waits(session)
            yield (gr.skip(),) * (len(outputs) - 3) + ("Waiting for the model to load…", gr.skip(), gr.skip())
        try:
            holder.wait(timeout_s=LOAD_TIMEOUT_S)
        except ModelNotReady as err:
            slots.leave(session)
            raise user_error(str(err)) from err
        if slots.withdrawn(request, values):  # Stop while the model loaded (the page's cancel may not have landed)
            return
        # ZeroGPU refuses a call that asks for more than the visitor's quota: cap the race to fit (and say so)
        max_new_tokens, note = (cap_for_zerogpu(max_new_tokens, methods, tree_count(methods, tree_nodes))
                                if spaces is not None else (max_new_tokens, ""))
        show_now[session] = bool(show_rejected)
        control = StepControl(delays.get(session, 0.0)) if spaces is None else None
        if control is not None:
            controls[session] = control
        started = False  # the finally below also runs for a tab closed while the race waited (its entries leaked)
        try:
            if slots.measuring:
                yield (gr.skip(),) * (len(outputs) - 3) + (MEASURING_NOTE, gr.skip(), gr.skip())
            slots.start(session)  # waits for a pass-cost measurement to end
            started, labs_before = True, slots.labs_started

            def noted(frame: tuple) -> tuple:  # a lab that ran beside this race is said on its run line (output -3)
                return with_lab_note(frame, -3) if slots.lab_beside(labs_before) else frame
            # the panes of the methods about to race, now (a listener after this one ran once the race had ended)
            yield (*pane_visibility(methods), *(gr.skip(),) * (len(outputs) - len(METHODS)))
            race = RaceRequest(prompt=prompt, num_lookahead=num_lookahead, temperature=temperature, top_k=top_k,
                               top_p=top_p, max_new_tokens=max_new_tokens, seed=seed, show_rejected=show_rejected,
                               fused=fused, methods=methods, chat_template=chat_template, auto_drafts=auto_drafts,
                               tree_nodes=tree_nodes)
            for out in run_on_device(race, run_note=note, control=control):
                show = show_now.get(session, show_rejected)
                frame = out if show == bool(show_rejected) else with_panes_for(out, show)
                if control is not None and not control.yielding(frame[-1]):  # Stop: the panes keep the last frame
                    if control.stop_frame_due:  # Stop's line and the trace of that frame, in this stream
                        yield noted(stopped_frame(holder.loaded, control, len(outputs), show))
                    return
                yield noted(frame)
        finally:
            if control is not None:
                control.end()  # Stop, waiting for the race to end, replies now
            if started:
                slots.end(session)
            show_now.pop(session, None)
            if controls.get(session) is control:
                controls.pop(session, None)

    with gr.Blocks(title="PaSS Playground") as demo:
        ui = lay_out(holder, offer, lookahead_line(SETTING_RANGES["num_lookahead"][2]), HELP_TEMPLATE)
        inputs = [ui.prompt, ui.num_lookahead, ui.temperature, ui.top_k, ui.top_p, ui.max_new_tokens, ui.seed,
                  ui.show_rejected, ui.fused, ui.methods, ui.chat_template, ui.auto_drafts]
        ui.run_btn.click(on_press, [*inputs, ui.tree_nodes], [ui.run_md, ui.inspector_md, ui.inspector_plot],
                         preprocess=False, **INSTANT)
        ui.run_btn.click(None, None, None, js=RUN_ECHO_JS, **INSTANT)  # or the race runs
        ui.run_btn.click(None, None, None, js=RUN_SCROLL_JS, **INSTANT)  # in view
        ui.replay_btn.click(None, None, None, js=REPLAY_SCROLL_JS, **INSTANT)
        ui.replay_btn.click(lambda: inspector_outputs(INSPECTOR_HINT), None, [ui.inspector_md, ui.inspector_plot],
                            **INSTANT)  # a new replay: no token
        ui.wire_remeasure(holder, ui.state, ui.cost_plot, ui.cost_md, slots)
        # the teaching panels' events, before the race's listener (Run's listeners run in order: ``wire_panels``)
        after_race = wire_panels(ui.state, [*inputs, ui.tree_nodes], ui.wire_lessons, ui.wire_whatif, run=ui.run_btn,
                                 refused=refused)
        outputs = [*ui.panes, ui.newest_css, *ui.metrics, ui.greedy_md, ui.latency_plot, ui.cumulative_plot,
                   ui.hist_plot, ui.position_plot, ui.theory_plot, ui.theory_md, ui.cost_plot, ui.cost_md,
                   *ui.tree.outputs, ui.trace_download, ui.run_md, ui.lookahead_md, ui.state]
        # preprocess=False: every value reaches validate_inputs as sent, for it to refuse by name (a component's
        # own check, e.g. of the methods' choices, would answer an API caller with a bare "400 Bad Request")
        run_event = ui.run_btn.click(on_run, [*inputs, ui.tree_nodes], outputs, api_name="race",
                                     concurrency_limit=1, preprocess=False, show_progress="minimal",
                                     show_progress_on=ui.run_md,  # progress and a refusal: on the run line only
                                     validator=functools.partial(validate_inputs, offer=offer, holder=holder))
        # a refused file: one small mark, on the upload box (on the run line it said a finished race had failed)
        replay_event = ui.replay_btn.click(replay_listener(holder, controls), [ui.trace_upload, ui.show_rejected],
                                           outputs, api_name="replay", concurrency_limit=4,
                                           show_progress_on=ui.trace_upload, show_progress="minimal")
        wire_tree(ui, holder)  # first: its Previous / Next read the chosen node before the step handlers empty it
        for button, direction in ((ui.pause_btn, "pause"), (ui.previous_btn, PREVIOUS), (ui.next_btn, NEXT),
                                  (ui.resume_btn, RESUME)):  # busy; one press at a time
            wire_step_button(button, on_step(direction), [ui.state, ui.show_rejected], outputs,
                             echo=direction != RESUME)  # after Resume, no "Paused after step ..." under the buttons
        # a replay shows the panes of the trace's methods only (one ticked but not in the trace stood empty, as if it
        # had written nothing); a race shows the ticked methods' again (its first frame)
        replay_event.success(replay_panes, ui.state, ui.panes, **INSTANT)
        # preprocess=False: set_delay names a bad value (the slider's own check logged a traceback)
        for event, live in ((ui.slow_motion.change, False), (ui.slow_motion.input, True)):  # a lesson's: no live race
            event(slow_motion_handler(delays, controls, live), ui.slow_motion, None, preprocess=False, **INSTANT)
        for key, pane in zip(METHODS, ui.panes):
            pane.select(on_select(key), [ui.state, ui.show_rejected], [ui.inspector_md, ui.inspector_plot], **INSTANT)
            pane.select(None, None, None, js=SCROLL_TO_INSPECTOR_JS, **INSTANT)  # the answer in view
        demo.unload(on_unload)
        ui.lab_btn.click(None, None, None, js=SCROLL_TO_LAB_JS, **INSTANT)  # its progress, then its table, in view
        ui.lab_btn.click(lab_presser(slots), [ui.lab_prompt, ui.lab_runs], None, preprocess=False, **INSTANT)
        # preprocess=False: N reaches validate_lab as sent, refused by name (the slider's own check logs a traceback)
        lab_event = ui.lab_btn.click(on_lab, [ui.lab_prompt, ui.lab_runs], [ui.lab_plot, ui.lab_md], api_name="lab",
                                     concurrency_limit=1, preprocess=False, validator=lab_validator(holder),
                                     show_progress_on=ui.lab_md)  # the plot is hidden before the first lab
        after_race(run_event, lab_event, ui.lab_md, replay_event)  # the lesson strip answers after a race, or a lab
        ui.lab_stop_btn.click(lab_stopper(slots), ui.lab_md, ui.lab_md, **INSTANT)  # unqueued: while a lab runs
        # Stop: a live race answers in its own stream (``stopped_frame``); after Stop's reply, the hidden cancel
        # button takes a race still waiting in the queue out of it (on ZeroGPU, Stop cancels the race at once)
        ui.cancel_btn.click(None, None, None, cancels=[run_event], **INSTANT)
        ui.trace_download.click(download_hint, ui.trace_download, None, api_visibility="private")  # queued: a toast
        on_stop = stop_handler(holder, controls, slots)
        for stop in (ui.stop_btn, ui.steps_stop_btn):  # beside Run, and beside the step buttons over the panes
            stop.click(None, None, None, js=CLEAR_STEP_ECHO_JS, **INSTANT)  # "Stopping…" at once, then ...
            stop.click(on_stop, ui.state, [ui.run_md, ui.trace_download, ui.state],
                       cancels=[run_event] if spaces is not None else None, **INSTANT).then(
                None, None, None, js=CANCEL_RACE_JS, **INSTANT).then(None, None, None, js=STOP_ECHO_JS,
                                                                     **INSTANT)  # Stop's answer under the buttons
        ui.stop_btn.click(None, None, None, js=SCROLL_TO_PANES_JS, **INSTANT)  # and the panes in view, as Run does
        ui.show_rejected.change(on_toggle, [ui.state, ui.show_rejected], [*ui.panes, *ui.tree.panes],
                                js=HIDE_REJECTED_JS, **INSTANT)
        ui.methods.change(preview_panes, [ui.methods, ui.state], ui.panes, **INSTANT)
        for event in (ui.num_lookahead.change, ui.methods.change):  # queued, the latest value only
            event(lookahead_line, [ui.num_lookahead, ui.methods], ui.lookahead_md, api_visibility="private",
                  trigger_mode="always_last", show_progress="hidden")
        polled = [ui.status, ui.model_md, ui.lookahead_md, ui.timer]
        for event in (ui.timer.tick, demo.load):
            event(poll, [ui.num_lookahead, ui.methods], polled, **INSTANT)
    return calm_queue(demo, QUEUE_MAX_SIZE)
