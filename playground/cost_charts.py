"""This machine's pass-cost curve beside what each method yields per step.

A step that yields E tokens and costs C AR steps (one-token target passes) runs at E / C times AR's speed,
so the chart puts the measured curve c(w) (the cost of one pass over w tokens, ``pass_cost``) beside each
method's measured tokens per step and cost per step. Pure: curve dicts and events in, a Plotly figure and
markdown out; no Gradio, no model.
"""

from __future__ import annotations

import plotly.graph_objects as go

from pass_core.decoding.events import StepEvent
from pass_core.runtime.pass_cost import busy_warning
from pass_core.decoding.text import count
from pass_core.teaching.race import cost_points

from playground.race_charts import colour, short_name
from playground.style import AXIS, BOTTOM_LEGEND


def pass_cost_figure(curve: dict, points: dict[str, tuple[float, float, float]] | None = None,
                     revision: str = "race") -> go.Figure:
    """c(w) for w = 1..16 (black line), and per method its tokens per step (filled marker) and its cost per
    step in AR steps (open marker) at its mean verification width: a method is faster than AR where its
    filled marker is above its open one.

    Args:
        curve: ``pass_cost.measure_pass_cost``'s dict ("widths", "c", "ms", "device", "dtype", "threads").
        points: ``cost_points`` of a race or benchmark (None: the curve alone).
        revision: Plotly ``uirevision`` (keeps the user's zoom across redraws).
    """
    threads = count(curve["threads"], "thread")
    traces = [go.Scatter(x=curve["widths"], y=curve["c"], mode="lines+markers", line=dict(color="black"),
                         name=f"c(w) ({curve['dtype']}, {threads})")]  # short: a phone's legend cut longer names
    for key, (width, tokens, cost) in (points or {}).items():
        if key == "ar":
            continue
        traces.append(go.Scatter(x=[width], y=[tokens], mode="markers", marker=dict(color=colour(key), size=12),
                                 cliponaxis=False,  # a marker at the top edge was cut in half
                                 name=f"{short_name(key)}: tokens per step ({tokens:.2f})", legendgroup=key))
        traces.append(go.Scatter(x=[width], y=[cost], mode="markers", legendgroup=key, cliponaxis=False,
                                 marker=dict(color="white", size=12, line=dict(color=colour(key), width=2)),
                                 name=f"{short_name(key)}: cost per step ({cost:.2f} AR steps)"))
    return go.Figure(traces, _layout(revision))


def _layout(revision: str) -> dict:
    """The cost chart's layout, with a curve in use or a refused one alone (that one stood on Plotly's grey
    default, its axes unnamed)."""
    return dict(height=360, margin=dict(l=55, r=15, t=35, b=10), uirevision=revision, paper_bgcolor="white",
                plot_bgcolor="white", font=dict(size=12), legend=BOTTOM_LEGEND,
                # two lines, ticks as Plotly spaces them: on a phone the one-line title was cut at both ends and
                # 17 ticks stood on end
                xaxis=dict(title=dict(text="tokens per pass w<br>(a method: its mean verification pass)"), **AXIS),
                yaxis=dict(title=dict(text="AR steps or tokens"), rangemode="tozero", **AXIS))


def pass_cost_markdown(curve: dict, points: dict[str, tuple[float, float, float]] | None = None) -> str:
    """One line on the curve (c(2), c(4), c(8) and the one-token pass time) and one per method: tokens per step
    against cost per step, and the speed-up over AR that follows."""
    c = dict(zip(curve["widths"], curve["c"]))
    widths = ", ".join(f"c({w}) = {c[w]:.2f}" for w in (2, 4, 8) if w in c)
    threads = count(curve["threads"], "thread")
    lines = [f"This machine ({curve['device']}, {curve['dtype']}, {threads}): a one-token pass after "
             f"{curve.get('cache_len', 200)} tokens takes {curve['ms'][0]:.1f} ms; {widths}. A step wins over AR "
             "when it yields more tokens than it costs in AR steps. "
             + ("These lines average every step after the first (prefill), gated and plain steps included; "
                "*Theory beside measurement* counts verification steps only, so its numbers differ."
                if any(key != "ar" for key in points or {}) else
                "A race puts each drafting method's tokens and cost per step beside the curve.")]
    if busy_warning(curve):
        lines.append(f"**{busy_warning(curve)}**")
    if curve.get("confirmed_dips"):  # pass_cost._measure: the same dip in two measurements
        lines.append(f"A wider pass is cheaper here at w = {', '.join(map(str, curve['confirmed_dips']))} "
                     "(measured twice): this CPU's matrix kernels favour that width.")
    for key, (width, tokens, cost) in (points or {}).items():
        if key != "ar":
            verdict = "faster than AR" if tokens > cost else "slower than AR"
            most = "N + 1, the tree's nodes and the root" if "+tree" in key else "k + 1"  # "N + 1 = 5.4" misread
            lines.append(f"**{short_name(key)}**: {tokens:.2f} tokens per step for {cost:.2f} AR steps "
                         f"(verification passes {width:.1f} wide on average, at most {most}; a gated or cut step "
                         f"verifies fewer): {tokens / cost:.2f}x, {verdict}.")
    return "  \n".join(lines)


#: The cost chart's text before a race, and for a replay (the curve belongs to the machine that raced).
COST_WAITING = ("*The pass cost of this machine and each method's tokens and cost per step appear after a race; "
                "Re-measure pass cost draws the curve alone before one.*")
COST_NO_CURVE = ("*No pass-cost curve: a replayed trace does not carry the cost of the machine that ran it, so its "
                 "steps are not set against this machine's. A race here draws this machine's curve, and so does "
                 "Re-measure pass cost.*")


def refused_line(refused: tuple[dict, str], used: dict | None) -> str:
    """Why the newest curve was refused (``pass_cost.curve_problem``) and what stands in for it."""
    curve, problem = refused
    instead = ("the last physical curve measured here is used instead" if used else
               "no physical curve was measured here yet, so the cost chart, the what-if panel's *this machine* and "
               "cost-aware draft lengths have none")
    return (f"⚠ **This machine's newest pass-cost curve is not physical and was refused:** {problem}. It is drawn "
            f"greyed, and {instead}. Press *Re-measure pass cost* (best on an idle machine) to measure it again.")


def refused_trace(curve: dict) -> go.Scatter:
    """A refused curve, greyed and dotted: shown, never read."""
    return go.Scatter(x=curve["widths"], y=curve["c"], mode="lines+markers", opacity=0.5,
                      line=dict(color="#9ca3af", dash="dot"), marker=dict(color="#9ca3af"),
                      name="refused: not physical (not used)")


def cost_view(events: dict[str, list[StepEvent]], curve: dict | None, revision: str = "race",
              refused: tuple[dict, str] | None = None) -> tuple[go.Figure | None, str]:
    """The page's cost view of a race: ``pass_cost_figure`` with the race's ``cost_points`` and
    ``pass_cost_markdown``; (None, ``COST_NO_CURVE``) without a curve. ``refused``: (a curve that is not
    physical, why): drawn greyed beside ``curve`` (the curve in use, or None) and named first in the text."""
    if refused:
        line = refused_line(refused, curve)
        if not curve:
            return go.Figure([refused_trace(refused[0])], _layout(revision)), line
        points = cost_points(events, curve["ms"][0] / 1000)
        fig = pass_cost_figure(curve, points, revision).add_trace(refused_trace(refused[0]))
        return fig, line + "  \n" + pass_cost_markdown(curve, points)
    if not curve:
        return None, COST_NO_CURVE
    points = cost_points(events, curve["ms"][0] / 1000)
    return pass_cost_figure(curve, points, revision), pass_cost_markdown(curve, points)
