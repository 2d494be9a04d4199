"""ParallelSpec's drafter in the speculative loop (Xiao et al. 2024, arXiv 2410.05589; docs/algorithms.md
section 5).

```
drafter state: its KV cache holds real positions t for the pairs (x_{t+1}, h_t) it has read;
               the features h_t from the last verification wait in ``pending_hidden``.
propose        one drafter pass over [pending pairs, MASK_1..MASK_{k-1}] -> q_1..q_k, d_i ~ q_i
               (all k drafts at once); the mask entries leave the drafter cache again
accepted(m)    the h_t of the uncached tokens and of the m accepted drafts become pending
```

The first step has nothing to read yet: it verifies no draft (the target's prefill samples one
token, labelled ``exact``). The loop verifies the drafts and rolls back the target cache.
"""

from __future__ import annotations

import copy
import dataclasses

import torch

from pass_core.runtime.backends import pack_linears, packed_linear
from pass_core.decoding.cache import cache_len
from pass_core.decoding.drafting import Drafter, Proposal, TargetRun, no_drafts
from pass_core.drafters.parallelspec.model import ParallelDrafter, TargetParts
from pass_core.decoding.sampling import logits_to_probs, sample
from pass_core.decoding.target import TargetOutput
from pass_core.decoding.tree import TreeSpec


def packed_for_onednn(drafter: ParallelDrafter, parts: TargetParts) -> tuple[ParallelDrafter, TargetParts]:
    """The drafter for a target on the ``onednn`` backend: a fresh copy whose linear layers (fc and the decoder
    layer's seven projections) run oneDNN's packed kernel, and ``parts`` with the draft-vocabulary head packed too
    (``backends.pack_linears`` / ``packed_linear``; without a draft vocabulary the head stays as it is). The
    original is not touched, so a later run on another backend gets it unchanged. Made per run (about 30 ms for
    the shipped drafter on this CPU, before the first step, outside the timed steps). Results differ from the plain
    drafter by float32 rounding only, and the output stays exactly the target's whatever the drafts.

    Args:
        drafter: a float32 CPU ``ParallelDrafter`` (after ``for_model``).
        parts: its ``target_parts`` for the run's model.

    Raises:
        ValueError: a drafter or head that is not float32 on the CPU.
    """
    packed = copy.deepcopy(drafter)
    pack_linears(packed)
    if drafter.draft_vocab is None:
        return packed, parts
    return packed, dataclasses.replace(parts, head=packed_linear(parts.head_weight, parts.head_bias, min_rows=1))


class ParallelSpecDrafter(Drafter):
    """A one-layer parallel drafter that reads the target's hidden states (EAGLE style).

    Args:
        drafter: a ``ParallelDrafter`` for the target (moved to its device and dtype at ``start``).
        min_confidence: confidence gate, an *extension* (dynamic draft length, in the spirit of
            EAGLE-2's confidence-based drafting): when the drafter's top-1 probability for d_1
            (temperature 1) is below it, the step verifies no draft (a plain target step, cheaper
            than a (k+1)-token pass). All or nothing *(our choice: on CPU BLAS a 2- or 3-token pass
            is not cheaper than a 4-token one)*. It depends on the drafter alone, so the output stays
            exactly the target's. None: the drafter file's calibrated value (``info["min_confidence"]``;
            0 = always k drafts).
        tree: a token tree (an extension, docs/algorithms.md section 4b): the per-position top-i of the one
            drafter pass fill its nodes (deterministic candidates, q one-hot), cut below depth k; None
            drafts a chain d_i ~ q_i.

    k = min(``settings.num_lookahead``, ``drafter.num_draft``): a drafter trained for k drafts gives
    fewer exactly as trained (mask i never sees later masks).

    Raises (from ``start``):
        ValueError: a drafter trained for another model.
    """

    reads_hidden_states = True

    def __init__(self, drafter: ParallelDrafter, min_confidence: float | None = None, tree: TreeSpec | None = None):
        self.drafter, self.shape = drafter, tree
        self.min_confidence = float(drafter.info.get("min_confidence", 0.0) if min_confidence is None
                                    else min_confidence)

    def start(self, run: TargetRun) -> None:
        super().start(run)
        self.drafter = self.drafter.for_model(run.loaded)
        self.parts = self.drafter.target_parts(run.loaded)
        self.pass_drafter = self.drafter  # the one that drafts (packed on the onednn backend)
        if getattr(run.loaded, "backend", None) == "onednn":
            self.pass_drafter, self.parts = packed_for_onednn(self.drafter, self.parts)
        self.k_max = min(run.settings.num_lookahead, self.drafter.num_draft)
        self.tree = self.shape.within(self.k_max) if self.shape is not None else None
        if self.tree is not None:
            self.k_max = self.tree.max_depth  # no drafter row beyond the tree's deepest node
        self.cache = self.pass_drafter.new_cache()
        self.pending_hidden: torch.Tensor | None = None  # (1, P, F*D): h_t of positions not yet read

    def most_drafts(self) -> int:
        return self.k_max  # min(L, the drafter's k)

    @property
    def caches(self) -> dict:
        return {"drafter_cache": self.cache}

    def step_cost(self) -> dict:
        return dict(drafter_pass=True)  # one drafter pass when the step drafts; a plain target step otherwise

    def propose(self, uncached: list[int], committed: list[int], max_drafts: int) -> Proposal:
        loaded = self.run.loaded
        k = min(self.k_max, max_drafts)
        if self.pending_hidden is None or k == 0:  # the prefill, or no draft fits the budget
            return no_drafts(loaded.vocab_size, loaded.device)
        logits = self.pass_drafter.draft(self.parts, committed, self.pending_hidden, k, self.cache)  # (k, V)
        self.pending_hidden = None
        if self.min_confidence > 0 and float(logits[0].float().softmax(-1).max()) < self.min_confidence:
            return no_drafts(loaded.vocab_size, loaded.device, drafter_passes=1)  # unsure of d_1: plain step
        if self.tree is not None:  # the top-i of each position fill the tree (section 4b)
            tree = self.tree.within(k)
            drafts = tree.candidates(logits)  # (N,)
            q = torch.nn.functional.one_hot(drafts, logits.shape[-1]).to(torch.float32)  # (N, V)
            return Proposal(drafts, q, drafter_passes=1, tree=tree)
        q = logits_to_probs(logits, self.run.settings)  # (k, V)
        return Proposal(sample(q, self.run.generator), q, drafter_passes=1)

    def accepted(self, m: int, out: TargetOutput, extra_rows: torch.Tensor, num_new: int) -> None:
        new = self.drafter.read_features(out.hidden_states)[:, :num_new]  # (1, num_new, F*D)
        self.pending_hidden = new if self.pending_hidden is None else torch.cat([self.pending_hidden, new], 1)
        held, pending, target = cache_len(self.cache), self.pending_hidden.shape[1], cache_len(self.run.cache)
        if held + pending != target:
            raise RuntimeError(f"drafter cache invariant broken: {held} cached + {pending} pending != {target} "
                               "target positions")
