"""The losslessness lab (issue 12, item 4) on the tiny model: every method's empirical law is within
the bound of the exact one, the broken rule (always accept) is not."""

from __future__ import annotations

import pytest

from pass_core.decoding.settings import DecodeSettings
from pass_core.registry import METHODS
from pass_core.teaching.lab import BROKEN, MAX_RUNS, exact_law, run_lab, total_variation, tv_bound
from sampling_design import ALPHA, BETA, Design, design

#: The broken rule's law is 1.0 away from the exact one on the tiny model (untrained drafts, accepted blindly,
#: leave its support); the lab's runs are chosen for power against any law at least this far away.
LAB_DELTA = 0.5


def lab_plan(loaded) -> Design:
    """Runs for the lab on ``loaded`` (prompt "ab", 3 tokens, top-k 2, as ``run_lab``'s defaults): the fewest for
    which the lab's own bound (``tv_bound``) keeps the false-alarm rate at most ALPHA and has power 1 - BETA against
    any law at TV >= LAB_DELTA (``sampling_design.design``)."""
    law = exact_law(loaded, "ab", DecodeSettings(max_new_tokens=3, temperature=1.0, top_k=2, num_lookahead=2), 3)
    return design(law, ALPHA, BETA, LAB_DELTA, fixed_bound=lambda runs: tv_bound(law, runs))


@pytest.mark.sampling
def test_lab_passes_every_method_and_fails_the_broken_rule(tiny):
    """n runs of 3 tokens, top-k 2 (8 outcomes), n from ``lab_plan``. Measured (`pytest tests/test_lab.py -s`):
    n = 100, bound 0.32; TV of the methods 0.10-0.13, of the broken rule 1.0."""
    plan, calls = lab_plan(tiny), []
    result = run_lab(tiny, "ab", runs=plan.runs, progress=lambda done, total: calls.append((done, total)))
    assert len(result.exact) == 8 and sum(result.exact.values()) == pytest.approx(1.0)
    assert result.bound == pytest.approx(plan.bound)
    assert set(result.tv) == set(METHODS) | {BROKEN}
    print(f"\nlab TV {result.tv}; {plan.describe()}")
    for key in METHODS:
        assert result.passed(key), f"{key}: TV {result.tv[key]:.3f} >= bound; {plan.describe()}"
    assert not result.passed(BROKEN), f"broken rule TV {result.tv[BROKEN]:.3f} under the bound; {plan.describe()}"
    total = plan.runs * (len(METHODS) + 1)
    assert calls == [(done, total) for done in range(total + 1)]  # a bar from the start, then one step a run


def test_lab_arithmetic_and_limits(tiny):
    law = {(1,): 0.5, (2,): 0.5}
    assert total_variation(law, {(1,): 0.7, (2,): 0.3}) == pytest.approx(0.2)
    assert total_variation(law, {(3,): 1.0}) == pytest.approx(1.0)
    assert tv_bound(law, 100) == pytest.approx(3 * 0.5 * 2 * (2 * 0.25 / (3.141592653589793 * 100)) ** 0.5)
    with pytest.raises(ValueError, match="runs"):
        run_lab(tiny, "ab", runs=MAX_RUNS + 1)
    with pytest.raises(ValueError, match="Unknown method"):
        run_lab(tiny, "ab", runs=2, keys=["medusa"])
    with pytest.raises(ValueError, match=r"Shorten the prompt to at most \d+ tokens\.$"):  # the lab has no length
        run_lab(tiny, "word " * 600, runs=2)                                              # setting to lower


def test_the_exact_law_ends_a_branch_at_eos_as_a_run_does():
    """With EOS a likely second token, runs stop there: their outcome is the first tokens up to and with EOS. The
    law enumerated every branch to its full depth past EOS, so AR itself (plain sampling) failed the lab at TV 0.41
    against a bound of 0.22. Now the law is the EOS-free one with every branch cut after its first EOS, and each
    outcome an AR run draws has mass in it."""
    from tiny import tiny_loaded

    loaded = tiny_loaded(seed=0)
    settings = DecodeSettings(max_new_tokens=3, temperature=1.0, top_k=2, num_lookahead=2)
    full = exact_law(loaded, "hello", settings, 3)
    second: dict[int, float] = {}
    for outcome, p in full.items():
        second[outcome[1]] = second.get(outcome[1], 0.0) + p
    eos = max(second, key=second.get)  # about 0.3 likely as the second token
    loaded.model.generation_config.eos_token_id = eos
    law = exact_law(loaded, "hello", settings, 3)
    cut: dict[tuple, float] = {}
    for outcome, p in full.items():
        short = outcome[:outcome.index(eos) + 1] if eos in outcome else outcome
        cut[short] = cut.get(short, 0.0) + p
    assert law.keys() == cut.keys() and all(law[x] == pytest.approx(cut[x]) for x in law)
    assert any(len(x) < 3 for x in law) and sum(law.values()) == pytest.approx(1.0)
    drawn = run_lab(loaded, "hello", runs=30, depth=3, top_k=2, keys=["ar"]).empirical["ar"]
    assert set(drawn) <= set(law) and any(len(x) < 3 for x in drawn), drawn
