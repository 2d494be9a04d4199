"""PaSS Playground: autoregressive decoding (AR) raced against speculative decoding methods.

``python app.py [--model NAME]`` serves on 127.0.0.1:7860 (GRADIO_SERVER_NAME /
GRADIO_SERVER_PORT override). Importing this module loads nothing and launches nothing:
``build_demo`` builds the page, ``ModelHolder`` loads the model in a background thread.

This file only wires the UI: the methods on offer come from ``pass_core.registry.METHODS``,
decoding, timing and metrics from ``pass_core`` (step events, ``summarize``), figures, token
colours, display strings and the page's CSS from ``pass_core.viz`` (``race_view``, ``race_charts``).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

try:  # Hugging Face's `spaces` package (ZeroGPU); imported before anything touches CUDA
    import spaces
except ImportError:
    spaces = None
if not hasattr(spaces, "GPU"):  # absent, or only this repo's spaces/ folder seen as a namespace package
    spaces = None

import gradio as gr

from pass_core.events import METRIC_FORMULAS
from pass_core.model_holder import ModelHolder, ModelNotReady
from pass_core.models import DEFAULT_MODEL, LoadedModel
from pass_core.race import race
from pass_core.registry import METHODS
from pass_core.settings import SETTING_RANGES, DecodeSettings
from pass_core.viz.race_charts import TOKEN_COLORS, highlighted_tokens
from pass_core.viz.race_view import METRIC_LABELS, PAGE_CSS, help_text, race_view, setting_range

EXAMPLES = [
    "Write a Python function that checks whether a string is a palindrome.",
    "Tell a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain in simple words how a rainbow forms.",
    "List five tips for learning a new language.",
    "Explique en quelques phrases pourquoi le ciel est bleu.",
]
#: The methods ticked when the page opens (every registered method can race).
DEFAULT_RACE = ("ar", "pass", "parallelspec")
UPDATE_INTERVAL_S = 0.25  # at most 4 page updates per second of wall time at the start of a race
CHART_EVERY = 4  # charts redraw on every 4th page update (figures are the browser's heaviest work)
TOKENS_PER_EXTRA_S = 400  # each 400 tokens on the page add 1 s between updates, so long races stay responsive
QUEUE_MAX_SIZE = 16
STOPPED_NOTE = "**Stopped.** The panes show what each method had produced when you pressed Stop."
LOAD_TIMEOUT_S = 600  # a Run pressed while the model loads waits this long at most
#: The "How to read this" help; ``help_text`` fills in the registered methods and the setting ranges.
HELP_TEMPLATE = (Path(__file__).resolve().parent / "assets" / "help" / "how-to-read.md").read_text(encoding="utf-8")


def gpu(duration):
    """``spaces.GPU(duration=...)`` where the ``spaces`` package exists (ZeroGPU), else a no-op."""
    return spaces.GPU(duration=duration) if spaces is not None else (lambda fn: fn)


def _whole(value):  # slider values arrive as floats; whole numbers go on as int (others fail validation)
    return int(value) if isinstance(value, float) and value.is_integer() else value


def make_settings(num_lookahead, temperature, top_k, top_p, max_new_tokens, seed, fused) -> DecodeSettings:
    """Validated ``DecodeSettings`` from UI values. Raises gr.Error with the setting's range."""
    try:
        return DecodeSettings(num_lookahead=_whole(num_lookahead), temperature=temperature, top_k=_whole(top_k),
                              top_p=top_p, max_new_tokens=_whole(max_new_tokens), seed=_whole(seed),
                              fused=bool(fused))
    except (TypeError, ValueError) as err:
        raise gr.Error(str(err)) from err


def _pick_message() -> str:
    names = ", ".join(m.short_name for m in METHODS.values())
    return f"Pick at least two methods to race (any two or more of {names})."


def race_keys(methods) -> tuple[str, ...]:
    """The chosen methods in pane (registry) order. Raises gr.Error unless two or more registered ones are chosen."""
    chosen = set(methods or ())
    unknown = chosen - set(METHODS)
    if unknown:
        raise gr.Error(f"Unknown method(s) {', '.join(sorted(unknown))}: choose from {', '.join(METHODS)}.")
    if len(chosen) < 2:
        raise gr.Error(_pick_message())
    return tuple(key for key in METHODS if key in chosen)


def render(events: dict, show_rejected: bool, greedy: bool, fused: bool, finished: bool, drafter_note: str,
           charts_now: bool = True) -> tuple:
    """Every output of the race (``race_view`` of the events so far), in ``build_demo``'s output order: one pane
    per registered method (empty when not racing; the page hides it), 5 metrics, greedy check, 4 figures (or
    ``gr.skip()`` unless ``charts_now``: Plotly redraws are the browser's heaviest work), run line, drafter line,
    ``gr.State`` dict."""
    view = race_view(events, show_rejected, greedy, fused, finished, with_figures=charts_now)
    return (
        *(view.panes.get(key, []) for key in METHODS),
        *(view.metrics[key] for key in METRIC_LABELS),
        view.greedy_check,
        *(view.figures or (gr.skip(),) * 4),
        view.run_line,
        drafter_note,
        {"events": events, "greedy": greedy, "fused": fused, "finished": finished, "note": drafter_note},
    )


def drafters_for(loaded: LoadedModel, keys, settings: DecodeSettings) -> tuple[dict, str]:
    """Each racing method's files (``Method.find_files``) and a markdown line per method that uses any.

    Returns:
        ({method key: what find_files returned} for the racing methods, note).

    Raises:
        ValueError: a shipped file that is corrupt or for another model (shown as gr.Error).
    """
    found, lines = {}, []
    for key in keys:
        found[key], note = METHODS[key].find_files(loaded, settings.num_lookahead)
        if note:
            lines.append(f"**{METHODS[key].label}:** {note}")
    return found, "  \n".join(lines) or "No racing method drafts: no files needed."


def race_handler(loaded: LoadedModel, prompt, num_lookahead, temperature, top_k, top_p, max_new_tokens, seed,
                 show_rejected=True, fused=False, methods=DEFAULT_RACE, *, update_interval_s: float = UPDATE_INTERVAL_S):
    """Race the chosen methods (pass_core.race: fair interleaving by compute time) and stream the page.

    ``methods`` holds two or more keys of ``METHODS``. Yields the outputs of ``render`` at most
    every ``update_interval_s`` seconds of wall time (one more second per ``TOKENS_PER_EXTRA_S``
    tokens already shown, so that the browser keeps up and Stop stays responsive in long races),
    and once more at the end. Raises gr.Error for bad settings, fewer than two methods or a bad prompt.
    """
    keys = race_keys(methods)
    settings = make_settings(num_lookahead, temperature, top_k, top_p, max_new_tokens, seed, fused)
    events = {key: [] for key in keys}
    try:
        found, note = drafters_for(loaded, keys, settings)
        decoders = {key: METHODS[key].decode(loaded, prompt, settings, found[key]) for key in keys}
        last, updates, tokens = float("-inf"), 0, 0
        for name, event in race(decoders):
            events[name].append(event)
            tokens += len(event.tokens)
            now = time.monotonic()
            if now - last >= update_interval_s * (1 + tokens / TOKENS_PER_EXTRA_S):
                last = now
                charts_now = updates % CHART_EVERY == 0
                updates += 1
                yield render(events, show_rejected, settings.greedy, settings.fused, False, note, charts_now)
    except ValueError as err:  # empty prompt, prompt too long, a drafter file for another model
        raise gr.Error(str(err)) from err
    yield render(events, show_rejected, settings.greedy, settings.fused, True, note)


def validate_inputs(prompt, num_lookahead, temperature, top_k, top_p, max_new_tokens, seed, show_rejected=True,
                    fused=False, methods=DEFAULT_RACE) -> list:
    """Check the race's inputs in the browser before the run starts: one ``gr.validate`` per input.

    The page then marks the faulty inputs with their messages instead of failing every output.
    ``race_handler`` checks the same again (and the prompt's length against the model's context),
    so API calls that skip this step still get a ``gr.Error``.
    """
    def check(**field):
        try:
            DecodeSettings(**{k: _whole(v) for k, v in field.items()})
            return gr.validate(True, "")
        except (TypeError, ValueError) as err:
            return gr.validate(False, str(err))

    chosen = set(methods or ())
    return [
        gr.validate(bool(str(prompt or "").strip()), "The prompt is empty: type a prompt or pick an example."),
        check(num_lookahead=num_lookahead), check(temperature=temperature), check(top_k=top_k),
        check(top_p=top_p), check(max_new_tokens=max_new_tokens), check(seed=seed),
        gr.validate(True, ""), gr.validate(True, ""),
        gr.validate(len(chosen) >= 2 and chosen <= set(METHODS), _pick_message()),
    ]


def gpu_duration(prompt, num_lookahead, temperature, top_k, top_p, max_new_tokens, seed=0, show_rejected=True,
                 fused=False, methods=DEFAULT_RACE) -> int:
    """Seconds of GPU to ask ZeroGPU for: a few forward passes per new token and racing method, plus slack."""
    try:
        return int(min(300, 20 + 0.05 * float(max_new_tokens) * max(2, len(methods or ()))))
    except (TypeError, ValueError):
        return 60


def rerender_panes(state, show_rejected):
    """Re-colour the panes from the last run (the toggle needs no new run)."""
    if not state:
        return (gr.skip(),) * len(METHODS)
    events = state["events"]
    return tuple(highlighted_tokens(events[key], show_rejected) if key in events else gr.skip()
                 for key in METHODS)


def pane_visibility(methods):
    """Show the panes of the chosen methods only (Run asks for two or more)."""
    chosen = set(methods or ())
    return tuple(gr.update(visible=key in chosen) for key in METHODS)


def build_demo(model: ModelHolder | LoadedModel) -> gr.Blocks:
    """Build the page around a model (a ``LoadedModel``, or a ``ModelHolder`` that may still be loading)."""
    holder = model if isinstance(model, ModelHolder) else ModelHolder(model.name, loaded=model)

    def lookahead_line(num_lookahead, methods=DEFAULT_RACE) -> str:
        if holder.loaded is None:
            return "**Look-ahead embeddings / drafters:** chosen once the model has loaded."
        keys = [key for key in METHODS if key in set(methods or ())]
        try:
            return drafters_for(holder.loaded, keys, DecodeSettings(num_lookahead=int(num_lookahead)))[1]
        except ValueError as err:
            return f"⚠ **Look-ahead embeddings / drafters:** {err}"

    def poll(num_lookahead, methods):
        return holder.status(), lookahead_line(num_lookahead, methods), gr.Timer(active=not holder.ready)

    @gpu(duration=gpu_duration)
    def run_on_device(*values):
        yield from race_handler(holder.loaded, *values)

    def on_run(prompt, num_lookahead, temperature, top_k, top_p, max_new_tokens, seed, show_rejected, fused, methods):
        values = (prompt, num_lookahead, temperature, top_k, top_p, max_new_tokens, seed, show_rejected, fused, methods)
        if not holder.ready:
            yield (gr.skip(),) * (len(outputs) - 3) + ("Waiting for the model to load…", gr.skip(), gr.skip())
        try:
            holder.wait(timeout_s=LOAD_TIMEOUT_S)
        except ModelNotReady as err:
            raise gr.Error(str(err)) from err
        yield from run_on_device(*values)

    rng = SETTING_RANGES
    with gr.Blocks(title="PaSS Playground") as demo:
        gr.Markdown("# PaSS Playground\nWatch **PaSS** (parallel speculative sampling, Monea, Joulin & Grave 2023) "
                    "race plain **autoregressive** decoding on the same model: one model drafts for itself with "
                    "learned look-ahead tokens, and verification keeps its output distribution exact. "
                    "**ParallelSpec** (Xiao et al. 2024) joins the race with a small trained parallel drafter.")
        status = gr.Markdown(holder.status(), elem_id="status-line")
        lookahead_md = gr.Markdown(lookahead_line(rng["num_lookahead"][2]), elem_id="drafter-line")
        with gr.Row():
            with gr.Column(scale=3):
                prompt = gr.Textbox(label="prompt", lines=4, placeholder="Type a prompt, or pick an example below.")
                gr.Examples(examples=[[e] for e in EXAMPLES], inputs=[prompt], label="examples")
                with gr.Row():
                    run_btn = gr.Button("Run", variant="primary")
                    stop_btn = gr.Button("Stop", variant="stop")
            with gr.Column(scale=2):
                with gr.Accordion("Settings", open=True):
                    methods = gr.CheckboxGroup([(m.label, key) for key, m in METHODS.items()],
                                               value=[key for key in DEFAULT_RACE if key in METHODS],
                                               label="methods to race", info="any two or more")
                    num_lookahead = gr.Slider(*rng["num_lookahead"], step=1, label="look-ahead tokens L",
                                              info="drafts per step: L learned [LA] tokens (PaSS), k [MASK] "
                                                   "tokens (ParallelSpec)")
                    temperature = gr.Slider(*rng["temperature"], step=0.05, label="temperature", info="0 = greedy")
                    with gr.Row():
                        top_k = gr.Slider(*rng["top_k"], step=1, label="top-k", info="0 = off")
                        top_p = gr.Slider(*rng["top_p"], step=0.01, label="top-p", info="1 = off")
                    with gr.Row():
                        max_new_tokens = gr.Slider(*rng["max_new_tokens"], step=1, label="max new tokens")
                        # range checked by validate_inputs (a Number's own min/max fails every output)
                        seed = gr.Number(rng["seed"][2], label="seed", precision=0, info=setting_range("seed"))
                    with gr.Row():
                        show_rejected = gr.Checkbox(True, label="show rejected drafts")
                        fused = gr.Checkbox(DecodeSettings().fused, label="fused step (extension)",
                                            info="beyond the paper, one forward pass per step: " +
                                                 ", ".join(m.short_name for m in METHODS.values() if m.fusable))
        with gr.Row(equal_height=True):
            panes = [gr.HighlightedText(label=m.label, color_map=TOKEN_COLORS, show_legend=True,
                                        show_inline_category=False, combine_adjacent=False,
                                        elem_classes="token-pane", elem_id=f"pane-{key}", visible=key in DEFAULT_RACE)
                     for key, m in METHODS.items()]
        greedy_md = gr.Markdown()
        with gr.Row():
            metrics = [gr.Textbox(label=label, info=METRIC_FORMULAS[key], interactive=False, min_width=180)
                       for key, label in METRIC_LABELS.items()]
        run_md = gr.Markdown()
        with gr.Row():
            latency_plot, cumulative_plot = gr.Plot(label="latency per step"), gr.Plot(label="tokens vs compute time")
        with gr.Row():
            hist_plot = gr.Plot(label="accepted drafts per verification step")
            position_plot = gr.Plot(label="acceptance by position")
        with gr.Accordion("How to read this", open=False):
            gr.Markdown(help_text(HELP_TEMPLATE), elem_id="how-to-read")
        state = gr.State(None)
        timer = gr.Timer(1.0, active=not holder.ready)

        inputs = [prompt, num_lookahead, temperature, top_k, top_p, max_new_tokens, seed, show_rejected, fused, methods]
        outputs = [*panes, *metrics, greedy_md, latency_plot, cumulative_plot, hist_plot, position_plot, run_md,
                   lookahead_md, state]
        run_event = run_btn.click(on_run, inputs, outputs, api_name="race", concurrency_limit=1,
                                  show_progress="minimal", validator=validate_inputs)
        stop_btn.click(lambda: STOPPED_NOTE, None, run_md, cancels=[run_event], api_visibility="private", queue=False)
        show_rejected.change(rerender_panes, [state, show_rejected], panes, api_visibility="private", queue=False)
        num_lookahead.change(lookahead_line, [num_lookahead, methods], lookahead_md, api_visibility="private",
                             trigger_mode="always_last", show_progress="hidden")
        methods.change(pane_visibility, methods, panes, api_visibility="private", queue=False)
        methods.change(lookahead_line, [num_lookahead, methods], lookahead_md, api_visibility="private")
        timer.tick(poll, [num_lookahead, methods], [status, lookahead_md, timer], api_visibility="private",
                   show_progress="hidden", queue=False)
        demo.load(poll, [num_lookahead, methods], [status, lookahead_md, timer], api_visibility="private",
                  show_progress="hidden", queue=False)
    demo.queue(max_size=QUEUE_MAX_SIZE)
    return demo


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, start loading the model and serve the page (blocks)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"model name for load_model (default {DEFAULT_MODEL})")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    args = parser.parse_args(argv)
    demo = build_demo(ModelHolder(args.model, args.device).start())
    demo.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
                theme=gr.themes.Soft(), css=PAGE_CSS, show_error=True)


if __name__ == "__main__":
    main()
