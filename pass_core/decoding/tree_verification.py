"""Verifying a token tree losslessly, and what a tree step writes into its ``StepEvent``.

Multi-step speculative sampling (SpecInfer, Miao et al. 2024, section 4.2; EAGLE-2/3's
``evaluate_posterior``; docs/algorithms.md section 4b), in Leviathan's notation: p = target,
q = draft. At a node whose target distribution is p, set p_res = p and try its children in rank
order: accept child x with probability min(1, p_res(x) / q_x(x)); on rejection
p_res <- norm(max(0, p_res - q_x)) and try the next child. After accepting x, continue at x with the
target's p there. When every child is rejected, draw the next token from p_res (resampled); at a
leaf, draw it from p there (bonus). Tree drafters propose *deterministic* candidates (top-i of the
drafter), so q_x is one-hot on x: accept with probability p_res(x), and a rejection sets
p_res(x) = 0 and renormalises. Each committed token is then distributed exactly as under p.
For a chain (one child per node) the rule, and its use of the generator, is exactly
``verification.verify_drafts``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pass_core.decoding.events import DraftRecord, TokenRecord
from pass_core.decoding.sampling import sample
from pass_core.decoding.target import TargetOutput
from pass_core.decoding.text import Detokenizer
from pass_core.decoding.tree import TreeSpec
from pass_core.decoding.bookkeeping import output_ended


@dataclass(frozen=True)
class TreeVerification:
    """Outcome of checking a tree of N drafts against the target.

    Attributes:
        path: the accepted nodes, root's child first (indices into the tree's node order).
        next_token: the resampled token (some child of the last accepted node was rejected) or the
            bonus token (the path ends at a leaf).
        next_is_bonus: True when ``next_token`` came from p at a leaf.
        decisions: per node "accepted", "rejected" (tried and rejected) or "not_verified" (never tried).
        uniforms: per node the uniform draw u compared with its acceptance probability, None when not tried.
        accept_probs: per node min(1, p_res(x) / q(x)) when tried, else None.
        p_draft: per node p(x), the target's probability of its token at the parent.
        p_res: per node p_res(x) when tried (the residual after its earlier siblings' rejections), else None.
        q_draft: per node q(x).
        next_law: (V,) float, the law ``next_token`` was drawn from: p_res at the last accepted node (every
            rejected child taken out) or p at the leaf; None from a rule that does not give it (a test seam's).
    """

    path: tuple[int, ...]
    next_token: int
    next_is_bonus: bool
    decisions: tuple[str, ...]
    uniforms: tuple[float | None, ...]
    accept_probs: tuple[float | None, ...]
    p_draft: tuple[float, ...]
    p_res: tuple[float | None, ...]
    q_draft: tuple[float, ...]
    next_law: torch.Tensor | None = None

    @property
    def num_accepted(self) -> int:
        """m, the accepted drafts (the path's length)."""
        return len(self.path)


def verify_tree(tree: TreeSpec, draft_ids: torch.Tensor, draft_probs: torch.Tensor, target_probs: torch.Tensor,
                generator: torch.Generator | None) -> TreeVerification:
    """Apply multi-step speculative sampling to a tree of drafts.

    Args:
        tree: the shape, N nodes.
        draft_ids: (N,) int64 node tokens in the tree's node order.
        draft_probs: (N, V) float q of each node's token (one-hot for deterministic candidates).
        target_probs: (N + 1, V) float processed p from one verification pass: row 0 at the root,
            row j + 1 at node j.
        generator: the run's random generator; N uniforms are drawn first (one per node, used when the
            node is tried), then the next token (no draw when its distribution is one-hot).

    Returns:
        A ``TreeVerification``: the accepted path and the next token, 1..depth + 1 tokens.

    Raises:
        ValueError: shapes that disagree with the tree or with each other's vocabulary width, a draft id outside
            the vocabulary, or a next token's law with NaN, inf or a negative number (``sampling.sample``).
    """
    n, vocab = tree.num_nodes, int(target_probs.shape[-1])
    if draft_ids.shape[0] != n or draft_probs.shape[0] != n or target_probs.shape[0] != n + 1:
        raise ValueError(f"verify_tree needs {n} drafts, {n} draft distributions and {n + 1} target distributions "
                         f"for a tree of {n} nodes; got {draft_ids.shape[0]}, {draft_probs.shape[0]} and "
                         f"{target_probs.shape[0]}")
    if n and draft_probs.shape[-1] != vocab:
        raise ValueError(f"the draft distributions cover {draft_probs.shape[-1]} tokens, the target's {vocab}: a "
                         "drafter for another vocabulary")
    if n and not 0 <= int(draft_ids.min()) <= int(draft_ids.max()) < vocab:
        raise ValueError(f"draft ids must lie in 0..{vocab - 1}, got {draft_ids.tolist()}")
    uniforms = torch.rand(n, generator=generator, device=draft_ids.device) if n else None
    ids = draft_ids.tolist()
    p_draft = target_probs[[p + 1 for p in tree.parents], draft_ids].float().tolist() if n else []
    q_draft = draft_probs[torch.arange(n), draft_ids].float().tolist() if n else []
    decisions, used, accept, residual_x = ["not_verified"] * n, [None] * n, [None] * n, [None] * n
    node, path, p_res = -1, [], target_probs[0]
    while True:
        chosen = None
        for c in tree.children(node):
            q = draft_probs[c]
            px, qx = p_res[ids[c]].float(), q[ids[c]].float()
            a = torch.where(qx > 0, (px / qx.clamp_min(1e-30)).clamp(max=1.0), torch.zeros_like(px))
            used[c], accept[c], residual_x[c] = float(uniforms[c]), float(a), float(px)
            if bool(uniforms[c] < a):
                decisions[c], chosen = "accepted", c
                break
            decisions[c] = "rejected"
            residual = (p_res - q).clamp_min(0.0)
            total = residual.sum()
            # p_res == q up to rounding: the residual vanishes; p_res itself is then the right law
            p_res = residual / total if total > 1e-12 else p_res
        if chosen is None:
            break
        node = chosen
        path.append(node)
        p_res = target_probs[node + 1]
    is_bonus = not tree.children(node)
    next_probs = p_res
    next_token = int(sample(next_probs[None].float(), generator)[0])  # one-hot (greedy): no draw
    return TreeVerification(path=tuple(path), next_token=next_token, next_is_bonus=is_bonus,
                            decisions=tuple(decisions), uniforms=tuple(used), accept_probs=tuple(accept),
                            p_draft=tuple(p_draft), p_res=tuple(residual_x), q_draft=tuple(q_draft),
                            next_law=next_probs)


def along_path(out: TargetOutput, num_real: int, path: list[int]) -> TargetOutput:
    """A tree verification pass's output kept along the accepted ``path``: logits rows of the root and the
    path's nodes ((m + 1, V)), hidden states of the ``num_real`` real tokens and the path's nodes (each
    (1, num_real + m, D)), as a chain verification of the accepted drafts would give them."""
    rows = list(range(num_real)) + [num_real + j for j in path]
    states = None if out.hidden_states is None else tuple(h[:, rows] for h in out.hidden_states)
    return TargetOutput(out.logits[[0] + [j + 1 for j in path]], states)


def tree_step_proposal(exact: int | None, draft_ids: list[int], result: TreeVerification) -> list[tuple[int, str]]:
    """The (token id, label) pairs a tree step proposes to commit: PaSS's exact token, the accepted path,
    then the resampled or bonus token (``bookkeeping.step_proposal`` for a tree)."""
    proposed = [(exact, "exact")] if exact is not None else []
    proposed += [(int(draft_ids[j]), "accepted") for j in result.path]
    return proposed + [(result.next_token, "bonus" if result.next_is_bonus else "resampled")]


def tree_draft_records(detok: Detokenizer, tree: TreeSpec, draft_ids: list[int], result: TreeVerification,
                       records: list[tuple[int, str, str]]) -> tuple[DraftRecord, ...]:
    """One ``DraftRecord`` per node, in node order, ``position`` = the node's depth.

    When EOS / ``max_new_tokens`` ended the output before the step's resampled or bonus token
    (``bookkeeping.output_ended``), every node deeper than the last committed draft counts as not verified
    (its rejected children too), as in ``bookkeeping.draft_records``: acceptance statistics count only
    drafts judged inside the output.
    """
    committed = sum(label == "accepted" for _, label, _ in records)
    ended = output_ended(records)
    depths = tree.depths
    out = []
    for j, tid in enumerate(draft_ids):
        decision = result.decisions[j]
        if ended and depths[j] > committed:  # tried after the output ended
            decision = "not_verified"
        examined = decision != "not_verified"
        out.append(DraftRecord(position=depths[j], token_id=int(tid), text=detok.token_text(tid),
                               q=float(result.q_draft[j]), p=float(result.p_draft[j]),
                               u=result.uniforms[j] if examined else None, decision=decision,
                               p_res=result.p_res[j] if examined else None))
    return tuple(out)


def shown_nodes(parents: tuple[int, ...], decisions: list[str]) -> list[int]:
    """The tried nodes of a tree step in the order its pane shows them: down the accepted path, each accepted
    node after its rejected elder siblings (tried before it, in rank order), then the rejected children of the
    last accepted node (the root's when none was accepted). ``decisions``: per node, after the EOS / budget cut
    (``tree_draft_records``), so no node tried past the output's end is shown."""
    out, node = [], -1
    while True:
        children = [c for c, parent in enumerate(parents) if parent == node]
        out += [c for c in children if decisions[c] == "rejected"]
        node = next((c for c in children if decisions[c] == "accepted"), None)
        if node is None:
            return out
        out.append(node)


def tree_token_records(records: list[tuple[int, str, str]], drafts: tuple[DraftRecord, ...],
                       parents: tuple[int, ...], margins: list[float] | None = None) -> tuple[TokenRecord, ...]:
    """Token records of a tree step in display order (``bookkeeping.token_records`` for a tree): PaSS's exact
    token, then ``shown_nodes``: each committed accepted node with every rejected node tried before it struck
    through beside it, then the resampled (or bonus) token. Rejected children of the last node show only when
    the step's last token was committed (as a chain's rejected draft shows only before its resampled token).

    Args:
        records: the step's committed (id, label, text), as ``RunState.take`` returned them.
        drafts: the step's ``tree_draft_records``; parents: the tree's parent per node.
        margins: greedy runs: the target's top-1 minus top-2 logit per committed token, in order.
    """
    margins = list(margins or []) + [None] * len(records)
    committed = [TokenRecord(token_id=t, text=text, label=label, margin=margin)
                 for (t, label, text), margin in zip(records, margins)]
    head = 1 if committed and committed[0].label == "exact" else 0
    out, rest = committed[:head], iter(committed[head:])
    for j in shown_nodes(parents, [d.decision for d in drafts]):
        d = drafts[j]
        out.append(next(rest) if d.decision == "accepted" else TokenRecord(d.token_id, d.text, "rejected"))
    final = list(rest)
    while not final and out and out[-1].label == "rejected":  # the step ended before its resampled token
        out.pop()
    return tuple(out + final)
