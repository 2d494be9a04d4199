"""Theory beside measurement (issue 12, item 3): formulas by hand, a simulated Bernoulli process,
and a check on real events."""

from __future__ import annotations

import random

import pytest

from pass_core.decoding.events import DraftRecord, StepEvent, TokenRecord
from pass_core.registry import METHODS
from pass_core.decoding.settings import DecodeSettings
from pass_core.teaching.theory import (break_even_alpha, check_theory, expected_tokens, expected_tokens_by_position,
                              truncated_geometric)


def test_formulas_by_hand():
    assert truncated_geometric(0.5, 3) == pytest.approx([0.5, 0.25, 0.125, 0.125])
    assert truncated_geometric(0.0, 2) == [1.0, 0.0, 0.0] and truncated_geometric(1.0, 2) == [0.0, 0.0, 1.0]
    assert sum(truncated_geometric(0.37, 5)) == pytest.approx(1.0)
    assert expected_tokens(0.5, 3) == pytest.approx(1.875)  # 1 + 0.5 + 0.25 + 0.125
    assert expected_tokens(1.0, 3) == 4.0 and expected_tokens(0.0, 3) == 1.0
    assert expected_tokens_by_position([0.5, 0.5, 0.5]) == pytest.approx(expected_tokens(0.5, 3))
    assert expected_tokens_by_position([0.4, 0.25, None]) == pytest.approx(1 + 0.4 + 0.1)
    # E(alpha, 3) = 1.5 where alpha + alpha^2 + alpha^3 = 0.5: alpha = 0.34251 (0.34251 + 0.11731 + 0.04018);
    # with an exact token (PaSS) E + 1 = 2 needs E = 1, alpha = 0
    assert break_even_alpha(3, 1.5) == pytest.approx(0.34251, abs=1e-4)
    assert break_even_alpha(3, 2.0, extra_tokens=1) == 0.0
    assert break_even_alpha(1, 3.0) is None  # k + 1 = 2 tokens can never pay for 3 AR steps
    with pytest.raises(ValueError):
        truncated_geometric(1.5, 2)


def test_predicted_histogram_matches_a_simulated_bernoulli_process():
    """m = leading successes of k Bernoulli(alpha) draws: 200,000 simulated steps vs the formula."""
    rng = random.Random(0)
    for alpha, k in ((0.3, 3), (0.8, 4)):
        counts = [0] * (k + 1)
        for _ in range(200_000):
            m = 0
            while m < k and rng.random() < alpha:
                m += 1
            counts[m] += 1
        simulated = [c / 200_000 for c in counts]
        assert simulated == pytest.approx(truncated_geometric(alpha, k), abs=0.005)
        mean_tokens = sum((m + 1) * c for m, c in enumerate(counts)) / 200_000
        assert mean_tokens == pytest.approx(expected_tokens(alpha, k), abs=0.01)


def test_theory_check_on_real_events(tiny):
    settings = DecodeSettings(max_new_tokens=30, num_lookahead=3, temperature=1.0, top_k=3)
    ar = list(METHODS["ar"].decode(tiny, "hello", settings))
    for key, name, exact in (("pass", "PaSS", True), ("parallelspec", "ParallelSpec", False)):
        events = list(METHODS[key].decode(tiny, "hello", settings))
        check = check_theory(events, ar, name)
        assert check is not None and check.k == 3 and 0 <= check.alpha <= 1
        assert sum(check.predicted_histogram) == pytest.approx(1.0)
        assert check.predicted_tokens == pytest.approx(exact + expected_tokens(check.alpha, 3))
        assert check.cost > 0 and check.predicted_speedup == pytest.approx(check.predicted_tokens / check.cost)
        assert check.sentence.startswith(f"{name}: α = ") and "AR steps here" in check.sentence
    assert check_theory([], ar) is None and check_theory(events, ar[:1]) is None


def _step(accepted: int, k: int, exact: bool, step: int, cut: bool = False) -> StepEvent:
    """A verification step that accepted ``accepted`` of ``k`` drafts: (PaSS: an exact token,) the accepted
    drafts, the rejected draft and its resampled token, or the bonus token when all k were accepted. ``cut``:
    the token budget ended the step after the accepted drafts (no resampled / bonus token)."""
    tokens = [TokenRecord(1, "e", "exact")] if exact else []
    tokens += [TokenRecord(2, "a", "accepted")] * accepted
    if not cut:
        tokens += ([TokenRecord(3, "r", "rejected"), TokenRecord(4, "s", "resampled")] if accepted < k
                   else [TokenRecord(5, "b", "bonus")])
    drafts = tuple(DraftRecord(i + 1, 2, "a", 0.5, 0.5, 0.1 if i <= accepted else None,
                               "accepted" if i < accepted else "rejected" if i == accepted else "not_verified")
                   for i in range(k))
    return StepEvent("pass" if exact else "parallelspec", step, tuple(tokens), drafts, forward_passes=1 + exact,
                     step_s=0.01, num_verified_drafts=k, finish_reason="max_new_tokens" if cut else None)


def _run(histogram: list[int], exact: bool, cut_last: bool = False) -> list[StepEvent]:
    """One step per count of the histogram (index = accepted drafts), in order; ``cut_last``: the last step
    ends the run at the token budget."""
    k = len(histogram) - 1
    counts = [m for m, n in enumerate(histogram) for _ in range(n)]
    return [_step(m, k, exact, i + 1, cut=cut_last and i == len(counts) - 1) for i, m in enumerate(counts)]


AR = [StepEvent("ar", i + 1, (TokenRecord(9, "t", "target"),), step_s=0.01) for i in range(4)]


def test_the_cost_of_a_step_leaves_the_prefill_out_as_the_unit_and_the_speedup_do():
    """PaSS's first step verifies drafts and prefills the prompt: 600 ms, then 30 ms a step, against AR's 500 ms
    prefill then 10 ms a step. A verification step costs 3 AR steps (it said 8.18 with the prefill in), so the
    prediction is 2 tokens / 3 = 0.67x, the measured speed-up (it said 0.24x, and that PaSS could not win even if
    every draft were accepted)."""
    import dataclasses

    ar = [dataclasses.replace(e, step=i + 1, step_s=0.5 if i == 0 else 0.01) for i, e in enumerate(AR * 6)]
    pass_steps = [dataclasses.replace(e, step_s=0.6 if e.step == 1 else 0.03) for e in _run([11, 0, 0, 0], True)]
    check = check_theory(pass_steps, ar, "PaSS")
    assert check.cost == pytest.approx(3.0) and check.predicted_speedup == pytest.approx(2 / 3)
    assert check.measured_speedup == pytest.approx(2 / 3)
    assert "costs 3.00 AR steps" in check.sentence and "wins only if α rises above" in check.sentence
    # one verification step, the first: its time is all there is
    assert check_theory(pass_steps[:1], ar, "PaSS").cost == pytest.approx(60.0)


def test_alpha_on_judged_drafts_predicts_the_measured_mean_of_a_real_trace():
    """The palindrome trace's numbers (greedy, k = 3). PaSS: 21 / 9 / 0 / 0 steps accepting 0..3 drafts, 9 accepted
    of 39 judged (90 drafted): alpha = 0.231 predicts 2.30 tokens per verification step, measured 2.30.
    ParallelSpec: 11 / 15 / 3 / 3 of 32, 30 accepted of 59 judged (96 drafted), the last step cut by the budget:
    alpha = 0.508 predicts 1.90, measured 1.91. accepted / drafted (0.10, 0.31) would predict 2.11 and 1.44."""
    for histogram, exact, cut, alpha, counts, predicted, measured in (
            ([21, 9, 0, 0], True, False, 0.231, (9, 39, 90), 2.30, 2.30),
            ([11, 15, 3, 3], False, True, 0.508, (30, 59, 96), 1.90, 1.91)):
        check = check_theory(_run(histogram, exact, cut), AR, "m")
        assert (check.accepted, check.judged, check.drafted) == counts
        assert check.alpha == pytest.approx(alpha, abs=5e-4) and check.k == 3
        assert check.measured_tokens == pytest.approx(measured, abs=5e-3)
        assert check.predicted_tokens == pytest.approx(predicted, abs=5e-3)
        assert abs(check.predicted_tokens - check.measured_tokens) < 0.05
        # the other estimator, shown beside it on the page, misses by far more
        assert abs(check.drafted_predicted_tokens - check.measured_tokens) > 0.15
        assert f"α = {alpha:.2f} ({counts[0]} accepted of {counts[1]} judged drafts)" in check.sentence


def test_predicted_mean_equals_the_measured_mean_of_a_geometric_simulation():
    """Steps whose drafts are each accepted with probability alpha until the first rejection (the law's own
    process), turned into events: the predicted tokens per verification step equal the measured mean within
    sampling noise (20,000 steps: standard error < 0.01), for a method with and without PaSS's exact token;
    the per-position prediction agrees too, and accepted / drafted is far off."""
    rng = random.Random(1)
    for alpha, k, exact in ((0.6, 4, False), (0.35, 3, True)):
        counts = [0] * (k + 1)
        for _ in range(20_000):
            m = 0
            while m < k and rng.random() < alpha:
                m += 1
            counts[m] += 1
        check = check_theory(_run(counts, exact), AR)
        assert check.alpha == pytest.approx(alpha, abs=0.01)
        assert check.predicted_tokens == pytest.approx(check.measured_tokens, abs=0.03)
        assert check.predicted_tokens_by_position == pytest.approx(check.measured_tokens, abs=0.03)
        assert check.predicted_histogram == pytest.approx(check.measured_histogram, abs=0.01)
        assert check.measured_tokens - check.drafted_predicted_tokens > 0.1


def test_theory_view_shows_both_estimators_and_why():
    """The page's sentences give alpha on the judged drafts, alpha by position, and what accepted / drafted would
    predict (the trace's 2.11 and 1.44) with the reason it is not alpha."""
    from playground.theory_view import theory_markdown

    checks = {"pass": check_theory(_run([21, 9, 0, 0], True), AR, "PaSS"),
              "parallelspec": check_theory(_run([11, 15, 3, 3], False, True), AR, "ParallelSpec")}
    text = theory_markdown(checks, {"pass": "PaSS", "parallelspec": "ParallelSpec"})
    assert "PaSS: α = 0.23 (9 accepted of 39 judged drafts) at k = 3 predicts 2.30" in text
    assert "ParallelSpec: α = 0.51 (30 accepted of 59 judged drafts) at k = 3 predicts 1.90" in text
    assert "PaSS 9 / 90 = 0.10 would predict 2.11; ParallelSpec 30 / 96 = 0.31 would predict 1.44" in text
    assert "never judged" in text
    # by position: d_1 judged in all 30 steps, 9 accepted; d_2 judged in those 9, none accepted; d_3 never judged
    assert "PaSS 0.30 / 0.00 / – (predicts 2.30)" in text
