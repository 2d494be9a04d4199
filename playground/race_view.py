"""Everything the race page shows, as plain values: events in, panes / metric lines / figures out.

The page (``page``, ``layout``) only places these values in Gradio components; this module never imports
Gradio. Method names come from ``pass_core.registry.METHODS``, ranges from ``SETTING_RANGES``.
"""

from __future__ import annotations

from dataclasses import dataclass
from string import Template

import gradio as gr
import plotly.graph_objects as go

from pass_core.decoding.events import StepEvent, output_text
from pass_core.decoding.metrics import summarize
from pass_core.registry import METHODS
from pass_core.decoding.settings import GREEDY_BELOW, SETTING_RANGES

from . import race_charts as charts
from .race_panes import highlighted_tokens
from . import race_text as text
from playground.race_inputs import ZEROGPU_MAX_S
from playground.style import and_join

#: The page's header: the title and one line, short enough to leave the prompt on a phone's first screen.
TITLE = "# PaSS Playground\nSpeculative decoding races plain autoregressive decoding on one model."
#: The longer introduction, folded under "Model and drafters" with the model and drafter lines.
INTRO = ("Watch **PaSS** (parallel speculative sampling, Monea, Joulin & Grave 2023) race plain **autoregressive** "
         "decoding on the same model: one model drafts for itself with learned look-ahead tokens, and verification "
         "keeps its output distribution exact. **ParallelSpec** (Xiao et al. 2024) joins the race with a small "
         "trained parallel drafter.")

#: Metrics shown under the panes (keys of ``race_charts.metric_texts``), with the label shown to people.
METRIC_LABELS = {
    "tokens_per_s": "tokens/s",
    "speedup": "speed-up vs AR",
    "tokens_per_forward_pass": "tokens per forward pass",
    "mean_accepted_tokens": "mean accepted tokens per verification step",
    "acceptance_rate": "draft acceptance rate α",
}

#: On a phone, over the token inspector: its table is wider than the screen and scrolls sideways (nothing showed it).
INSPECTOR_SWIPE = "The table is wider than the screen: swipe it sideways for every column, the decision last."
LAB_SWIPE = "The table may be wider than the screen: swipe it sideways for every column, the verdict last."
#: A page listener that answers at once: outside the API and the queue, and without gradio's spinner, which asks the
#: browser for 60 frames a second for some 4 s after the answer removed it (its springs' loop, ``idle_frames``). Only
#: the race, the replay, the lab and the pass-cost measurement take long enough to show one.
INSTANT = dict(api_visibility="private", queue=False, show_progress="hidden")


def page_theme() -> gr.themes.Base:
    """Gradio's Soft theme with every text at WCAG's 4.5:1 or more (axe-core 4.14 found these under it): labels and
    info lines (3.6:1), subdued text (2.5:1: a slider's two ends, the upload's "- or -", the footer), white on
    indigo (4.46:1: Run, the ticked methods; Run lab under the pointer 2.98:1) and the accent (4.46:1: the chosen
    tab's name); in dark mode (Gradio follows the system's) the same, a pane's tokens and legend on white, as
    their half-transparent colours were chosen for (on the dark page black on them read 2.7-4.3:1, white 3.8:1), and
    a refusal under its input's label in a pale red (``PAGE_CSS``: gradio's red on the indigo label read 1.7:1)."""
    return gr.themes.Soft().set(block_info_text_color="*neutral_600", block_title_text_color="*primary_700",
                                block_label_text_color="*primary_700", body_text_color_subdued="*neutral_600",
                                button_primary_background_fill="*primary_600",
                                button_primary_background_fill_hover="*primary_700",
                                checkbox_label_background_fill_selected="*primary_600", color_accent="*primary_600",
                                button_primary_background_fill_dark="*primary_600",
                                button_primary_background_fill_hover_dark="*primary_700")


#: Page CSS: tight token boxes; rejected drafts hidden at once in the browser while "show rejected drafts" is off
#: (``HIDE_REJECTED_JS`` sets the class; the server re-renders the panes without them too, but an update already
#: on its way when the box was unticked would otherwise show them again for a moment); the token inspector's table scrolls sideways on a phone instead of wrapping each
#: letter; rejected drafts struck through (a mark that does not rely on colour alone); a
#: blank line between paragraphs kept (gradio draws each newline as an empty ``.line-break`` of no height, so
#: two in a row collapse into one); a dotted line between steps (``race_charts.STEP_MARK_CSS``); the range sliders
#: beside the number boxes without their own number box (it clamps typed values silently); the four settings
#: checkboxes two a line (four in a row cut their labels, on a desktop too); on a narrow screen a smaller title
#: and the checkboxes still two a line, the four step buttons two a line (three and one cut "◀ Previous step"
#: onto two lines) and a line over the inspector saying that its table scrolls sideways (``INSPECTOR_SWIPE``); the
#: step buttons' answer under them takes no room while empty; each chart's toolbar (on hover) keeps download, zoom,
#: pan and reset (selection, lasso, zoom in / out, autoscale and Plotly's logo do nothing useful here, and on a phone
#: their ten buttons ran under the chart's label); a focused slider, button, text box, radio, checkbox or token
#: ringed in indigo (gradio's showed none on a slider, a faint grey one on Run, a 2:1 border on the prompt box and a
#: blue circle on a radio: helper 79); the section headings for screen readers (``layout.HEADINGS``) out of sight,
#: in no room and no gap.
PAGE_CSS = f"""
.range-aid .head {{display: none}}
.sr-heading {{height: 0; width: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap;
              margin-top: calc(-1 * var(--layout-gap)) !important}}  /* no room, and no gap */
/* the focus ring: no comma inside :is() or :has() (gradio's scoping of the page's CSS splits selectors at every
   comma), and not the accent's colour (a primary button redefines it: a near-white ring on Run) */
input[type=range]:focus-visible, button:focus-visible, textarea:focus-visible, input[type=text]:focus-visible,
input[type=number]:focus-visible, label:has(> input[type=radio]:focus-visible),
label:has(> input[type=checkbox]:focus-visible), .token-pane .token:focus-visible {{
  outline: 2px solid var(--focus-ring) !important; outline-offset: 2px}}
:root {{--focus-ring: var(--primary-600)}} .dark {{--focus-ring: var(--primary-400)}}  /* 3:1 on the dark page too */
.token-pane {{min-height: 220px}}
.token-pane .textfield {{font-size: 15px; line-height: 1.8}}
.token-pane .token.highlighted {{margin: 0 1px 2px 0 !important; padding: 1px 1px !important}}
.token-pane .text {{white-space: pre-wrap}}
.dark .token-pane .textfield {{background: #fff; color: #000; --body-text-color: #000}}  /* tints for white; the tokens
   gradio dims while a legend chip is pointed at, and step marks, in gradio's body text colour (white on white) */
{charts.dark_legend_css()}
.dark [role=tab][aria-selected=true] {{color: var(--primary-400)}}  /* the accent is one colour in both modes */
/* a refusal's message, in its input's indigo label: red 100 (gradio's red 500 read 1.7:1, red 200 4.4:1); the box's
   red glow, gradio's, stays */
.dark div.validation-error {{--error-icon-color: var(--color-red-100)}}
.token-pane .line-break + .line-break {{height: 1.2em}}
.token-pane .empty {{flex-direction: column}}  /* before a race: what fills the pane, under gradio's icon */
.token-pane .empty::after {{content: "This method's tokens appear here during a race."; font-size: 14px;
  color: var(--block-info-text-color); margin-top: 6px; text-align: center}}
{charts.STEP_MARK_CSS}
/* a rejected draft struck through across its whole chip: a line through "," or "." alone read as ";" or ":" */
{charts.rejected_css_selector()} {{padding: 0 3px;
  background: linear-gradient(currentColor, currentColor) no-repeat 0 58% / 100% 1.5px}}
body.hide-rejected {charts.rejected_css_selector().removesuffix(" .text")} {{display: none}}
#step-echo:has(#step-echo-text:empty) {{display: none}}
.row:not(:has(> *)) {{display: none}}  /* a row of plots not drawn yet (hidden until their figures): no gap */
#settings-checks .form > .block {{min-width: 200px !important}}
#inspector-text table, #lab-table table {{display: block; overflow-x: auto; max-width: 100%; width: max-content}}
#inspector-text th, #inspector-text td, #lab-table th, #lab-table td {{white-space: nowrap; padding: 2px 8px}}
#trace-download, #replay-button, #lab-buttons {{align-self: center}}  /* buttons' height, not the row's */
#lab-table {{min-height: 4em}}  /* room for the lab's progress bar before the first table */
#lab-table:has(.progress-level) .prose {{visibility: hidden}}  /* the bar's label ran over the waiting line */
/* the runs counted above the bar's label, in the flow (on a phone the two texts were printed over each other) */
#lab-table .meta-text-center {{position: static !important; transform: none !important}}
#lab-table:has(.progress-level) {{min-height: 7em}}
/* a check group's or drop-down's refusal in the page's flow, above its label (it floated over the label) */
.block > .wrap:has(> .validation-error) {{position: static !important; background: none !important;
  padding: 0 !important; height: auto !important}}
.block > .wrap > .validation-error {{position: static !important; width: 100% !important; box-sizing: border-box}}
/* a refused Replay's mark (and its clear button) under the upload box's text, in the flow: they covered "Drop File
   Here" and, on a phone, the box's label */
#trace-upload:has(> [data-testid="status-tracker"] > .error) {{display: flex !important; flex-direction: column}}
#trace-upload > [data-testid="status-tracker"]:has(> .error) {{position: static !important; order: 2;
  flex-direction: row !important; justify-content: center !important; gap: 6px; background: none !important;
  height: auto !important; padding: 0 0 6px !important}}
#trace-upload > [data-testid="status-tracker"] > .clear-status {{position: static !important}}
.modebar-btn[data-val="select"], .modebar-btn[data-val="lasso"], .modebar-btn--logo,
.modebar-btn[data-attr="zoom"]:not([data-val="reset"]) {{display: none !important}}
@media (max-width: 640px) {{
  #page-title h1 {{font-size: 1.4em; margin: 0}}
  /* labels that wrap to two lines, in the flow: they covered the what-if chart's title, the upload's icon and the
     inspector chart's "drawn" mark, and the charts' toolbars lay over the long ones */
  :is(#whatif-plot, #trace-upload, #inspector-plot, #latency-plot, #cumulative-plot, #histogram-plot, #positions-plot,
      #theory-plot, #cost-plot, #tree-plot, #lab-plot) label[data-testid="block-label"].float {{
    position: static !important; margin-bottom: 4px}}
  #settings-checks .form > .block {{min-width: 140px !important}}
  #step-through > button {{flex: 1 1 40% !important; white-space: nowrap}}
  #examples .gallery-item .gallery {{white-space: nowrap !important; overflow: hidden; text-overflow: ellipsis}}
  #lab-table:has(table)::before {{content: "{LAB_SWIPE}"}}
  #inspector-text:has(table)::before {{content: "{INSPECTOR_SWIPE}"}}
  #lab-table table {{font-size: 0.9em}}  /* names on two or three lines: the verdicts fit a phone's width */
  #lab-table th, #lab-table td {{white-space: normal; overflow-wrap: normal; word-break: normal; padding: 2px 3px}}
  #inspector-text:has(table)::before, #lab-table:has(table)::before {{display: block; font-size: 0.85em;
    font-style: italic; color: var(--body-text-color-subdued)}}
}}
"""


#: Browser-side half of the "show rejected drafts" toggle: a class on the page's body (see ``PAGE_CSS``).
#: It runs before the toggle's handler, whose inputs are (the page state, the checkbox): it passes both on.
HIDE_REJECTED_JS = ("(state, show) => { document.body.classList.toggle('hide-rejected', !show); "
                    "return [state, show]; }")


@dataclass(frozen=True)
class RaceView:
    """What the page shows for the events so far.

    Attributes:
        panes: method key -> ``gr.HighlightedText`` value, for every racing method.
        metrics: ``METRIC_LABELS`` key -> display string naming each method.
        greedy_check: markdown, the output comparison (greedy) or why there is none (sampling).
        figures: latency, tokens vs compute time, acceptance histogram, acceptance by position;
            None when the charts are not redrawn this time; four Nones before the first step (nothing to draw).
        run_line: markdown, "Racing…" or "Finished." (then the finish view, ``race_text.finish_line``), the caller's
            note, a line per method that wrote nothing (``empty_output_notes``), one compute line per method and each
            method's first step (prefill) time.
    """

    panes: dict[str, list[tuple[str, str]]]
    metrics: dict[str, str]
    greedy_check: str
    figures: tuple[go.Figure | None, go.Figure | None, go.Figure | None, go.Figure | None] | None
    run_line: str


def empty_output_notes(events: dict[str, list[StepEvent]], chat_template: bool = True) -> list[str]:
    """One markdown line per finished method whose pane shows nothing, saying why (from its events alone).

    A run whose only committed token is the end-of-sequence token (``finish_reason`` "eos") "ended
    immediately"; a finished run whose output text is empty or blank "wrote no visible text". Both are common
    without the chat template (raw mode): a chat model given bare text often answers with EOS at once.

    Args:
        events: method key -> its ``StepEvent`` list so far.
        chat_template: the prompt was wrapped in the chat template (else the note suggests it).
    """
    advice = "try another prompt." if chat_template else "try with the chat template."
    notes = []
    for key, evs in events.items():
        if not evs or not evs[-1].finished:
            continue
        label = METHODS[key].short_name if key in METHODS else key
        tokens = sum(len(e.new_token_ids) for e in evs)
        if tokens == 1 and evs[-1].finish_reason == "eos":
            notes.append(f"⚠ **{label}:** the model ended immediately (EOS as its first token); {advice}")
        elif not output_text(evs).strip():
            notes.append(f"⚠ **{label}:** the model wrote no visible text ({tokens} token{'s' * (tokens != 1)}, "
                         f"ended by {evs[-1].finish_reason}); {advice}")
    return notes


def race_view(events: dict[str, list[StepEvent]], show_rejected: bool, greedy: bool, fused: bool,
              finished: bool, with_figures: bool = True, chat_template: bool = True, note: str = "",
              dtype: str = "float32", revision: str = "race", headline: str | None = None, baseline: str = ""
              ) -> RaceView:
    """Build every displayed value from the race's events (pure: no model, no Gradio).

    Args:
        events: method key -> its ``StepEvent`` list so far, for the racing methods in pane order.
        show_rejected: keep rejected drafts in the panes.
        greedy: temperature 0 (the outputs must then be identical).
        fused: the fused step ran (legends mark the fusable methods).
        finished: the race is over.
        with_figures: build the four figures (the browser's heaviest redraw) or leave them None; with no event
            in ``events`` the figures are four Nones (nothing to draw: the page hides the plots).
        chat_template: the prompts were wrapped in the chat template (``empty_output_notes`` advice).
        note: markdown put in the run line under "Racing…" / "Finished." (e.g. a cap on max new tokens).
        dtype: the model's dtype, for the greedy check's near-tie judgement.
        revision: the figures' Plotly ``uirevision``: one value per race, so that redraws keep the user's zoom
            and hidden legend entries, and a new race starts afresh.
        headline: the run line's first line (default "**Finished.**" or "**Racing…**"; the step-through's
            "**Paused** after step n …").
        baseline: what AR ran on (``race_text.baseline_label``), under the speed-up ("" for a replay).
    """
    summaries = {key: summarize(evs, key) for key, evs in events.items()}
    summaries = {key: (s if s.steps else None) for key, s in summaries.items()}
    names = charts.legend_names(events, fused)
    figures = None
    if with_figures and not any(events.values()):  # no step yet (a race's first update): no chart to draw, and
        figures = (None,) * 4  # four empty ones cost the browser as much as full ones: hidden until the first step
    elif with_figures:
        figures = (charts.latency_figure(events, names, revision), charts.cumulative_figure(events, names, revision),
                   charts.acceptance_histogram_figure(summaries, names, revision),
                   charts.position_acceptance_figure(summaries, names, revision))
    return RaceView(
        panes={key: highlighted_tokens(evs, show_rejected) for key, evs in events.items()},
        metrics=text.so_far(text.metric_texts(summaries, events, baseline, greedy),
                            not finished and any(events.values())),
        greedy_check=text.greedy_check(events, greedy, finished, dtype),
        figures=figures,
        run_line="  \n".join([headline or ("**Finished.**" if finished else "**Racing…**"),
                                *filter(None, [finished and headline is None and text.finish_line(summaries, events)]),
                                *([note] if note else []),
                                *empty_output_notes(events, chat_template), text.compute_line(summaries),
                                *filter(None, [text.prefill_line(events)])]),
    )


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def setting_range(name: str) -> str:
    """``SETTING_RANGES[name]`` as shown to people: "1–8", "0.01–1", "0–2,147,483,647"."""
    lo, hi, _ = SETTING_RANGES[name]
    return f"{_number(lo)}–{_number(hi)}"


def help_text(template: str) -> str:
    """The page's help from a template (``string.Template``): ``$methods`` (each registered method's
    label and description), ``$fusable`` (the methods the fused step applies to), ``$<setting>`` (each
    ``SETTING_RANGES`` range), ``$greedy_below`` (``GREEDY_BELOW``) and ``$zerogpu_s`` (``ZEROGPU_MAX_S``), so that the page never states other
    methods, ranges or limits than it has.

    Raises:
        KeyError: the template names an unknown placeholder.
    """
    fusable = and_join([m.short_name for m in METHODS.values() if m.fusable], none="no method")
    methods = "; ".join(f"**{m.label}**: {m.description}" for m in METHODS.values())
    ranges = {name: setting_range(name) for name in SETTING_RANGES}
    return Template(template).substitute(ranges, methods=methods, fusable=fusable, zerogpu_s=ZEROGPU_MAX_S,
                                         greedy_below=f"{GREEDY_BELOW:g}")
