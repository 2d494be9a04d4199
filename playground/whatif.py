"""The "What if…" panel's values: predicted tokens per step and speed-up for a chosen alpha, k and pass-cost curve
(``pass_core.teaching.whatif``, docs/algorithms.md section 4), with this run's measured points marked. Pure:
numbers and events in, a Plotly figure and markdown out; no Gradio (``whatif_panel`` builds the accordion).
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pass_core.registry import METHODS
from pass_core.teaching.theory import check_theory
from pass_core.teaching.whatif import (FLAT_CURVE, H200_CURVE, WhatIfRow, parse_curve, speedup_with_overhead,
                                       step_overhead, what_if)
from playground.style import AXIS, BOTTOM_LEGEND
from playground.theory_view import trees_left_out

#: Cost-curve presets as the radio shows them.
MACHINE, H200, FLAT, TYPED = ("this machine (measured)", "H200 GPU (shipped)", "flat (GPU-like)", "typed in")
PRESETS = (MACHINE, H200, FLAT, TYPED)
#: The typed-in box's first value: a CPU-like curve, each token adding a fifth of a pass.
TYPED_EXAMPLE = "1, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2, 2.4, 2.6"
K_MAX = 8  # as the race's look-ahead range
#: The curves' colours: the chain in dark grey (no method's colour: every chain method's diamond sits on it), PaSS's
#: two-pass loop in PaSS's own colour (they were PaSS's green and AR's blue: a PaSS diamond seemed to belong to the
#: chain)
_CHAIN, _PASS = "#374151", METHODS["pass"].colour
NO_MACHINE_CURVE = ("*No physical pass-cost curve of this machine yet: it is measured once the model has loaded, and "
                    "a measurement that other programs disturbed is refused (*Pass cost on this machine* says why); "
                    "*Re-measure pass cost* (under the theory) measures it again. Pick another curve meanwhile; a page "
                    "without a model (replay only) has none.*")


def curve_for(preset: str, machine_curve: dict | None, typed: str) -> tuple[tuple[float, ...] | None, str]:
    """(c(1), c(2), ... for the preset, a short name for it) or (None, why there is none).

    Raises:
        ValueError: an unknown preset, or typed text that is not a list of positive numbers (naming the box).
    """
    if preset == MACHINE:
        if not machine_curve:
            return None, NO_MACHINE_CURVE
        return tuple(machine_curve["c"]), f"this machine ({machine_curve['device']}, {machine_curve['dtype']})"
    if preset == H200:
        return H200_CURVE, "H200, SmolLM2-135M, float32"
    if preset == FLAT:
        return FLAT_CURVE, "flat c(w) = 1"
    if preset == TYPED:
        return parse_curve(typed), "typed in"
    raise ValueError(f"cost curve: choose one of {', '.join(PRESETS)}, got {preset!r}.")


def run_points(events: dict | None, fused: bool = False) -> dict[str, tuple[int, float, float | None, float, str]]:
    """This run's measured points: method key -> (k, tokens per verification step, measured speed-up (None before
    AR has run), alpha on the judged drafts, "pass" for a two-pass look-ahead method else "chain"), from
    ``check_theory`` against AR; {} without AR or without a verification step."""
    if not events or "ar" not in events:
        return {}
    points = {}
    for key, evs in events.items():
        if key == "ar" or key not in METHODS:
            continue
        check = check_theory(evs, events["ar"], METHODS[key].short_name)
        if check is not None:
            loop = "pass" if METHODS[key].fusable and not fused else "chain"
            points[key] = (check.k, check.measured_tokens, check.measured_speedup, check.alpha, loop)
    return points


def whatif_figure(rows: list[WhatIfRow], k: int, points: dict | None = None, measured_here: bool = True) -> go.Figure:
    """Two panels over k = 1..: predicted tokens per step (top) and speed-up over AR (bottom) for the chain and
    PaSS's two-pass loop; the chosen k as a dotted line, AR's 1.0x as a grey line, and this run's measured points
    (filled, in the method's colour) over the curve of their loop. ``measured_here`` False (the curve is not this
    machine's): no measured speed-up is drawn (it was measured here; tokens per step hold on any machine)."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("tokens per step", "speed-up over AR"))
    ks = [r.k for r in rows]
    for name, tokens, speed, colour in (("chain (one verification pass)", [r.chain_tokens for r in rows],
                                         [r.chain_speedup for r in rows], _CHAIN),
                                        ("PaSS two-pass loop", [r.pass_tokens for r in rows],
                                         [r.pass_speedup for r in rows], _PASS)):
        fig.add_trace(go.Scatter(x=ks, y=tokens, mode="lines+markers", line=dict(color=colour), name=name,
                                 legendgroup=name), row=1, col=1)
        fig.add_trace(go.Scatter(x=ks, y=speed, mode="lines+markers", line=dict(color=colour), name=name,
                                 legendgroup=name, showlegend=False), row=2, col=1)
    for key, (mk, tokens, speed, alpha, loop) in (points or {}).items():
        method = METHODS[key]
        label = f"this run: {method.short_name} (α {alpha:.2f}, {'PaSS loop' if loop == 'pass' else 'chain'})"
        fig.add_trace(go.Scatter(x=[mk], y=[tokens], mode="markers", name=label, legendgroup=key,
                                 marker=dict(color=method.colour, size=13, symbol="diamond",
                                             line=dict(color="black", width=1))), row=1, col=1)
        if speed is not None and measured_here:
            fig.add_trace(go.Scatter(x=[mk], y=[speed], mode="markers", name=label, legendgroup=key, showlegend=False,
                                     marker=dict(color=method.colour, size=13, symbol="diamond",
                                                 line=dict(color="black", width=1))), row=2, col=1)
    fig.add_hline(y=1.0, line=dict(color="#9ca3af", dash="dash"), row=2, col=1)
    fig.add_vline(x=k, line=dict(color="#6b7280", dash="dot"))
    fig.update_xaxes(dtick=1, **AXIS)
    fig.update_xaxes(title_text="drafts per step k", row=2, col=1)
    fig.update_yaxes(rangemode="tozero", **AXIS)
    # t=60: the page's plot label sits over the figure's top-left corner; the first panel's title must clear it
    fig.update_layout(height=540, margin=dict(l=45, r=10, t=60, b=10), paper_bgcolor="white", plot_bgcolor="white",
                      legend=BOTTOM_LEGEND)
    return fig


def whatif_markdown(rows: list[WhatIfRow], alpha: float, k: int, curve_name: str, drafter_cost: float,
                    points: dict | None = None, measured_here: bool = True) -> str:
    """The numbers at the chosen k with the formulas they come from, and a line per measured point (its speed-up
    said to be this machine's, not the curve's, when ``measured_here`` is False)."""
    row = next((r for r in rows if r.k == k), None)
    if row is None:
        return f"⚠ The {curve_name} curve gives c(w) up to w = {rows[-1].k + 1 if rows else 1}: choose k ≤ " \
               f"{rows[-1].k if rows else 0}."
    lines = [f"At α = {alpha:.2f}, k = {k}, cost curve {curve_name}: c({k + 1}) = {row.pass_cost / 2:.2f}.",
             f"**Chain**: E = (1 − α^(k+1)) / (1 − α) = {row.chain_tokens:.2f} tokens per step for c(k+1) + c_d = "
             f"{row.chain_cost:.2f} AR steps (drafter c_d = {drafter_cost:.2f}): **{row.chain_speedup:.2f}x**.",
             f"**PaSS two-pass loop**: 1 + E = {row.pass_tokens:.2f} tokens per step (one exact token) for 2 c(k+1) = "
             f"{row.pass_cost:.2f} AR steps: **{row.pass_speedup:.2f}x**."]
    for key, (mk, tokens, speed, a, loop) in (points or {}).items():
        measured = "–" if speed is None else f"{speed:.2f}x"
        where = ("(the diamond; set α and k to match it to compare with its curve)" if measured_here else
                 f"on this machine, not with the {curve_name} curve: its diamond marks the tokens per step only")
        lines.append(f"This run, {METHODS[key].short_name}: α = {a:.2f} at k = {mk}, {tokens:.2f} tokens per "
                     f"verification step, measured {measured} {where}.")
    return "  \n".join(lines)


def overhead_line(events: dict | None, machine_curve: dict | None, row: WhatIfRow | None = None) -> str:
    """Why this run's diamonds can sit above the curve of "this machine": its AR steps took longer than the curve's
    one-token pass (sampling, the loop's bookkeeping and the page's events run outside the model), and the formula
    counts passes only, while AR pays that time on every token. With ``row`` (the chosen k's prediction), the same
    prediction with that time added to every step of both sides: h = (AR step − one-token pass) / one-token pass,
    in AR passes, so a step costing C AR passes and yielding T tokens gives T (1 + h) / (C + h) (a helper's race on
    the embedded model: 0.59x predicted, 0.77x measured; with h = 36.5 / 85.5 this gives 0.76x). "" without AR
    steps after the first or a curve."""
    pass_ms = machine_curve["ms"][0] if machine_curve else None
    h = step_overhead((events or {}).get("ar", []), pass_ms) if pass_ms else None
    if h is None:
        return ""
    step_ms = pass_ms * (1 + h)
    line = (f"This run's AR steps took {step_ms:.1f} ms each, the curve's one-token pass {pass_ms:.1f} ms: the "
            f"formula counts model passes only and leaves out the {step_ms - pass_ms:.1f} ms a step spends outside "
            "them, which AR pays on every token, so measured speed-ups can come out above the prediction.")
    if row is None:
        return line
    chain = speedup_with_overhead(row.chain_tokens, row.chain_cost, h)
    two_pass = speedup_with_overhead(row.pass_tokens, row.pass_cost, h)
    return (f"{line} With that time added to every step of both sides (h = {h:.2f} AR passes; a step costing C AR "
            f"passes for T tokens gives T (1 + h) / (C + h)): chain **{chain:.2f}x**, PaSS two-pass loop "
            f"**{two_pass:.2f}x**.")


def _control(value, label: str, lo: float, hi: float, whole: bool = False) -> float:
    """A slider's value as sent (the panel's listener does not preprocess: gradio's own check of an emptied or
    out-of-range box answered with its internals and logged a traceback). Raises ValueError naming the control."""
    kind = "a whole number" if whole else "a number"
    if value is None or value == "":
        raise ValueError(f"{label} is empty: type {kind} from {lo:g} to {hi:g}.")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{label} must be {kind} from {lo:g} to {hi:g}; got {value!r}.") from None
    if not lo <= number <= hi or (whole and number != int(number)):  # NaN fails the range too
        raise ValueError(f"{label} must be {kind} from {lo:g} to {hi:g}; got {value!r}.")
    return number


def whatif_view(alpha, k, preset: str, typed: str, drafter_cost, state: dict | None,
                machine_curve: dict | None = None) -> tuple[go.Figure | None, str]:
    """The panel for its controls and the page's race state (``race_handlers.render``'s last output: its events,
    ``fused`` and this machine's curve; ``machine_curve``, the curve measured when the model loaded, stands in
    before a race and for a replay); (None, a message naming the control) for bad input: an empty box, a value
    outside its slider's range, or a k that is not a whole number (``_control``)."""
    try:
        alpha = _control(alpha, "draft acceptance α", 0, 1)
        k = int(_control(k, "drafts per step k", 1, K_MAX, whole=True))
        drafter_cost = _control(drafter_cost, "drafter cost c_d", 0, 1)
        machine = ((state or {}).get("show") or {}).get("curve") or machine_curve
        curve, name = curve_for(preset, machine, typed)
        if curve is None:
            return None, name
        if len(curve) < 2:
            raise ValueError(f"c(w) typed in: give c(1) and at least c(2); got {len(curve)} value.")
        rows = what_if(alpha, curve, K_MAX, drafter_cost)
    except (TypeError, ValueError) as err:
        return None, f"⚠ {err}"
    points = run_points((state or {}).get("events"), bool((state or {}).get("fused")))
    text = whatif_markdown(rows, alpha, k, name, drafter_cost, points, preset == MACHINE)
    overhead = overhead_line((state or {}).get("events"), machine, next((r for r in rows if r.k == k), None)) \
        if preset == MACHINE and points else ""
    left_out = trees_left_out((state or {}).get("events"), TREES_LEFT_OUT)  # they were, unsaid (helper 70)
    return whatif_figure(rows, k, points, preset == MACHINE), "  \n".join(filter(None, (text, overhead, left_out)))


#: After a race with token trees: the panel's formula is a chain's (and PaSS's two-pass loop's).
TREES_LEFT_OUT = ("*Token-tree runs are left out here: the formula is a chain's, and a tree step's expected tokens "
                  "depend on its shape.*")
