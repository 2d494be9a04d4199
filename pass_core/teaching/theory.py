"""Theory beside measurement: what the measured acceptance predicts (Leviathan et al. 2022,
section 3; docs/algorithms.md sections 2 and 4).

With k drafts per step, each accepted with probability alpha independently (the i.i.d.
assumption of Leviathan et al.), the number m of accepted drafts in a step follows a truncated
geometric law and a verification step yields (1 - alpha^(k+1)) / (1 - alpha) tokens. A step that
costs c AR steps then runs at that many tokens per c: the predicted speed-up. alpha is measured on the judged
drafts only (accepted / judged, docs/algorithms.md section 6): the law describes the drafts the rule examines,
and the drafts after a rejection never are.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from pass_core.decoding.metrics import summarize
from pass_core.teaching.race import FIRST_PER_STEP, decode_speedup


def truncated_geometric(alpha: float, k: int) -> list[float]:
    """P(m) for m = 0..k accepted drafts: alpha^m (1 - alpha) for m < k, alpha^k for m = k.

    Raises:
        ValueError: alpha outside [0, 1] or k < 0.
    """
    _check(alpha, k)
    return [alpha ** m * (1 - alpha) for m in range(k)] + [alpha ** k]


def expected_tokens(alpha: float, k: int) -> float:
    """Expected tokens per verification step, accepted drafts plus the resampled / bonus token:
    (1 - alpha^(k+1)) / (1 - alpha), which is k + 1 at alpha = 1.

    Raises:
        ValueError: alpha outside [0, 1] or k < 0.
    """
    _check(alpha, k)
    return float(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


def expected_tokens_by_position(conditional: list[float | None]) -> float:
    """The same without the i.i.d. assumption: 1 + a_1 + a_1 a_2 + ... from per-position
    conditional acceptance rates a_i (a position never reached, None, ends the product)."""
    total, reach = 1.0, 1.0
    for rate in conditional:
        if rate is None:
            break
        reach *= rate
        total += reach
    return total


def break_even_alpha(k: int, cost: float, extra_tokens: int = 0) -> float | None:
    """The smallest alpha at which (extra_tokens + expected_tokens(alpha, k)) / cost reaches 1,
    by bisection; None when even alpha = 1 falls short (k + 1 + extra_tokens < cost).

    Raises:
        ValueError: k < 0 or cost <= 0.
    """
    if k < 0 or cost <= 0:
        raise ValueError(f"break_even_alpha needs k >= 0 and a positive cost, got k={k}, cost={cost}.")
    if extra_tokens + expected_tokens(1.0, k) < cost:
        return None
    if extra_tokens + expected_tokens(0.0, k) >= cost:
        return 0.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if extra_tokens + expected_tokens(mid, k) < cost else (lo, mid)
    return hi


@dataclass(frozen=True)
class TheoryCheck:
    """Theory against measurement for one drafting method in one run.

    Attributes:
        alpha: measured draft acceptance rate on the judged drafts (accepted / judged, docs/algorithms.md
            section 6): the rate the truncated-geometric law is fitted on.
        alpha_by_position: conditional acceptance of d_1..d_k (accepted at i / steps whose rule judged d_i;
            None for a position never judged).
        accepted / judged / drafted: the run's counts behind alpha (judged <= drafted).
        drafted_alpha: accepted / drafted, the estimator a student computes first (too small: it counts the
            drafts after a rejection, which no rule examined, as failures); None without drafts.
        k: drafts per verification step (the most any step verified).
        predicted_histogram / measured_histogram: share of verification steps accepting 0..k drafts.
        predicted_tokens / measured_tokens: tokens per verification step (PaSS's exact token
            included in both when the method has one).
        predicted_tokens_by_position: the same from ``alpha_by_position`` (no i.i.d. assumption).
        drafted_predicted_tokens: what ``drafted_alpha`` would predict (None without drafts).
        cost: measured cost of a verification step in AR steps (its mean model time / the mean of
            AR's steps after the prefill).
        predicted_speedup / measured_speedup: tokens per step / cost, and the race's speed-up after the first
            step (``race.decode_speedup``; None before both have a second step).
        break_even: the alpha at which this method would tie with AR at this cost (None: never).
        sentence: one sentence with this run's numbers: can speculation win here, and why.
    """

    alpha: float
    alpha_by_position: list[float | None]
    accepted: int
    judged: int
    drafted: int
    drafted_alpha: float | None
    k: int
    predicted_histogram: list[float]
    measured_histogram: list[float]
    predicted_tokens: float
    predicted_tokens_by_position: float
    drafted_predicted_tokens: float | None
    measured_tokens: float
    cost: float
    predicted_speedup: float
    measured_speedup: float | None
    break_even: float | None
    sentence: str


def check_theory(events, ar_events, name: str = "the method") -> TheoryCheck | None:
    """Compare a drafting method's run with the theory, using the AR run beside it (same race).

    alpha is accepted / judged drafts (``RunSummary.acceptance_rate``): with it the truncated-geometric law
    predicts the measured tokens per verification step (docs/algorithms.md sections 2.3 and 6).

    Args:
        events: the drafting method's ``StepEvent`` list.
        ar_events: AR's events from the same race: the mean model time of its steps after the
            first (the prefill) is the unit of cost; the method's verification steps after its first
            give the cost of a step in that unit.
        name: the method's name for the sentence.

    Returns:
        A ``TheoryCheck``, or None before the method has a verification step and AR two steps.
    """
    summary = summarize(events)
    verifying = [e for e in events if e.verified_drafts]
    ar_steps = [e.step_s for e in list(ar_events)[1:]]
    if not verifying or not ar_steps or summary.acceptance_rate is None or not sum(ar_steps):
        return None
    alpha, k = summary.acceptance_rate, len(summary.acceptance_histogram) - 1
    extra = int(any(t.label == "exact" for e in verifying for t in e.tokens))  # PaSS: 1 exact token per step
    predicted = extra + expected_tokens(alpha, k)
    naive = summary.drafted_acceptance_rate
    # the prefill left out on both sides, as in the speed-up: PaSS's step 1 verifies drafts and prefills the prompt
    # (it made a PaSS step cost 8.18 AR steps where its later steps cost 3); only a run whose one verification
    # step is its first keeps it
    timed = [e for e in verifying if e.step >= FIRST_PER_STEP] or verifying
    cost = statistics.fmean(e.step_s for e in timed) / statistics.fmean(ar_steps)
    speedup = decode_speedup(events, ar_events)  # the prefill step left out, as in the cost
    even = break_even_alpha(k, cost, extra)
    verdict = ("and speculation can win here" if even is not None and alpha >= even else
               f"and it wins only if α rises above {even:.2f}" if even is not None else
               f"and it cannot win here at k = {k}, even if every draft were accepted")
    sentence = (f"{name}: α = {alpha:.2f} ({summary.accepted_drafts} accepted of {summary.judged_drafts} judged "
                f"drafts) at k = {k} predicts {predicted:.2f} tokens per verification step "
                f"(measured {summary.mean_accepted_tokens:.2f}); a verification step costs {cost:.2f} AR steps "
                f"here, so the predicted speed-up is {predicted / cost:.2f}x (measured "
                f"{'-' if speedup is None else f'{speedup:.2f}x'}), {verdict}.")
    return TheoryCheck(alpha, list(summary.per_position_conditional), summary.accepted_drafts,
                       summary.judged_drafts, summary.drafted_tokens, naive, k, truncated_geometric(alpha, k),
                       list(summary.acceptance_histogram), predicted,
                       extra + expected_tokens_by_position(summary.per_position_conditional[:k]),
                       None if naive is None else extra + expected_tokens(naive, k),
                       summary.mean_accepted_tokens, cost, predicted / cost, speedup, even, sentence)


def _check(alpha: float, k: int) -> None:
    if not 0.0 <= alpha <= 1.0 or k < 0:
        raise ValueError(f"alpha must be in [0, 1] and k >= 0, got alpha={alpha}, k={k}.")
