"""The drafter seam of the speculative loop, in the spirit of transformers' candidate generators.

A ``Drafter`` proposes drafts with their processed q (and, for PaSS, the exact token its
drafting pass samples), may add rows to the verification pass (the fused step's look-ahead
blocks), may read the verification pass's hidden states (ParallelSpec), and learns how many
drafts were accepted so that it can roll back its own state. ``speculative.generate_speculative``
is the one loop that drives every drafter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ContextManager

import torch

from pass_core.decoding.inspection import TopN
from pass_core.decoding.settings import DecodeSettings
from pass_core.decoding.target import TargetOutput
from pass_core.decoding.tree import TreeSpec


@dataclass
class TargetRun:
    """What a drafter may use of the run it drafts for.

    Attributes:
        loaded: the ``LoadedModel`` (target model, tokenizer, device, dtype).
        cache: the target's KV cache (a drafter that runs target passes extends and crops it).
        settings: the run's ``DecodeSettings`` (the processing of q must equal p's).
        generator: the run's one ``torch.Generator``.
        plain_head: ``target.plain_head(model)``, checked once per run.
    """

    loaded: object
    cache: object
    settings: DecodeSettings
    generator: torch.Generator
    plain_head: bool


@dataclass(frozen=True)
class Proposal:
    """Drafts for one step.

    Attributes:
        drafts: (k,) int64 draft ids d_1..d_k (k may be 0).
        q: (k, V) float32 processed draft distributions, d_i ~ q_i.
        exact: a token sampled by the target at a real position of a drafting pass (PaSS), or
            None. When set, the drafter has put every uncached token into the target cache and
            ``exact`` becomes the pending token.
        target_passes: target forward passes spent drafting (PaSS: 1).
        drafter_passes: forward passes of a separate drafter model (ParallelSpec: 1).
        exact_margin: top-1 minus top-2 logit where ``exact`` was sampled (greedy runs), or None.
        exact_top: top-n of the distribution ``exact`` was drawn from (``DecodeSettings.inspect``).
        note: one line on where the drafts came from, for the token inspector (prompt lookup: where in the
            context its n-gram matched), or "".
        tree: the shape when the drafts are a token tree's N nodes in its node order (docs/algorithms.md
            section 4b; ``drafts`` (N,), ``q`` (N, V) one-hot: deterministic top-i candidates), or None for
            a chain d_1..d_k.
    """

    drafts: torch.Tensor
    q: torch.Tensor
    exact: int | None = None
    target_passes: int = 0
    drafter_passes: int = 0
    exact_margin: float | None = None
    exact_top: TopN | None = None
    note: str = ""
    tree: TreeSpec | None = None


def no_drafts(vocab_size: int, device, **counts) -> Proposal:
    """A ``Proposal`` with k = 0 (the step is a plain target step)."""
    return Proposal(torch.zeros(0, dtype=torch.long, device=device),
                    torch.zeros((0, vocab_size), device=device), **counts)


@dataclass(frozen=True)
class Extension:
    """Extra query rows a drafter appends to the verification pass (the fused step, docs/algorithms.md
    section 4). The real tokens come first, then ``embeds``.

    Attributes:
        embeds: (1, E, D) input embeddings of the extra rows.
        attention_mask: (1, 1, R + E, cached + R + E) additive float mask over the whole query
            (R real tokens), 0 = attend.
        position_ids: (1, R + E) int64.
        gate: ``rows -> context manager`` under which the pass runs, given the (E,) query indices of the
            extra rows (look-ahead adapters act there only, an extension), or None.
    """

    embeds: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    gate: Callable[[torch.Tensor], ContextManager] | None = None


class Drafter:
    """Base class of the drafters driven by ``generate_speculative``.

    Class attributes:
        reads_hidden_states: the verification pass must return the target's hidden states.
    """

    reads_hidden_states = False

    def start(self, run: TargetRun) -> None:
        """Begin a run (fresh caches). Called once before the first ``propose``."""
        self.run = run

    def makes_exact_token(self) -> bool:
        """True when every proposal carries an exact token (PaSS's drafting pass, section 3): it takes one of
        the run's remaining positions before the drafts, so the loop offers one draft fewer."""
        return False

    def most_drafts(self) -> int:
        """The most drafts one step can propose (after ``start``): ``settings.num_lookahead``, unless the
        drafter has fewer (a ParallelSpec drafter trained for k = 3) or more (look-ahead embeddings of a
        file's own L). Cost-aware draft lengths choose k up to this."""
        return self.run.settings.num_lookahead

    def propose(self, uncached: list[int], committed: list[int], max_drafts: int) -> Proposal:
        """Draft for the next step.

        Args:
            uncached: committed tokens not yet in the target cache (the prompt at first, then the
                pending token).
            committed: every committed token id (prompt and output).
            max_drafts: drafts that can still be used (the loop verifies at most this many).
        """
        raise NotImplementedError

    def extension(self, n_cached: int, num_real: int, k: int) -> Extension | None:
        """Extra rows for the verification pass over ``num_real`` real tokens (uncached tokens and
        k drafts) after ``n_cached`` cached positions, or None."""
        return None

    def accepted(self, m: int, out: TargetOutput, extra_rows: torch.Tensor, num_new: int) -> None:
        """Learn the verification's outcome and roll back the drafter's own state.

        Args:
            m: accepted drafts.
            out: the verification pass's output (hidden states when ``reads_hidden_states``); after a
                tree, its rows along the accepted path only (the uncached tokens, then the m nodes).
            extra_rows: (E, V) logits of the ``extension`` rows (E = 0 without one).
            num_new: positions the target cache gained for good (uncached tokens + m drafts).
        """

    def step_cost(self) -> dict:
        """How a step with k drafts is paid for, for ``draft_length.CostAwareDraftLength`` (keyword arguments:
        ``width`` k -> tokens of the verification pass, ``drafter_cost`` k -> the drafter's cost in AR steps,
        ``extra_tokens`` / ``extra_width``: tokens and the width of a drafting pass of the target, a number or
        k -> the width). Default: a verification pass over the pending token and k drafts, nothing else."""
        return {}

    @property
    def caches(self) -> dict:
        """The drafter's own KV caches by name (for tests and inspection); {} when it has none."""
        return {}
