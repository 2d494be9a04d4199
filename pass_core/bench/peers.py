"""Real peers in the benchmark: transformers' own ``model.generate()`` and its prompt-lookup decoding, run on the
same loaded model, prompts and settings as the project's methods, interleaved with them.

``--baselines hf-generate,hf-prompt-lookup``. A peer's run becomes one ``StepEvent`` per output token (label
"exact", the whole call's time spread evenly over its tokens), so that tokens/s, speed-ups and the greedy
exact-match flow through the same ``summarize`` / ``aggregate`` as every method. Per-step quantities (accepted
tokens, forward passes) are not visible from outside ``generate()`` and are reported as None.
"""

from __future__ import annotations

import torch

from pass_core.decoding.bookkeeping import eos_token_ids
from pass_core.decoding.cache import StepClock
from pass_core.decoding.events import StepEvent, TokenRecord
from pass_core.decoding.settings import DecodeSettings
from pass_core.decoding.text import Detokenizer, encode_prompt

#: Peer name -> extra ``generate()`` arguments. Prompt lookup as transformers ships it (Saxena 2023), 3 tokens.
PEERS: dict[str, dict] = {
    "hf-generate": {},
    "hf-prompt-lookup": {"prompt_lookup_num_tokens": 3},
}
#: The peers that decode plainly autoregressively: candidates for the run's fastest AR (``summary.aggregate``).
AR_PEERS = ("hf-generate",)
#: Summary fields a peer cannot report (they need the steps inside ``generate()``).
UNSEEN_FIELDS = ("tokens_per_forward_pass", "mean_accepted_tokens", "accepted_drafts_per_step", "acceptance_rate",
                 "per_position_conditional", "per_position_unconditional", "acceptance_histogram", "ms_per_step",
                 "steps", "forward_passes", "drafted_tokens", "accepted_drafts", "verification_steps",
                 "drafter_passes", "judged_drafts")


def check_peers(names: list[str]) -> list[str]:
    """The ``--baselines`` names, validated.

    Raises:
        ValueError: an unknown peer, naming the offered ones.
    """
    for name in names:
        if name not in PEERS:
            raise ValueError(f"Unknown baseline {name!r}: choose from {', '.join(PEERS)}.")
    return names


@torch.inference_mode()
def generate_peer(loaded, name: str, prompt: str, settings: DecodeSettings) -> list[StepEvent]:
    """One run of peer ``name``: ``loaded.model.generate`` on the prompt's token ids (chat template as the
    project's methods apply it), greedy at T = 0, else sampling with T, top-k and top-p seeded by
    ``settings.seed`` (transformers' own sampler: the same law, not the same draws).

    Returns:
        One ``StepEvent`` per new token (EOS included when generated), ``step_s`` = the call's seconds / tokens.

    Raises:
        ValueError: an unknown peer.
    """
    check_peers([name])
    ids = encode_prompt(loaded.tokenizer, prompt, settings.chat_template, loaded.max_positions,
                        settings.max_new_tokens)
    x = torch.tensor([ids], device=loaded.device)  # (1, T)
    eos = sorted(eos_token_ids(loaded))
    kwargs = dict(max_new_tokens=settings.max_new_tokens, attention_mask=torch.ones_like(x),
                  eos_token_id=eos or None, pad_token_id=eos[0] if eos else None, **PEERS[name])
    if settings.greedy:
        kwargs.update(do_sample=False, temperature=None, top_k=None, top_p=None)
    else:
        torch.manual_seed(settings.seed)
        kwargs.update(do_sample=True, temperature=settings.temperature, top_k=settings.top_k or None,
                      top_p=settings.top_p)
    clock = StepClock(loaded.device)
    t0 = clock.now()
    out = loaded.model.generate(x, **kwargs)  # (1, T + N)
    seconds = clock.now() - t0
    new = out[0, len(ids):].tolist()
    detok = Detokenizer(loaded.tokenizer)
    per_token = seconds / max(len(new), 1)
    events = []
    for i, tid in enumerate(new, 1):
        last = i == len(new)
        reason = ("eos" if tid in eos else "max_new_tokens") if last else None
        events.append(StepEvent(method=name, step=i, tokens=(TokenRecord(tid, detok.token_text(tid), "exact"),),
                                step_s=per_token, verification_s=per_token, finish_reason=reason))
    return events


def blank_unseen(entry: dict) -> dict:
    """A peer's summary entry with the fields it cannot measure set to None (recursively in ``by_category``)."""
    for field in UNSEEN_FIELDS:
        if field in entry:
            entry[field] = None
    for sub in (entry.get("by_category") or {}).values():
        blank_unseen(sub)
    return entry


def wall_time_note() -> str:
    """How a peer is timed, for the report."""
    return ("transformers' generate() on the same loaded model, timed as one call (prompt prefill "
            "included, as the project's first step includes it); per-step metrics are not visible and shown as -.")
