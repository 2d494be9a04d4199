"""Held-out evaluation of look-ahead embeddings: top-1 agreement and real greedy PaSS decoding."""

from __future__ import annotations

import torch
from tqdm.auto import tqdm

from pass_core.decoding.cache import new_cache
from pass_core.training.data import default_prompt_file, generate_self_data, prompt_lengths, read_prompts
from pass_core.decoding.metrics import summarize
from pass_core.drafters.lookahead.embeddings import LookaheadEmbeddings
from pass_core.training.lookahead_batch import lookahead_logits
from pass_core.drafters.lookahead.drafter import LookaheadDrafter
from pass_core.decoding.settings import DecodeSettings
from pass_core.decoding.speculative import generate_speculative
from pass_core.decoding.text import encode_prompt, spare_positions


def held_out_sequences(loaded, count: int) -> tuple[list[list[int]], list[int]]:
    """The first ``count`` held-out sequences (prompt + the model's greedy answer of up to 160 tokens, cached) and
    where each prompt ends, for ``agreement``. Only those ``count`` prompts are generated (``--eval-sequences 1``
    generated answers to all 60 held-out prompts and used one)."""
    rows = read_prompts(default_prompt_file("heldout"))[:count]
    seqs = generate_self_data(loaded, rows, max_new_tokens=160, desc="held-out data")
    return seqs, [max(p - 1, 0) for p in prompt_lengths(loaded, rows)]


@torch.no_grad()
def agreement(loaded, la: LookaheadEmbeddings, seqs: list[list[int]], firsts: list[int],
              max_positions: int = 256) -> list[float]:
    """Per-position top-1 agreement of the drafts with the model's greedy choice.

    Args:
        seqs: held-out token sequences (prompt + the model's own generation).
        firsts: index of the last prompt token of each sequence (first drafting position).

    Returns:
        L floats: share of positions t where argmax q_i equals argmax p at t+i.
    """
    model, dev = loaded.model, loaded.device
    weight = la.for_model(loaded)
    L = la.num_lookahead
    hits, total = torch.zeros(L), 0
    for seq, first in zip(seqs, firsts):
        T = len(seq)
        last = T - 1 - L
        if last < first:
            continue
        cache = new_cache(model)
        teacher = model(input_ids=torch.tensor([seq], device=dev), cache=cache, use_cache=True).logits[0]
        starts = torch.arange(first, last + 1, device=dev)[:max_positions]
        logits = lookahead_logits(model, cache, T, starts, weight, la.draft_indices(), la.adapters)  # (P, L, V)
        rows = starts[:, None] + torch.arange(1, L + 1, device=dev)[None]
        hits += (logits.argmax(-1) == teacher[rows].argmax(-1)).float().sum(0).cpu()
        total += len(starts)
    return [round(float(h) / max(total, 1), 4) for h in hits]


def check_eval_length(loaded, eval_prompts: int, eval_tokens: int, num_lookahead: int) -> None:
    """Refuse, before the training, an ``--eval-tokens`` that the first ``eval_prompts`` held-out prompts leave no
    room for in the model's context (``text.encode_prompt``, as the evaluation's decoding checks it): the evaluation
    refused it after the training.

    Raises:
        ValueError: a prompt and ``eval_tokens`` new tokens (and the drafts' spare positions) do not fit.
    """
    for row in read_prompts(default_prompt_file("heldout"))[:eval_prompts]:
        encode_prompt(loaded.tokenizer, row["prompt"], True, loaded.max_positions, eval_tokens, "--eval-tokens",
                      spare_positions(num_lookahead))


def decode_eval(loaded, la: LookaheadEmbeddings, prompts: list[str], max_new_tokens: int) -> dict:
    """Greedy PaSS on held-out prompts: accepted drafts per step and related metrics."""
    events = []
    settings = DecodeSettings(max_new_tokens=max_new_tokens, num_lookahead=la.num_lookahead)
    for prompt in tqdm(prompts, desc="greedy PaSS eval", unit="prompt", leave=False):
        events += list(generate_speculative(loaded, prompt, settings, LookaheadDrafter(la),
                                           method="pass" if la.adapters is None else "pass-lora"))
    s = summarize(events)
    return {"prompts": len(prompts), "max_new_tokens": max_new_tokens,
            "accepted_drafts_per_step": round(s.accepted_drafts_per_step, 4),
            "mean_accepted_tokens": round(s.mean_accepted_tokens, 4),
            "acceptance_rate": round(s.acceptance_rate or 0.0, 4),
            "per_position_conditional": [None if c is None else round(c, 4) for c in s.per_position_conditional],
            "acceptance_histogram": [round(h, 4) for h in s.acceptance_histogram]}


def evaluate(loaded, la: LookaheadEmbeddings, eval_prompts: int = 16, eval_tokens: int = 48,
             agreement_sequences: int = 40) -> dict:
    """Agreement on held-out self-generated sequences + real greedy PaSS decoding on held-out prompts."""
    rows = read_prompts(default_prompt_file("heldout"))
    out = {}
    if agreement_sequences > 0:
        seqs, firsts = held_out_sequences(loaded, agreement_sequences)
        out["top1_agreement"] = agreement(loaded, la, seqs, firsts)
        out["agreement_sequences"] = len(seqs)
    if eval_prompts > 0:
        out["greedy_pass"] = decode_eval(loaded, la, [r["prompt"] for r in rows[:eval_prompts]], eval_tokens)
    return out
