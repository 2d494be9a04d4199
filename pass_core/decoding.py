"""Decoding loops: plain autoregressive (AR) and PaSS, as generators of ``StepEvent``.

Both share one KV-cache discipline (see ``cache.py``), one sampling path
(``sampling.py``) and one acceptance rule (``verification.py``). Batch size 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from .cache import StepClock, check_invariant, crop_to, cache_len, new_cache
from .events import DraftRecord, StepEvent, TokenRecord
from .lookahead import LookaheadEmbeddings
from .sampling import logits_to_probs, make_generator, sample
from .settings import DecodeSettings
from .text import Detokenizer, encode_prompt
from .verification import VerificationResult, verify_drafts

#: A test seam: given the committed context (prompt + output ids) and L, return L
#: draft ids to use instead of the look-ahead drafts (their q is one-hot).
DraftFn = Callable[[list[int], int], list[int]]
VerifyFn = Callable[..., VerificationResult]


def eos_token_ids(loaded) -> set[int]:
    """Token ids that end generation: the generation config's and the tokenizer's EOS."""
    ids: set[int] = set()
    for source in (getattr(loaded.model, "generation_config", None), loaded.tokenizer):
        value = getattr(source, "eos_token_id", None)
        if value is None:
            continue
        ids.update(int(v) for v in (value if isinstance(value, (list, tuple, set)) else [value]))
    return ids


@dataclass
class _RunState:
    """Book-keeping shared by the decoders: output ids, detokeniser, stop rule."""

    settings: DecodeSettings
    eos: set[int]
    detok: Detokenizer
    prompt_len: int
    output: list[int]

    def take(self, proposed: list[tuple[int, str]]) -> tuple[list[tuple[int, str, str]], str | None]:
        """Commit (token id, label) pairs up to EOS or max_new_tokens.

        Returns:
            ([(token_id, label, text piece)], finish_reason or None).
        """
        out, reason = [], None
        for tid, label in proposed:
            self.output.append(tid)
            if tid in self.eos:
                reason = "eos"
            elif len(self.output) >= self.settings.max_new_tokens:
                reason = "max_new_tokens"
            out.append((tid, label, self.detok.add(tid, final=reason is not None)))
            if reason:
                break
        return out, reason

    @property
    def remaining(self) -> int:
        return self.settings.max_new_tokens - len(self.output)


def _prepare(loaded, prompt: str, settings: DecodeSettings) -> tuple[list[int], _RunState, torch.Generator]:
    if not isinstance(settings, DecodeSettings):
        raise TypeError("settings must be a DecodeSettings")
    ids = encode_prompt(loaded.tokenizer, prompt, settings.chat_template, loaded.max_positions,
                        settings.max_new_tokens + settings.num_lookahead * 2)
    state = _RunState(settings=settings, eos=eos_token_ids(loaded), detok=Detokenizer(loaded.tokenizer),
                      prompt_len=len(ids), output=[])
    return ids, state, make_generator(settings.seed, loaded.device)


def _tokens(loaded, records) -> tuple[TokenRecord, ...]:
    return tuple(TokenRecord(token_id=t, text=text, label=label) for t, label, text in records)


@torch.inference_mode()
def generate_autoregressive(loaded, prompt: str, settings: DecodeSettings) -> Iterator[StepEvent]:
    """Plain autoregressive decoding: one forward pass and one token per step.

    Args:
        loaded: a ``LoadedModel``.
        prompt: user text (wrapped in the chat template unless ``settings.chat_template`` is False).
        settings: validated ``DecodeSettings``; ``num_lookahead`` is ignored.

    Yields:
        One ``StepEvent`` per step with a single token labelled ``target``; the
        first step includes the prompt prefill. The last event has ``finish_reason``.

    Raises:
        ValueError: empty prompt or prompt too long for the model's context.
    """
    ids, state, gen = _prepare(loaded, prompt, settings)
    model, clock = loaded.model, StepClock(loaded.device)
    cache = new_cache(model)
    uncached = torch.tensor([ids], device=loaded.device)  # (1, T)
    step = 0
    while True:
        step += 1
        t0 = clock.now()
        logits = model(input_ids=uncached, cache=cache, use_cache=True, logits_to_keep=1).logits[0, -1]  # (V,)
        token = int(sample(logits_to_probs(logits, settings)[None], gen)[0])
        t1 = clock.now()
        uncached = torch.tensor([[token]], device=loaded.device)
        records, reason = state.take([(token, "target")])
        yield StepEvent(method="ar", step=step, tokens=_tokens(loaded, records), forward_passes=1,
                        verification_s=t1 - t0, step_s=t1 - t0, finish_reason=reason)
        if reason:
            return


def _draft_records(loaded, detok, drafts, q_draft, p_draft, uniforms, num_verified, num_accepted, records=None):
    """One ``DraftRecord`` per draft. ``records`` (the committed tokens of the step): drafts past
    the end of the output (accepted, but after EOS) count as not verified, so acceptance
    statistics only count drafts that are part of the output."""
    if records is not None:
        committed = sum(label == "accepted" for _, label, _ in records)
        if committed < num_accepted:
            num_verified = num_accepted = committed
    out = []
    for i, tid in enumerate(drafts):
        if i < num_accepted:
            decision = "accepted"
        elif i < num_verified and i == num_accepted:
            decision = "rejected"
        else:
            decision = "not_verified"
        examined = i <= num_accepted and i < num_verified
        out.append(DraftRecord(position=i + 1, token_id=int(tid), text=detok.token_text(tid),
                               q=float(q_draft[i]), p=float(p_draft[i]) if i < len(p_draft) else float("nan"),
                               u=float(uniforms[i]) if examined and i < len(uniforms) else None,
                               decision=decision))
    return tuple(out)


def _step_tokens(first: tuple[int, str] | None, drafts, result: VerificationResult, num_verified: int):
    """Proposed (id, label) pairs of a step, and the rejected draft (or None)."""
    proposed = [first] if first else []
    proposed += [(int(d), "accepted") for d in drafts[: result.num_accepted]]
    rejected = int(drafts[result.num_accepted]) if result.num_accepted < num_verified else None
    # with no draft left to check (end of the budget) the token is a plain target sample
    label = "exact" if num_verified == 0 else "bonus" if result.next_is_bonus else "resampled"
    proposed.append((result.next_token, label))
    return proposed, rejected


def _with_rejected(records, rejected: int | None, detok, insert_at: int):
    """Token records with the rejected draft shown just before the resampled token."""
    tokens = [TokenRecord(token_id=t, text=text, label=label) for t, label, text in records]
    if rejected is not None and len(tokens) > insert_at:
        tokens.insert(insert_at, TokenRecord(token_id=rejected, text=detok.token_text(rejected), label="rejected"))
    return tuple(tokens)


def _drafts_from_logits(la_logits, settings, gen, context, draft_fn, vocab):
    """Draft ids (L,) and their processed q (L, V) from the look-ahead logits (L, V)."""
    if draft_fn is not None:
        drafts = torch.tensor(draft_fn(context, la_logits.shape[0]), device=la_logits.device)
        return drafts, torch.nn.functional.one_hot(drafts, vocab).float()
    q = logits_to_probs(la_logits, settings)  # (L, V)
    return sample(q, gen), q


@torch.inference_mode()
def generate_pass(loaded, prompt: str, settings: DecodeSettings, lookahead: LookaheadEmbeddings, *,
                  draft_fn: DraftFn | None = None, verify_fn: VerifyFn = verify_drafts) -> Iterator[StepEvent]:
    """PaSS decoding (Monea, Joulin, Grave 2023, arXiv 2311.13581, section 2; algorithms.md section 3).

    Each step runs a *drafting pass* over ``[x_n, LA_1..LA_L]`` (the real position
    gives the exact token x_{n+1}; look-ahead position i gives q_i and the draft
    d_{n+1+i}), crops the look-ahead entries from the cache, then a *verification
    pass* over ``[x_{n+1}, d_{n+2}..d_{n+1+L}]`` applies speculative sampling
    (p = target, q = draft; Leviathan et al. notation). With ``settings.fused`` the
    extension of algorithms.md section 4 runs instead (``generate_pass_fused``).

    Args:
        loaded: a ``LoadedModel``.
        prompt: user text.
        settings: validated ``DecodeSettings``; L is ``lookahead.num_lookahead``.
        lookahead: the look-ahead embeddings, (L*R, D), checked against the model.
        draft_fn: test seam replacing the look-ahead drafts (one-hot q).
        verify_fn: test seam replacing the acceptance rule (negative controls).

    Yields:
        ``StepEvent`` with tokens labelled exact / accepted / rejected / resampled /
        bonus, the drafts with q, p, u and the decision, 2 forward passes per step
        (1 when the exact token ends the run), and timings in seconds.

    Raises:
        ValueError: bad prompt, or look-ahead embeddings for another model.
    """
    lookahead.check_compatible(loaded)
    if settings.fused:
        yield from generate_pass_fused(loaded, prompt, settings, lookahead, draft_fn=draft_fn, verify_fn=verify_fn)
        return
    ids, state, gen = _prepare(loaded, prompt, settings)
    model, clock, dev = loaded.model, StepClock(loaded.device), loaded.device
    embed = model.get_input_embeddings()
    la = lookahead.for_model(loaded)[None]  # (1, L*R, D)
    draft_idx = torch.tensor(lookahead.draft_indices(), device=dev) + 1  # rows of the kept logits
    block, vocab = lookahead.block_len, loaded.vocab_size
    cache = new_cache(model)
    uncached = ids  # committed tokens not yet in the cache (prompt, then the pending token)
    step = 0
    while True:
        step += 1
        t0 = clock.now()
        # 1. drafting pass over [x_n, LA_1..LA_L]
        x = embed(torch.tensor([uncached], device=dev))  # (1, T, D)
        logits = model(inputs_embeds=torch.cat([x, la], 1), cache=cache, use_cache=True,
                       logits_to_keep=block + 1).logits[0]  # (1 + L*R, V)
        exact = int(sample(logits_to_probs(logits[:1], settings), gen)[0])
        context = ids + state.output + [exact] if draft_fn else None
        drafts, q = _drafts_from_logits(logits[draft_idx], settings, gen, context, draft_fn, vocab)
        crop_to(cache, cache_len(cache) - block)  # look-ahead entries never survive
        t1 = clock.now()
        k = min(len(drafts), max(state.remaining - 2, 0))  # drafts that can still be used
        if exact in state.eos or state.remaining <= 1:
            records, reason = state.take([(exact, "exact")])
            yield StepEvent(method="pass", step=step, tokens=_tokens(loaded, records),
                            drafts=_draft_records(loaded, state.detok, drafts.tolist(), q[torch.arange(len(drafts)), drafts].tolist(), [], [], 0, 0),
                            forward_passes=1, drafting_s=t1 - t0, step_s=t1 - t0, finish_reason=reason)
            return
        # 2. verification pass over [x_{n+1}, d_1..d_k]
        before = cache_len(cache)
        verify_in = torch.tensor([[exact] + drafts[:k].tolist()], device=dev)  # (1, k+1)
        p = logits_to_probs(model(input_ids=verify_in, cache=cache, use_cache=True).logits[0], settings)  # (k+1, V)
        result = verify_fn(drafts[:k], q[:k], p, gen)
        crop_to(cache, before + 1 + result.num_accepted)  # keep x_{n+1} and the accepted drafts
        t2 = clock.now()
        proposed, rejected = _step_tokens((exact, "exact"), drafts[:k].tolist(), result, k)
        records, reason = state.take(proposed)
        if not reason:
            check_invariant(cache, len(ids) + len(state.output))
        uncached = [state.output[-1]]
        q_all = q[torch.arange(len(drafts)), drafts].tolist()
        yield StepEvent(
            method="pass", step=step,
            tokens=_with_rejected(records, rejected, state.detok, 1 + result.num_accepted),
            drafts=_draft_records(loaded, state.detok, drafts.tolist(), q_all, result.p_draft,
                                  result.uniforms, k, result.num_accepted, records),
            forward_passes=2, drafting_s=t1 - t0, verification_s=t2 - t1, step_s=t2 - t0,
            finish_reason=reason)
        if reason:
            return


def fused_mask(n_cached: int, num_real: int, block: int, dtype: torch.dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
    """4-D attention mask and position ids for a fused verification + drafting pass.

    Layout of the query: ``num_real`` real tokens (pending + drafts), then one
    look-ahead block of ``block`` tokens per possible acceptance length m = 0..num_real-1.
    Block m sits after real token m: it sees the cache, real tokens 0..m and its own
    earlier look-ahead tokens (a tree attention mask, algorithms.md section 4).

    Returns:
        mask: (1, 1, Q, n_cached + Q) additive float mask (0 = attend, dtype min = blocked),
            Q = num_real * (1 + block).
        position_ids: (1, Q) int64.
    """
    q_len = num_real * (1 + block)
    allowed = torch.zeros((q_len, n_cached + q_len), dtype=torch.bool, device=device)
    allowed[:, :n_cached] = True
    real = torch.arange(num_real, device=device)
    allowed[:num_real, n_cached:n_cached + num_real] = real[:, None] >= real[None, :]
    positions = torch.empty(q_len, dtype=torch.long, device=device)
    positions[:num_real] = n_cached + real
    tri = torch.ones((block, block), dtype=torch.bool, device=device).tril()
    for m in range(num_real):
        start = num_real + m * block
        allowed[start:start + block, n_cached:n_cached + m + 1] = True
        allowed[start:start + block, n_cached + start:n_cached + start + block] = tri
        positions[start:start + block] = n_cached + m + 1 + torch.arange(block, device=device)
    mask = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)
    return mask[None, None], positions[None]


@torch.inference_mode()
def generate_pass_fused(loaded, prompt: str, settings: DecodeSettings, lookahead: LookaheadEmbeddings, *,
                        draft_fn: DraftFn | None = None, verify_fn: VerifyFn = verify_drafts) -> Iterator[StepEvent]:
    """PaSS with a fused step: an *extension* beyond the paper (algorithms.md section 4).

    The first step is a drafting pass over ``[prompt, LA_1..LA_L]`` (exact token +
    L drafts). Every later step runs one pass over ``[pending, d_1..d_L]`` plus L+1
    look-ahead blocks under a tree mask (``fused_mask``): verification of this step's
    drafts and drafting of the next step's share the pass. The drafts of block m
    (after m accepted drafts) become the next drafts. Output is lossless as in PaSS.

    Args, yields and raises: as ``generate_pass``; each step uses 1 forward pass.
    """
    ids, state, gen = _prepare(loaded, prompt, settings)
    model, clock, dev = loaded.model, StepClock(loaded.device), loaded.device
    embed = model.get_input_embeddings()
    la = lookahead.for_model(loaded)  # (L*R, D)
    draft_rows = torch.tensor(lookahead.draft_indices(), device=dev)
    block, vocab, L = lookahead.block_len, loaded.vocab_size, lookahead.num_lookahead
    cache = new_cache(model)
    # step 1: prefill + first drafting block (a plain causal pass)
    t0 = clock.now()
    x = embed(torch.tensor([ids], device=dev))  # (1, T, D)
    logits = model(inputs_embeds=torch.cat([x, la[None]], 1), cache=cache, use_cache=True,
                   logits_to_keep=block + 1).logits[0]  # (1 + L*R, V)
    first = int(sample(logits_to_probs(logits[:1], settings), gen)[0])
    context = ids + [first] if draft_fn else None
    drafts, q = _drafts_from_logits(logits[draft_rows + 1], settings, gen, context, draft_fn, vocab)
    crop_to(cache, len(ids))
    t1 = clock.now()
    records, reason = state.take([(first, "exact")])
    yield StepEvent(method="pass-fused", step=1, tokens=_tokens(loaded, records), forward_passes=1,
                    drafting_s=t1 - t0, step_s=t1 - t0, finish_reason=reason)
    step = 1
    while not reason:
        step += 1
        t0 = clock.now()
        k = min(L, max(state.remaining - 1, 0))
        n = cache_len(cache)
        real = torch.tensor([[state.output[-1]] + drafts[:k].tolist()], device=dev)  # (1, k+1)
        blocks = la.repeat(k + 1, 1)[None]  # (1, (k+1)*L*R, D)
        mask, positions = fused_mask(n, k + 1, block, la.dtype, dev)
        out = model(inputs_embeds=torch.cat([embed(real), blocks], 1), cache=cache, use_cache=True,
                    attention_mask=mask, position_ids=positions).logits[0]  # (Q, V)
        p = logits_to_probs(out[: k + 1], settings)  # (k+1, V)
        result = verify_fn(drafts[:k], q[:k], p, gen)
        m = result.num_accepted
        t_verified = clock.now()
        committed = ids + state.output + drafts[:m].tolist() + [result.next_token] if draft_fn else None
        rows = k + 1 + m * block + draft_rows
        new_drafts, new_q = _drafts_from_logits(out[rows], settings, gen, committed, draft_fn, vocab)
        crop_to(cache, n + 1 + m)
        t2 = clock.now()
        proposed, rejected = _step_tokens(None, drafts[:k].tolist(), result, k)
        records, reason = state.take(proposed)
        if not reason:
            check_invariant(cache, len(ids) + len(state.output))
        q_all = q[torch.arange(len(drafts)), drafts].tolist()
        yield StepEvent(
            method="pass-fused", step=step,
            tokens=_with_rejected(records, rejected, state.detok, m),
            drafts=_draft_records(loaded, state.detok, drafts.tolist(), q_all, result.p_draft,
                                  result.uniforms, k, m, records),
            forward_passes=1, drafting_s=t2 - t_verified, verification_s=t_verified - t0, step_s=t2 - t0,
            finish_reason=reason)
        drafts, q = new_drafts, new_q
