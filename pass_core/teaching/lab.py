"""The losslessness lab: sample short continuations many times with every method and compare each
empirical distribution with the exact law computed from the model (Leviathan et al. 2022,
theorem 1: speculative sampling gives exactly the target's distribution; docs/algorithms.md section 2).

A deliberately broken acceptance rule (always accept) runs beside them as a negative control:
its distribution must be visibly off.
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass, field
from typing import Callable

import torch

from pass_core.decoding.bookkeeping import eos_token_ids
from pass_core.decoding.events import output_token_ids
from pass_core.decoding.metrics import summarize
from pass_core.registry import METHODS
from pass_core.decoding.sampling import logits_to_probs
from pass_core.decoding.settings import DecodeSettings
from pass_core.decoding.text import encode_prompt
from pass_core.decoding.verification import verify_drafts

#: Key of the negative control in a ``LabResult``.
BROKEN = "pass, always accept"
#: Runs per method at most (the page's cap: about 27 minutes for all methods at about 4 s per N on a 2-core CPU).
MAX_RUNS = 400


def lab_prompt_ids(loaded, prompt: str, depth: int = 3, chat_template: bool = True) -> list[int]:
    """The prompt's token ids as the lab feeds them (``text.encode_prompt``; ``depth``: the lab's new tokens, 3 by
    default as ``run_lab``'s). Raises ValueError for a bad prompt, or one the context cannot hold with ``depth`` new
    tokens: as the runs would refuse it, but without "or lower max new tokens" (the lab has no such setting)."""
    return encode_prompt(loaded.tokenizer, prompt, chat_template, loaded.max_positions, depth, length_setting=None)


def exact_law(loaded, prompt: str, settings: DecodeSettings, depth: int) -> dict[tuple[int, ...], float]:
    """P(first ``depth`` tokens) of plain sampling from the target, by enumerating the tree of
    tokens with non-zero processed probability (top-k keeps it small: k^depth leaves). A branch ends at
    an EOS token, as a run does: its outcome is shorter (the first tokens up to and with EOS).

    Returns:
        {token ids: probability}, summing to 1.

    Raises:
        ValueError: a bad prompt, or one the context cannot hold with ``depth`` new tokens (``text.encode_prompt``).
    """
    ids = lab_prompt_ids(loaded, prompt, depth, settings.chat_template)
    law: dict[tuple[int, ...], float] = {}
    eos = eos_token_ids(loaded)

    def walk(prefix: list[int], prob: float) -> None:
        if len(prefix) == depth or (prefix and prefix[-1] in eos):  # a run stops at EOS: a shorter outcome
            law[tuple(prefix)] = prob
            return
        with torch.inference_mode():
            logits = loaded.model(input_ids=torch.tensor([ids + prefix], device=loaded.device)).logits[0, -1]
        p = logits_to_probs(logits, settings)
        for t in p.nonzero().flatten().tolist():
            walk(prefix + [t], prob * float(p[t]))

    walk([], 1.0)
    return law


def always_accept(draft_ids, draft_probs, target_probs, generator):
    """A broken acceptance rule (negative control): every draft is kept, the bonus drawn from p_{k+1}."""
    k = int(draft_ids.shape[0])
    result = verify_drafts(draft_ids, draft_probs, target_probs, generator)
    token = int(torch.multinomial(target_probs[k], 1, generator=generator))
    return dataclasses.replace(result, num_accepted=k, next_token=token, next_is_bonus=True)


def total_variation(law: dict, empirical: dict) -> float:
    """Total-variation distance 0.5 * sum |P(x) - Q(x)| between two distributions over outcomes."""
    return 0.5 * sum(abs(law.get(x, 0.0) - empirical.get(x, 0.0)) for x in set(law) | set(empirical))


def tv_bound(law: dict, runs: int) -> float:
    """The check's bound: 3 x the expected TV of ``runs`` exact samples, sum over outcomes of
    sqrt(2 P (1 - P) / (pi runs)) / 2 *(our choice: a correct sampler stays under it with high
    probability; a biased one exceeds it once its bias is larger than the noise)*."""
    return 3 * 0.5 * sum(math.sqrt(2 * p * (1 - p) / (math.pi * runs)) for p in law.values())


@dataclass(frozen=True)
class LabResult:
    """Empirical laws against the exact one.

    Attributes:
        exact: {outcome: probability} from the model.
        empirical: method key (and ``BROKEN``) -> {outcome: share of runs}.
        tv: method key -> total-variation distance to ``exact``.
        bound: ``tv_bound(exact, runs)``.
        runs: runs per method; depth: tokens per run.
        drafts: method key (and ``BROKEN``) -> (accepted drafts, judged drafts) over all its runs.
    """

    exact: dict[tuple[int, ...], float]
    empirical: dict[str, dict[tuple[int, ...], float]]
    tv: dict[str, float]
    bound: float
    runs: int
    depth: int
    drafts: dict[str, tuple[int, int]] = field(default_factory=dict)

    def passed(self, key: str) -> bool:
        """True when ``key``'s TV is under the bound."""
        return self.tv[key] < self.bound


def run_lab(loaded, prompt: str, runs: int, depth: int = 3, top_k: int = 2, temperature: float = 1.0,
            num_lookahead: int = 2, keys: list[str] | None = None,
            progress: Callable[[int, int], None] | None = None) -> LabResult:
    """Run ``runs`` seeded continuations of ``depth`` tokens with each method and the broken rule.

    Args:
        loaded: a ``LoadedModel``.
        prompt: the user's text (chat template applied).
        runs: continuations per method, 1..``MAX_RUNS``.
        keys: registered methods to run (default: all); the broken rule always runs.
        progress: called with (0, runs in all) first (the exact law and the drafters' files come before the first
            run: seconds), then with (runs done, runs in all) after every run.

    Raises:
        ValueError: ``runs`` or ``depth`` out of range, an unknown method, or a bad prompt.
    """
    if not 1 <= runs <= MAX_RUNS or not 1 <= depth <= 6:
        raise ValueError(f"The lab takes 1-{MAX_RUNS} runs of 1-6 tokens, got {runs} runs of {depth}.")
    keys = list(METHODS) if keys is None else keys
    unknown = [k for k in keys if k not in METHODS]
    if unknown:
        raise ValueError(f"Unknown method(s) {', '.join(unknown)}: choose from {', '.join(METHODS)}.")
    settings = DecodeSettings(max_new_tokens=depth, temperature=temperature, top_k=top_k, num_lookahead=num_lookahead)
    plan = [(k, k, dict()) for k in keys] + [(BROKEN, "pass", dict(verify_fn=always_accept))]
    if progress:
        progress(0, runs * len(plan))
    exact = exact_law(loaded, prompt, settings, depth)
    state = {method: METHODS[method].find_files(loaded, num_lookahead)[0] for _, method, _ in plan}
    empirical, drafts, done = {}, {}, 0
    for name, method, kw in plan:
        counts: dict[tuple[int, ...], int] = {}
        accepted = judged = 0
        for seed in range(runs):
            events = list(METHODS[method].decode(loaded, prompt, settings.with_(seed=seed), state[method], **kw))
            out = tuple(output_token_ids(events)[:depth])
            counts[out] = counts.get(out, 0) + 1
            summary = summarize(events)
            accepted, judged = accepted + summary.accepted_drafts, judged + summary.judged_drafts
            done += 1
            if progress:
                progress(done, runs * len(plan))
        empirical[name], drafts[name] = {x: c / runs for x, c in counts.items()}, (accepted, judged)
    return LabResult(exact, empirical, {k: total_variation(exact, v) for k, v in empirical.items()},
                     tv_bound(exact, runs), runs, depth, drafts)


def half_as_wrong(law: dict, other: dict) -> dict:
    """The mixture (law + other) / 2: a sampler half as far from ``law`` as ``other`` in total variation (a
    subtler broken rule, for ``detection_power``)."""
    return {x: (law.get(x, 0.0) + other.get(x, 0.0)) / 2 for x in set(law) | set(other)}


def detection_power(law: dict, alternative: dict, runs: int, bound: float, trials: int = 2000,
                    seed: int = 0) -> float:
    """The check's power against a sampler whose law is ``alternative``: the share of ``trials`` simulated labs
    of ``runs`` draws from it whose total-variation distance to ``law`` exceeds ``bound`` (Monte Carlo with a
    seeded ``random.Random``, no model). With ``alternative`` = the broken rule's measured shares it says how
    surely this N catches a rule as wrong as that one.

    Raises:
        ValueError: ``runs`` or ``trials`` < 1, or an ``alternative`` with no mass.
    """
    if runs < 1 or trials < 1 or not sum(alternative.values()):
        raise ValueError(f"detection_power needs runs >= 1, trials >= 1 and an alternative law with mass, got "
                         f"runs={runs}, trials={trials}.")
    rng = random.Random(seed)
    outcomes, weights = list(alternative), list(alternative.values())
    caught = 0
    for _ in range(trials):
        counts: dict = {}
        for x in rng.choices(outcomes, weights, k=runs):
            counts[x] = counts.get(x, 0) + 1
        caught += total_variation(law, {x: c / runs for x, c in counts.items()}) >= bound
    return caught / trials
