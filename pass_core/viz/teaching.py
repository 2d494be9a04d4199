"""Teaching views from events alone (issue 12): the token inspector, theory beside measurement, and
the losslessness lab's chart. Pure: events / results in, markdown and Plotly figures out; no Gradio.
"""

from __future__ import annotations

import plotly.graph_objects as go

from pass_core.events import StepEvent
from pass_core.inspection import TopN
from pass_core.lab import BROKEN, LabResult
from pass_core.registry import METHODS
from pass_core.theory import TheoryCheck, check_theory
from pass_core.trace import Trace

_P, _Q, _RESIDUAL, _DRAWN = "#0072B2", "#E69F00", "#009E73", "#D55E00"
#: As the race's charts (``race_charts._layout``): the legend under the x-axis title, in the figure's bottom
#: margin, so that however many rows it wraps into on a phone it never covers the plot area.
_BOTTOM_LEGEND = dict(orientation="h", yref="container", yanchor="bottom", y=0.0, xanchor="left", x=0.0)


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "–" if x is None else format(x, spec)


def inspector_markdown(event: StepEvent, method_label: str, lookahead: bool) -> str:
    """The inspector's table for one step: each draft d_i with q_i(d_i), p_i(d_i), min(1, p/q), the
    uniform draw u and the decision (PaSS: which look-ahead token LA_i drafted it), then the step's
    tokens and its drafting / verification times.

    Args:
        event: the step.
        method_label: the method's name, for the heading.
        lookahead: the method drafts with look-ahead tokens (PaSS): name LA_i per draft.
    """
    lines = [f"**{method_label}, step {event.step}**: drafting {event.drafting_s * 1000:.1f} ms, verification "
             f"{event.verification_s * 1000:.1f} ms, {event.forward_passes} target pass(es)"
             + (f", {event.drafter_passes} drafter pass(es)" if event.drafter_passes else "") + "."]
    if event.drafts:
        lines += ["", "| draft | token | q(d) | p(d) | min(1, p/q) | u | decision |", "|---|---|---|---|---|---|---|"]
        for d in event.drafts:
            ratio = min(1.0, d.p / d.q) if d.q > 0 and d.p == d.p else None
            source = f"d_{d.position}" + (f" (LA_{d.position})" if lookahead else "")
            lines.append(f"| {source} | `{d.text!r}` | {_fmt(d.q)} | {_fmt(d.p)} | {_fmt(ratio)} | {_fmt(d.u)} | "
                         f"{d.decision.replace('_', ' ')} |")
        lines.append("")
        lines.append("A draft is accepted when u < min(1, p/q); the first rejected one is replaced by a token "
                     "drawn from norm(max(0, p − q)); after the last accepted draft of a full step, a bonus "
                     "token is drawn from p.")
    else:
        lines.append("This step verified no draft (prefill, a gated step, or AR): its token comes from p directly.")
    tokens = ", ".join(f"`{t.text!r}` ({t.label})" for t in event.tokens)
    return "\n".join(lines + ["", f"Tokens: {tokens}"])


def inspector_figure(event: StepEvent, token_id: int, label: str, decode=str) -> go.Figure | None:
    """Bars for the distribution a token was drawn from, the drawn token marked.

    Resampled: top-n of p, q and the residual at the rejected position. Bonus: top-n of p_{k+1}.
    Exact / target: top-n of the p it came from. None when the event carries no inspector data.

    Args:
        decode: token id -> text for the axis (e.g. the tokenizer's decode; ``str`` by default).
    """
    by_position = {pi.position: pi for pi in event.inspection}
    if not by_position:
        return None
    if label == "resampled":
        entry = next((pi for pi in event.inspection if pi.residual is not None), None)
        series = [("p", entry.p, _P), ("q", entry.q, _Q), ("residual norm(max(0, p − q))", entry.residual, _RESIDUAL)]
    elif label == "bonus":
        entry = by_position.get(event.num_verified_drafts + 1)
        series = [("p (bonus position)", entry.p, _P)] if entry else []
    elif label == "exact" and 0 in by_position and event.tokens and event.tokens[0].token_id == token_id:
        series = [("p (exact token)", by_position[0].p, _P)]
    else:
        entry = by_position.get(1)
        series = [("p", entry.p, _P)] if entry else []
    series = [(name, top, colour) for name, top, colour in series if top is not None]
    if not series:
        return None
    ids = list(dict.fromkeys(i for _, top, _ in series for i in top.ids))
    names = [decode(i) for i in ids]
    fig = go.Figure([go.Bar(x=names, y=[_prob(top, i) for i in ids], name=name, marker=dict(color=colour))
                     for name, top, colour in series])
    if token_id in ids:
        fig.add_annotation(x=names[ids.index(token_id)], y=max(_prob(top, token_id) for _, top, _ in series),
                           text="drawn", showarrow=True, arrowcolor=_DRAWN, font=dict(color=_DRAWN))
    fig.update_layout(barmode="group", height=280, margin=dict(l=50, r=10, t=30, b=60), yaxis=dict(range=[0, 1.05]),
                      yaxis_title="probability", legend=dict(orientation="h", y=1.1))
    return fig


def _prob(top: TopN, token_id: int) -> float:
    return dict(zip(top.ids, top.probs)).get(token_id, 0.0)


def theory_figure(checks: dict[str, TheoryCheck], names: dict[str, str], colours: dict[str, str]) -> go.Figure:
    """Accepted drafts per verification step: measured bars (solid) beside the truncated-geometric
    prediction from the measured alpha (outlined), one pair per drafting method."""
    traces = []
    for key, check in checks.items():
        x = list(range(check.k + 1))
        traces.append(go.Bar(x=x, y=check.measured_histogram, name=f"{names[key]}: measured",
                             marker=dict(color=colours[key])))
        traces.append(go.Bar(x=x, y=check.predicted_histogram, name=f"{names[key]}: theory (α = {check.alpha:.2f})",
                             marker=dict(color="white", line=dict(color=colours[key], width=2))))
    fig = go.Figure(traces)
    fig.update_layout(barmode="group", height=360, xaxis=dict(title="accepted drafts in the step", dtick=1),
                      yaxis=dict(title="share of verification steps", range=[0, 1.05], tickformat=".0%",
                                 gridcolor="#e5e7eb"),
                      margin=dict(l=55, r=10, t=35, b=10), legend=_BOTTOM_LEGEND,
                      paper_bgcolor="white", plot_bgcolor="white")
    return fig


def theory_markdown(checks: dict[str, TheoryCheck]) -> str:
    """One line per method: expected vs measured tokens per verification step, predicted vs
    measured speed-up, and the verdict sentence."""
    return "  \n".join(check.sentence for check in checks.values())


def lab_figure(result: LabResult, names: dict[str, str], decode=str) -> go.Figure:
    """Each method's empirical distribution over the outcomes beside the exact law (outlined), in the method's
    colour (the broken rule grey, hatched), with its TV distance and pass / fail in the legend."""
    outcomes = sorted(result.exact, key=lambda x: -result.exact[x])
    # outcomes the law gives no mass (only a wrong rule draws them) after those it does, so that they show
    outcomes += sorted({x for dist in result.empirical.values() for x in dist} - set(outcomes))
    labels = []
    for x in outcomes:  # two outcomes may decode to the same text (e.g. partial UTF-8 bytes): keep bars apart
        label = "".join(decode(t) for t in x) or repr(x)
        labels.append(label if label not in labels else f"{label} {list(x)}")
    traces = [go.Bar(x=labels, y=[result.exact.get(x, 0.0) for x in outcomes], name="exact law",
                     marker=dict(color="white", line=dict(color="black", width=1.5)))]
    for key, dist in result.empirical.items():
        mark = "✓" if result.passed(key) else "✗"
        name = names.get(key, "broken rule: always accept" if key == BROKEN else key)
        method = METHODS.get(key)
        marker = dict(color=method.colour) if method else dict(color="#9ca3af", pattern=dict(shape="x"))
        traces.append(go.Bar(x=labels, y=[dist.get(x, 0.0) for x in outcomes], marker=marker,
                             name=f"{mark} {name}: TV {result.tv[key]:.3f}"))
    fig = go.Figure(traces)
    # no title (the table under the chart states N, the depth and the bound): a phone would cut it off
    fig.update_layout(barmode="group", height=420, yaxis=dict(title="probability", rangemode="tozero",
                                                              gridcolor="#e5e7eb"),
                      xaxis=dict(title=f"outcome ({result.depth} tokens)"), margin=dict(l=55, r=10, t=35, b=10),
                      legend=_BOTTOM_LEGEND,
                      paper_bgcolor="white", plot_bgcolor="white")
    return fig


#: The losslessness lab's defaults: a short prompt, and N runs per method (about a minute on a 2-core CPU
#: with the embedded model; see ``LAB_DEFAULT_RUNS``'s measurement in the app's README section).
LAB_PROMPT = "Once upon a time"
LAB_DEFAULT_RUNS = 50
LAB_INTRO = ("Each method continues the prompt by 3 tokens, N times with seeds 0..N-1 (temperature 1, top-k 2: at "
             "most 8 outcomes); the chart sets each method's shares beside the exact law computed from the model. "
             "A lossless method stays under the total-variation bound; the broken rule (PaSS that accepts every "
             "draft) does not.")
#: Shown in place of the theory chart when it cannot be drawn.
THEORY_NEEDS_AR = "*Theory beside measurement needs AR in the race: its steps are the unit of cost.*"
THEORY_WAITING = "*Theory beside measurement appears once a drafting method has verified drafts.*"


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
    fig = theory_figure(checks, {k: METHODS[k].short_name for k in checks}, {k: METHODS[k].colour for k in checks})
    fig.update_layout(uirevision=revision)
    return fig, theory_markdown(checks)


def replay_note(trace: Trace) -> str:
    """The run line's note for a replayed trace: model, prompt and the settings that shaped the race."""
    s = trace.settings
    return (f"Replay of a trace: {trace.model_name}, prompt {trace.prompt!r}, k = {s.num_lookahead}, temperature "
            f"{s.temperature:g}, top-k {s.top_k}, top-p {s.top_p:g}, seed {s.seed}.")


def lab_markdown(result: LabResult, names: dict[str, str]) -> str:
    """The lab's table: total-variation distance per method (and the broken rule) against the bound,
    with pass / fail."""
    lines = [f"{result.runs} seeded runs of {result.depth} tokens per method; TV must stay under the bound "
             f"{result.bound:.3f} (what sampling noise allows for {result.runs} runs).", "",
             "| method | TV distance | bound | lossless? |", "|---|---|---|---|"]
    for key, tv in result.tv.items():
        name = names.get(key, "broken rule: always accept" if key == BROKEN else key)
        verdict = "✓ pass" if result.passed(key) else "✗ fail"
        lines.append(f"| {name} | {tv:.3f} | {result.bound:.3f} | {verdict} |")
    return "\n".join(lines)
