"""Pure display helpers for the race: step events and run summaries -> what the page shows.

Every function here takes ``pass_core.decoding`` objects (``StepEvent``, ``RunSummary``) keyed by
method key and returns a Plotly figure or a string (a pane's value: ``race_panes``). Nothing here
touches a model, a tensor or a tokenizer, and no metric is computed here: metrics, the speed-up
and the output comparison come from ``pass_core.decoding``. Names and colours of the methods come
from ``pass_core.registry.METHODS``.

Figures are built without a Plotly template on purpose: resolving a named template
costs about 30 ms per figure, ten times the rest, and the charts redraw every 2 s during a race.
"""

from __future__ import annotations

from itertools import accumulate

import plotly.graph_objects as go

from pass_core.decoding.events import TOKEN_LABELS, StepEvent
from pass_core.decoding.metrics import RunSummary
from pass_core.registry import BASELINE, METHODS
from pass_core.teaching.race import FIRST_PER_STEP
from playground.style import AXIS, BOTTOM_LEGEND

#: Okabe-Ito colour-blind-safe palette (Okabe & Ito 2008).
OKABE_ITO = {
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
    "black": "#000000",
}

#: How far a variant's colour is moved from its method's towards white (0: the same, 1: white).
VARIANT_TINT = 0.5
#: Token label (as shown, ``TOKEN_LABELS`` values) -> colour, for ``gr.HighlightedText``
#: (which draws them at half opacity). Plain AR tokens are a neutral grey; the labels that
#: sit next to each other (rejected draft, then its resampled token) get colours far apart,
#: and rejected drafts are also struck through by the app's CSS (``rejected_css_selector``).
TOKEN_COLORS: dict[str, str] = {
    TOKEN_LABELS["target"]: "#BBBBBB",
    TOKEN_LABELS["exact"]: OKABE_ITO["sky_blue"],
    TOKEN_LABELS["accepted"]: OKABE_ITO["bluish_green"],
    TOKEN_LABELS["rejected"]: OKABE_ITO["vermillion"],
    TOKEN_LABELS["resampled"]: OKABE_ITO["yellow"],
    TOKEN_LABELS["bonus"]: OKABE_ITO["reddish_purple"],
}


STEP_MARK_CSS_SELECTOR = ".token-pane .token:not(.highlighted):has(.text.unlabeled)"
#: The step mark's look: a dotted line taller than the text, with a gap on each side and never selected with the
#: text, so that it cannot pass for a character ("|", "l", "I") in code; the zero-width space stays unseen.
STEP_MARK_CSS = (f"{STEP_MARK_CSS_SELECTOR} {{display: inline-block; border-left: 2px dotted #94a3b8; width: 0; "
                 "height: 1.6em; "
                 "margin: 0 5px !important; padding: 0 !important; vertical-align: middle; overflow: hidden; "
                 "user-select: none; background: none !important}")
#: Step axes span at least this many steps, so that a chart with one or two points mid-race keeps sane axes.
MIN_STEPS_SHOWN = 10


def short_name(key: str) -> str:
    """The registered method's short name (legends, metric lines), with a benchmark variant's suffixes
    ("parallelspec+auto" -> "ParallelSpec +auto"); the key itself if unregistered."""
    base, *variants = key.split("+")
    method = METHODS.get(base)
    return " +".join([method.short_name, *variants]) if method else key


def colour(key: str) -> str | None:
    """The registered method's line / bar colour; a variant "key+..." (a token tree, a benchmark variant) takes a
    lighter tint of its method's (``VARIANT_TINT``: "PaSS" and "PaSS +tree8" shared one colour, and their bars
    side by side could not be told apart); None (Plotly's default) if unregistered."""
    base, plus, _ = key.partition("+")
    method = METHODS.get(base)
    if not method:
        return None
    if not plus:
        return method.colour
    rgb = (int(method.colour[i:i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(c + (255 - c) * VARIANT_TINT):02x}" for c in rgb)


def dash(key: str) -> str:
    """The line style of a method's traces: dotted for a variant "key+...", beside its method's solid line."""
    return "dot" if "+" in key else "solid"


def legend_names(keys, fused: bool = False) -> dict[str, str]:
    """Method key -> legend name: the short name, with " (fused)" for fusable methods when fused."""
    return {key: short_name(key) + (" (fused)" if fused and key in METHODS and METHODS[key].fusable else "")
            for key in keys}


def pane_colours(key: str) -> dict[str, str]:
    """The token colours (label -> colour) a method's pane can show, for its legend: plain AR
    (``METHODS[key].drafter is None``) writes only "AR target" tokens, a drafting method every other label.
    An unregistered key gets every label."""
    method = METHODS.get(key)
    if method is None:
        return dict(TOKEN_COLORS)
    target = TOKEN_LABELS["target"]
    return {label: c for label, c in TOKEN_COLORS.items() if (label == target) == (method.drafter is None)}


def style_rgb(hex_colour: str) -> str:
    """"#RRGGBB" as the "r, g, b" that gradio writes into a ``gr.HighlightedText`` token's style attribute."""
    return ", ".join(str(int(hex_colour[i:i + 2], 16)) for i in (1, 3, 5))


def dark_legend_css() -> str:
    """Dark mode: each pane legend's chip in its colour as drawn on white (gradio lays it at half opacity), opaque,
    so that its black name reads as in light mode with the dark pane around it. A white legend row did that before,
    but it stood as a white strip a line tall across the pane: bare beside AR's one chip, alone before a race's first
    token."""
    def on_white(colour: str) -> str:
        return "#" + "".join(f"{(int(colour[i:i + 2], 16) + 255) // 2:02x}" for i in (1, 3, 5))
    return "\n".join(f'.dark .token-pane .legend-item[style*="{style_rgb(c)}"] {{background: {on_white(c)} !important}}'
                     for c in TOKEN_COLORS.values())


def rejected_css_selector() -> str:
    """CSS selector of a rejected draft's text in a ``gr.HighlightedText`` pane (by its colour, ``style_rgb``)."""
    return f'.token-pane .token[style*="{style_rgb(TOKEN_COLORS[TOKEN_LABELS["rejected"]])}"] .text'


def _layout(x_title: str, y_title: str, revision: str = "race", **extra) -> dict:
    # no title: the gr.Plot label names the chart (its badge covers the top left: hence the top margin). The
    # legend sits at the bottom of the figure, under the x-axis title (Plotly widens the bottom margin to fit
    # it), so that however many rows it wraps into on a phone it never covers an axis or its title.
    # uirevision: Plotly.react keeps the user's zoom and hidden legend entries while it stays the same.
    layout = dict(
        height=340, margin=dict(l=55, r=15, t=35, b=10), uirevision=revision,
        paper_bgcolor="white", plot_bgcolor="white", font=dict(size=12),
        legend=BOTTOM_LEGEND,
        xaxis=dict(title=dict(text=x_title), **AXIS), yaxis=dict(title=dict(text=y_title), **AXIS),
    )
    layout.update(extra)
    return layout


def _step_axis(events: dict[str, list[StepEvent]], first: int = 1) -> dict:
    """An x axis over steps ``first``..max(last step, ``MIN_STEPS_SHOWN``), whole steps only."""
    last = max((e.step for evs in events.values() for e in evs), default=0)
    return dict(range=[first - 0.5, max(last, MIN_STEPS_SHOWN) + 0.5], tickformat="d")


def latency_figure(events: dict[str, list[StepEvent]], names: dict[str, str] | None = None,
                   revision: str = "race") -> go.Figure:
    """Model compute time of every step from step ``FIRST_PER_STEP`` on, in ms (``step_s``), one line per method.

    The first step (prompt prefill) is left out: its time is of another order and is stated apart
    (``prefill_line``). The y axis starts at 0; the x axis spans at least ``MIN_STEPS_SHOWN`` steps.

    Args:
        events: method key -> its events so far.
        names: method key -> legend name (default: ``legend_names``).
        revision: Plotly ``uirevision``, the same for every redraw of one race (keeps the user's zoom).
    """
    names = names or legend_names(events)
    traces = []
    for key, evs in events.items():
        later = [e for e in evs if e.step >= FIRST_PER_STEP]
        traces.append(go.Scatter(x=[e.step for e in later], y=[e.step_s * 1000 for e in later], name=names[key],
                                 mode="lines+markers", marker=dict(size=4),
                                 line=dict(color=colour(key), dash=dash(key))))
    layout = _layout("step (after the first: prompt prefill)", "ms (model compute)", revision)
    layout["xaxis"].update(_step_axis(events, FIRST_PER_STEP))
    layout["yaxis"].update(tickformat=",.0f", rangemode="tozero")
    return go.Figure(traces, layout)


def cumulative_figure(events: dict[str, list[StepEvent]], names: dict[str, str] | None = None,
                      revision: str = "race") -> go.Figure:
    """Generated tokens against accumulated compute time (s): the race itself (both axes from 0).

    The steeper line is the faster method; at equal compute time (the fair race of
    docs/algorithms.md section 7) the higher line has produced more text. ``revision``: Plotly ``uirevision``.
    """
    names = names or legend_names(events)
    traces = []
    for key, evs in events.items():
        x = [0.0, *accumulate(e.step_s for e in evs)]
        y = [0, *accumulate(len(e.new_token_ids) for e in evs)]
        traces.append(go.Scatter(x=x, y=y, name=names[key], mode="lines",
                                 line=dict(shape="hv", color=colour(key), dash=dash(key))))
    layout = _layout("compute time (s)", "generated tokens", revision)
    last = max((trace.x[-1] for trace in traces), default=0.0)  # 3 % room: the slowest line ran into the edge
    layout["xaxis"].update(rangemode="tozero", range=[0, last * 1.03] if last > 0 else None)
    layout["yaxis"].update(rangemode="tozero")
    return go.Figure(traces, layout)


def drafting_summaries(summaries: dict[str, RunSummary | None]) -> dict[str, RunSummary | None]:
    """The methods that draft (every key but the baseline, AR), in race order."""
    return {key: s for key, s in summaries.items() if key != BASELINE}


def acceptance_histogram_figure(summaries: dict[str, RunSummary | None],
                                names: dict[str, str] | None = None, revision: str = "race") -> go.Figure:
    """Share of verification steps that accepted 0, 1, ..., k drafts (``RunSummary.acceptance_histogram``).

    Args:
        summaries: method key -> its summary so far (None before its first step); AR is skipped.
        names: method key -> legend name (default: ``legend_names``).
        revision: Plotly ``uirevision``, the same for every redraw of one race.

    Returns:
        One bar group per accepted-draft count, one bar per drafting method.
    """
    names = names or legend_names(summaries)
    bars = []
    for key, summary in drafting_summaries(summaries).items():
        hist = summary.acceptance_histogram if summary else []
        bars.append(go.Bar(x=list(range(len(hist))), y=hist, name=names[key], marker=dict(color=colour(key)),
                           text=[f"{h:.0%}" for h in hist], textposition="inside", insidetextanchor="end"))
    layout = _layout("accepted drafts in the step", "share of verification steps", revision, barmode="group")
    layout["xaxis"].update(dtick=1, zeroline=False)
    layout["yaxis"].update(range=[0, 1.1], tickformat=".0%")
    # a label inside its bar, left out where it does not fit (outside the bars, on a phone, they ran together:
    # "80% 56% 45% 22%"); the y axis still reads every bar
    layout["uniformtext"] = dict(minsize=9, mode="hide")
    return go.Figure(bars, layout)


def position_acceptance_figure(summaries: dict[str, RunSummary | None],
                               names: dict[str, str] | None = None, revision: str = "race") -> go.Figure:
    """Acceptance by draft position i, conditional and unconditional (docs/algorithms.md section 6).

    Args:
        summaries: method key -> its summary so far (None before its first step); AR is skipped.
        names: method key -> legend name (default: ``legend_names``).
        revision: Plotly ``uirevision``, the same for every redraw of one race.

    Returns:
        Per drafting method a solid bar (conditional: accepted given verification reached i)
        and a hatched one (unconditional: accepted at i / verification steps). A position no
        verification reached has no conditional value (None): Plotly draws no bar, not 0 %.
        Positions are named d_i, the i-th draft of a step.
    """
    names = names or legend_names(summaries)
    traces = []
    for key, summary in drafting_summaries(summaries).items():
        uncond = summary.per_position_unconditional if summary else []
        cond = list(summary.per_position_conditional) if summary else []
        x = [f"d_{i}" for i in range(1, len(uncond) + 1)]
        c, full = colour(key), colour(key.partition("+")[0])
        traces.append(go.Bar(x=x, y=cond, name=f"{names[key]}: conditional", marker=dict(color=c)))
        # a tree entry's hatching in its method's full colour, crossed: in the lighter tint it was barely visible
        traces.append(go.Bar(x=x, y=uncond, name=f"{names[key]}: unconditional",
                             marker=dict(color="white", line=dict(color=full, width=1.5),
                                         pattern=dict(shape="x" if "+" in key else "/", fgcolor=full))))
    layout = _layout("draft position", "acceptance", revision, barmode="group")
    layout["yaxis"].update(range=[0, 1.05], tickformat=".0%")
    return go.Figure(traces, layout)
