"""Typed step events: the one stream that feeds the UI, the benchmark, exports and tests.

A decoder is a Python generator of ``StepEvent``. Everything downstream (colouring
tokens, latency charts, metrics, JSON export) reads only these objects.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# the greedy output comparison lives in comparison.py; re-exported for the callers of events
from pass_core.decoding.comparison import UNIT_ROUNDOFF, OutputComparison, compare_outputs, rounding_tolerance  # noqa: F401
from pass_core.decoding.inspection import PositionInspection

#: Token labels, in display order. ``target`` is a token of plain autoregressive
#: decoding; the others follow docs/algorithms.md section 1.
TOKEN_LABELS: dict[str, str] = {
    "target": "AR target",
    "exact": "exact",
    "accepted": "accepted draft",
    "rejected": "rejected draft",
    "resampled": "resampled",
    "bonus": "bonus",
}

#: Labels of tokens that become part of the output (everything but ``rejected``).
COMMITTED_LABELS = frozenset(TOKEN_LABELS) - {"rejected"}


@dataclass(frozen=True)
class TokenRecord:
    """One token as shown in the output stream.

    Attributes:
        token_id: vocabulary id.
        text: the text this token adds to the output (may be "" while a multi-byte
            character is incomplete). For a rejected draft: its own decoded text,
            which is *not* part of the output.
        label: one of ``TOKEN_LABELS``.
        margin: greedy runs only: the target's top-1 minus top-2 logit at the position where this
            token was chosen (small = a near-tie that rounding can flip); None otherwise.
    """

    token_id: int
    text: str
    label: str
    margin: float | None = None

    @property
    def committed(self) -> bool:
        """True when the token is part of the output (not a rejected draft)."""
        return self.label in COMMITTED_LABELS


@dataclass(frozen=True)
class DraftRecord:
    """One drafted token and what verification did with it.

    Attributes:
        position: i, 1-based look-ahead / draft position within the step.
        token_id: the draft d_i.
        text: its decoded text (for display).
        q: q_i(d_i), the draft probability (processed distribution).
        p: p_i(d_i), the target probability (processed distribution).
        u: the uniform draw compared with min(1, p/q); None when never examined.
        decision: "accepted", "rejected" or "not_verified" (after the first rejection,
            or cut off by EOS / max_new_tokens).
        p_res: trees: p_res(d), the residual the node was tried against (section 4b); else None.
    """

    position: int
    token_id: int
    text: str
    q: float
    p: float
    u: float | None
    decision: str
    p_res: float | None = None


@dataclass(frozen=True)
class StepEvent:
    """What one decoding step did.

    Attributes:
        method: "ar", "pass", "pass-fused", "fixed-token", "parallelspec", ...
        step: 1-based step index.
        tokens: the step's tokens in display order; committed ones plus (PaSS) the
            rejected draft, labelled ``rejected``.
        drafts: every draft of the step with q, p, u and the decision (empty for AR).
        forward_passes: target-model forward passes used by this step.
        drafting_s: seconds of drafting work (device synchronised), 0 for AR.
        verification_s: seconds of verification work (device synchronised).
        step_s: seconds of the whole step's model work (>= drafting_s + verification_s).
        finish_reason: None while running, else "eos" or "max_new_tokens" on the last event.
        drafter_passes: forward passes of a separate drafter model (ParallelSpec).
        num_verified_drafts: k, drafts that went into this step's verification pass (0: the step
            verified nothing: AR, a prefill, a gated step, or a drafting pass that ended the run).
        inspection: the token inspector's data (``DecodeSettings.inspect``), else ().
        draft_choice: with cost-aware draft lengths (``DecodeSettings.auto_drafts``), which k this step
            chose and why (``draft_length.DraftLengthChoice.note``); "" otherwise.
        draft_note: what the drafter says about this step's drafts (``drafting.Proposal.note``; prompt lookup:
            where in the context the drafts were copied from), or "".
        tree_parents: a tree step: each draft's parent node (-1 = the root; position = depth); () = a chain.
    """

    method: str
    step: int
    tokens: tuple[TokenRecord, ...]
    drafts: tuple[DraftRecord, ...] = ()
    forward_passes: int = 1
    drafting_s: float = 0.0
    verification_s: float = 0.0
    step_s: float = 0.0
    finish_reason: str | None = None
    drafter_passes: int = 0
    num_verified_drafts: int = 0
    inspection: tuple[PositionInspection, ...] = ()
    draft_choice: str = ""
    draft_note: str = ""
    tree_parents: tuple[int, ...] = ()

    @property
    def verified_drafts(self) -> bool:
        """True when this step ran a verification over at least one draft (a *verification step*)."""
        return self.num_verified_drafts > 0

    @property
    def new_token_ids(self) -> list[int]:
        """Ids of the tokens this step added to the output."""
        return [t.token_id for t in self.tokens if t.committed]

    @property
    def num_accepted(self) -> int:
        """Accepted drafts in this step."""
        return sum(d.decision == "accepted" for d in self.drafts)

    @property
    def finished(self) -> bool:
        """True on the last event of a run."""
        return self.finish_reason is not None

    def to_dict(self) -> dict:
        """Plain dict for JSON export."""
        return asdict(self)


def output_token_ids(events) -> list[int]:
    """All committed token ids of a run, in order."""
    return [tid for e in events for tid in e.new_token_ids]


def ended_at_once(events) -> bool:
    """True when a finished run's only output token is EOS (the model wrote nothing; common with
    a raw prompt, without the chat template)."""
    events = list(events)
    return bool(events) and events[-1].finish_reason == "eos" and len(output_token_ids(events)) == 1


def output_text(events) -> str:
    """The output text rebuilt from the events' committed text pieces."""
    return "".join(t.text for e in events for t in e.tokens if t.committed)


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
                            "token (Spec-Bench; AR = 1.00)",
    "accepted_drafts_per_step": "accepted drafts / verification steps (gpt-fast; AR = 0)",
    "acceptance_rate": "accepted drafts / judged drafts (the accepted ones and the first rejected one of each step)",
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
