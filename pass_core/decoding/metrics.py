"""The five metrics and the rest of a run's summary, computed from step events alone (``pass_core.decoding.events``):
``summarize`` for one run, ``speedup`` between two, ``METRIC_FORMULAS`` for the page's labels. Definitions:
docs/algorithms.md section 6.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

@dataclass(frozen=True)
class RunSummary:
    """Every metric of docs/algorithms.md section 6, computed from events alone.

    A *verification step* is a step whose verification pass checked at least one draft
    (``StepEvent.verified_drafts``). Acceptance metrics count verification steps only: a
    prefill, a gated step or a drafting pass that ended the run is not one.

    Attributes (all counts are over the whole run):
        method: the decoding method.
        tokens: generated (committed) tokens.
        steps: decoding steps (every step, verification or not).
        verification_steps: steps that verified drafts.
        forward_passes: target forward passes.
        drafter_passes: forward passes of a separate drafter model (ParallelSpec; 0 otherwise).
        drafted_tokens: drafts sent to verification.
        accepted_drafts: drafts accepted (and part of the output).
        judged_drafts: drafts the acceptance rule examined: every accepted one and the first rejected one of
            each step (docs/algorithms.md section 1); drafts after a rejection, or cut off by EOS or the
            token budget, are never judged.
        tokens_per_forward_pass: tokens / forward_passes (AR: 1.00).
        mean_accepted_tokens: tokens of verification steps / verification steps, Spec-Bench's
            definition (counts the resampled or bonus token, and PaSS's exact token); tokens / steps
            when no step verified drafts (AR: 1.00).
        accepted_drafts_per_step: accepted_drafts / verification steps, gpt-fast's (AR: 0).
        acceptance_rate: alpha = accepted_drafts / judged_drafts (None without judged drafts): the
            conditional acceptance of docs/algorithms.md section 6, the rate the truncated-geometric law of
            section 2.3 is fitted on. ``drafted_acceptance_rate`` is accepted / drafted, for comparison.
        per_position_unconditional: for draft position i, verification steps where d_i was
            accepted / verification steps.
        per_position_conditional: accepted at i / verification steps that reached i; None for
            a position never reached (no data, not 0 %).
        acceptance_histogram: share of verification steps accepting 0..k drafts (index = count).
        compute_time_s: summed step_s: model work only, seconds.
        drafting_s / verification_s: summed seconds of each phase.
        tokens_per_s: tokens / compute_time_s.
        ms_per_step: compute_time_s / steps * 1000.
        finish_reason: why the run ended ("eos", "max_new_tokens") or None if cut short.
    """

    method: str
    tokens: int
    steps: int
    forward_passes: int
    drafted_tokens: int
    accepted_drafts: int
    tokens_per_forward_pass: float
    mean_accepted_tokens: float
    accepted_drafts_per_step: float
    acceptance_rate: float | None
    per_position_unconditional: list[float] = field(default_factory=list)
    per_position_conditional: list[float | None] = field(default_factory=list)
    acceptance_histogram: list[float] = field(default_factory=list)
    compute_time_s: float = 0.0
    drafting_s: float = 0.0
    verification_s: float = 0.0
    tokens_per_s: float = 0.0
    ms_per_step: float = 0.0
    finish_reason: str | None = None
    verification_steps: int = 0
    drafter_passes: int = 0
    judged_drafts: int = 0

    @property
    def drafted_acceptance_rate(self) -> float | None:
        """accepted_drafts / drafted_tokens (None without drafts): what a student computes first, and too small
        an estimate of alpha, since it counts the drafts after a rejection, which no rule examined, as failures."""
        return self.accepted_drafts / self.drafted_tokens if self.drafted_tokens else None

    def to_dict(self) -> dict:
        """Plain dict for JSON export."""
        return asdict(self)


#: Each metric's formula, for info texts in the UI and the README.
METRIC_FORMULAS: dict[str, str] = {
    "tokens_per_s": "generated tokens / summed model compute time (s)",
    "speedup": "tokens/s of the method / tokens/s of AR, measured in the same run (the page: after the first step)",
    "tokens_per_forward_pass": "generated tokens / target forward passes (AR = 1.00)",
    "mean_accepted_tokens": "tokens of verification steps / verification steps, counts the resampled or bonus "
                            "token and PaSS's exact token, not only accepted drafts (Spec-Bench; AR = 1.00)",
    "accepted_drafts_per_step": "accepted drafts / verification steps (gpt-fast; AR = 0)",
    "acceptance_rate": "accepted drafts / judged drafts (a chain: the accepted ones and the first rejected one of "
                       "each step; a token tree: every node verification tried, rejected siblings included, so a "
                       "tree's α reads lower than a chain's of the same drafter)",
    "drafted_acceptance_rate": "accepted drafts / drafted tokens (counts never-judged drafts as failures)",
    "per_position_unconditional": "verification steps where draft i was accepted / verification steps",
    "per_position_conditional": "accepted at position i / verification steps that reached position i",
    "acceptance_histogram": "share of verification steps that accepted 0, 1, ..., k drafts",
}


def summarize(events, method: str | None = None) -> RunSummary:
    """Compute a ``RunSummary`` from a sequence of ``StepEvent``.

    Args:
        events: iterable of StepEvent from one run (may be empty).
        method: overrides the method name (defaults to the first event's).

    Returns:
        The summary; ratios with a zero denominator are 0.0 (or None for the acceptance
        rate and for unreached positions, which have no value).
    """
    events = list(events)
    steps = len(events)
    verifying = [e for e in events if e.verified_drafts]
    n_ver = len(verifying)
    tokens = sum(len(e.new_token_ids) for e in events)
    passes = sum(e.forward_passes for e in events)
    drafted = sum(len(e.drafts) for e in verifying)
    accepted = sum(e.num_accepted for e in verifying)
    judged = sum(d.decision in ("accepted", "rejected") for e in verifying for d in e.drafts)
    max_pos = max((d.position for e in verifying for d in e.drafts), default=0)
    uncond, cond = [], []
    for i in range(1, max_pos + 1):
        acc_i = sum(any(d.position == i and d.decision == "accepted" for d in e.drafts) for e in verifying)
        reached_i = sum(any(d.position == i and d.decision in ("accepted", "rejected") for d in e.drafts)
                        for e in verifying)
        uncond.append(acc_i / n_ver)
        cond.append(acc_i / reached_i if reached_i else None)
    hist = [0] * (max_pos + 1)
    for e in verifying:
        hist[e.num_accepted] += 1
    compute = sum(e.step_s for e in events)
    ver_tokens = sum(len(e.new_token_ids) for e in verifying)
    return RunSummary(
        method=method or (events[0].method if events else ""),
        tokens=tokens,
        steps=steps,
        forward_passes=passes,
        drafted_tokens=drafted,
        accepted_drafts=accepted,
        tokens_per_forward_pass=tokens / passes if passes else 0.0,
        mean_accepted_tokens=ver_tokens / n_ver if n_ver else (tokens / steps if steps else 0.0),
        accepted_drafts_per_step=accepted / n_ver if n_ver else 0.0,
        acceptance_rate=accepted / judged if judged else None,
        per_position_unconditional=uncond,
        per_position_conditional=cond,
        acceptance_histogram=[h / n_ver for h in hist] if n_ver else [],
        compute_time_s=compute,
        drafting_s=sum(e.drafting_s for e in events),
        verification_s=sum(e.verification_s for e in events),
        tokens_per_s=tokens / compute if compute > 0 else 0.0,
        ms_per_step=compute / steps * 1000 if steps else 0.0,
        finish_reason=events[-1].finish_reason if events else None,
        verification_steps=n_ver,
        drafter_passes=sum(e.drafter_passes for e in events),
        judged_drafts=judged,
    )


def speedup(method: RunSummary | None, baseline: RunSummary | None) -> float | None:
    """Speed-up (docs/algorithms.md section 6): tokens/s of ``method`` / tokens/s of ``baseline`` (AR).

    Only meaningful for two runs measured side by side in one process (the race, the bench).

    Returns:
        The ratio, or None while either summary has no tokens or no compute time yet.
    """
    if not method or not baseline or not baseline.tokens_per_s or not method.tokens_per_s:
        return None
    return method.tokens_per_s / baseline.tokens_per_s
