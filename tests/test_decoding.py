"""Losslessness of PaSS against AR on tiny random models: greedy equality, cache state, distribution."""

from __future__ import annotations

import copy
import itertools

import pytest
import torch

import pass_core.decoding as decoding
from pass_core.decoding import generate_autoregressive, generate_pass
from pass_core.events import output_text, output_token_ids, summarize
from pass_core.lookahead import LookaheadEmbeddings
from pass_core.sampling import logits_to_probs
from pass_core.settings import DecodeSettings
from pass_core.verification import VerificationResult, verify_drafts

PROMPTS = ["hello world", "def f(x):\n    return", "1, 2, 3,", "Grüße 😀 <|im_end|> ok"]


def ar_ids(loaded, prompt, settings):
    return output_token_ids(generate_autoregressive(loaded, prompt, settings))


def oracle(full_prompt_ids, ar_output, wrong=False, vocab=259):
    """A drafter that knows AR's greedy output (always right) or is always off by one."""
    truth = full_prompt_ids + ar_output

    def draft_fn(context, num):
        nxt = [truth[i] if i < len(truth) else 0 for i in range(len(context), len(context) + num)]
        return [(t + 1) % vocab for t in nxt] if wrong else nxt

    return draft_fn


def prompt_ids(loaded, prompt):
    from pass_core.text import encode_prompt

    return encode_prompt(loaded.tokenizer, prompt, True)


@pytest.mark.parametrize("fused", [False, True], ids=["paper", "fused"])
@pytest.mark.parametrize("num_lookahead", [1, 3])
def test_greedy_pass_equals_ar_with_real_lookahead(tiny, fused, num_lookahead):
    settings = DecodeSettings(max_new_tokens=24, num_lookahead=num_lookahead, fused=fused)
    la = LookaheadEmbeddings.initialise(tiny, num_lookahead, "random", generator=torch.Generator().manual_seed(1))
    for prompt in PROMPTS:
        assert output_token_ids(generate_pass(tiny, prompt, settings, la)) == ar_ids(tiny, prompt, settings)


@pytest.mark.parametrize("fused", [False, True], ids=["paper", "fused"])
def test_always_right_drafter_accepts_everything_and_gets_bonus(tiny, fused):
    settings = DecodeSettings(max_new_tokens=30, num_lookahead=3, fused=fused)
    la = LookaheadEmbeddings.initialise(tiny, 3, "mean")
    prompt = PROMPTS[1]
    expected = ar_ids(tiny, prompt, settings)
    events = list(generate_pass(tiny, prompt, settings, la, draft_fn=oracle(prompt_ids(tiny, prompt), expected)))
    assert output_token_ids(events) == expected
    full_steps = [e for e in events if len(e.drafts) == 3 and any(d.decision != "not_verified" for d in e.drafts)]
    assert full_steps, "expected steps that verified all 3 drafts"
    for e in full_steps:
        assert e.num_accepted == 3
        assert e.tokens[-1].label == "bonus"
    s = summarize(events)
    assert s.tokens_per_forward_pass > (2.0 if fused else 2.0)


@pytest.mark.parametrize("fused", [False, True], ids=["paper", "fused"])
def test_always_wrong_drafter_still_matches_ar(tiny, fused):
    settings = DecodeSettings(max_new_tokens=30, num_lookahead=3, fused=fused)
    la = LookaheadEmbeddings.initialise(tiny, 3, "mean")
    prompt = PROMPTS[2]
    expected = ar_ids(tiny, prompt, settings)
    wrong = oracle(prompt_ids(tiny, prompt), expected, wrong=True, vocab=tiny.vocab_size)
    events = list(generate_pass(tiny, prompt, settings, la, draft_fn=wrong))
    assert output_token_ids(events) == expected
    assert summarize(events).accepted_drafts == 0
    assert any(t.label == "rejected" for e in events for t in e.tokens)
    assert all(t.label in ("exact", "resampled", "rejected") for e in events for t in e.tokens)


@pytest.mark.parametrize("fused", [False, True], ids=["paper", "fused"])
def test_cache_after_rejection_matches_fresh_forward(tiny, fused, monkeypatch):
    caches = []
    real_crop = decoding.crop_to

    def spy(cache, length):
        caches.append(cache)
        real_crop(cache, length)

    monkeypatch.setattr(decoding, "crop_to", spy)
    settings = DecodeSettings(max_new_tokens=20, num_lookahead=3, fused=fused)
    la = LookaheadEmbeddings.initialise(tiny, 3, "mean")
    prompt = PROMPTS[0]
    ids = prompt_ids(tiny, prompt)
    expected = ar_ids(tiny, prompt, settings)
    wrong = oracle(ids, expected, wrong=True, vocab=tiny.vocab_size)
    checked = 0
    output = []
    for event in generate_pass(tiny, prompt, settings, la, draft_fn=wrong):
        output += event.new_token_ids
        if event.finished or not any(t.label == "rejected" for t in event.tokens):
            continue
        cache = copy.deepcopy(caches[-1])
        committed = ids + output
        assert cache.get_seq_length() == len(committed) - 1
        with torch.no_grad():
            cached = tiny.model(input_ids=torch.tensor([[committed[-1]]]), cache=cache, use_cache=True).logits[0, -1]
            fresh = tiny.model(input_ids=torch.tensor([committed])).logits[0, -1]
        torch.testing.assert_close(cached, fresh, atol=1e-4, rtol=1e-4)
        checked += 1
    assert checked >= 2


def exact_joint(loaded, prompt, settings, n_tokens):
    """The exact AR distribution of the first n tokens, by enumerating the top-k tree."""
    ids = prompt_ids(loaded, prompt)
    dist = {}

    def walk(prefix, prob):
        if len(prefix) == n_tokens:
            dist[tuple(prefix)] = prob
            return
        with torch.no_grad():
            logits = loaded.model(input_ids=torch.tensor([ids + prefix])).logits[0, -1]
        p = logits_to_probs(logits, settings)
        for t in p.nonzero().flatten().tolist():
            walk(prefix + [t], prob * float(p[t]))

    walk([], 1.0)
    return dist


def empirical_tv(loaded, prompt, settings, la, runs, n_tokens, verify_fn=verify_drafts):
    exact = exact_joint(loaded, prompt, settings, n_tokens)
    counts = {}
    for seed in range(runs):
        out = []
        for event in generate_pass(loaded, prompt, settings.with_(seed=seed), la, verify_fn=verify_fn):
            out += event.new_token_ids
            if len(out) >= n_tokens:
                break
        key = tuple(out[:n_tokens])
        counts[key] = counts.get(key, 0) + 1
    keys = set(exact) | set(counts)
    return 0.5 * sum(abs(exact.get(k, 0.0) - counts.get(k, 0) / runs) for k in keys)


def always_accept(draft_ids, draft_probs, target_probs, generator):
    """A deliberately broken acceptance rule: every draft is kept."""
    res = verify_drafts(draft_ids, draft_probs, target_probs, generator)
    k = len(draft_ids)
    nxt = int(torch.multinomial(target_probs[k], 1, generator=generator))
    return VerificationResult(k, nxt, True, res.uniforms, res.accept_probs, res.p_draft, res.q_draft)


@pytest.mark.parametrize("fused", [False, True], ids=["paper", "fused"])
def test_sampling_distribution_matches_ar_and_broken_rule_fails(tiny, fused):
    settings = DecodeSettings(max_new_tokens=8, num_lookahead=2, temperature=1.0, top_k=3, fused=fused)
    la = LookaheadEmbeddings.initialise(tiny, 2, "random", generator=torch.Generator().manual_seed(3))
    prompt, runs, n = "abc", 1500, 3
    bound = 0.08
    tv = empirical_tv(tiny, prompt, settings, la, runs, n)
    tv_broken = empirical_tv(tiny, prompt, settings, la, runs, n, verify_fn=always_accept)
    assert tv < bound, f"PaSS sampling differs from AR: TV {tv:.3f} >= {bound}"
    assert tv_broken > bound, f"negative control passed the check: TV {tv_broken:.3f} <= {bound}"


def test_events_rebuild_text_and_summary_matches_hand_counts(tiny):
    settings = DecodeSettings(max_new_tokens=25, num_lookahead=3)
    la = LookaheadEmbeddings.initialise(tiny, 3, "random", generator=torch.Generator().manual_seed(0))
    events = list(generate_pass(tiny, "Grüße 😀", settings, la))
    ids = output_token_ids(events)
    assert output_text(events) == tiny.tokenizer.decode(ids, skip_special_tokens=True)
    s = summarize(events)
    assert s.tokens == len(ids) == 25
    assert s.steps == len(events)
    assert s.forward_passes == sum(e.forward_passes for e in events)
    accepted = sum(1 for e in events for d in e.drafts if d.decision == "accepted")
    drafted = sum(len(e.drafts) for e in events)
    assert s.accepted_drafts == accepted and s.drafted_tokens == drafted
    assert s.mean_accepted_tokens == pytest.approx(len(ids) / len(events))
    assert s.tokens_per_forward_pass == pytest.approx(len(ids) / s.forward_passes)
    assert sum(s.acceptance_histogram) == pytest.approx(1.0)
    assert s.finish_reason == "max_new_tokens"
    # every step but a truncated last one: 1 exact + accepted + 1 resampled/bonus
    for e in events[:-1]:
        assert len(e.new_token_ids) == e.num_accepted + 2


def test_ar_events(tiny):
    events = list(generate_autoregressive(tiny, "hi", DecodeSettings(max_new_tokens=7)))
    assert len(events) == 7 and all(len(e.tokens) == 1 and e.tokens[0].label == "target" for e in events)
    s = summarize(events)
    assert (s.tokens_per_forward_pass, s.mean_accepted_tokens, s.accepted_drafts_per_step) == (1.0, 1.0, 0.0)
    assert s.acceptance_rate is None


def test_stops_at_eos():
    from tiny import tiny_loaded

    loaded = tiny_loaded(seed=5, eos=True)
    eos = loaded.tokenizer.eos_token_id
    with torch.no_grad():  # make EOS the argmax after any token
        loaded.model.lm_head.weight[eos] = loaded.model.lm_head.weight.abs().max(0).values * 50
    la = LookaheadEmbeddings.initialise(loaded, 2, "mean")
    for events in (list(generate_autoregressive(loaded, "x", DecodeSettings(max_new_tokens=10))),
                   list(generate_pass(loaded, "x", DecodeSettings(max_new_tokens=10, num_lookahead=2), la))):
        assert output_token_ids(events)[-1] == eos
        assert events[-1].finish_reason == "eos"


@pytest.mark.parametrize("changes, fragment", [
    ({"num_lookahead": 0}, "look-ahead"),
    ({"temperature": -0.5}, "temperature"),
    ({"top_p": 0.0}, "top-p"),
    ({"top_p": 1.5}, "top-p"),
    ({"max_new_tokens": 0}, "max new tokens"),
    ({"top_k": -1}, "top-k"),
    ({"max_new_tokens": 2.5}, "whole number"),
])
def test_out_of_range_settings_raise(changes, fragment):
    with pytest.raises(ValueError, match=fragment):
        DecodeSettings(**changes)


def test_bad_prompts_raise(tiny):
    with pytest.raises(ValueError, match="empty"):
        list(generate_autoregressive(tiny, "   ", DecodeSettings()))
    with pytest.raises(ValueError, match="context"):
        list(generate_autoregressive(tiny, "a" * 2000, DecodeSettings()))


def test_verify_drafts_rule_by_hand():
    p = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])
    q = torch.tensor([[0.25, 0.75, 0.0], [0.0, 0.0, 1.0]])
    drafts = torch.tensor([0, 2])
    res = verify_drafts(drafts, q, p, torch.Generator().manual_seed(0))
    assert res.accept_probs == pytest.approx((1.0, 0.5))
    assert res.num_accepted >= 1  # p/q >= 1 for the first draft
    # residual at a rejection of the second draft: max(0, p - q) = [0.2, 0.3, 0] -> never token 2
    for seed in range(50):
        r = verify_drafts(drafts, q, p, torch.Generator().manual_seed(seed))
        if r.num_accepted == 1:
            assert r.next_token in (0, 1)
        else:
            assert r.num_accepted == 2 and r.next_token == 0 and r.next_is_bonus


def test_greedy_verify_is_argmax_rule():
    p = torch.nn.functional.one_hot(torch.tensor([4, 2, 7]), 9).float()
    for drafts, n_acc, nxt in ([[4, 2], 2, 7], [[4, 3], 1, 2], [[1, 2], 0, 4]):
        d = torch.tensor(drafts)
        res = verify_drafts(d, torch.nn.functional.one_hot(d, 9).float(), p, None)
        assert (res.num_accepted, res.next_token) == (n_acc, nxt)


def test_sampling_filters():
    logits = torch.tensor([[3.0, 2.0, 1.0, 0.0]])
    assert logits_to_probs(logits, DecodeSettings()).tolist() == [[1.0, 0.0, 0.0, 0.0]]
    p = logits_to_probs(logits, DecodeSettings(temperature=1.0, top_k=2))
    assert (p[0, 2:] == 0).all() and p.sum() == pytest.approx(1.0)
    p = logits_to_probs(logits, DecodeSettings(temperature=1.0, top_p=0.5))
    assert (p[0, 1:] == 0).all()  # the top token alone holds > 0.5 of the mass
    p = logits_to_probs(logits, DecodeSettings(temperature=1.0, top_p=0.9))
    assert (p[0, :3] > 0).all() and p[0, 3] == 0


def test_drafts_after_eos_are_not_counted_as_accepted(tiny):
    """Verification accepted 3 drafts but the 2nd was EOS: only the committed ones count."""
    class Detok:
        def token_text(self, tid):
            return f"<{tid}>"

    records = [(5, "exact", "a"), (6, "accepted", "b"), (0, "accepted", "")]  # EOS (0) ends the output
    drafts = decoding._draft_records(tiny, Detok(), [6, 0, 7], [0.5] * 3, [0.5] * 3, [0.1] * 3, 3, 3, records)
    assert [d.decision for d in drafts] == ["accepted", "accepted", "not_verified"]
    uncut = decoding._draft_records(tiny, Detok(), [6, 0, 7], [0.5] * 3, [0.5] * 3, [0.1] * 3, 3, 3)
    assert [d.decision for d in uncut] == ["accepted"] * 3
    # every real run: accepted drafts == committed tokens labelled "accepted"
    settings = DecodeSettings(num_lookahead=3, temperature=1.0, max_new_tokens=40, seed=3)
    la = LookaheadEmbeddings.initialise(tiny, 3, "random", generator=torch.Generator().manual_seed(0))
    for event in generate_pass(tiny, "hello", settings, la):
        assert event.num_accepted == sum(t.label == "accepted" for t in event.tokens if t.committed)
