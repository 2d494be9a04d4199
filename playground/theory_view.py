"""Theory beside measurement for a race: the measured histogram of accepted drafts per verification step beside
the truncated-geometric prediction from the measured alpha (``pass_core.teaching.theory``: Leviathan et al.
2022, section 3; docs/algorithms.md sections 2 and 4), as a Plotly figure and sentences. Pure: events in, a figure and markdown out; no Gradio.
"""

from __future__ import annotations

import plotly.graph_objects as go

from pass_core.decoding.events import StepEvent
from pass_core.registry import METHODS, tree_entry_nodes
from pass_core.teaching.theory import TheoryCheck, check_theory
from playground.race_charts import short_name
from playground.style import BOTTOM_LEGEND, GRID, number


def theory_figure(checks: dict[str, TheoryCheck], names: dict[str, str], colours: dict[str, str],
                  revision: str = "race") -> go.Figure:
    """Accepted drafts per verification step: measured bars (solid) beside the truncated-geometric
    prediction from the measured alpha (outlined), one pair per drafting method. ``revision``: the Plotly
    ``uirevision`` (keeps the user's zoom across redraws)."""
    traces = []
    for key, check in checks.items():
        x = list(range(check.k + 1))
        traces.append(go.Bar(x=x, y=check.measured_histogram, name=f"{names[key]}: measured",
                             marker=dict(color=colours[key])))
        traces.append(go.Bar(x=x, y=check.predicted_histogram, name=f"{names[key]}: theory (α = {check.alpha:.2f})",
                             marker=dict(color="white", line=dict(color=colours[key], width=2))))
    # the layout goes to the constructor in one piece (as race_charts does): update_layout validates it
    # property by property, several times slower, and this figure redraws during the race
    layout = dict(barmode="group", height=360, xaxis=dict(title=dict(text="accepted drafts in the step"), dtick=1),
                  yaxis=dict(title=dict(text="share of verification steps"), range=[0, 1.05], tickformat=".0%",
                             gridcolor=GRID),
                  margin=dict(l=55, r=10, t=35, b=10), legend=BOTTOM_LEGEND, uirevision=revision,
                  paper_bgcolor="white", plot_bgcolor="white")
    return go.Figure(traces, layout)


def theory_markdown(checks: dict[str, TheoryCheck], names: dict[str, str] | None = None) -> str:
    """One line per method: expected vs measured tokens per verification step, predicted vs measured speed-up and
    the verdict sentence; then alpha by position, and what accepted / drafted (the estimator a student computes
    first) would predict, with why it is not alpha. ``names``: method key -> name (default: the key)."""
    names = names or {}
    lines = [check.sentence for check in checks.values()]
    by_position = [f"{names.get(key, key)} " + " / ".join(number(a, ".2f") for a in c.alpha_by_position)
                   + f" (predicts {c.predicted_tokens_by_position:.2f})" for key, c in checks.items()]
    lines.append("α by draft position d_1..d_k, accepted / judged there: " + "  ·  ".join(by_position))
    naive = [f"{names.get(key, key)} {c.accepted} / {c.drafted} = {c.drafted_alpha:.2f} would predict "
             f"{c.drafted_predicted_tokens:.2f}" for key, c in checks.items() if c.drafted > c.judged]
    if naive:
        lines.append("Why not accepted / drafted? " + "; ".join(naive) + ": the drafts after a step's first rejection "
                     "are never judged, and counting them as failures makes α too small.")
    return "  \n".join(lines)


#: Shown in place of the theory chart when it cannot be drawn.
THEORY_NEEDS_AR = "*Theory beside measurement needs AR in the race: its steps are the unit of cost.*"
THEORY_WAITING = ("*Theory beside measurement appears once a drafting method has verified drafts and AR has run a "
                  "step after its prefill (AR's steps are the unit of cost).*")
#: After the lines of a race with token trees: the chain's law (section 2.3) does not describe a tree step.
TREES_LEFT_OUT = ("*Token-tree runs are left out here: the truncated-geometric law is a chain's, and a tree step's "
                  "expected tokens depend on its shape (the pass-cost chart shows their tokens and cost per step "
                  "once this machine's curve is measured).*")
#: Shown before the first race.
THEORY_BEFORE_RACE = "*Theory beside measurement appears after a race with AR and a drafting method.*"


def theory_view(events: dict[str, list[StepEvent]], revision: str = "race") -> tuple[go.Figure | None, str]:
    """Theory beside measurement for a race: ``check_theory`` of each drafting method against AR.

    Args:
        events: method key -> its events so far (the race's).
        revision: the figure's ``uirevision`` (keeps the user's zoom across redraws).

    Returns:
        (the ``theory_figure``, or None when there is nothing to draw; ``theory_markdown``, or a short
        note: AR is not racing, or no method has verified drafts yet).
    """
    if "ar" not in events:
        return None, THEORY_NEEDS_AR
    checks = {}
    for key, evs in events.items():
        method = METHODS.get(key)
        if key != "ar" and method is not None:
            check = check_theory(evs, events["ar"], method.short_name)
            if check is not None:
                checks[key] = check
    if not checks:
        return None, THEORY_WAITING
    fig = theory_figure(checks, {k: METHODS[k].short_name for k in checks}, {k: METHODS[k].colour for k in checks},
                        revision)
    left_out = trees_left_out(events, TREES_LEFT_OUT)
    return fig, theory_markdown(checks, {k: METHODS[k].short_name for k in checks}) + (
        f"  \n{left_out}" if left_out else "")


def trees_left_out(events: dict | None, why: str) -> str:
    """``why``, then the race's token-tree entries by name ("Left out: PaSS +tree8."), or "" for a race without
    any: the theory and the what-if panel describe chains."""
    trees = [short_name(key) for key in events or {} if tree_entry_nodes(key)]
    return f"{why} Left out: {', '.join(trees)}." if trees else ""
