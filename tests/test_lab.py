"""The losslessness lab (issue 12, item 4) on the tiny model: every method's empirical law is within
the bound of the exact one, the broken rule (always accept) is not."""

from __future__ import annotations

import pytest

from pass_core.teaching.lab import BROKEN, MAX_RUNS, run_lab, total_variation, tv_bound
from pass_core.registry import METHODS


def test_lab_passes_every_method_and_fails_the_broken_rule(tiny):
    """300 runs of 3 tokens, top-k 2 (8 outcomes). Measured: bound 0.18; TV of the methods
    0.05-0.10 (ar 0.048, pass 0.057, fixed-token 0.057, parallelspec 0.103), of the broken rule 1.0."""
    calls = []
    result = run_lab(tiny, "ab", runs=300, progress=lambda done, total: calls.append((done, total)))
    assert len(result.exact) == 8 and sum(result.exact.values()) == pytest.approx(1.0)
    assert set(result.tv) == set(METHODS) | {BROKEN}
    for key in METHODS:
        assert result.passed(key), f"{key}: TV {result.tv[key]:.3f} >= bound {result.bound:.3f}"
    assert not result.passed(BROKEN), f"broken rule TV {result.tv[BROKEN]:.3f} under bound {result.bound:.3f}"
    assert calls[-1] == (300 * (len(METHODS) + 1),) * 2 and len(calls) == 300 * (len(METHODS) + 1)


def test_lab_arithmetic_and_limits(tiny):
    law = {(1,): 0.5, (2,): 0.5}
    assert total_variation(law, {(1,): 0.7, (2,): 0.3}) == pytest.approx(0.2)
    assert total_variation(law, {(3,): 1.0}) == pytest.approx(1.0)
    assert tv_bound(law, 100) == pytest.approx(3 * 0.5 * 2 * (2 * 0.25 / (3.141592653589793 * 100)) ** 0.5)
    with pytest.raises(ValueError, match="runs"):
        run_lab(tiny, "ab", runs=MAX_RUNS + 1)
    with pytest.raises(ValueError, match="Unknown method"):
        run_lab(tiny, "ab", runs=2, keys=["medusa"])
