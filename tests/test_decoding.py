"""Decoding building blocks: the acceptance rule, sampling filters, settings, events and metrics,
EOS handling, the global RNG, the output head's vocabulary. Losslessness of every method is in
test_lossless.py."""

from __future__ import annotations

import re

import pytest
import torch

from pass_core.decoding.autoregressive import generate_autoregressive
from pass_core.decoding.bookkeeping import draft_records
from pass_core.decoding.events import output_text, output_token_ids
from pass_core.decoding.metrics import summarize
from pass_core.drafters.lookahead.embeddings import LookaheadEmbeddings
from pass_core.drafters.lookahead.drafter import LookaheadDrafter
from pass_core.decoding.sampling import logits_to_probs
from pass_core.decoding.settings import DecodeSettings
from pass_core.decoding.speculative import generate_speculative
from pass_core.decoding.verification import VerificationResult, verify_drafts
from pass_core.registry import METHODS


def generate_pass(loaded, prompt, settings, la):
    return generate_speculative(loaded, prompt, settings, LookaheadDrafter(la, settings.fused), method="pass")


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
    verifying = [e for e in events if e.verified_drafts]
    assert s.verification_steps == len(verifying) >= len(events) - 1
    assert s.mean_accepted_tokens == pytest.approx(sum(len(e.new_token_ids) for e in verifying) / len(verifying))
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
    # the context message names a fix that works: with 1,024 new tokens asked on a 512-position model it said
    # "of which 1,040 stay free ... Shorten the prompt to at most 0 tokens or lower max new tokens"
    from pass_core.decoding.text import encode_prompt

    short, long = (len(encode_prompt(tiny.tokenizer, text, False)) for text in ("Hello", "a" * 450))
    assert tiny.max_positions == 512 and 396 < long < 496
    cases = {("a" * 450, 100, "max new tokens"):
             f"Shorten the prompt to at most 396 tokens or lower max new tokens to at most {496 - long}\\.$",
             ("Hello", 1024, "max new tokens"): f"positions\\. Lower max new tokens to at most {496 - short}\\.$",
             ("Hello", 1024, None): "positions\\. Use a model with a longer context\\.$",
             ("a" * 500, 496, "max new tokens"): "to at most 495 tokens and lower max new tokens to 1\\.$",
             ("a" * 450, 100, None): "positions\\. Shorten the prompt to at most 396 tokens\\.$"}
    for (prompt, new, setting), message in cases.items():
        with pytest.raises(ValueError, match=message):
            encode_prompt(tiny.tokenizer, prompt, False, tiny.max_positions, new, setting)
    # a run with drafts states the numbers it was given: 4 new tokens and L = 3 said "10 new tokens are asked for,
    # with 16 more positions" (the 2 L positions a run keeps free were added to max new tokens)
    with pytest.raises(ValueError, match=r"and 4 new tokens are asked for, with 22 more positions kept free for "
                                         r"drafts: .* Shorten the prompt to at most 486 tokens or lower max new "
                                         r"tokens to at most 2\.$"):  # 488 + 4 + 22 > 512 positions
        list(METHODS["pass"].decode(tiny, "a" * 488, DecodeSettings(max_new_tokens=4, num_lookahead=3,
                                                                    chat_template=False)))
    # a lone surrogate (bytes that were not UTF-8 on a command line, or sent through the API) reached the
    # tokenizer, which raised "TextEncodeInput must be Union[...]" with a traceback in the server log
    with pytest.raises(ValueError, match=r"not valid text: character 4 \('\\udcff'\)"):
        list(generate_autoregressive(tiny, "hi \udcff there", DecodeSettings()))


def test_verify_drafts_rule_by_hand():
    """p/q >= 1 for d_1 (always kept), 0.5 for d_2; a rejection of d_2 resamples from
    norm(max(0, p_2 - q_2)) = (0.4, 0.6, 0); all accepted gives the bonus from p_3 = token 0.
    Exact joint law of (m, next token): (1, 0) 0.2, (1, 1) 0.3, (2, 0) 0.5."""
    p = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])
    q = torch.tensor([[0.25, 0.75, 0.0], [0.0, 0.0, 1.0]])
    drafts = torch.tensor([0, 2])
    res = verify_drafts(drafts, q, p, torch.Generator().manual_seed(0))
    assert res.accept_probs == pytest.approx((1.0, 0.5))
    assert res.p_draft == pytest.approx((0.5, 0.5)) and res.q_draft == pytest.approx((0.25, 1.0))
    runs, counts = 4000, {}
    for seed in range(runs):
        r = verify_drafts(drafts, q, p, torch.Generator().manual_seed(seed))
        key = (r.num_accepted, r.next_token, r.next_is_bonus)
        counts[key] = counts.get(key, 0) + 1
    law = {(1, 0, False): 0.2, (1, 1, False): 0.3, (2, 0, True): 0.5}
    assert set(counts) <= set(law), f"impossible outcomes: {set(counts) - set(law)}"
    for key, prob in law.items():
        assert abs(counts.get(key, 0) / runs - prob) < 0.03, (key, counts.get(key, 0) / runs, prob)


def test_greedy_verify_is_argmax_rule():
    p = torch.nn.functional.one_hot(torch.tensor([4, 2, 7]), 9).float()
    for drafts, n_acc, nxt in ([[4, 2], 2, 7], [[4, 3], 1, 2], [[1, 2], 0, 4]):
        d = torch.tensor(drafts)
        res = verify_drafts(d, torch.nn.functional.one_hot(d, 9).float(), p, None)
        assert (res.num_accepted, res.next_token) == (n_acc, nxt)


def test_only_a_one_hot_law_skips_the_draw_and_vocabularies_must_agree():
    """A one-hot row (greedy) is its argmax with no draw; a sampled row whose top probability rounds to 1.0 in
    float32 is still drawn (its other tokens keep their tiny mass: the shortcut took the argmax for it, a bias
    against them). q and p of different vocabulary widths are refused by name (they passed silently when every
    draft was accepted)."""
    from pass_core.decoding.sampling import sample
    from pass_core.decoding.tree import chain
    from pass_core.decoding.tree_verification import verify_tree

    for row, draws in (([0.0, 1.0, 0.0], False), ([1.0, 2e-9, 0.0], True)):
        probs = torch.tensor([row], dtype=torch.float32)
        gen = torch.Generator().manual_seed(0)
        before = gen.get_state().clone()
        token = sample(probs, gen)
        assert int(token[0]) == int(probs.argmax()) and (not torch.equal(gen.get_state(), before)) == draws, row
    drafts, q, p = torch.tensor([1, 2]), torch.full((2, 9), 1 / 9), torch.full((3, 8), 1 / 8)
    with pytest.raises(ValueError, match="cover 9 tokens, the target's 8: a drafter for another vocabulary"):
        verify_drafts(drafts, q, p, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="cover 9 tokens, the target's 8: a drafter for another vocabulary"):
        verify_tree(chain(2), drafts, q, p, torch.Generator().manual_seed(0))


def test_ar_keeps_no_context_for_drafts_it_never_makes(tiny):
    """AR ignores L: a prompt that fills the context but for max new tokens runs with L = 8 (AR kept 16 + 2 L
    positions free for drafts it never makes, and refused it); a longer one is refused without speaking of
    drafts; PaSS, which drafts, still needs them and says so."""
    from pass_core.decoding.text import encode_prompt

    prompt = "abc " * 60
    used = len(encode_prompt(tiny.tokenizer, prompt, False))
    settings = DecodeSettings(max_new_tokens=tiny.max_positions - used, num_lookahead=8, chat_template=False)
    first = next(iter(generate_autoregressive(tiny, prompt, settings)))
    assert first.tokens and first.tokens[0].label == "target"
    with pytest.raises(ValueError, match="asked for, with 32 more positions kept free for drafts: more than"):
        next(iter(METHODS["pass"].decode(tiny, prompt, settings)))
    with pytest.raises(ValueError, match="new tokens are asked for: more than the model's context of 512"):
        next(iter(generate_autoregressive(tiny, prompt, settings.with_(max_new_tokens=settings.max_new_tokens + 1))))


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

    result = VerificationResult(3, 9, True, (0.1,) * 3, (1.0,) * 3, (0.5,) * 3, (0.5,) * 3)
    records = [(5, "exact", "a"), (6, "accepted", "b"), (0, "accepted", "")]  # EOS (0) ends the output
    drafts = draft_records(Detok(), [6, 0, 7], [0.5] * 3, result, records)
    assert [d.decision for d in drafts] == ["accepted", "accepted", "not_verified"]
    uncut = draft_records(Detok(), [6, 0, 7], [0.5] * 3, result, records + [(7, "accepted", "c")])
    assert [d.decision for d in uncut] == ["accepted"] * 3
    # EOS (0) the last accepted draft, the draft after it rejected: compared past the output's end, not judged
    # (it counted as rejected, so that alpha depended on what the rule said after the output had ended)
    result = VerificationResult(2, 9, False, (0.1,) * 3, (1.0, 1.0, 0.0), (0.5,) * 3, (0.5,) * 3)
    ended = draft_records(Detok(), [6, 0, 7], [0.5] * 3, result, records)
    assert [d.decision for d in ended] == ["accepted", "accepted", "not_verified"]
    assert ended[2].u is None
    going_on = draft_records(Detok(), [6, 8, 7], [0.5] * 3, result, records[:2] + [(8, "accepted", "d"),
                                                                                   (9, "resampled", "e")])
    assert [d.decision for d in going_on] == ["accepted", "accepted", "rejected"]
    # PaSS's exact token was EOS: no draft is part of the output
    result = VerificationResult(0, 9, False, (0.1,) * 3, (0.0,) * 3, (0.5,) * 3, (0.5,) * 3)
    assert [d.decision for d in draft_records(Detok(), [6, 8, 7], [0.5] * 3, result, [(0, "exact", "")])] == [
        "not_verified"] * 3


def test_decoding_and_training_leave_the_global_rng_alone(tiny, tmp_path, monkeypatch):
    """Every run uses its own torch.Generator: the global RNG state is the same afterwards."""
    from pass_core.training.data import generate_self_data

    monkeypatch.setenv("PASS_PLAYGROUND_CACHE", str(tmp_path))
    torch.manual_seed(1234)
    before = torch.get_rng_state()
    settings = DecodeSettings(max_new_tokens=12, num_lookahead=2, temperature=1.0, top_k=5)
    for key, method in METHODS.items():
        list(method.decode(tiny, "hello", settings))
    LookaheadEmbeddings.initialise(tiny, 2, "random")
    LookaheadEmbeddings.initialise(tiny, 2, "mean")
    generate_self_data(tiny, [{"prompt": "hi"}, {"prompt": "yo"}], max_new_tokens=4, batch_size=2, cache=False,
                       temperature=0.8)
    assert torch.equal(torch.get_rng_state(), before), "a library function changed the global RNG"


def test_vocabulary_comes_from_the_output_head():
    """V is the number of rows of the output head (the width of p and q); a model whose head and
    input embeddings disagree is refused with both sizes named."""
    import dataclasses

    from tiny import tiny_loaded

    loaded = tiny_loaded(seed=3)
    assert loaded.vocab_size == loaded.model.get_output_embeddings().weight.shape[0] == 259
    loaded.model.set_output_embeddings(torch.nn.Linear(loaded.model.config.hidden_size, 300, bias=False))
    with pytest.raises(ValueError, match="output head has 300 rows but the input embeddings have 259"):
        dataclasses.replace(loaded)


def test_detokenizer_never_freezes_on_a_decode_that_is_not_prefix_stable(tiny):
    """A decode that rewrites earlier text (here: the first character upper-cased once the text is
    longer than 3 characters) must not stop the stream: every later token still adds its text."""
    from pass_core.decoding.text import Detokenizer

    class Rewriting:
        def decode(self, ids, **kw):
            text = "".join(chr(97 + i % 26) for i in ids)
            return text[:1].upper() + text[1:] if len(text) > 3 else text

    detok = Detokenizer(Rewriting())
    pieces = [detok.add(i) for i in range(10)]
    assert all(pieces[4:]), f"the stream froze: {pieces}"
    assert "".join(pieces).lower() == "abcdefghij"
    # a prefix-stable tokenizer: pieces rebuild the full decode exactly, emoji included
    ids = tiny.tokenizer("Grüße 😀 ok 春", add_special_tokens=False)["input_ids"]
    detok = Detokenizer(tiny.tokenizer)
    text = "".join(detok.add(t, final=i == len(ids) - 1) for i, t in enumerate(ids))
    assert text == tiny.tokenizer.decode(ids) == "Grüße 😀 ok 春"


@pytest.mark.parametrize("name", ["num_lookahead", "temperature", "top_k", "top_p", "max_new_tokens", "seed"])
def test_every_setting_range_is_enforced_at_its_bounds(name):
    """``SETTING_RANGES`` is the one source of ranges (UI sliders, CLI, README): the validator
    accepts both ends and refuses just outside them."""
    from pass_core.decoding.settings import SETTING_RANGES

    lo, hi, default = SETTING_RANGES[name]
    step = 1 if isinstance(lo, int) and isinstance(hi, int) else 0.001
    for ok in (lo, hi, default):
        assert getattr(DecodeSettings(**{name: ok}), name) == ok
    for bad in (lo - step, hi + step):
        shown = [f"{int(b):,}" if float(b).is_integer() else f"{b:g}" for b in (lo, hi)]
        with pytest.raises(ValueError, match=re.escape(f"between {shown[0]} and {shown[1]}")):
            DecodeSettings(**{name: bad})


def test_a_huge_value_is_named_short_in_the_message():
    """A seed of 1e300 (a whole number to JSON) came back as a 301-digit number in the message."""
    with pytest.raises(ValueError, match=r"seed must be between 0 and 2,147,483,647, got 1\.00e\+300$"):
        DecodeSettings(seed=10**300)
    with pytest.raises(ValueError, match=r"max new tokens must be between 1 and 1,024, got 1\.00e\+400$"):
        DecodeSettings(max_new_tokens=10**400)  # too large for a float
    with pytest.raises(ValueError, match=r"top-k must be between 0 and 200, got 1\.00e\+30$"):
        DecodeSettings(top_k=1e30)
    with pytest.raises(ValueError, match=r"got 201$"):  # ordinary values as given
        DecodeSettings(top_k=201)


def test_cache_checks_raise_even_under_python_O(tiny):
    """The cache invariant (checked after every step) and the crops raise RuntimeError: as ``assert`` statements,
    ``python -O`` stripped them and a broken cache went on unseen."""
    from pass_core.decoding.cache import check_invariant, crop_to, keep_positions, new_cache

    cache = new_cache(tiny.model)
    with torch.no_grad():
        tiny.model(input_ids=torch.tensor([[1, 2, 3, 4]]), cache=cache, use_cache=True)
    check_invariant(cache, 5)  # 4 cached + the pending token
    for broken in (lambda: check_invariant(cache, 4), lambda: crop_to(cache, 6), lambda: keep_positions(cache, 2, [5])):
        with pytest.raises(RuntimeError, match="cache"):
            broken()


def test_each_drafts_acceptance_probability_decided_it(tiny):
    """``DraftRecord.acceptance_probability`` (min(1, p/q); a tree node's min(1, p_res/q)), which the token
    inspector shows, is the number the rule compared u with: every verified draft of sampled chain and tree runs was
    accepted exactly when its u fell below it, and a draft never verified has none."""
    seen = {}
    for tree_nodes in (0, 8):
        settings = DecodeSettings(max_new_tokens=30, num_lookahead=3, temperature=1.0, tree_nodes=tree_nodes)
        for prompt in ("hello", "abcab abcab"):
            for event in METHODS["parallelspec"].decode(tiny, prompt, settings):
                for d in event.drafts:
                    a = d.acceptance_probability
                    if d.decision == "not_verified":
                        assert a is None, d
                        continue
                    p = d.p if d.p_res is None else d.p_res
                    assert a == pytest.approx(min(1.0, p / d.q)) and (d.u < a) == (d.decision == "accepted"), d
                    seen[(tree_nodes, d.decision)] = seen.get((tree_nodes, d.decision), 0) + 1
                    seen["p_res"] = seen.get("p_res", 0) + (d.p_res is not None and d.p_res != d.p)
    assert {(n, decision) for n in (0, 8) for decision in ("accepted", "rejected")} <= set(seen), seen
    assert seen["p_res"] > 10, seen  # nodes tried after a rejected sibling, against a p_res below p (no top-k)
