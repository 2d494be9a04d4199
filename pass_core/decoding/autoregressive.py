"""Plain autoregressive (AR) decoding as a generator of ``StepEvent``: the speed-up baseline."""

from __future__ import annotations

from itertools import count
from typing import Iterator

import torch

from pass_core.decoding.bookkeeping import start_run, token_records
from pass_core.decoding.cache import StepClock, new_cache
from pass_core.decoding.events import StepEvent
from pass_core.decoding.inspection import PositionInspection, top_n
from pass_core.decoding.sampling import logit_margins, logits_to_probs, sample
from pass_core.decoding.settings import DecodeSettings
from pass_core.decoding.target import plain_head, target_forward


@torch.inference_mode()
def generate_autoregressive(loaded, prompt: str, settings: DecodeSettings) -> Iterator[StepEvent]:
    """Plain autoregressive decoding: one target forward pass and one token per step.

    Args:
        loaded: a ``LoadedModel``.
        prompt: user text (wrapped in the chat template unless ``settings.chat_template`` is False).
        settings: validated ``DecodeSettings``; ``num_lookahead`` and ``fused`` are ignored.

    Yields:
        One ``StepEvent`` per step with a single token labelled ``target``; the first step
        includes the prompt prefill. The last event has ``finish_reason``.

    Raises:
        ValueError: empty prompt or prompt too long for the model's context.
    """
    state, gen = start_run(loaded, prompt, settings, drafts=False)  # no context kept for drafts
    model, clock, dev = loaded.model, StepClock(loaded.device), loaded.device
    cache, plain, last = new_cache(model), plain_head(model), torch.tensor([-1], device=dev)
    uncached = torch.tensor([state.prompt_ids], device=dev)  # (1, T)
    for step in count(1):
        t0 = clock.now()
        logits = target_forward(model, cache, last, input_ids=uncached, plain=plain).logits  # (1, V)
        p = logits_to_probs(logits, settings)  # (1, V)
        token = int(sample(p, gen)[0])
        t1 = clock.now()
        inspection = (PositionInspection(1, top_n(p[0])),) if settings.inspect else ()  # not timed: display data
        uncached = torch.tensor([[token]], device=dev)
        records, reason = state.take([(token, "target")])
        margins = logit_margins(logits) if settings.greedy else None
        yield StepEvent(method="ar", step=step, tokens=token_records(records, None, state.detok, 0, margins),
                        forward_passes=1, verification_s=t1 - t0, step_s=t1 - t0, finish_reason=reason,
                        inspection=inspection)
        if reason:
            return
