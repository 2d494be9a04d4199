"""Typed step events: the one stream that feeds the UI, the benchmark, exports and tests.

A decoder is a Python generator of ``StepEvent``. Everything downstream (colouring
tokens, latency charts, metrics, JSON export) reads only these objects.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

#: Token labels, in display order. ``target`` is a token of plain autoregressive
#: decoding; the others follow algorithms.md section 1.
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
    """

    token_id: int
    text: str
    label: str

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
    """

    position: int
    token_id: int
    text: str
    q: float
    p: float
    u: float | None
    decision: str


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


def output_text(events) -> str:
    """The output text rebuilt from the events' committed text pieces."""
    return "".join(t.text for e in events for t in e.tokens if t.committed)


@dataclass(frozen=True)
class RunSummary:
    """Every metric of algorithms.md section 6, computed from events alone.

    Attributes (all counts are over the whole run):
        method: the decoding method.
        tokens: generated (committed) tokens.
        steps: decoding steps.
        forward_passes: target forward passes.
        drafted_tokens: drafts proposed and examined or not.
        accepted_drafts: drafts accepted.
        tokens_per_forward_pass: tokens / forward_passes (AR: 1.00).
        mean_accepted_tokens: tokens / steps, Spec-Bench's definition (AR: 1.00).
        accepted_drafts_per_step: accepted_drafts / steps, gpt-fast's definition (AR: 0).
        acceptance_rate: accepted_drafts / drafted_tokens (None without drafts).
        per_position_unconditional: for draft position i, steps where d_i was accepted / steps.
        per_position_conditional: accepted at i / steps whose verification reached i.
        acceptance_histogram: share of steps accepting 0..L drafts (index = count).
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

    def to_dict(self) -> dict:
        """Plain dict for JSON export."""
        return asdict(self)


#: Each metric's formula, for info texts in the UI and the README.
METRIC_FORMULAS: dict[str, str] = {
    "tokens_per_s": "generated tokens / summed model compute time (s)",
    "speedup": "tokens/s of the method / tokens/s of AR, measured in the same run",
    "tokens_per_forward_pass": "generated tokens / target forward passes (AR = 1.00)",
    "mean_accepted_tokens": "generated tokens / verification steps, counts the resampled or bonus token (Spec-Bench; AR = 1.00)",
    "accepted_drafts_per_step": "accepted drafts / steps (gpt-fast; AR = 0)",
    "acceptance_rate": "accepted drafts / drafted tokens",
    "per_position_unconditional": "steps where draft i was accepted / steps",
    "per_position_conditional": "accepted at position i / steps whose verification reached position i",
    "acceptance_histogram": "share of steps that accepted 0, 1, ..., L drafts",
}


def summarize(events, method: str | None = None) -> RunSummary:
    """Compute a ``RunSummary`` from a sequence of ``StepEvent``.

    Args:
        events: iterable of StepEvent from one run (may be empty).
        method: overrides the method name (defaults to the first event's).

    Returns:
        The summary; ratios with a zero denominator are 0.0 (or None for the
        acceptance rate, which has no AR value).
    """
    events = list(events)
    steps = len(events)
    tokens = sum(len(e.new_token_ids) for e in events)
    passes = sum(e.forward_passes for e in events)
    drafted = sum(len(e.drafts) for e in events)
    accepted = sum(e.num_accepted for e in events)
    max_pos = max((d.position for e in events for d in e.drafts), default=0)
    uncond, cond = [], []
    for i in range(1, max_pos + 1):
        acc_i = sum(any(d.position == i and d.decision == "accepted" for d in e.drafts) for e in events)
        reached_i = sum(any(d.position == i and d.decision in ("accepted", "rejected") for d in e.drafts) for e in events)
        uncond.append(acc_i / steps if steps else 0.0)
        cond.append(acc_i / reached_i if reached_i else None)
    hist = [0] * (max_pos + 1)
    for e in events:
        hist[min(e.num_accepted, max_pos)] += 1
    compute = sum(e.step_s for e in events)
    return RunSummary(
        method=method or (events[0].method if events else ""),
        tokens=tokens,
        steps=steps,
        forward_passes=passes,
        drafted_tokens=drafted,
        accepted_drafts=accepted,
        tokens_per_forward_pass=tokens / passes if passes else 0.0,
        mean_accepted_tokens=tokens / steps if steps else 0.0,
        accepted_drafts_per_step=accepted / steps if steps else 0.0,
        acceptance_rate=accepted / drafted if drafted else None,
        per_position_unconditional=uncond,
        per_position_conditional=cond,
        acceptance_histogram=[h / steps for h in hist] if steps and max_pos else [],
        compute_time_s=compute,
        drafting_s=sum(e.drafting_s for e in events),
        verification_s=sum(e.verification_s for e in events),
        tokens_per_s=tokens / compute if compute > 0 else 0.0,
        ms_per_step=compute / steps * 1000 if steps else 0.0,
        finish_reason=events[-1].finish_reason if events else None,
    )
