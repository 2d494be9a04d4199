"""Step bookkeeping shared by every decoding loop: the run's committed tokens, the stop rule,
and how one step's tokens and drafts become a ``StepEvent``'s records.

Nothing here runs a model: it turns token ids and a ``VerificationResult`` into
``TokenRecord`` / ``DraftRecord`` tuples (docs/algorithms.md sections 1 and 6).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from pass_core.decoding.events import DraftRecord, TokenRecord
from pass_core.decoding.sampling import make_generator
from pass_core.decoding.settings import DecodeSettings
from pass_core.decoding.text import Detokenizer, encode_prompt, spare_positions
from pass_core.decoding.verification import VerificationResult


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
class RunState:
    """One run's committed tokens and stop rule.

    Attributes:
        settings: the run's validated settings.
        eos: token ids that end the run.
        detok: turns committed ids into text pieces.
        prompt_ids: the encoded prompt (chat template included).
        output: generated token ids so far (committed).
    """

    settings: DecodeSettings
    eos: set[int]
    detok: Detokenizer
    prompt_ids: list[int]
    output: list[int] = field(default_factory=list)

    @property
    def committed(self) -> list[int]:
        """Prompt and output ids: every committed token."""
        return self.prompt_ids + self.output

    @property
    def remaining(self) -> int:
        """Tokens that may still be generated."""
        return self.settings.max_new_tokens - len(self.output)

    def take(self, proposed: list[tuple[int, str]]) -> tuple[list[tuple[int, str, str]], str | None]:
        """Commit (token id, label) pairs in order, up to the first EOS or ``max_new_tokens``.

        Returns:
            ([(token id, label, text piece)] of the committed ones, finish reason or None).
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


def run_prompt_ids(loaded, prompt: str, settings: DecodeSettings, drafts: bool = True) -> list[int]:
    """The prompt's token ids as a run encodes them (chat template per ``settings``). A run with ``drafts`` keeps
    ``spare_positions(L)`` of the context free beyond its new tokens; a run without (AR) none.

    Raises:
        ValueError: an empty prompt, or one too long for the model's context (the message says how to fit it).
    """
    return encode_prompt(loaded.tokenizer, prompt, settings.chat_template, loaded.max_positions,
                         settings.max_new_tokens, spare=spare_positions(settings.num_lookahead) if drafts else 0)


def start_run(loaded, prompt: str, settings: DecodeSettings, drafts: bool = True) -> tuple[RunState, torch.Generator]:
    """Encode the prompt (``run_prompt_ids``) and create the run's state and its one random generator.

    Raises:
        TypeError: ``settings`` is not a ``DecodeSettings``.
        ValueError: an empty prompt, or one too long for the model's context.
    """
    if not isinstance(settings, DecodeSettings):
        raise TypeError("settings must be a DecodeSettings")
    ids = run_prompt_ids(loaded, prompt, settings, drafts)
    state = RunState(settings=settings, eos=eos_token_ids(loaded), detok=Detokenizer(loaded.tokenizer),
                     prompt_ids=ids)
    return state, make_generator(settings.seed, loaded.device)


def step_proposal(exact: int | None, drafts: list[int], result: VerificationResult) -> list[tuple[int, str]]:
    """The (token id, label) pairs one step proposes to commit, in order.

    ``exact`` (PaSS's token from the real position of its drafting pass), the m accepted
    drafts, then the resampled token (m < k), the bonus token (m = k > 0), or, when no
    draft was verified (k = 0), a plain target sample labelled ``exact``.
    """
    proposed = [(exact, "exact")] if exact is not None else []
    proposed += [(int(d), "accepted") for d in drafts[: result.num_accepted]]
    label = "exact" if not drafts else "bonus" if result.next_is_bonus else "resampled"
    return proposed + [(result.next_token, label)]


def token_records(records: list[tuple[int, str, str]], rejected: int | None, detok: Detokenizer,
                  insert_at: int, margins: list[float] | None = None) -> tuple[TokenRecord, ...]:
    """Token records of a step in display order, with the rejected draft (if any) at ``insert_at``:
    after the exact token and the accepted drafts, just before the resampled token. ``margins``
    (greedy runs): the target's top-1 minus top-2 logit for each committed token, in order."""
    margins = list(margins or []) + [None] * len(records)
    tokens = [TokenRecord(token_id=t, text=text, label=label, margin=margin)
              for (t, label, text), margin in zip(records, margins)]
    if rejected is not None and len(tokens) > insert_at:
        tokens.insert(insert_at, TokenRecord(token_id=rejected, text=detok.token_text(rejected), label="rejected"))
    return tuple(tokens)


def output_ended(records: list[tuple[int, str, str]]) -> bool:
    """True when a step's committed (id, label, text) records stop before its resampled or bonus token: EOS was
    the exact token or an accepted draft (a draft budget always leaves room for the step's last token)."""
    return not records or records[-1][1] not in ("resampled", "bonus")


def draft_records(detok: Detokenizer, drafts: list[int], q_draft: list[float], result: VerificationResult | None,
                  records: list[tuple[int, str, str]]) -> tuple[DraftRecord, ...]:
    """One ``DraftRecord`` per draft of a step.

    Args:
        drafts: the k' proposed draft ids (k' >= k, the verified ones come first).
        q_draft: q_i(d_i) for each of them.
        result: the verification of the first k drafts (k = len(result.p_draft)), or None when
            none was verified.
        records: the step's committed (id, label, text). When EOS among the exact token and the
            accepted drafts ended the output (``output_ended``), the drafts after the last committed
            one count as not verified, the rejected one too: acceptance statistics only count drafts
            judged inside the output (algorithms.md section 6).
    """
    num_verified = len(result.p_draft) if result else 0
    num_accepted = result.num_accepted if result else 0
    committed = sum(label == "accepted" for _, label, _ in records)
    if result is not None and output_ended(records):
        num_verified = num_accepted = committed
    out = []
    for i, tid in enumerate(drafts):
        if i < num_accepted:
            decision = "accepted"
        elif i == num_accepted and i < num_verified:
            decision = "rejected"
        else:
            decision = "not_verified"
        examined = i <= num_accepted and i < num_verified
        out.append(DraftRecord(position=i + 1, token_id=int(tid), text=detok.token_text(tid), q=float(q_draft[i]),
                               p=float(result.p_draft[i]) if result and i < len(result.p_draft) else float("nan"),
                               u=float(result.uniforms[i]) if examined and i < len(result.uniforms) else None,
                               decision=decision))
    return tuple(out)
