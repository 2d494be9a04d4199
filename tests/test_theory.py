"""Theory beside measurement (issue 12, item 3): formulas by hand, a simulated Bernoulli process,
and a check on real events."""

from __future__ import annotations

import random

import pytest

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
        assert check.sentence.startswith(f"{name}: alpha = ") and "AR steps here" in check.sentence
    assert check_theory([], ar) is None and check_theory(events, ar[:1]) is None
