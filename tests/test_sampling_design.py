"""The sampling tests' design (tests/sampling_design.py) checked by simulation: no model is run."""

from __future__ import annotations

import math

import numpy as np

from sampling_design import any_law_slack, design, total_variation, tv_floor


def test_any_law_slack_holds_at_every_q_and_is_tight():
    """P(Q(A) - empirical(A) >= t_beta) <= beta at every q = Q(A) (simulated), and a t 2 / n smaller fails at the
    worst q: the slack is the binomial law's, not a loose bound (Hoeffding's is larger)."""
    runs, beta, draws = 300, 0.01, 100_000
    t = any_law_slack(runs, beta)
    assert t < math.sqrt(math.log(1 / beta) / (2 * runs))
    rng = np.random.default_rng(0)
    worst_at_t, worst_below = 0.0, 0.0
    for q in np.linspace(0.05, 0.95, 37):
        shortfall = q - rng.binomial(runs, q, size=draws) / runs
        worst_at_t = max(worst_at_t, float((shortfall >= t).mean()))
        worst_below = max(worst_below, float((shortfall >= t - 2 / runs).mean()))
    noise = 4 * math.sqrt(beta * (1 - beta) / draws)
    assert worst_at_t <= beta + noise, (t, worst_at_t)
    assert worst_below > beta + noise, (t, worst_below)


def test_design_keeps_its_false_alarm_rate_and_power():
    """The plan for a law of 8 outcomes: b + t_beta <= delta at n, not at n - 25; and TV of n draws from the law
    itself exceeds b in about alpha of simulated tests (at most 3 alpha here)."""
    probs = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02])
    law = {(i,): float(p) for i, p in enumerate(probs)}
    plan = design(law, 1e-2, 1e-2, 0.2)
    assert plan.bound + plan.slack <= plan.delta
    assert plan.bound + any_law_slack(plan.runs - 25, 1e-2) > plan.delta or plan.runs == 25
    counts = np.random.default_rng(5).multinomial(plan.runs, probs, size=20_000)
    tv = 0.5 * np.abs(counts / plan.runs - probs).sum(axis=1)
    assert (tv >= plan.bound).mean() <= 3e-2


def test_tv_floor_is_the_tv_once_all_runs_are_made_and_never_above_it_before():
    """A negative control may stop once ``tv_floor`` exceeds b: that is sound only if the floor of the runs made so
    far is at most the TV of all runs, whatever the rest draw, and equals it once all are made (simulated)."""
    rng = np.random.default_rng(1)
    law = dict(enumerate(rng.dirichlet(np.ones(6))))
    runs = 200
    for _ in range(300):
        outcomes = rng.choice(7, size=runs, p=[*(0.9 * p for p in law.values()), 0.1])  # 6: outside the law
        made = int(rng.integers(0, runs))
        partial, full = {}, {}
        for i, x in enumerate(outcomes):
            full[x] = full.get(x, 0) + 1
            if i < made:
                partial[x] = partial.get(x, 0) + 1
        tv = total_variation(law, full, runs)
        assert abs(tv_floor(law, full, runs) - tv) < 1e-12
        assert tv_floor(law, partial, runs) <= tv + 1e-12, (made, partial, full)
