"""What if: predicted tokens per step and speed-up over AR for a chosen acceptance rate, number of drafts and
pass-cost curve (docs/algorithms.md section 4, "Predicted speed-up"; section 3, "Break-even").

A chain drafter (ParallelSpec's kind) verifies k drafts in one target pass over k + 1 tokens and pays its own
drafter pass, c_d AR steps; PaSS's two-pass loop pays a drafting and a verification pass over k + 1 tokens each
and gains one exact token per step:

    chain:  S = E_k / (c(k+1) + c_d)            E_k = (1 - alpha^(k+1)) / (1 - alpha)
    PaSS:   S = (1 + E_k) / (2 c(k+1))           = (2 + accepted drafts per step) / (2 c(k+1))

c(w) is a pass-cost curve (time of a pass over w tokens / a one-token pass, ``runtime.pass_cost``): this
machine's, the H200 curve shipped below, a flat "GPU-like" one, or one typed in. Pure numbers, no model.
"""

from __future__ import annotations

from dataclasses import dataclass

from pass_core.teaching.theory import expected_tokens

#: c(w), w = 1..16, of SmolLM2-135M-Instruct on one NVIDIA H200, float32, cache of 200 tokens: medians of 30
#: interleaved rounds, 35.7 ms for a one-token pass (torch 2.11.0+cu130; measured by the project's GPU
#: pass-cost script, RESULTS.md). A small model leaves the GPU idle: a wide pass costs about as much as a
#: narrow one.
H200_CURVE = (1.0, 1.059, 1.047, 1.027, 1.012, 1.042, 1.087, 1.047, 1.080, 1.116, 1.092, 1.125, 1.096, 1.116,
              1.113, 1.092)
#: A flat curve: every pass costs one AR step whatever its width (the ideal a large model on a GPU approaches).
FLAT_CURVE = (1.0,) * 16


def parse_curve(text: str, field: str = "c(w) typed in") -> tuple[float, ...]:
    """c(1), c(2), ... from text such as "1, 1.2, 1.5" (commas, spaces or semicolons), divided by c(1) so that
    c(1) = 1.

    Raises:
        ValueError: naming ``field``: no numbers, a word that is not a number, a value that is not positive, or a
            c(w) below c(1) (a pass over more tokens cannot cost less than a one-token pass).
    """
    parts = [p for p in str(text or "").replace(";", " ").replace(",", " ").split() if p]
    if not parts:
        raise ValueError(f"{field}: type the costs c(1), c(2), ... as numbers, e.g. 1, 1.1, 1.3, 1.6.")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        bad = next(p for p in parts if not _is_number(p))
        raise ValueError(f"{field}: {bad!r} is not a number; type c(1), c(2), ... e.g. 1, 1.1, 1.3.") from None
    if not all(v > 0 and v != float("inf") for v in values):
        raise ValueError(f"{field}: every cost must be a positive number, got {', '.join(parts)}.")
    cheaper = next((w for w, v in enumerate(values[1:], start=2) if v < values[0]), None)
    if cheaper:  # "1, 0.5, 0.2" predicted 14.5x: the app refuses such a curve when it measures one (pass_cost)
        raise ValueError(f"{field}: c({cheaper}) = {parts[cheaper - 1]} is below c(1) = {parts[0]}: a pass over "
                         f"{cheaper} tokens cannot cost less than a one-token pass.")
    return tuple(v / values[0] for v in values)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _cost(curve: tuple[float, ...], width: int) -> float:
    if not 1 <= width <= len(curve):
        raise ValueError(f"the cost curve gives c(1)..c({len(curve)}); k = {width - 1} drafts need c({width}).")
    return curve[width - 1]


def chain_speedup(alpha: float, k: int, curve, drafter_cost: float = 0.0) -> float:
    """Predicted speed-up of a chain drafter: E_k / (c(k+1) + c_d) (docs/algorithms.md section 4).

    Args:
        alpha: acceptance probability of each draft, 0..1.
        k: drafts per step, >= 1.
        curve: c(1), c(2), ...: at least k + 1 values.
        drafter_cost: c_d, the drafter's own pass in AR steps (0: free drafts).

    Raises:
        ValueError: alpha outside [0, 1], k < 1, a curve shorter than k + 1, a negative drafter cost.
    """
    if k < 1 or drafter_cost < 0:
        raise ValueError(f"k must be >= 1 and the drafter cost >= 0, got k={k}, drafter cost={drafter_cost}.")
    return expected_tokens(alpha, k) / (_cost(tuple(curve), k + 1) + drafter_cost)


def pass_speedup(alpha: float, k: int, curve) -> float:
    """Predicted speed-up of PaSS's two-pass loop: (1 + E_k) / (2 c(k+1)), i.e. (2 + accepted drafts per step)
    over two passes of k + 1 tokens (docs/algorithms.md sections 3 and 4).

    Raises:
        ValueError: alpha outside [0, 1], k < 1, or a curve shorter than k + 1.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got k={k}.")
    return (1 + expected_tokens(alpha, k)) / (2 * _cost(tuple(curve), k + 1))


@dataclass(frozen=True)
class WhatIfRow:
    """The prediction at one k.

    Attributes:
        k: drafts per step.
        chain_tokens / pass_tokens: expected tokens per step, E_k and 1 + E_k.
        chain_cost / pass_cost: a step's cost in AR steps, c(k+1) + c_d and 2 c(k+1).
        chain_speedup / pass_speedup: tokens / cost.
    """

    k: int
    chain_tokens: float
    pass_tokens: float
    chain_cost: float
    pass_cost: float
    chain_speedup: float
    pass_speedup: float


def what_if(alpha: float, curve, k_max: int, drafter_cost: float = 0.0) -> list[WhatIfRow]:
    """``WhatIfRow`` for k = 1..k_max, as far as the curve reaches (k + 1 <= len(curve)).

    Raises:
        ValueError: alpha outside [0, 1], k_max < 1, a negative drafter cost, or a curve of one value.
    """
    curve = tuple(curve)
    if k_max < 1 or len(curve) < 2:
        raise ValueError(f"what_if needs k_max >= 1 and c(1), c(2) at least, got k_max={k_max}, "
                         f"{len(curve)} cost(s).")
    rows = []
    for k in range(1, min(k_max, len(curve) - 1) + 1):
        tokens, c = expected_tokens(alpha, k), curve[k]
        rows.append(WhatIfRow(k, tokens, 1 + tokens, c + drafter_cost, 2 * c,
                              chain_speedup(alpha, k, curve, drafter_cost), pass_speedup(alpha, k, curve)))
    return rows


def step_overhead(ar_events, one_pass_ms: float) -> float | None:
    """h: the time AR's steps spend outside the model pass (sampling, the loop's bookkeeping, the events), in
    one-token passes: (mean ``step_s`` of AR's steps after the first, in ms − ``one_pass_ms``) / ``one_pass_ms``.
    The formulas above count passes only; AR pays h on every token. None without AR steps after the first, or
    when they took no longer than the pass."""
    later = [e.step_s for e in list(ar_events)[1:]]
    if not later or not one_pass_ms > 0:
        return None
    step_ms = 1000 * sum(later) / len(later)
    return (step_ms - one_pass_ms) / one_pass_ms if step_ms > one_pass_ms else None


def speedup_with_overhead(tokens: float, cost: float, h: float) -> float:
    """The speed-up of a step that yields ``tokens`` tokens for ``cost`` AR passes when every step of both sides
    also spends h passes outside the model (``step_overhead``): T (1 + h) / (C + h)."""
    return tokens * (1 + h) / (cost + h)
