"""ParallelSpec decoding (Xiao et al. 2024, arXiv 2410.05589; algorithms.md section 5) as a generator of events.

```
state: committed x_0..x_{n-1}; the target cache holds x_0..x_{n-2} (x_{n-1} is pending);
       the drafter cache holds its real positions t for pairs (x_{t+1}, h_t) it has seen,
       and the pairs whose h_t came from the last verification wait in ``pending``.
DRAFTING pass      drafter over [pending pairs, MASK_1..MASK_{k-1}] -> q_1..q_k, d_i ~ q_i
                   (one pass, all k drafts at once); crop the mask entries
VERIFICATION pass  target over [x_{n-1}, d_1..d_k] -> p_1..p_{k+1} and h_{n-1}..h_{n-1+k}
                   apply speculative sampling (algorithms.md section 2; p = target, q = draft);
                   crop the target cache to the committed tokens; the h of the pending token
                   and of the accepted drafts become the next pending pairs
tokens per step = m accepted + 1 resampled/bonus, for 1 target pass + 1 drafter pass
```

The first step is the target's prefill over the prompt (one token, labelled ``exact``: sampled
by the target at a real position, never a draft, as PaSS's).
"""

from __future__ import annotations

from typing import Callable, Iterator

import torch

from .cache import StepClock, cache_len, check_invariant, crop_to, new_cache
from .decoding import DraftFn, VerifyFn, _draft_records, _prepare, _step_tokens, _tokens, _with_rejected
from .events import StepEvent
from .parallelspec import ParallelDrafter
from .sampling import logits_to_probs, sample
from .settings import DecodeSettings
from .verification import verify_drafts

METHOD = "parallelspec"

#: A test seam called after every step with the run's internals (caches, committed ids, pending pairs).
InspectFn = Callable[[dict], None]


def _plain_head(model) -> bool:
    """True when logits are exactly ``lm_head(base_model(x))`` (no logit scaling or soft-capping)."""
    head, config = model.get_output_embeddings(), model.config
    scaled = any(getattr(config, name, None) not in (None, 1.0) for name in
                 ("logit_scale", "final_logit_softcapping", "logits_scaling", "output_multiplier_scale"))
    return isinstance(head, torch.nn.Linear) and not scaled and getattr(model, "base_model", model) is not model


def _target_pass(model, ids: list[int], cache, device, drafter: ParallelDrafter,
                 plain: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Target forward over ``ids`` after the cache.

    Returns:
        (T, V) logits and (1, T, F*D) the drafter's features of the target's hidden states
        (``ParallelDrafter.read_features``; F = 1: the last hidden state, after the final norm).

    For a plain output head the logits are computed as ``W @ h^T``: the same numbers up to
    rounding, and on CPU BLAS about twice as fast as ``linear`` for a few rows (the head is
    the largest matrix of a small model; measured 12 vs 27 ms for 4 rows of SmolLM2-135M).
    ``plain``: ``_plain_head(model)``, checked once per run by the caller (None: check here).
    """
    x = torch.tensor([ids], device=device)  # (1, T)
    if _plain_head(model) if plain is None else plain:
        states = model.base_model(input_ids=x, cache=cache, use_cache=True, output_hidden_states=True).hidden_states
        head = model.get_output_embeddings()
        logits = (head.weight @ states[-1][0].to(head.weight.dtype).T).T  # (T, V)
        return (logits if head.bias is None else logits + head.bias), drafter.read_features(states)
    out = model(input_ids=x, cache=cache, use_cache=True, output_hidden_states=True)
    return out.logits[0], drafter.read_features(out.hidden_states)


@torch.inference_mode()
def generate_parallelspec(loaded, prompt: str, settings: DecodeSettings, drafter: ParallelDrafter, *,
                          draft_fn: DraftFn | None = None, verify_fn: VerifyFn = verify_drafts,
                          inspect_fn: InspectFn | None = None, min_confidence: float | None = None
                          ) -> Iterator[StepEvent]:
    """ParallelSpec: a one-layer parallel drafter proposes k drafts in one pass; the target verifies them.

    Args:
        loaded: a ``LoadedModel``.
        prompt: user text.
        settings: validated ``DecodeSettings``; k = min(``num_lookahead``, ``drafter.num_draft``)
            (a drafter trained for k drafts can give fewer: mask i never sees later masks).
        drafter: a ``ParallelDrafter`` for this model (moved to its device and dtype).
        draft_fn: test seam replacing the drafter's drafts (one-hot q); the drafter still runs.
        verify_fn: test seam replacing the acceptance rule (negative controls).
        min_confidence: confidence gate, an *extension* (dynamic draft length, in the spirit of
            EAGLE-2's confidence-based drafting): when the drafter's top-1 probability for d_1
            (temperature 1) is below it, the step verifies no draft (a plain target step, cheaper
            than a (k+1)-token pass). All or nothing *(our choice: on CPU BLAS a 2- or 3-token pass
            is not cheaper than a 4-token one)*. It depends on the drafter alone, so the output stays
            exactly the target's. None: the drafter file's calibrated value
            (``info["min_confidence"]``; 0 = always k drafts).
        inspect_fn: test seam, called after each step with a dict of ``target_cache``,
            ``drafter_cache``, ``committed`` ids and ``pending_hidden`` ((1, P, D): h_t of the
            positions the drafter has not read yet).

    Yields:
        ``StepEvent`` (method "parallelspec"): tokens labelled exact (the prefill and gated steps) /
        accepted / rejected / resampled / bonus, drafts with q, p, u and the decision,
        ``forward_passes`` = target passes (1 per step), ``drafter_passes`` (1 per step
        with drafts), ``drafting_s`` and ``verification_s`` timed separately.

    Raises:
        ValueError: bad prompt, or a drafter trained for another model.
    """
    drafter = drafter.for_model(loaded)
    ids, state, gen = _prepare(loaded, prompt, settings)
    model, clock, dev = loaded.model, StepClock(loaded.device), loaded.device
    parts, k_max = drafter.target_parts(loaded), min(settings.num_lookahead, drafter.num_draft)
    plain = _plain_head(model)  # once per run, not in the timed loop
    if min_confidence is None:
        min_confidence = float(drafter.info.get("min_confidence", 0.0))
    target_cache, drafter_cache = new_cache(model), drafter.new_cache()

    # step 1: prefill; every prompt position becomes a pending pair (x_{t+1}, h_t)
    t0 = clock.now()
    logits, hidden = _target_pass(model, ids, target_cache, dev, drafter, plain)
    first = int(sample(logits_to_probs(logits[-1:], settings), gen)[0])
    t1 = clock.now()
    pending_h = hidden  # (1, P, D): h_t of the positions t not yet in the drafter cache
    records, reason = state.take([(first, "exact")])
    _inspect(inspect_fn, target_cache, drafter_cache, ids, state, pending_h)
    yield StepEvent(method=METHOD, step=1, tokens=_tokens(loaded, records), forward_passes=1,
                    verification_s=t1 - t0, step_s=t1 - t0, finish_reason=reason)
    step = 1
    while not reason:
        step += 1
        t0 = clock.now()
        k = min(k_max, max(state.remaining - 1, 0))  # drafts that can still be used
        # 1. drafting pass: all k drafts at once
        drafts, q = torch.zeros(0, dtype=torch.long, device=dev), torch.zeros((0, loaded.vocab_size), device=dev)
        drafter_passes = int(k > 0)
        if k:
            draft_logits = drafter.draft(parts, ids + state.output, pending_h, k, drafter_cache)  # (k, V)
            pending_h = None
            if min_confidence > 0 and float(draft_logits[0].float().softmax(-1).max()) < min_confidence:
                k, draft_logits = 0, draft_logits[:0]  # unsure of d_1: a plain target step is cheaper
            if draft_fn is not None and k:
                drafts = torch.tensor(draft_fn(ids + state.output, k), device=dev)
                q = torch.nn.functional.one_hot(drafts, loaded.vocab_size).float()
            elif k:
                q = logits_to_probs(draft_logits, settings)  # (k, V)
                drafts = sample(q, gen)  # (k,)
        t1 = clock.now()
        # 2. verification pass over [x_{n-1}, d_1..d_k]
        n = cache_len(target_cache)
        logits, hidden = _target_pass(model, [state.output[-1]] + drafts.tolist(), target_cache, dev, drafter, plain)
        result = verify_fn(drafts, q, logits_to_probs(logits, settings), gen)
        m = result.num_accepted
        crop_to(target_cache, n + 1 + m)  # keep the pending token and the accepted drafts
        new_h = hidden[:, : m + 1]  # (1, m+1, D): h of x_{n-1}, d_1..d_m
        pending_h = new_h if pending_h is None else torch.cat([pending_h, new_h], 1)
        t2 = clock.now()
        proposed, rejected = _step_tokens(None, drafts.tolist(), result, k)
        records, reason = state.take(proposed)
        if not reason:
            check_invariant(target_cache, len(ids) + len(state.output))
            assert cache_len(drafter_cache) + pending_h.shape[1] == cache_len(target_cache), (
                f"drafter cache invariant broken: {cache_len(drafter_cache)} cached + {pending_h.shape[1]} pending "
                f"!= {cache_len(target_cache)} target positions")
        _inspect(inspect_fn, target_cache, drafter_cache, ids, state, pending_h)
        q_all = q[torch.arange(len(drafts)), drafts].tolist()
        yield StepEvent(
            method=METHOD, step=step, tokens=_with_rejected(records, rejected, state.detok, m),
            drafts=_draft_records(loaded, state.detok, drafts.tolist(), q_all, result.p_draft, result.uniforms, k, m,
                                  records),
            forward_passes=1, drafter_passes=drafter_passes, drafting_s=t1 - t0, verification_s=t2 - t1,
            step_s=t2 - t0, finish_reason=reason)


def _inspect(inspect_fn, target_cache, drafter_cache, ids, state, pending_h) -> None:
    if inspect_fn is not None:
        inspect_fn({"target_cache": target_cache, "drafter_cache": drafter_cache,
                    "committed": ids + list(state.output), "pending_hidden": pending_h})
