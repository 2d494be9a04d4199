"""Pure display helpers for the app: step events and run summaries -> what the page shows.

Every function here takes ``pass_core.events`` objects (``StepEvent``, ``RunSummary``)
and returns a Plotly figure, a ``gr.HighlightedText`` value or a string. Nothing here
touches a model, a tensor or a tokenizer, and no metric is computed here: metrics come
from ``pass_core.events.summarize`` (the one exception is ``speedup``, the ratio of two
summaries' tokens/s, algorithms.md section 6).

Figures are built without a Plotly template on purpose: resolving a named template
costs about 30 ms per figure, ten times the rest, and the charts redraw ~10 times a second.
"""

from __future__ import annotations

from itertools import accumulate

import plotly.graph_objects as go

from pass_core.events import TOKEN_LABELS, RunSummary, StepEvent

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

#: Token label (as shown, ``TOKEN_LABELS`` values) -> colour, for ``gr.HighlightedText``
#: (which draws them at half opacity). Plain AR tokens are a neutral grey; the PaSS labels
#: that sit next to each other (rejected draft, then its resampled token) get colours far
#: apart, and rejected drafts are also struck through by the app's CSS.
TOKEN_COLORS: dict[str, str] = {
    TOKEN_LABELS["target"]: "#BBBBBB",
    TOKEN_LABELS["exact"]: OKABE_ITO["sky_blue"],
    TOKEN_LABELS["accepted"]: OKABE_ITO["bluish_green"],
    TOKEN_LABELS["rejected"]: OKABE_ITO["vermillion"],
    TOKEN_LABELS["resampled"]: OKABE_ITO["yellow"],
    TOKEN_LABELS["bonus"]: OKABE_ITO["reddish_purple"],
}

#: Line / bar colour per method key of the race.
METHOD_COLORS = {"ar": OKABE_ITO["blue"], "pass": OKABE_ITO["bluish_green"]}

_AXIS = dict(gridcolor="#e5e7eb", zerolinecolor="#d1d5db", linecolor="#9ca3af", showline=True)


def _layout(x_title: str, y_title: str, **extra) -> dict:
    # no title: the gr.Plot label names the chart
    layout = dict(
        height=300, margin=dict(l=55, r=15, t=30, b=45),
        paper_bgcolor="white", plot_bgcolor="white", font=dict(size=12),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0),
        xaxis=dict(title=dict(text=x_title), **_AXIS), yaxis=dict(title=dict(text=y_title), **_AXIS),
    )
    layout.update(extra)
    return layout


def highlighted_tokens(events: list[StepEvent], show_rejected: bool = True) -> list[tuple[str, str]]:
    """A ``gr.HighlightedText`` value: one (text, label) pair per token, in stream order.

    Args:
        events: one method's step events so far.
        show_rejected: keep rejected drafts (labelled "rejected draft", whitespace made
            visible by ``visible_text``); they are not part of the output, so hiding them
            leaves exactly the output text.

    Returns:
        [(text piece, label from ``TOKEN_LABELS``)]; tokens whose piece is "" (half of a
        multi-byte character) are left out: their text arrives with a later token.
    """
    out = []
    for event in events:
        for token in event.tokens:
            if token.committed:
                if token.text:
                    out.append((token.text, TOKEN_LABELS[token.label]))
            elif show_rejected:
                out.append((visible_text(token.text), TOKEN_LABELS[token.label]))
    return out


def visible_text(text: str) -> str:
    """A rejected draft's text with newlines, tabs and lone spaces shown as symbols.

    The draft is not part of the output, so its raw whitespace would only move the text around.
    """
    if not text:
        return "∅"
    text = text.replace("\n", "↵").replace("\t", "⇥")
    return text.replace(" ", "␣") if not text.strip() else text


def latency_figure(events: dict[str, list[StepEvent]], names: dict[str, str]) -> go.Figure:
    """Model compute time of every step in ms (step_s), one line per method.

    Args:
        events: method key -> its events so far.
        names: method key -> label for the legend.
    """
    traces = [go.Scatter(x=[e.step for e in evs], y=[e.step_s * 1000 for e in evs], name=names[key],
                         mode="lines+markers", marker=dict(size=4), line=dict(color=METHOD_COLORS.get(key)))
              for key, evs in events.items()]
    return go.Figure(traces, _layout("step", "ms (model compute)"))


def cumulative_figure(events: dict[str, list[StepEvent]], names: dict[str, str]) -> go.Figure:
    """Generated tokens against accumulated compute time (s): the race itself.

    The steeper line is the faster method; at equal compute time (the fair race of
    algorithms.md section 7) the higher line has produced more text.
    """
    traces = []
    for key, evs in events.items():
        x = [0.0, *accumulate(e.step_s for e in evs)]
        y = [0, *accumulate(len(e.new_token_ids) for e in evs)]
        traces.append(go.Scatter(x=x, y=y, name=names[key], mode="lines", line=dict(shape="hv", color=METHOD_COLORS.get(key))))
    return go.Figure(traces, _layout("compute time (s)", "generated tokens"))


def acceptance_histogram_figure(summary: RunSummary | None) -> go.Figure:
    """Share of steps that accepted 0, 1, ..., L drafts (``RunSummary.acceptance_histogram``)."""
    hist = summary.acceptance_histogram if summary else []
    bars = go.Bar(x=list(range(len(hist))), y=hist, marker=dict(color=METHOD_COLORS["pass"]),
                  text=[f"{h:.0%}" for h in hist], textposition="outside", cliponaxis=False, name="steps")
    layout = _layout("accepted drafts in the step", "share of steps", showlegend=False)
    layout["xaxis"].update(dtick=1)
    layout["yaxis"].update(range=[0, 1.1], tickformat=".0%")
    return go.Figure([bars], layout)


def position_acceptance_figure(summary: RunSummary | None) -> go.Figure:
    """Acceptance by look-ahead position i: conditional and unconditional (algorithms.md section 6)."""
    uncond = summary.per_position_unconditional if summary else []
    cond = [c if c is not None else 0.0 for c in (summary.per_position_conditional if summary else [])]
    x = [f"LA_{i}" for i in range(1, len(uncond) + 1)]
    traces = [
        go.Bar(x=x, y=cond, name="conditional", marker=dict(color=OKABE_ITO["blue"])),
        go.Bar(x=x, y=uncond, name="unconditional", marker=dict(color=OKABE_ITO["sky_blue"])),
    ]
    layout = _layout("draft position", "acceptance", barmode="group")
    layout["yaxis"].update(range=[0, 1.05], tickformat=".0%")
    return go.Figure(traces, layout)


def speedup(method: RunSummary | None, ar: RunSummary | None) -> float | None:
    """tokens/s of the method / tokens/s of AR in the same run; None before both have tokens."""
    if not method or not ar or not ar.tokens_per_s or not method.tokens_per_s:
        return None
    return method.tokens_per_s / ar.tokens_per_s


def _fmt(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def metric_texts(ar: RunSummary | None, pss: RunSummary | None) -> dict[str, str]:
    """Display strings of the headline metrics, keyed like ``METRIC_FORMULAS``."""
    ratio = speedup(pss, ar)
    return {
        "tokens_per_s": f"AR {_fmt(ar and ar.tokens_per_s, '.1f')}  ·  PaSS {_fmt(pss and pss.tokens_per_s, '.1f')}",
        "speedup": "–" if ratio is None else f"{ratio:.2f}×",
        "tokens_per_forward_pass": (f"AR {_fmt(ar and ar.tokens_per_forward_pass, '.2f')}  ·  "
                                    f"PaSS {_fmt(pss and pss.tokens_per_forward_pass, '.2f')}"),
        "mean_accepted_tokens": (f"AR {_fmt(ar and ar.mean_accepted_tokens, '.2f')}  ·  "
                                 f"PaSS {_fmt(pss and pss.mean_accepted_tokens, '.2f')}"),
        "acceptance_rate": "–" if pss is None or pss.acceptance_rate is None else
                           f"{pss.acceptance_rate:.1%} ({pss.accepted_drafts} of {pss.drafted_tokens} drafts)",
    }


def compute_line(ar: RunSummary | None, pss: RunSummary | None) -> str:
    """One line of compute-time facts per method (steps, forward passes, ms per step)."""
    parts = []
    for name, s in (("AR", ar), ("PaSS", pss)):
        if s and s.steps:
            parts.append(f"**{name}** {s.tokens} tokens in {s.steps} steps, {s.forward_passes} forward passes, "
                         f"{s.compute_time_s:.2f} s compute ({s.ms_per_step:.1f} ms/step)")
    return "  \n".join(parts)


def _committed(events: list[StepEvent]) -> list[tuple[int, str]]:
    return [(t.token_id, t.text) for e in events for t in e.tokens if t.committed]


def greedy_check(ar_events: list[StepEvent], pass_events: list[StepEvent], greedy: bool, finished: bool) -> str:
    """Markdown saying whether the PaSS output equals AR's (greedy only) and where it first differs.

    In greedy mode speculative decoding must reproduce AR token for token; a difference
    points at numerics (batched verification rounding differently near a tie) or a bug.
    """
    if not greedy:
        return ("Sampling (temperature > 0): the two outputs differ by design; "
                "PaSS keeps the target model's distribution, not its exact draws.")
    ar, pss = _committed(ar_events), _committed(pass_events)
    n = min(len(ar), len(pss))
    for i in range(n):
        if ar[i][0] != pss[i][0]:
            context = "".join(text for _, text in ar[max(0, i - 8):i])
            return (f"✗ **PaSS differs from AR at token {i}** (0-based): AR `{ar[i][1]!r}` vs PaSS "
                    f"`{pss[i][1]!r}`, after `{context[-40:]!r}`.")
    if finished and len(ar) == len(pss):
        return f"✓ **Greedy check: PaSS output is identical to AR** ({n} tokens)."
    if finished:
        return (f"✗ **Same first {n} tokens, but different lengths**: AR {len(ar)} tokens, PaSS {len(pss)}.")
    return f"… Greedy check: identical so far ({n} tokens compared)."
