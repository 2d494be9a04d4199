"""Prompt lookup (Saxena 2023; transformers' ``prompt_lookup_num_tokens``): a drafter that needs no file, no
training and no second model, and works with any target (docs/algorithms.md section 4).

```
propose   for n = N, N-1, ..., 1: the last n committed tokens (the n-gram); its earliest occurrence in
          prompt + output that has a continuation; d_1..d_k = the k tokens after it, cut before the
          first EOS; q_i = one-hot(d_i). No match: k = 0, a plain target step.
accepted  nothing to roll back: the drafter keeps no state besides the committed tokens
```

With q one-hot, the usual acceptance rule (docs/algorithms.md section 2) accepts d_i with probability
min(1, p_i(d_i) / 1) = p_i(d_i) and resamples from norm(max(0, p_i - q_i)), i.e. p_i without d_i: the output
is exactly the target's. Greedy: d_i is accepted iff it is the argmax of p_i.

The choice of match follows transformers' ``PromptLookupCandidateGenerator`` exactly (its n-gram sizes from
``max_matching_ngram_size`` = 2 by default down to 1, the *earliest* occurrence left to right with at least one
token after it, the continuation cut before the first EOS, no other occurrence tried when that leaves nothing),
so that under greedy decoding the drafts, the verification passes and the tokens equal ``model.generate(...,
prompt_lookup_num_tokens=k)``. Saxena's original code also takes the first match.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pass_core.decoding.bookkeeping import eos_token_ids
from pass_core.decoding.drafting import Drafter, Proposal, TargetRun, no_drafts

#: transformers' default ``max_matching_ngram_size`` (``generate()`` uses 2 when it is not set).
MAX_NGRAM = 2


@dataclass(frozen=True)
class Match:
    """Where prompt lookup found the drafts of one step.

    Attributes:
        ngram: n, the size of the matched n-gram (the last n committed tokens).
        start: index in prompt + output of the earliest earlier occurrence of that n-gram.
        drafts: the tokens that followed it (at most k, cut before the first EOS; may be empty).
    """

    ngram: int
    start: int
    drafts: tuple[int, ...]


def find_match(ids: list[int], max_ngram: int, k: int, eos: set[int] | frozenset[int] = frozenset()) -> Match | None:
    """The prompt-lookup match for the committed tokens ``ids`` (transformers' ``PromptLookupCandidateGenerator``).

    Args:
        ids: every committed token id, prompt and output (T of them).
        max_ngram: the largest n-gram tried (n = min(max_ngram, T - 1) down to 1).
        k: the most drafts to copy (k >= 1).
        eos: token ids that end generation: the continuation is cut before the first one.

    Returns:
        The first n (largest first) whose last-n-gram occurs earlier with at least one token after it, at its
        earliest such occurrence; None when no n-gram occurs earlier. ``drafts`` is empty when the continuation
        starts with EOS (transformers then drafts nothing, without trying another occurrence).

    Raises:
        ValueError: max_ngram < 1 or k < 1.
    """
    if max_ngram < 1 or k < 1:
        raise ValueError(f"prompt lookup needs max_ngram >= 1 and k >= 1, got {max_ngram} and {k}")
    total = len(ids)
    for n in range(min(max_ngram, total - 1), 0, -1):
        ngram = ids[total - n:]
        i = -1
        while True:
            try:  # list.index scans in C: fast enough for every step (T in the thousands)
                i = ids.index(ngram[0], i + 1, total - n)  # occurrences with a token after them
            except ValueError:
                break
            if ids[i:i + n] == ngram:
                drafts = ids[i + n:min(i + n + k, total)]
                cut = next((j for j, t in enumerate(drafts) if t in eos), len(drafts))
                return Match(n, i, tuple(drafts[:cut]))
    return None


class PromptLookupDrafter(Drafter):
    """Drafts by copying from the context (prompt lookup); q is one-hot on each draft.

    Args:
        max_ngram: the largest n-gram matched (default ``MAX_NGRAM``, transformers' default).

    k = min(``settings.num_lookahead``, the drafts the loop can still use); k = 0 when nothing matches. Each
    proposal carries a note saying where in the context the match was found (``StepEvent.draft_note``, shown by
    the token inspector).

    Raises:
        ValueError: max_ngram < 1.
    """

    def __init__(self, max_ngram: int = MAX_NGRAM):
        if max_ngram < 1:
            raise ValueError(f"prompt lookup: max_ngram must be >= 1, got {max_ngram}")
        self.max_ngram = max_ngram

    def start(self, run: TargetRun) -> None:
        super().start(run)
        self.eos = eos_token_ids(run.loaded)
        self.prompt_len: int | None = None  # known at the first proposal, whose uncached tokens are the prompt

    def propose(self, uncached: list[int], committed: list[int], max_drafts: int) -> Proposal:
        loaded = self.run.loaded
        if self.prompt_len is None:
            self.prompt_len = len(uncached)
        k = min(self.run.settings.num_lookahead, max_drafts)
        if k < 1:
            return no_drafts(loaded.vocab_size, loaded.device, note="no draft fits the remaining tokens")
        match = find_match(committed, self.max_ngram, k, self.eos)
        if match is None or not match.drafts:
            return no_drafts(loaded.vocab_size, loaded.device, note=self.describe(match, committed))
        drafts = torch.tensor(match.drafts, dtype=torch.long, device=loaded.device)  # (k,)
        q = torch.nn.functional.one_hot(drafts, loaded.vocab_size).to(torch.float32)  # (k, V)
        return Proposal(drafts, q, note=self.describe(match, committed))

    def describe(self, match: Match | None, committed: list[int]) -> str:
        """One line for the token inspector: which n-gram matched where (prompt or output, 0-based token index,
        the chat template's tokens included in the prompt's), or why nothing was drafted."""
        if match is None:
            last = self.run.loaded.tokenizer.decode(committed[-1:])
            return f"prompt lookup: the last token {last!r} occurs nowhere earlier, so no draft (a plain target step)"
        gram = self.run.loaded.tokenizer.decode(committed[len(committed) - match.ngram:])
        prompt_len = self.prompt_len or 0
        where = (f"prompt token {match.start}" if match.start < prompt_len
                 else f"output token {match.start - prompt_len}")
        if not match.drafts:
            return f"prompt lookup: the {match.ngram}-gram {gram!r} at {where} is followed by EOS, so no draft"
        return (f"prompt lookup: the last {match.ngram}-gram {gram!r} first occurs at {where}; "
                f"drafts copied from the {len(match.drafts)} token(s) after it")
