"""Prompt lookup (``pass_core/drafters/prompt_lookup.py``): its match equals transformers' candidate generator's,
greedy tokens equal AR and ``model.generate(..., prompt_lookup_num_tokens=3)``, the sampled law with its own
one-hot drafts is the target's (two broken rules must fail), and the inspector's note says where it matched.

The losslessness suite (tests/test_lossless.py) runs prompt-lookup too: its cases come from the registry
(oracle drafts right / wrong / partly right, EOS in every role, the target cache after partial acceptance,
the distribution with both negative controls).
"""

from __future__ import annotations

import random

import pytest
import torch
from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

from lossless_helpers import always_accept, exact_law, resample_from_p, run
from pass_core.bench.peers import generate_peer
from pass_core.decoding.events import output_token_ids
from pass_core.decoding.metrics import summarize
from pass_core.decoding.settings import DecodeSettings
from pass_core.decoding.text import encode_prompt
from pass_core.drafters.prompt_lookup import MAX_NGRAM, Match, PromptLookupDrafter, find_match
from pass_core.registry import METHODS
from sampling_design import ALPHA, BETA, DELTA, design, tv_floor

GREEDY = DecodeSettings(max_new_tokens=48, temperature=0.0, num_lookahead=3)
#: Prompts whose greedy continuation on the tiny model repeats itself, so that drafts get accepted.
PROMPTS = ["hello world hello world", "def f(x):\n    return f(x)", "a b c a b c a b"]


def hf_candidates(ids: list[int], k: int, eos: list[int] | None = None) -> list[int]:
    """transformers' own prompt-lookup drafts for the committed ``ids`` (its default n-gram size)."""
    gen = PromptLookupCandidateGenerator(eos_token_id=torch.tensor(eos) if eos else None, num_output_tokens=k,
                                         max_matching_ngram_size=MAX_NGRAM, max_length=len(ids) + 100)
    x = torch.tensor([ids])
    out, _ = gen.get_candidates(x)
    return out[0, len(ids):].tolist()


# ------------------------------------------------------------------ the match
def test_match_prefers_the_longer_ngram_then_the_earliest_occurrence():
    ids = [5, 1, 2, 9, 9, 7, 2, 8, 8, 1, 2, 6, 6, 1, 2]  # last 2-gram (1, 2) at 1, 9 and (itself) 13
    assert find_match(ids, 2, 3) == Match(2, 1, (9, 9, 7))
    assert find_match(ids, 1, 3) == Match(1, 2, (9, 9, 7))  # 1-gram (2,) first occurs at index 2
    assert find_match([4, 3, 2, 1, 4, 3, 9, 2], 2, 2) == Match(1, 2, (1, 4))  # no earlier (3, 2): n = 1
    assert find_match([1, 2, 3], 2, 3) is None  # the last token occurs nowhere earlier
    assert find_match([7, 7, 7], 2, 3) == Match(2, 0, (7,))  # overlapping occurrences count
    assert find_match([1, 2, 3, 1], 2, 5) == Match(1, 0, (2, 3, 1))  # the continuation runs to the end


def test_match_is_cut_before_eos_and_tries_no_other_occurrence():
    ids = [3, 0, 8, 3, 4, 8, 3]
    assert find_match(ids, 1, 3, eos={4}) == Match(1, 0, (0, 8, 3))
    assert find_match(ids, 1, 3, eos={8}) == Match(1, 0, (0,))
    assert find_match(ids, 1, 3, eos={0}) == Match(1, 0, ())  # transformers drafts nothing then


def test_match_equals_transformers_candidate_generator_on_random_sequences():
    rng = random.Random(0)
    checked = 0
    for trial in range(400):
        ids = [rng.randrange(6) for _ in range(rng.randint(1, 30))]  # a small vocabulary: many matches
        k, eos = rng.randint(1, 5), ([rng.randrange(6)] if trial % 3 == 0 else None)
        match = find_match(ids, MAX_NGRAM, k, set(eos or ()))
        ours = list(match.drafts) if match else []
        assert ours == hf_candidates(ids, k, eos), f"ids {ids}, k {k}, eos {eos}"
        checked += bool(ours)
    assert checked > 200  # most trials drafted something


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="max_ngram"):
        PromptLookupDrafter(max_ngram=0)
    with pytest.raises(ValueError, match="k >= 1"):
        find_match([1, 2], 2, 0)


# ------------------------------------------------------------------ greedy
def test_greedy_equals_ar_with_accepted_and_partially_accepted_steps(tiny):
    partial = accepted = no_match = 0
    for prompt in PROMPTS:
        events = run(tiny, "prompt-lookup", prompt, GREEDY)
        assert output_token_ids(events) == output_token_ids(run(tiny, "ar", prompt, GREEDY))
        partial += sum(0 < e.num_accepted < e.num_verified_drafts for e in events)
        accepted += summarize(events).accepted_drafts
        no_match += sum(not e.verified_drafts for e in events)
        for e in events:  # q is one-hot on each draft
            assert all(d.q == 1.0 for d in e.drafts)
    assert partial >= 2 and accepted >= 10 and no_match >= 1, (partial, accepted, no_match)


@pytest.mark.parametrize("prompt", PROMPTS + ["Grüße 😀 ok"])
def test_greedy_tokens_equal_transformers_prompt_lookup(tiny, prompt):
    ours = output_token_ids(run(tiny, "prompt-lookup", prompt, GREEDY))
    assert ours == output_token_ids(generate_peer(tiny, "hf-prompt-lookup", prompt, GREEDY))


def test_drafts_are_transformers_candidates_at_every_step(tiny):
    """Each step's drafts equal transformers' candidates for the committed tokens (k = 3, no EOS here)."""
    drafter = PromptLookupDrafter()
    seen = []
    original = drafter.propose

    def recording(uncached, committed, max_drafts):
        prop = original(uncached, committed, max_drafts)
        seen.append((list(committed), max_drafts, prop.drafts.tolist()))
        return prop

    drafter.propose = recording
    run(tiny, "prompt-lookup", PROMPTS[0], GREEDY, drafter)
    full = [s for s in seen if s[1] >= 3]
    assert len(full) >= 10
    for committed, _, drafts in full:
        assert drafts == hf_candidates(committed, 3)


def test_no_match_is_a_plain_target_step_with_a_note(tiny):
    """A raw prompt of distinct bytes: the first step finds no earlier occurrence of the last token."""
    settings = GREEDY.with_(max_new_tokens=4, chat_template=False)
    events = run(tiny, "prompt-lookup", "xyz", settings)
    first = events[0]
    assert first.num_verified_drafts == 0 and first.forward_passes == 1 and not first.drafts
    assert "'z' occurs nowhere earlier" in first.draft_note


def test_the_note_says_where_the_match_was(tiny):
    prompt = "abcab"  # raw: the last 2-gram "ab" first occurs at prompt token 0, followed by "cab"
    events = run(tiny, "prompt-lookup", prompt, GREEDY.with_(max_new_tokens=8, chat_template=False))
    assert encode_prompt(tiny.tokenizer, prompt, False) == tiny.tokenizer.encode("abcab")
    note = events[0].draft_note
    assert "2-gram 'ab'" in note and "prompt token 0" in note and "3 token(s)" in note, note
    assert [d.token_id for d in events[0].drafts] == tiny.tokenizer.encode("cab")


def test_registered_with_no_file(tiny):
    method = METHODS["prompt-lookup"]
    assert method.file_option is None and method.find_files(tiny, 3) == (None, "")
    assert method.colour not in {m.colour for k, m in METHODS.items() if k != "prompt-lookup"}


# ------------------------------------------------------------------ sampling with its own drafts
WINDOW = 4


def _tv(tiny, settings, law, runs, stop_above=None, **kw):
    """(TV of ``runs`` seeded runs' first WINDOW tokens to ``law``, the token labels seen). ``stop_above``: a negative
    control's bound b; its runs stop once their TV is sure to exceed b, and the TV returned is then ``tv_floor``'s."""
    counts, decisions = {}, set()
    for seed in range(runs):
        if stop_above is not None and tv_floor(law, counts, runs) > stop_above:
            break
        events = run(tiny, "prompt-lookup", SAMPLED_PROMPT, settings.with_(seed=seed), **kw)
        out = tuple(output_token_ids(events)[:WINDOW])
        counts[out] = counts.get(out, 0) + 1
        decisions |= {t.label for e in events for t in e.tokens}
    return tv_floor(law, counts, runs), decisions  # once all runs are made, their TV


#: Raw text after which the tiny model gives the copied draft "S" about half of its top-2 mass (found by
#: scanning "aba" for letters and digits), so that drafts are accepted at times and rejected at others and a
#: rule that resamples from p instead of the residual redraws the rejected draft often.
SAMPLED_PROMPT = "SSS"


@pytest.mark.sampling
def test_sampling_with_its_own_drafts_matches_the_exact_law_and_broken_rules_fail(tiny):
    """First 4 tokens at T = 1, top-k 2, prompt lookup's own one-hot drafts: n seeded runs and the bound b from the
    exact law (``sampling_design.design``, as tests/test_lossless.py: false-alarm rate ALPHA, power 1 - BETA against
    any law at TV >= DELTA); TV under b, and always-accept and resample-from-p above b with the same n."""
    settings = DecodeSettings(max_new_tokens=WINDOW, num_lookahead=2, temperature=1.0, top_k=2, chat_template=False)
    law = exact_law(tiny, SAMPLED_PROMPT, settings, WINDOW)
    assert len(law) == 16 and abs(sum(law.values()) - 1) < 1e-5
    plan = design(law, ALPHA, BETA, DELTA)
    tv, seen = _tv(tiny, settings, law, plan.runs)
    assert {"accepted", "rejected", "bonus", "resampled"} <= seen, f"not every decision happened: {seen}"
    print(f"\nTV prompt-lookup: {tv:.4f}; {plan.describe()}")
    assert tv < plan.bound, f"prompt lookup's sampling differs from the target's law: TV {tv:.4f}; {plan.describe()}"
    for broken in (always_accept, resample_from_p):
        tv_broken, _ = _tv(tiny, settings, law, plan.runs, stop_above=plan.bound, verify_fn=broken)
        print(f"TV prompt-lookup {broken.__name__}: at least {tv_broken:.4f}")
        assert tv_broken > plan.bound, f"{broken.__name__}: TV {tv_broken:.4f}: the test has no power; {plan.describe()}"


# ------------------------------------------------------------------ the embedded model
COPY_PROMPT = "Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the quiet river bank."


@pytest.mark.slow
def test_embedded_model_greedy_equals_ar_and_transformers(smollm):
    settings = GREEDY.with_(max_new_tokens=32)
    events = run(smollm, "prompt-lookup", COPY_PROMPT, settings)
    tokens = output_token_ids(events)
    assert tokens == output_token_ids(run(smollm, "ar", COPY_PROMPT, settings))
    assert tokens == output_token_ids(generate_peer(smollm, "hf-prompt-lookup", COPY_PROMPT, settings))
    assert summarize(events).mean_accepted_tokens > 2.0  # copying a sentence: most drafts are right


# ------------------------------------------------------------------ grounded prompts
def test_suites_and_page_examples_hold_grounded_prompts():
    from pass_core.bench.suites import load_suite
    from playground.race_inputs import EXAMPLES

    kinds = ("Summarize this paragraph", "Rewrite this", "Fix ", "Continue this list")
    for suite, size in (("quick", 4), ("full", 10)):
        grounded = [p.prompt for p in load_suite(suite) if p.category == "grounded"]
        assert len(grounded) == size, suite
        assert all(any(p.startswith(kind) for p in grounded) for kind in kinds), suite
    assert any(p.prompt.startswith("Repeat this sentence exactly: ") for p in load_suite("full")
               if p.category == "grounded")
    assert any(e.startswith("Repeat this sentence exactly: ") for e in EXAMPLES)
    assert all(any(e.startswith(kind) for e in EXAMPLES) for kind in kinds)
