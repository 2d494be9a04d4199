"""PaSS drafting with learned look-ahead embeddings (Monea, Joulin, Grave 2023, arXiv 2311.13581,
section 2; docs/algorithms.md section 3), and the fused step (an extension, docs/algorithms.md section 4).

Paper step: a *drafting pass* over ``[x_n, LA_1..LA_L]``: the real position gives the exact
token x_{n+1}, look-ahead position i gives q_i and the draft d_{n+1+i}; the look-ahead entries
are cropped from the cache. The speculative loop then verifies ``[x_{n+1}, d_1..d_L]``.

Fused step (extension): no drafting pass. The verification pass carries one look-ahead block
per possible acceptance length m = 0..k under a tree mask (``fused_mask``); block m sits after
real token m and gives exactly the drafts a plain drafting pass would give after m accepted
drafts. The block of the actual m becomes the next step's drafts: one forward pass per step.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from pass_core.decoding.cache import cache_len, crop_to
from pass_core.decoding.drafting import Drafter, Extension, Proposal, TargetRun, no_drafts
from pass_core.decoding.inspection import top_n
from pass_core.drafters.lookahead.embeddings import LookaheadEmbeddings
from pass_core.decoding.sampling import logit_margins, logits_to_probs, sample
from pass_core.decoding.target import TargetOutput, target_forward
from pass_core.decoding.tree import TreeSpec


def fused_mask(n_cached: int, num_real: int, block: int, num_blocks: int, dtype: torch.dtype,
               device) -> tuple[torch.Tensor, torch.Tensor]:
    """4-D attention mask and position ids for a verification pass with look-ahead blocks.

    Layout of the query: ``num_real`` real tokens (causal among themselves), then ``num_blocks``
    blocks of ``block`` look-ahead tokens. Block m sits after real token
    ``num_real - num_blocks + m``: it sees the cache, the real tokens up to that one and its own
    earlier look-ahead tokens (a tree attention mask), at the positions that follow that token.

    Returns:
        mask: (1, 1, Q, n_cached + Q) additive float mask (0 = attend, dtype min = blocked),
            Q = num_real + num_blocks * block.
        position_ids: (1, Q) int64.
    """
    q_len = num_real + num_blocks * block
    allowed = torch.zeros((q_len, n_cached + q_len), dtype=torch.bool, device=device)
    allowed[:, :n_cached] = True
    real = torch.arange(num_real, device=device)
    allowed[:num_real, n_cached:n_cached + num_real] = real[:, None] >= real[None, :]
    positions = torch.empty(q_len, dtype=torch.long, device=device)
    positions[:num_real] = n_cached + real
    tri = torch.ones((block, block), dtype=torch.bool, device=device).tril()
    for m in range(num_blocks):
        start, anchor = num_real + m * block, num_real - num_blocks + m  # block m follows real token `anchor`
        allowed[start:start + block, n_cached:n_cached + anchor + 1] = True
        allowed[start:start + block, n_cached + start:n_cached + start + block] = tri
        positions[start:start + block] = n_cached + anchor + 1 + torch.arange(block, device=device)
    mask = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)
    return mask[None, None], positions[None]


class LookaheadDrafter(Drafter):
    """PaSS's drafter: the target itself with L look-ahead embeddings appended. With look-ahead
    adapters in ``lookahead.adapters`` (method ``pass-lora``, an extension), low-rank adapters act at
    the look-ahead tokens' rows of each pass that carries them, and nowhere else.

    Args:
        lookahead: the look-ahead embeddings ((L*R, D); trained, or the fixed-token baseline).
        fused: use the fused step (an extension beyond the paper).
        tree: a token tree (an extension, docs/algorithms.md section 4b): the look-ahead positions' top-i
            fill its nodes (deterministic candidates, q one-hot), cut below depth L; None drafts a chain.

    Raises:
        ValueError: a tree with the fused step (not supported); from ``start``: look-ahead embeddings
            trained for another model.
    """

    def __init__(self, lookahead: LookaheadEmbeddings, fused: bool = False, tree: TreeSpec | None = None):
        if fused and tree is not None:
            raise ValueError("token trees do not work with the fused step yet: use one or the other")
        self.lookahead, self.fused, self.shape = lookahead, bool(fused), tree

    def start(self, run: TargetRun) -> None:
        super().start(run)
        self.lookahead.check_compatible(run.loaded)
        self.la = self.lookahead.for_model(run.loaded)  # (L*R, D)
        self.block = self.lookahead.block_len  # learned tokens per block, L*R
        self.draft_rows = torch.tensor(self.lookahead.draft_indices(), device=run.loaded.device)  # (L,) in a block
        self.next: tuple[torch.Tensor, torch.Tensor] | None = None  # fused: drafts and q for the next step
        self.adapters = self.lookahead.adapters  # look-ahead adapters (pass-lora, extension) or None
        self.tree = self.shape.within(len(self.draft_rows)) if self.shape is not None else None

    def makes_exact_token(self) -> bool:
        return not self.fused  # the paper's drafting pass samples the next token at x_n

    def most_drafts(self) -> int:
        return len(self.draft_rows)  # L of the embeddings in use (a file's own L)

    def _gate(self, rows: torch.Tensor):
        """Context for a pass whose look-ahead tokens sit at query ``rows`` (G,): the look-ahead adapters
        act there (``pass-lora``); a no-op without adapters (the paper's PaSS)."""
        if self.adapters is None:
            return nullcontext()
        return self.adapters.gated(self.run.loaded.model.get_decoder(), rows)

    def _sample_drafts(self, la_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(L, V) look-ahead logits -> drafts (L,) and their processed q (L, V)."""
        q = logits_to_probs(la_logits, self.run.settings)
        return sample(q, self.run.generator), q

    def propose(self, uncached: list[int], committed: list[int], max_drafts: int) -> Proposal:
        loaded = self.run.loaded
        if self.fused:
            if self.next is None:  # first step: the prefill pass drafts (block after the prompt)
                return no_drafts(loaded.vocab_size, loaded.device)
            (drafts, q), self.next = self.next, None
            return Proposal(drafts, q)
        # drafting pass over [x_n, LA_1..LA_j] (x_n: the uncached tokens, the whole prompt at first): the first j
        # look-ahead positions only, j = the drafts this step can verify (causal attention: LA_1..LA_j read the
        # same as in the whole block, so the drafts are the same; k = 0 leaves a plain pass for the exact token)
        model, t = loaded.model, len(uncached)
        j = min(len(self.draft_rows), max(max_drafts, 0))
        block = self.rows_for(j)  # look-ahead rows appended, up to L*R
        x = model.get_input_embeddings()(torch.tensor([uncached], device=loaded.device))  # (1, T, D)
        rows = torch.arange(t - 1, t + block, device=loaded.device)  # last real token, then the block
        with self._gate(torch.arange(t, t + block, device=loaded.device)):  # adapters at the block only
            logits = target_forward(model, self.run.cache, rows,
                                    inputs_embeds=torch.cat([x, self.la[None, :block]], 1),
                                    plain=self.run.plain_head).logits  # (1 + rows, V)
        p_exact = logits_to_probs(logits[:1], self.run.settings)  # (1, V)
        exact = int(sample(p_exact, self.run.generator)[0])
        tree = None
        if self.tree is not None and j:  # the look-ahead positions' top-i fill the tree, cut at depth j (4b)
            tree = self.tree.within(j)
            drafts = tree.candidates(logits[1 + self.draft_rows[:j]])  # (N,)
            q = torch.nn.functional.one_hot(drafts, logits.shape[-1]).to(torch.float32)  # (N, V)
        elif j:
            drafts, q = self._sample_drafts(logits[1 + self.draft_rows[:j]])  # (j,), (j, V)
        else:  # no draft fits (the token budget, or k = 0 chosen): the exact token alone
            drafts = torch.zeros(0, dtype=torch.long, device=loaded.device)
            q = torch.zeros((0, logits.shape[-1]), device=loaded.device)
        crop_to(self.run.cache, cache_len(self.run.cache) - block)  # look-ahead entries never survive
        margin = logit_margins(logits[:1])[0] if self.run.settings.greedy else None
        top = top_n(p_exact[0]) if self.run.settings.inspect else None
        return Proposal(drafts, q, exact=exact, target_passes=1, exact_margin=margin, exact_top=top, tree=tree)

    def rows_for(self, k: int) -> int:
        """Look-ahead rows a drafting pass appends for k drafts: up to d_k's row (0 for k = 0; L*R for k = L)."""
        return int(self.draft_rows[k - 1]) + 1 if k > 0 else 0

    def step_cost(self) -> dict:
        if self.fused:  # 1 pending + k drafts, then one look-ahead block per acceptance length 0..k
            return dict(width=lambda k: 1 + k + (k + 1) * self.block)
        # the paper's step: a drafting pass over the pending token and the look-ahead rows of k drafts (the exact
        # token, paid at k = 0 too), then verification of k drafts
        return dict(extra_tokens=1.0, extra_width=lambda k: 1 + self.rows_for(k))

    def extension(self, n_cached: int, num_real: int, k: int) -> Extension | None:
        if not self.fused:
            return None
        num_blocks = k + 1  # one block per possible acceptance length m = 0..k
        mask, positions = fused_mask(n_cached, num_real, self.block, num_blocks, self.la.dtype, self.la.device)
        return Extension(self.la.repeat(num_blocks, 1)[None], mask, positions,
                         gate=self._gate if self.adapters is not None else None)

    def accepted(self, m: int, out: TargetOutput, extra_rows: torch.Tensor, num_new: int) -> None:
        if self.fused:  # block m followed the last accepted token: its drafts are the next step's
            self.next = self._sample_drafts(extra_rows[m * self.block + self.draft_rows])
