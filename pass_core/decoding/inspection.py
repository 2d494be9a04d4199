"""What the token inspector shows of a step: the top-n of each verified distribution, never whole
distributions (docs/algorithms.md section 2; p = target, q = draft, Leviathan et al. notation).

Collected only when ``DecodeSettings.inspect`` is on: a few ``topk`` calls per step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

#: Tokens kept per distribution.
TOP_N = 10


@dataclass(frozen=True)
class TopN:
    """The n most likely tokens of one processed distribution, most likely first.

    Attributes:
        ids: token ids.
        probs: their probabilities (floats in [0, 1]).
    """

    ids: tuple[int, ...]
    probs: tuple[float, ...]


@dataclass(frozen=True)
class PositionInspection:
    """One position of a step as the inspector shows it.

    Attributes:
        position: 0 = PaSS's exact token (the real position of its drafting pass); i = 1..k the
            verification of draft d_i; k + 1 = the bonus position. AR steps have position 1.
        p: top-n of the target's processed distribution at this position.
        q: top-n of the draft distribution q_i (drafts only, else None).
        residual: top-n of norm(max(0, p_i - q_i)) at the first rejection (else None): the law the
            resampled token was drawn from (a token tree's: p_res, every rejected child taken out).
    """

    position: int
    p: TopN
    q: TopN | None = None
    residual: TopN | None = None


def top_n(probs: torch.Tensor, n: int = TOP_N) -> TopN:
    """``TopN`` of one distribution, (V,) float probabilities."""
    values, ids = probs.float().topk(min(n, probs.shape[-1]))
    keep = values > 0
    return TopN(tuple(ids[keep].tolist()), tuple(values[keep].tolist()))


def inspect_verification(p: torch.Tensor, q: torch.Tensor, m: int, n: int = TOP_N,
                         exact: TopN | None = None, residual: torch.Tensor | None = None
                         ) -> tuple[PositionInspection, ...]:
    """The inspector's data of one verification.

    Args:
        p: (k+1, V) processed target distributions p_1..p_{k+1}.
        q: (k, V) processed draft distributions q_1..q_k.
        m: accepted drafts (the residual is shown at position m + 1 when m < k).
        exact: top-n of the distribution PaSS's exact token was drawn from (position 0), if any.
        residual: (V,) float, a token tree's p_res at its last accepted node (the law of its resampled token,
            docs/algorithms.md section 4b), shown at position m + 1; a tree step passes its accepted path's p
            and q (k = m), so no residual is computed from them.

    Returns:
        One ``PositionInspection`` per position that verification used: (0,) 1..min(m + 1, k + 1).
    """
    k = q.shape[0]
    used = min(m + 1, k + 1)
    p_top = p[:used].float().topk(min(n, p.shape[-1]))
    q_top = q[:min(used, k)].float().topk(min(n, q.shape[-1])) if k else None
    out = [PositionInspection(0, exact)] if exact is not None else []
    for i in range(used):
        shown = top_n(residual, n) if residual is not None and i == m else None
        if i == m < k:
            diff = (p[i] - q[i]).clamp_min(0.0)
            shown = top_n(diff / diff.sum() if float(diff.sum()) > 1e-12 else p[i], n)
        out.append(PositionInspection(
            i + 1, _pair(p_top, i), _pair(q_top, i) if q_top is not None and i < k else None, shown))
    return tuple(out)


def _pair(top, i: int) -> TopN:
    values, ids = top.values[i], top.indices[i]
    keep = values > 0
    return TopN(tuple(ids[keep].tolist()), tuple(values[keep].tolist()))
