"""Cost-aware draft lengths (an extension beyond both papers; docs/algorithms.md section 4).

Before each step, choose how many drafts k to verify (0 = a plain target step) to maximise the expected
tokens per unit of cost, E_k / cost(k), where

- E_k = 1 + a_1 + a_1 a_2 + ... + a_1...a_k, with a_i the running acceptance rate of draft i given that
  verification reached it (Laplace-smoothed counts from this run's committed events), and
- cost(k) is in AR steps (one-token target passes): c(w) = the measured pass-cost curve
  (``pass_cost.measure_pass_cost``), ``width(k)`` the tokens of the step's verification pass, plus the
  drafter's own passes.

The choice reads only events already emitted (never the current step's random draws), so verification
keeps the output distribution exactly the target's (the losslessness suite runs ``auto`` too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from pass_core.decoding.events import StepEvent


@dataclass(frozen=True)
class DraftLengthChoice:
    """One step's choice.

    Attributes:
        k: drafts to verify (0..max).
        expected_tokens: E_k, tokens the step is expected to add.
        cost: its cost in AR steps.
        note: one line for the token inspector: the choice and the runner-up, with their numbers.
    """

    k: int
    expected_tokens: float
    cost: float
    note: str


class CostAwareDraftLength:
    """Chooses each step's number of drafts from the pass-cost curve and the acceptance seen so far.

    Args:
        pass_cost: c(w) for w = 1, 2, ... (index w - 1), c(1) = 1; widths past the end are extrapolated
            linearly from the last two points.
        max_drafts: the largest k offered (the drafter's L or k).
        width: k -> tokens of the verification pass (default k + 1; the fused step adds (k + 1) L look-ahead
            rows).
        extra_tokens: tokens a step yields besides E_k (PaSS's paper step: the exact token), paid by a target
            drafting pass of ``extra_width`` tokens (0: none; a function of k: the pass's width for k drafts).
        drafter_pass: a separate drafter runs once per step that drafts (ParallelSpec): its cost in AR steps
            is learned from the events (its drafting seconds per drafter pass over ``one_pass_s``), starting at
            ``drafter_prior``.
        per_draft: the drafter runs once per draft instead (a draft model: k passes for k drafts).
        drafter_prior: the drafter's cost per pass in AR steps before any is measured (None: ``DRAFTER_PRIOR``).
        one_pass_s: seconds of a one-token target pass (the curve's first point).
        explore_every: every n-th step drafts at least 1 even when k = 0 looks best, so that the acceptance
            estimates keep learning (a fixed rule of the step number: still lossless).

    Raises:
        ValueError: an empty curve, c(1) <= 0, or max_drafts < 0.
    """

    DRAFTER_PRIOR = 0.25

    def __init__(self, pass_cost: Sequence[float], max_drafts: int, width: Callable[[int], int] = lambda k: k + 1,
                 extra_tokens: float = 0.0, extra_width: int | Callable[[int], int] = 0,
                 drafter_pass: bool = False,
                 one_pass_s: float = 0.0, explore_every: int = 8, per_draft: bool = False,
                 drafter_prior: float | None = None):
        if not pass_cost or pass_cost[0] <= 0 or max_drafts < 0:
            raise ValueError("need a pass-cost curve with c(1) > 0 and max_drafts >= 0")
        self.c = [float(x) / float(pass_cost[0]) for x in pass_cost]
        self.max_drafts, self.width, self.explore_every = max_drafts, width, explore_every
        self.extra_tokens, self.extra_width = extra_tokens, extra_width
        self.drafter_pass, self.one_pass_s = drafter_pass, one_pass_s
        self.per_draft = per_draft
        self.drafter_prior = self.DRAFTER_PRIOR if drafter_prior is None else float(drafter_prior)
        self.reached = [0] * (max_drafts + 1)  # index i: verifications that reached draft i
        self.accepted = [0] * (max_drafts + 1)
        self.drafter_s: list[float] = []  # seconds per drafter pass seen so far
        self.steps = 0

    def pass_cost(self, w: int) -> float:
        """c(w) in AR steps (linear extrapolation past the measured widths)."""
        if w <= len(self.c):
            return self.c[w - 1]
        if len(self.c) == 1:
            return self.c[0] * w
        slope = self.c[-1] - self.c[-2]
        return self.c[-1] + slope * (w - len(self.c))

    def rate(self, i: int) -> float:
        """a_i: accepted / reached draft i, Laplace-smoothed ((accepted + 1) / (reached + 2))."""
        return (self.accepted[i] + 1) / (self.reached[i] + 2)

    def drafter_cost(self) -> float:
        """The drafter's cost per pass in AR steps (0 without a drafter)."""
        if not self.drafter_pass:
            return 0.0
        if not self.drafter_s or self.one_pass_s <= 0:
            return self.drafter_prior
        return sum(self.drafter_s) / len(self.drafter_s) / self.one_pass_s

    def evaluate(self, k: int) -> tuple[float, float]:
        """(E_k plus the extra tokens, cost in AR steps) of a step verifying k drafts."""
        expected, run = 1.0, 1.0
        for i in range(1, k + 1):
            run *= self.rate(i)
            expected += run
        cost = self.pass_cost(self.width(k)) + (self.drafter_cost() * (k if self.per_draft else 1) if k else 0.0)
        extra = self.extra_width(k) if callable(self.extra_width) else self.extra_width
        if extra:
            cost += self.pass_cost(extra)
        return expected + self.extra_tokens, cost

    def choose(self) -> DraftLengthChoice:
        """The k maximising E_k / cost(k) (ties: the smaller k)."""
        self.steps += 1
        scored = sorted(((self.evaluate(k), k) for k in range(self.max_drafts + 1)),
                        key=lambda item: (-item[0][0] / item[0][1], item[1]))
        (best_e, best_c), best = scored[0]
        why = "most tokens per cost"
        if best == 0 and self.max_drafts and self.steps % self.explore_every == 0:
            (best_e, best_c), best = next(item for item in scored if item[1] > 0)
            why = f"exploring: every {self.explore_every}th step drafts"
        note = f"auto: k = {best} ({why}: {best_e:.2f} tokens for {best_c:.2f} AR steps"
        runner = next(((ec, k) for ec, k in scored if k != best), None)
        if runner is not None:
            (e, c), k = runner
            note += f"; k = {k}: {e:.2f} for {c:.2f}"
        return DraftLengthChoice(best, best_e, best_c, note + ")")

    def observe(self, event: StepEvent) -> None:
        """Count the step's verified drafts (accepted or rejected) per position, and its drafter time."""
        for d in event.drafts:
            if d.decision in ("accepted", "rejected") and d.position <= self.max_drafts:
                self.reached[d.position] += 1
                self.accepted[d.position] += d.decision == "accepted"
        if self.drafter_pass and event.drafter_passes:
            self.drafter_s.append(event.drafting_s / event.drafter_passes)
