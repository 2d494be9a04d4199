"""The one speculative decoding loop, for every drafter (docs/algorithms.md sections 2-5).

```
state: committed x_1..x_n; the target cache holds all but the pending token(s) ``uncached``.
per step:
  1. draft      proposal = drafter.propose(...)        drafts d_1..d_k with q_1..q_k
                (PaSS: its drafting pass also samples the exact token, which becomes pending)
  2. verify     one target pass over [uncached, d_1..d_k] (+ the drafter's extension rows)
                -> p_1..p_{k+1}; speculative sampling keeps m drafts and draws the next token
  3. roll back  crop the target cache to the committed tokens; the drafter rolls back its own
  4. commit     exact, d_1..d_m, resampled / bonus token (up to EOS or max_new_tokens)
  5. emit       one StepEvent
```

p = target, q = draft (Leviathan et al. 2022 notation). The output distribution is exactly the
target's for any drafter, because the acceptance rule (``verification.verify_drafts``) compares
the same processed p and q (``sampling.logits_to_probs``).
"""

from __future__ import annotations

from contextlib import nullcontext
from itertools import count
from typing import Callable, Iterator

import torch

from pass_core.decoding.bookkeeping import draft_records, start_run, step_proposal, token_records
from pass_core.decoding.cache import StepClock, cache_len, check_invariant, keep_positions, new_cache
from pass_core.decoding.draft_length import CostAwareDraftLength
from pass_core.decoding.drafting import Drafter, Extension, TargetRun
from pass_core.decoding.events import StepEvent
from pass_core.decoding.inspection import PositionInspection, inspect_verification
from pass_core.decoding.sampling import logit_margins, logits_to_probs
from pass_core.decoding.settings import DecodeSettings
from pass_core.decoding.target import TargetOutput, plain_head, target_forward
from pass_core.decoding.tree import TreeSpec
from pass_core.decoding.tree_verification import (TreeVerification, along_path, tree_draft_records,
                                                  tree_step_proposal, tree_token_records, verify_tree)
from pass_core.decoding.verification import VerificationResult, verify_drafts

#: The acceptance rule's signature (a test seam for negative controls).
VerifyFn = Callable[..., VerificationResult]
#: The token-tree acceptance rule's signature (``tree_verification.verify_tree``; a test seam).
VerifyTreeFn = Callable[..., TreeVerification]
#: Called after every step with ``target_cache``, ``drafter`` and ``committed`` ids (a test seam).
InspectFn = Callable[[dict], None]


def verification_pass(run: TargetRun, real: list[int], k: int, extension: Extension | None,
                      hidden_states: bool = False, tree: TreeSpec | None = None) -> tuple[TargetOutput, torch.Tensor]:
    """One target pass over the real tokens ``real`` (uncached tokens, then k drafts), plus the
    drafter's extension rows; ``hidden_states`` also returns the target's hidden states. With a ``tree``
    the k drafts are its nodes, under its attention mask and position ids (docs/algorithms.md section 4b).

    Returns:
        (output whose ``logits`` are (k+1, V): the rows of the last k+1 real tokens, i.e. p_1..p_{k+1};
        (E, V) logits of the extension rows).
    """
    model, dev = run.loaded.model, run.loaded.device
    ids = torch.tensor([real], device=dev)  # (1, R)
    last = torch.arange(len(real) - k - 1, len(real), device=dev)  # rows of p_1..p_{k+1}
    if extension is None:
        mask = positions = None
        if tree is not None:  # the nodes see the prefix, their ancestors and themselves
            n_cached, num_real = cache_len(run.cache), len(real) - k
            mask = tree.attention_mask(n_cached, num_real, model.get_input_embeddings().weight.dtype, dev)
            positions = tree.position_ids(n_cached, num_real, dev)
        out = target_forward(model, run.cache, last, input_ids=ids, hidden_states=hidden_states,
                             attention_mask=mask, position_ids=positions, plain=run.plain_head)
        return out, out.logits[:0]
    extra = torch.arange(len(real), len(real) + extension.embeds.shape[1], device=dev)  # (E,) query rows
    rows = torch.cat([last, extra])
    embeds = torch.cat([model.get_input_embeddings()(ids), extension.embeds], 1)  # (1, R + E, D)
    with extension.gate(extra) if extension.gate is not None else nullcontext():
        out = target_forward(model, run.cache, rows, inputs_embeds=embeds, attention_mask=extension.attention_mask,
                             position_ids=extension.position_ids, hidden_states=hidden_states,
                             plain=run.plain_head)
    return TargetOutput(out.logits[: k + 1], out.hidden_states), out.logits[k + 1:]


def cost_aware_lengths(curve: dict, drafter: Drafter) -> CostAwareDraftLength:
    """The run's ``CostAwareDraftLength``: this machine's pass-cost curve ``curve`` (the dict of
    ``runtime.pass_cost.measure_pass_cost``: "c" relative costs, "ms" times in milliseconds) and the
    drafter's ``step_cost``, up to the drafter's ``most_drafts`` (call after ``drafter.start``)."""
    return CostAwareDraftLength(curve["c"], drafter.most_drafts(), one_pass_s=curve["ms"][0] / 1000,
                                **drafter.step_cost())


def _inspect(inspect_fn: InspectFn | None, cache, drafter: Drafter, state) -> None:
    if inspect_fn is not None:
        inspect_fn({"target_cache": cache, "drafter": drafter, "committed": state.committed})


@torch.inference_mode()
def generate_speculative(loaded, prompt: str, settings: DecodeSettings, drafter: Drafter, *, method: str,
                         verify_fn: VerifyFn = verify_drafts,
                         verify_tree_fn: VerifyTreeFn = verify_tree, inspect_fn: InspectFn | None = None,
                         pass_cost: dict | None = None) -> Iterator[StepEvent]:
    """Speculative decoding with any ``Drafter`` (batch size 1).

    Args:
        loaded: a ``LoadedModel``.
        prompt: user text (wrapped in the chat template unless ``settings.chat_template`` is False).
        settings: validated ``DecodeSettings``.
        drafter: proposes the drafts (``LookaheadDrafter`` for PaSS, ``ParallelSpecDrafter``, ...).
        method: the registry key written into every event.
        verify_fn: the acceptance rule (test seam for broken rules).
        verify_tree_fn: the acceptance rule of token trees (test seam for broken rules).
        inspect_fn: test seam, see ``InspectFn``.
        pass_cost: this machine's pass-cost curve (``runtime.pass_cost``), needed when
            ``settings.auto_drafts`` is on: the loop is given it and never measures the machine itself.

    Yields:
        One ``StepEvent`` per step: tokens labelled exact / accepted / rejected / resampled / bonus,
        every verified draft with q, p, u and its decision, ``num_verified_drafts`` = k, target and
        drafter passes, and drafting / verification times in seconds (device synchronised). A token-tree
        step (``Proposal.tree``, not a chain) has one draft per node and ``tree_parents``.

    Raises:
        ValueError: an empty prompt or one too long for the model's context, or ``settings.auto_drafts``
            without ``pass_cost``.
    """
    if settings.auto_drafts and pass_cost is None:
        raise ValueError("Cost-aware draft lengths need this machine's pass-cost curve (pass_cost=...).")
    state, gen = start_run(loaded, prompt, settings)
    clock, cache = StepClock(loaded.device), new_cache(loaded.model)
    run = TargetRun(loaded, cache, settings, gen, plain_head(loaded.model))
    drafter.start(run)
    lengths = cost_aware_lengths(pass_cost, drafter) if settings.auto_drafts else None
    uncached = list(state.prompt_ids)
    for step in count(1):
        # 0. cost-aware draft length (extension): from the events already emitted only
        choice = lengths.choose() if lengths is not None else None
        room = max(state.remaining - 1 - drafter.makes_exact_token(), 0)  # drafts that fit before the budget
        budget = room if choice is None else min(room, choice.k)
        t0 = clock.now()
        # 1. draft
        proposal = drafter.propose(uncached, state.committed, budget)
        t1 = clock.now()
        exact, passes = proposal.exact, proposal.target_passes + 1
        counts = dict(method=method, step=step, drafter_passes=proposal.drafter_passes,
                      draft_choice=choice.note if choice else "", draft_note=proposal.note)
        if exact is not None:
            uncached = [exact]  # the drafting pass cached every earlier token
            if exact in state.eos or state.remaining <= 1:  # the exact token ends the run
                records, reason = state.take([(exact, "exact")])
                _inspect(inspect_fn, cache, drafter, state)
                top = (PositionInspection(0, proposal.exact_top),) if proposal.exact_top is not None else ()
                yield StepEvent(**counts, tokens=token_records(records, None, state.detok, 0, [proposal.exact_margin]),
                                forward_passes=passes - 1, drafting_s=t1 - t0, step_s=t1 - t0, finish_reason=reason,
                                inspection=top)
                return
        limit = min(state.remaining - (exact is not None) - 1, budget)  # draft positions that fit
        tree = proposal.tree.within(limit) if proposal.tree is not None else None
        tree = None if tree is not None and tree.is_chain else tree  # a one-chain tree runs as the chain it is
        k = min(len(proposal.drafts), limit) if tree is None else tree.num_nodes  # drafts (tree: nodes) verified
        drafts, q = proposal.drafts[:k], proposal.q[:k]
        # 2. verify
        n_cached = cache_len(cache)
        real = uncached + drafts.tolist()
        out, extra_rows = verification_pass(run, real, k, drafter.extension(n_cached, len(real), k),
                                            drafter.reads_hidden_states, tree)
        p = logits_to_probs(out.logits, settings)  # (k+1, V); a tree: the root's row, then one per node
        result = verify_fn(drafts, q, p, gen) if tree is None else verify_tree_fn(tree, drafts, q, p, gen)
        m = result.num_accepted
        path = list(range(m)) if tree is None else list(result.path)  # the accepted drafts' indices
        # 3. roll back: keep the uncached tokens and the m accepted drafts (a tree: gathered to follow them)
        num_new = len(uncached) + m
        keep_positions(cache, n_cached + len(uncached), [n_cached + len(uncached) + j for j in path])
        t2 = clock.now()
        drafter.accepted(m, out if tree is None else along_path(out, len(uncached), path), extra_rows, num_new)
        t3 = clock.now()
        # 4. commit
        propose = step_proposal if tree is None else tree_step_proposal
        records, reason = state.take(propose(exact, drafts.tolist(), result))
        rows = [0] + [j + 1 for j in path]  # p rows of the accepted drafts' parents and of the next token
        margins = None
        if settings.greedy:
            margins = ([proposal.exact_margin] if exact is not None else []) + logit_margins(out.logits[rows])
        if not reason:
            check_invariant(cache, len(state.committed))
        uncached = [state.output[-1]]
        _inspect(inspect_fn, cache, drafter, state)
        # 5. emit
        # display data for the token inspector, after the timed work
        if tree is None:
            inspection = inspect_verification(p, q, m, exact=proposal.exact_top) if settings.inspect else ()
            rejected = int(drafts[m]) if m < k else None
            q_draft = q[torch.arange(k), drafts].tolist()
            records_of_drafts = draft_records(state.detok, drafts.tolist(), q_draft, result if k else None, records)
        else:  # along the accepted path; every node's q, p, p_res and decision are in its draft record
            law = None if result.next_is_bonus else result.next_law  # p_res: the resampled token's law
            inspection = (inspect_verification(p[rows], q[path], m, exact=proposal.exact_top, residual=law)
                          if settings.inspect else ())
            records_of_drafts = tree_draft_records(state.detok, tree, drafts.tolist(), result, records)
        tokens = (token_records(records, rejected, state.detok, (exact is not None) + m, margins) if tree is None
                  else tree_token_records(records, records_of_drafts, tree.parents, margins))
        event = StepEvent(**counts, tokens=tokens,
                          drafts=records_of_drafts, num_verified_drafts=k, forward_passes=passes,
                          drafting_s=(t1 - t0) + (t3 - t2), verification_s=t2 - t1, step_s=t3 - t0,
                          finish_reason=reason, inspection=inspection, tree_parents=tree.parents if tree else ())
        if lengths is not None:
            lengths.observe(event)
        yield event
        if reason:
            return
