"""Classic speculative sampling in the loop: a draft model proposes k tokens one at a time (Leviathan et al. 2022,
section 2; Chen et al. 2023, algorithm 2; docs/algorithms.md section 2).

```
drafter state: the draft model's own KV cache and the token ids it holds (``held``), a prefix of the
               committed tokens after every step
propose        catch up: crop ``held`` to its longest common prefix with the committed tokens and feed
               the rest; then k draft passes: q_i = logits_to_probs(draft logits), d_i ~ q_i, d_i fed to
               the next pass (d_k never is)
accepted(m)    roll back: keep the committed tokens and d_1..d_min(m, k-1) in the draft cache
```

q goes through the same ``sampling.logits_to_probs`` as p (temperature, top-k, top-p), which keeps the output
exactly the target's (Leviathan et al. 2022, theorem 1). The draft model's logits are cut (or padded with -inf)
to the target's vocabulary V when its output head is wider.
"""

from __future__ import annotations

import os

import torch

from pass_core.decoding.cache import cache_len, crop_to, new_cache
from pass_core.decoding.drafting import Drafter, Proposal, TargetRun, no_drafts
from pass_core.decoding.sampling import logits_to_probs, sample
from pass_core.decoding.target import TargetOutput, plain_head, target_forward
from pass_core.drafters.draft_model.models import DraftModel


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two id lists."""
    return len(os.path.commonprefix([a, b]))


class DraftModelDrafter(Drafter):
    """A separate draft model with the target's vocabulary drafts k tokens autoregressively.

    Args:
        draft: the ``DraftModel`` (``draft_model.models``); its ``cost`` (in one-token target passes per draft
            token) seeds the cost-aware draft lengths when known.

    k = min(``settings.num_lookahead``, the drafts the loop can still use). ``drafter_passes`` counts the draft
    model's passes (k per drafting step).
    """

    def __init__(self, draft: DraftModel):
        self.draft = draft

    def start(self, run: TargetRun) -> None:
        super().start(run)
        self.cache = new_cache(self.draft.model)
        self.held: list[int] = []  # token ids whose K/V the draft cache holds, in order
        self.plain = plain_head(self.draft.model)
        self.vocab_size = run.loaded.vocab_size
        self.proposed_from = 0  # committed tokens when the last drafts were proposed
        self.k = 0

    @property
    def caches(self) -> dict:
        return {"draft_model_cache": self.cache}

    def step_cost(self) -> dict:
        # k draft passes per drafting step, each costing the learned drafter_cost (seeded by the model's cost)
        return dict(drafter_pass=True, per_draft=True, drafter_prior=self.draft.cost)

    def _next_logits(self, ids: list[int]) -> torch.Tensor:
        """Feed ``ids`` to the draft model after its cache; (V,) float32 logits of the last one, on the target's
        vocabulary."""
        x = torch.tensor([ids], device=self.run.loaded.device)  # (1, T)
        rows = torch.tensor([len(ids) - 1], device=x.device)
        logits = target_forward(self.draft.model, self.cache, rows, input_ids=x, plain=self.plain).logits[0]
        self.held += ids
        logits = logits.float()
        if logits.shape[-1] > self.vocab_size:  # a padded head: rows past the tokenizer's vocabulary
            return logits[: self.vocab_size]
        if logits.shape[-1] < self.vocab_size:
            return torch.nn.functional.pad(logits, (0, self.vocab_size - logits.shape[-1]), value=float("-inf"))
        return logits

    def propose(self, uncached: list[int], committed: list[int], max_drafts: int) -> Proposal:
        loaded, settings = self.run.loaded, self.run.settings
        k = min(settings.num_lookahead, max_drafts)
        self.k, self.proposed_from = 0, len(committed)
        if k < 1:
            return no_drafts(loaded.vocab_size, loaded.device)
        keep = common_prefix(self.held, committed)  # normally all of ``held``; less after outside changes
        keep = min(keep, len(committed) - 1)  # the last committed token is fed, so that its logits come out
        crop_to(self.cache, keep)
        self.held = self.held[:keep]
        feed, drafts, qs = committed[keep:], [], []
        for _ in range(k):
            q = logits_to_probs(self._next_logits(feed), settings)  # (V,)
            d = int(sample(q[None], self.run.generator)[0])
            drafts.append(d)
            qs.append(q)
            feed = [d]
        self.k = k
        return Proposal(torch.tensor(drafts, dtype=torch.long, device=loaded.device), torch.stack(qs),
                        drafter_passes=k)

    def accepted(self, m: int, out: TargetOutput, extra_rows: torch.Tensor, num_new: int) -> None:
        if not self.k:
            return
        keep = self.proposed_from + min(m, self.k - 1)  # d_k was never fed to the draft model
        crop_to(self.cache, keep)
        self.held = self.held[:keep]
        if cache_len(self.cache) != len(self.held):
            raise RuntimeError(f"draft cache holds {cache_len(self.cache)} positions but {len(self.held)} token ids")
