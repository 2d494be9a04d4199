"""Sample sizes and bounds of the sampling tests, derived from the exact law.

A sampling test draws n seeded runs, counts their outcomes (the first few tokens) and computes the total-variation
distance TV = 0.5 * sum |empirical - P| to the exact law P (``pass_core.teaching.lab.exact_law``). The design:

- **False-alarm rate alpha**: the bound b is the (1 - alpha) quantile of TV(empirical law of n draws from P, P),
  computed here by simulating ``SIMULATIONS`` multinomial draws from P itself (no model is run). A correct sampler
  reaches b with probability alpha.
- **Power 1 - beta against any law Q at TV(Q, P) = d >= delta**: take A = {x : Q(x) > P(x)}, so that
  Q(A) - P(A) = d. Then TV(emp, P) >= emp(A) - P(A) = d - (Q(A) - emp(A)), and since A is fixed by Q (not chosen
  from the data), n emp(A) is Binomial(n, Q(A)). So such a sampler stays under b with probability at most beta once
  b + t_beta <= delta, where t_beta is the smallest t with P(Binomial(n, q) <= n (q - t)) <= beta for every q in
  [0, 1] (``any_law_slack``: computed from the binomial law itself; Hoeffding's sqrt(ln(1 / beta) / (2 n)) also
  holds but is about 30 % larger, which costs about 20 % more runs).
- **n**: the smallest number of runs (a multiple of ``STEP``) for which b + t_beta <= delta.

The negative controls (broken acceptance rules) are run with the same n and must exceed the same b.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: The losslessness tests' design: false-alarm rate alpha and power 1 - beta, against any law at a total-variation
#: distance >= DELTA from the exact one. The subtler broken rule of the tests (resample from p instead of the
#: residual) is about 0.19 away from the exact law of tests/test_lossless.py (measured), always-accept about 0.55.
#: alpha is kept small because the suite runs about 20 such tests (a false alarm in one of them about 2 % of runs).
ALPHA, BETA, DELTA = 1e-3, 1e-2, 0.15
#: Multinomial draws from P that estimate the (1 - alpha) quantile of TV.
SIMULATIONS = 40_000
#: Sample sizes are rounded up to a multiple of this.
STEP = 25


def total_variation(law: dict, counts: dict, runs: int) -> float:
    """0.5 * sum over outcomes of |counts / runs - law|."""
    return 0.5 * sum(abs(counts.get(x, 0) / runs - law.get(x, 0.0)) for x in set(law) | set(counts))


def tv_floor(law: dict, counts: dict, runs: float) -> float:
    """The least TV that ``runs`` runs can end at, from the outcome counts of those made so far, whatever the rest
    draw: TV = sum over outcomes of max(0, count / runs - P) (the positive parts, as both laws sum to 1), and a
    count only grows as runs are added. Once all ``runs`` are made it is their TV. So a negative control stops as
    soon as this exceeds the bound: the TV of all its n runs is then certain to exceed it (``stop_above``)."""
    return sum(max(0.0, c / runs - law.get(x, 0.0)) for x, c in counts.items())


def null_quantile(probs: np.ndarray, runs: int, alpha: float, seed: int = 0) -> float:
    """The (1 - alpha) quantile of TV between the empirical law of ``runs`` draws from ``probs`` and ``probs``
    ((K,) float64 summing to 1), by simulation (seeded: the same bound every time)."""
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(runs, probs, size=SIMULATIONS)  # (SIMULATIONS, K)
    tv = 0.5 * np.abs(counts / runs - probs).sum(axis=1)
    return float(np.quantile(tv, 1 - alpha, method="higher"))


#: Grid of q = Q(A) on which ``any_law_slack`` evaluates the binomial law.
SLACK_GRID = 4000


def any_law_slack(runs: int, beta: float, grid: int = SLACK_GRID) -> float:
    """t_beta: for every law Q and every fixed set A of outcomes, P(Q(A) - empirical(A) >= t_beta) <= beta with
    ``runs`` draws from Q, from the binomial law of runs * empirical(A).

    For each q = i / grid, k_q is the largest k with P(Binomial(runs, q) <= k) <= beta (-1 if none); every
    t > q - (k_q + 1) / runs has P(Q(A) - empirical(A) >= t) <= beta at Q(A) = q. k_q never decreases as q grows,
    so between two grid points q_i < q < q_(i+1) the needed t is below q_(i+1) - (k_(q_i) + 1) / runs: the largest
    of these over the grid bounds every q, not just the grid's.
    """
    k = np.arange(runs + 1)
    q = np.linspace(0.0, 1.0, grid + 1)[:, None]
    log_choose = np.array([math.lgamma(runs + 1) - math.lgamma(i + 1) - math.lgamma(runs - i + 1) for i in k])
    with np.errstate(divide="ignore", invalid="ignore"):
        log_pmf = log_choose + k * np.log(q) + (runs - k) * np.log1p(-q)
    log_pmf = np.nan_to_num(log_pmf, nan=-np.inf)  # 0 * log(0) at q = 0 and q = 1
    log_pmf[0, 0] = log_pmf[-1, -1] = 0.0  # Binomial(n, 0) is 0, Binomial(n, 1) is n, surely
    cdf = np.cumsum(np.exp(log_pmf), axis=1)
    k_q = (cdf <= beta).sum(axis=1) - 1
    return float(np.max(q[1:, 0] - (k_q[:-1] + 1) / runs)) + 1e-9  # strictly above the bound of each interval


@dataclass(frozen=True)
class Design:
    """A sampling test's plan.

    Attributes:
        runs: n, seeded runs per sampler.
        bound: b, the TV a correct sampler stays under with probability 1 - alpha.
        alpha, beta, delta: false-alarm rate; 1 - power; the TV a sampler must be off by to be caught.
        outcomes: outcomes with a non-zero exact probability.
        slack: t_beta (b + slack <= delta).
        given_bound: b is the caller's (``fixed_bound``), not the simulated quantile.
    """

    runs: int
    bound: float
    alpha: float
    beta: float
    delta: float
    outcomes: int
    slack: float
    given_bound: bool = False

    def describe(self) -> str:
        """One line for test output and failure messages."""
        source = (f"given; its false-alarm rate under the exact law, simulated, is at most {self.alpha:g}"
                  if self.given_bound else f"false-alarm rate {self.alpha:g}: the {1 - self.alpha:g} quantile of TV "
                                           f"under the exact law")
        return (f"n = {self.runs} runs, bound b = {self.bound:.4f} ({source}, {SIMULATIONS:,} simulated draws); power "
                f">= {1 - self.beta:g} against any law at TV >= {self.delta:g} (b + {self.slack:.4f} <= delta); "
                f"{self.outcomes} outcomes")


_PLANS: dict[tuple, Design] = {}


def design(law: dict, alpha: float, beta: float, delta: float, fixed_bound=None) -> Design:
    """The smallest n (a multiple of ``STEP``) for which a test with false-alarm rate ``alpha`` has power
    ``1 - beta`` against every law at TV >= ``delta`` from ``law`` ({outcome: probability}).

    ``fixed_bound``: ``runs -> b`` when the bound is not the test's choice (the lab's ``tv_bound``); then n must
    also keep the false-alarm rate of that bound at most ``alpha`` (simulated).

    Raises:
        ValueError: no n up to 100,000 fits (delta too small for alpha and beta).
    """
    memo = (tuple(sorted(law.items())), alpha, beta, delta)
    if fixed_bound is None and memo in _PLANS:  # every case of a test shares its law: computed once
        return _PLANS[memo]
    probs = np.array(sorted(law.values()), dtype=np.float64)
    probs = probs / probs.sum()
    outcomes = len(probs)

    def plan(runs: int) -> Design:
        slack = any_law_slack(runs, beta)
        bound = null_quantile(probs, runs, alpha) if fixed_bound is None else fixed_bound(runs)
        return Design(runs, bound, alpha, beta, delta, outcomes, slack, fixed_bound is not None)

    def fits(d: Design) -> bool:
        ok = d.bound + d.slack <= delta
        if ok and fixed_bound is not None:  # the given bound must also keep the false-alarm rate
            ok = null_quantile(probs, d.runs, alpha) < d.bound
        return ok

    # b and t_beta both shrink as 1 / sqrt(n): scale from a first guess, then step up until it fits
    guess = plan(1000)
    runs = max(STEP, STEP * math.ceil(((guess.bound + guess.slack) * math.sqrt(1000) / delta) ** 2 / STEP))
    while runs > STEP and fits(plan(runs - STEP)):
        runs -= STEP
    while not fits(plan(runs)):
        runs += STEP
        if runs > 100_000:
            raise ValueError(f"no sample size up to 100,000 reaches power {1 - beta} at TV {delta}")
    if fixed_bound is None:
        _PLANS[memo] = plan(runs)
        return _PLANS[memo]
    return plan(runs)
