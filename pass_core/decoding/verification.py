"""The speculative-sampling acceptance rule. Pure: no model, no cache.

Leviathan et al. 2022 (arXiv 2211.17192), algorithm 1 and Chen et al. 2023
(arXiv 2302.01318), algorithm 2, in Leviathan's notation: p = target, q = draft.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pass_core.decoding.sampling import sample


@dataclass(frozen=True)
class VerificationResult:
    """Outcome of checking k drafts against the target.

    Attributes:
        num_accepted: m, how many leading drafts were accepted (0..k).
        next_token: the resampled token (m < k) or the bonus token (m == k).
        next_is_bonus: True when every draft was accepted and ``next_token`` came from p_{k+1}.
        uniforms: the k uniform draws u_i (only the first min(m+1, k) were used).
        accept_probs: min(1, p_i(d_i) / q_i(d_i)) for each draft, floats.
        p_draft: p_i(d_i) for each draft.
        q_draft: q_i(d_i) for each draft.
    """

    num_accepted: int
    next_token: int
    next_is_bonus: bool
    uniforms: tuple[float, ...]
    accept_probs: tuple[float, ...]
    p_draft: tuple[float, ...]
    q_draft: tuple[float, ...]


def verify_drafts(
    draft_ids: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    generator: torch.Generator | None,
) -> VerificationResult:
    """Apply the speculative-sampling rule to k drafts.

    Args:
        draft_ids: (k,) int64 drafted tokens d_1..d_k (k >= 0).
        draft_probs: (k, V) float processed draft distributions q_1..q_k; d_i ~ q_i.
        target_probs: (k+1, V) float processed target distributions p_1..p_{k+1},
            all from one verification pass.
        generator: the run's random generator (on the same device as the tensors).

    Returns:
        A ``VerificationResult``. The committed tokens are d_1..d_m followed by
        ``next_token``: between 1 and k+1 tokens, distributed exactly as sampling
        from p one token at a time. Greedy (one-hot p and q) reduces to "accept iff
        d_i == argmax p_i" and the replacement is argmax p_i.

    Raises:
        ValueError: if the shapes disagree (counts, or the vocabulary widths of q and p), a draft id is not a
            token id 0..V-1 (a negative id would otherwise index from the end of the vocabulary and be verified
            as another token), or the next token's law holds NaN, inf or a negative number (``sampling.sample``).
    """
    k = int(draft_ids.shape[0])
    if draft_probs.shape[0] != k or target_probs.shape[0] != k + 1:
        raise ValueError(
            f"verify_drafts needs k drafts, k draft distributions and k+1 target "
            f"distributions; got {k}, {draft_probs.shape[0]} and {target_probs.shape[0]}"
        )
    if k and draft_probs.shape[-1] != target_probs.shape[-1]:
        raise ValueError(f"the draft distributions cover {draft_probs.shape[-1]} tokens, the target's "
                         f"{target_probs.shape[-1]}: a drafter for another vocabulary")
    vocab_size = int(target_probs.shape[-1])
    if k and not 0 <= int(draft_ids.min()) <= int(draft_ids.max()) < vocab_size:
        bad = [int(d) for d in draft_ids.tolist() if not 0 <= d < vocab_size]
        raise ValueError(f"draft ids must be token ids between 0 and {vocab_size - 1} (V = {vocab_size}); the drafter "
                         f"proposed {bad}")
    idx = torch.arange(k, device=draft_ids.device)
    p_draft = target_probs[idx, draft_ids].float()  # (k,)
    q_draft = draft_probs[idx, draft_ids].float()  # (k,)
    accept_probs = torch.where(q_draft > 0, (p_draft / q_draft.clamp_min(1e-30)).clamp(max=1.0), torch.zeros_like(p_draft))
    uniforms = torch.rand(k, generator=generator, device=draft_ids.device) if k else p_draft
    accepted = uniforms < accept_probs  # (k,)
    rejected = (~accepted).nonzero()
    num_accepted = int(rejected[0, 0]) if rejected.numel() else k

    if num_accepted == k:
        next_probs, is_bonus = target_probs[k], True
    else:
        residual = (target_probs[num_accepted] - draft_probs[num_accepted]).clamp_min(0.0)
        total = residual.sum()
        # p == q up to rounding: the residual vanishes; p itself is then the right law
        next_probs = residual / total if total > 1e-12 else target_probs[num_accepted]
        is_bonus = False
    next_token = int(sample(next_probs[None].float(), generator)[0])  # one-hot (greedy): no draw
    return VerificationResult(
        num_accepted=num_accepted,
        next_token=next_token,
        next_is_bonus=is_bonus,
        uniforms=tuple(float(u) for u in uniforms.tolist()) if k else (),
        accept_probs=tuple(accept_probs.tolist()),
        p_draft=tuple(p_draft.tolist()),
        q_draft=tuple(q_draft.tolist()),
    )
