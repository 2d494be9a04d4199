"""Typed step events: the one stream that feeds the UI, the benchmark, exports and tests.

A decoder is a Python generator of ``StepEvent``. Everything downstream (colouring
tokens, latency charts, metrics, JSON export) reads only these objects.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

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

    @property
    def acceptance_probability(self) -> float | None:
        """min(1, p/q), a tree node's min(1, p_res/q): the probability that the rule kept this draft, as
        ``verification.verify_drafts`` computes it (0 where q = 0); None for a draft never verified or a p that is
        NaN (docs/algorithms.md section 2; Leviathan et al. 2023, section 2.3)."""
        p = self.p if self.p_res is None else self.p_res
        if self.decision == "not_verified" or p != p:
            return None
        return min(1.0, p / self.q) if self.q > 0 else 0.0


@dataclass(frozen=True)
class StepEvent:
    """What one decoding step did.

    Attributes:
        method: a ``registry.METHODS`` key ("ar", "pass", "fixed-token", "parallelspec", ...; a fused PaSS run
            writes "pass").
        step: 1-based step index.
        tokens: the step's tokens in display order; committed ones plus the rejected draft (a token tree's:
            every rejected node shown, ``tree_verification.tree_token_records``), labelled ``rejected``.
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
