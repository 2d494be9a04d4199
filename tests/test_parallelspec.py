"""ParallelSpec (issue 7): lossless decoding, drafter cache rollback, training layout, files, CLI."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from pass_core.cache import cache_len, new_cache
from pass_core.data import generate_self_data, prompt_lengths
from pass_core.decoding import generate_autoregressive
from pass_core.decoding_parallelspec import generate_parallelspec
from pass_core.events import output_text, output_token_ids, summarize
from pass_core.methods import METHODS, assets_dir, make_decoder, resolve_drafter
from pass_core.parallelspec import FORMAT, ParallelDrafter, causal_mask
from pass_core.sampling import logits_to_probs
from pass_core.settings import DecodeSettings
from pass_core.drafter_data import draft_vocabulary, make_batch, target_features
from pass_core.drafter_eval import evaluate
from pass_core.train_drafter import batch_loss
from pass_core.text import encode_prompt
from pass_core.verification import VerificationResult, verify_drafts
from tiny import tiny_loaded

PROMPTS = ["Tell me a story.", "hello there", "What is 2 + 2?"]


def _ar_ids(loaded, prompt, settings):
    return output_token_ids(generate_autoregressive(loaded, prompt, settings))


@pytest.fixture(scope="module")
def trained(tiny, tmp_path_factory):
    """A drafter trained for a few dozen steps on the tiny model's own generations (k = 3)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PASS_PLAYGROUND_CACHE", str(tmp_path_factory.mktemp("cache")))
        prompts = [{"prompt": p} for p in PROMPTS] + [{"prompt": f"Question number {i}?"} for i in range(13)]
        seqs = generate_self_data(tiny, prompts, max_new_tokens=32, batch_size=8, cache=False)
        feats = target_features(tiny, seqs, prompt_lengths(tiny, prompts), topk=8)
    vocab = draft_vocabulary(feats, 128, tiny.vocab_size)
    vocab_map = torch.full((tiny.vocab_size,), -1, dtype=torch.long)
    vocab_map[vocab] = torch.arange(len(vocab))
    drafter = ParallelDrafter.initialise(tiny, 3, vocab, seed=0)
    parts = drafter.target_parts(tiny)
    opt = torch.optim.AdamW(drafter.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(40):
        batch = make_batch(feats, torch.randint(len(seqs), (4,), generator=gen).tolist(), 2, 12, gen, "cpu")
        loss, _, _ = batch_loss(drafter, parts, batch, feats, vocab_map)
        opt.zero_grad()
        loss.backward()
        opt.step()
    report = evaluate(drafter, parts, feats, 3, vocab_map, "cpu")
    return drafter.eval().requires_grad_(False), report


def _reference_draft_fn(loaded, prompt, settings, wrong: bool):
    """Drafts that are the AR continuation (always right) or never it (always wrong)."""
    ids = make_decoder("ar", loaded, prompt, settings)
    ref = output_token_ids(ids)
    n_prompt = None

    def draft_fn(context, k):
        nonlocal n_prompt
        if n_prompt is None:
            n_prompt = len(context) - 1  # first call: prompt + the prefill token
        pos = len(context) - n_prompt
        out = (ref[pos:pos + k] + [0] * k)[:k]
        return [(t + 1) % loaded.vocab_size for t in out] if wrong else out

    return ref, draft_fn


@pytest.mark.parametrize("wrong", [False, True], ids=["always-right", "always-wrong"])
def test_greedy_equals_ar_with_oracle_drafts(tiny, wrong):
    settings = DecodeSettings(max_new_tokens=30, num_lookahead=3, chat_template=False)
    drafter = ParallelDrafter.initialise(tiny, 3)
    for prompt in PROMPTS:
        ref, draft_fn = _reference_draft_fn(tiny, prompt, settings, wrong)
        events = list(generate_parallelspec(tiny, prompt, settings, drafter, draft_fn=draft_fn))
        assert output_token_ids(events) == ref
        s = summarize(events)
        if wrong:
            assert s.accepted_drafts == 0 and s.steps == 30
        else:
            assert s.accepted_drafts == s.drafted_tokens
            assert all(len(e.new_token_ids) == 4 for e in events[1:-1])  # k drafts + bonus


def test_greedy_equals_ar_with_trained_drafter(tiny, trained):
    drafter, report = trained
    assert report["per_position_agreement"][0] > 0.3  # it learned something
    settings = DecodeSettings(max_new_tokens=32, num_lookahead=3)
    accepted = 0
    for prompt in PROMPTS:
        events = list(make_decoder("parallelspec", tiny, prompt, settings, drafter=drafter))
        assert output_token_ids(events) == _ar_ids(tiny, prompt, settings)
        assert output_text(events) == tiny.tokenizer.decode(output_token_ids(events), skip_special_tokens=True)
        accepted += summarize(events).accepted_drafts
        assert events[0].tokens[0].label == "exact" and events[0].drafter_passes == 0
        assert all(e.forward_passes == 1 and e.drafter_passes == (1 if e.drafts else 0) for e in events[1:])
        assert {t.label for e in events[1:] if e.drafts for t in e.tokens} <= {"accepted", "rejected", "resampled",
                                                                               "bonus"}
        assert all(e.step_s >= e.drafting_s + e.verification_s - 1e-9 for e in events)
    assert accepted > 0


def test_confidence_gate_keeps_greedy_output(tiny, trained):
    """The gate (an extension) only shortens the drafts: output stays AR's, the drafter still runs every step."""
    drafter, _ = trained
    settings = DecodeSettings(max_new_tokens=32, num_lookahead=3)
    for prompt in PROMPTS[:2]:
        events = list(generate_parallelspec(tiny, prompt, settings, drafter, min_confidence=0.3))
        assert output_token_ids(events) == _ar_ids(tiny, prompt, settings)
        assert all(e.drafter_passes == 1 for e in events[1:-1])
        assert any(not e.drafts for e in events[1:-1]) and any(e.drafts for e in events[1:-1])


def test_training_layout_matches_incremental_drafting(tiny, trained):
    """A mask group in the 4-D training layout gives the same drafts as a cached drafting pass."""
    drafter, _ = trained
    parts = drafter.target_parts(tiny)
    ids = torch.randint(0, tiny.vocab_size, (1, 20))
    with torch.no_grad():
        hidden = tiny.model(input_ids=ids, output_hidden_states=True).hidden_states[-1]  # (1, 20, D)
        from pass_core.parallelspec import additive, group_layout

        anchors = torch.tensor([4, 11, 17])
        allowed, positions, mask_ids = group_layout(19, anchors, 2)
        feats = drafter(parts, ids[:, 1:], ids[:, :-1], hidden[:, :19], mask_ids, positions[None],
                        additive(allowed, torch.float32)[None, None])[0]  # (19 + 3*2, D)
        train_logits = drafter.full_logits(drafter.logits(parts, feats), tiny.vocab_size)
        for g, a in enumerate(anchors.tolist()):
            cache = drafter.new_cache()
            drafter.draft(parts, ids[0].tolist(), hidden[:, :2], 1, cache)  # an earlier step
            logits = drafter.draft(parts, ids[0].tolist(), hidden[:, 2:a + 1], 3, cache)  # (3, V)
            rows = [a, 19 + 2 * g, 19 + 2 * g + 1]
            torch.testing.assert_close(logits, train_logits[rows], atol=1e-4, rtol=1e-4)
            assert cache_len(cache) == a + 1  # masks left the cache


def test_drafter_cache_after_rejection_matches_fresh_forward(tiny, trained):
    drafter, _ = trained
    settings = DecodeSettings(max_new_tokens=40, num_lookahead=3)
    checked = []

    def inspect(run):
        committed, pending_h = run["committed"], run["pending_hidden"]
        n_target, n_drafter = cache_len(run["target_cache"]), cache_len(run["drafter_cache"])
        assert n_target == len(committed) - 1 and n_drafter + pending_h.shape[1] == n_target
        with torch.no_grad():
            target_cache = new_cache(tiny.model)
            out = tiny.model(input_ids=torch.tensor([committed[:-1]]), cache=target_cache, use_cache=True,
                             output_hidden_states=True)
            hidden = out.hidden_states[-1]  # (1, C, D)
            torch.testing.assert_close(pending_h, hidden[:, n_drafter:], atol=1e-4, rtol=1e-4)
            if n_drafter:
                fresh = drafter.new_cache()
                parts = drafter.target_parts(tiny)
                drafter(parts, torch.tensor([committed[1:n_drafter + 1]]), torch.tensor([committed[:n_drafter]]),
                        hidden[:, :n_drafter],
                        torch.zeros(0, dtype=torch.long), torch.arange(n_drafter)[None],
                        causal_mask(0, n_drafter, torch.float32, "cpu"), fresh)
                for kept, ref in zip(run["drafter_cache"].layers, fresh.layers):
                    torch.testing.assert_close(kept.keys, ref.keys, atol=1e-4, rtol=1e-4)
                    torch.testing.assert_close(kept.values, ref.values, atol=1e-4, rtol=1e-4)
                for kept, ref in zip(run["target_cache"].layers, target_cache.layers):
                    torch.testing.assert_close(kept.keys, ref.keys, atol=1e-4, rtol=1e-4)
            checked.append(n_drafter)

    events = list(generate_parallelspec(tiny, PROMPTS[0], settings, drafter, inspect_fn=inspect))
    rejected_steps = [e for e in events if any(d.decision == "rejected" for d in e.drafts)]
    assert rejected_steps and len(checked) == len(events) and max(checked) > 0


# ---------------------------------------------------------------- sampling distribution
def _exact_ar_distribution(loaded, prompt_ids, settings, depth):
    """P(first ``depth`` tokens) of plain sampling from the target, enumerated exactly."""
    dist = {}

    def walk(prefix, prob):
        if len(prefix) == depth:
            dist[tuple(prefix)] = prob
            return
        with torch.no_grad():
            logits = loaded.model(input_ids=torch.tensor([prompt_ids + prefix])).logits[0, -1]
        p = logits_to_probs(logits, settings)
        for t in p.nonzero().flatten().tolist():
            walk(prefix + [t], prob * float(p[t]))

    walk([], 1.0)
    return dist


def _always_accept(draft_ids, draft_probs, target_probs, generator):
    """Broken rule (negative control): keep every draft, bonus from p_{k+1}."""
    k = int(draft_ids.shape[0])
    token = int(torch.multinomial(target_probs[k], 1, generator=generator))
    return VerificationResult(num_accepted=k, next_token=token, next_is_bonus=True, uniforms=(0.0,) * k,
                              accept_probs=(1.0,) * k, p_draft=tuple(target_probs[torch.arange(k), draft_ids].tolist()),
                              q_draft=(1.0,) * k)


def _resample_from_p(draft_ids, draft_probs, target_probs, generator):
    """Subtly broken rule (negative control): after a rejection, draw from p instead of norm(max(0, p - q))."""
    result = verify_drafts(draft_ids, draft_probs, target_probs, generator)
    if result.num_accepted < int(draft_ids.shape[0]):
        token = int(torch.multinomial(target_probs[result.num_accepted], 1, generator=generator))
        result = dataclasses.replace(result, next_token=token)
    return result


def _sampled_tv(loaded, drafter, settings, exact, runs, **kw):
    """Total variation between the empirical law of the first 3 tokens over ``runs`` seeds and ``exact``."""
    counts, decisions = {}, set()
    for seed in range(runs):
        events = list(generate_parallelspec(loaded, "ab", settings.with_(seed=seed), drafter, **kw))
        key = tuple(output_token_ids(events)[:3])
        counts[key] = counts.get(key, 0) + 1
        decisions |= {d.decision for e in events for d in e.drafts}
    keys = set(counts) | set(exact)
    return 0.5 * sum(abs(counts.get(x, 0) / runs - exact.get(x, 0.0)) for x in keys), decisions


@pytest.fixture(autouse=True)
def one_thread():
    """Many tiny forward passes run faster on one thread (and leave a core to others on a shared CPU)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_sampling_matches_ar_distribution_with_negative_controls(tiny, trained):
    """First 3 tokens, 2 of them through 2 sampled drafts: empirical law vs the exact AR law.

    With 8 outcomes and 800 runs the sampling noise in total variation is about 0.03;
    both broken acceptance rules must fail the same bound (measured: about 1.0 and 0.17).
    """
    drafter, _ = trained
    settings = DecodeSettings(max_new_tokens=4, num_lookahead=2, temperature=1.0, top_k=2)
    exact = _exact_ar_distribution(tiny, encode_prompt(tiny.tokenizer, "ab", True), settings, 3)
    assert abs(sum(exact.values()) - 1) < 1e-4 and len(exact) == 8
    runs, bound = 800, 0.1
    tv, decisions = _sampled_tv(tiny, drafter, settings, exact, runs)
    assert {"accepted", "rejected"} <= decisions  # both branches of the rule ran
    assert tv < bound, f"ParallelSpec sampling deviates from AR: TV {tv:.3f} >= {bound}"
    for broken in (_always_accept, _resample_from_p):
        tv_broken, _ = _sampled_tv(tiny, drafter, settings, exact, runs, verify_fn=broken)
        assert tv_broken >= bound, f"{broken.__name__} passed the check (TV {tv_broken:.3f}): the test has no power"


# ---------------------------------------------------------------- files and methods
def test_drafter_file_round_trip_and_refusal(tiny, trained, tmp_path):
    drafter, _ = trained
    path = drafter.save(tmp_path / "d.safetensors")
    back = ParallelDrafter.load(path, tiny)
    assert back.num_draft == 3 and back.model_name == tiny.name and torch.equal(back.draft_vocab, drafter.draft_vocab)
    settings = DecodeSettings(max_new_tokens=16, num_lookahead=3)
    assert output_token_ids(make_decoder("parallelspec", tiny, PROMPTS[1], settings, drafter=back)) == \
        _ar_ids(tiny, PROMPTS[1], settings)
    other = tiny_loaded(seed=1)
    with pytest.raises(ValueError, match="tiny-llama-0.*tiny-llama-1"):
        ParallelDrafter.load(path, other)
    with pytest.raises(ValueError, match="tiny-llama-0.*tiny-llama-1"):
        resolve_drafter(other, 3, str(path))
    with pytest.raises(ValueError, match="not a ParallelSpec drafter|not a readable"):
        (tmp_path / "bad.safetensors").write_bytes(b"nonsense")
        ParallelDrafter.load(tmp_path / "bad.safetensors", tiny)


def test_method_is_registered_with_fallback(tiny):
    assert "parallelspec" in METHODS
    drafter, message = resolve_drafter(tiny, 3)
    assert "untrained" in message and drafter.num_draft == 3
    settings = DecodeSettings(max_new_tokens=10, num_lookahead=2)
    assert output_token_ids(make_decoder("parallelspec", tiny, "hi", settings)) == _ar_ids(tiny, "hi", settings)


def test_shipped_drafter_file():
    """The shipped drafter: float16 safetensors under 20 MB, metadata naming its model, a report."""
    files = sorted((assets_dir() / "drafter").glob("*.safetensors"))
    if not files:
        pytest.skip("no shipped drafter yet")
    from safetensors import safe_open

    for path in files:
        assert path.stat().st_size <= 20 * 2**20
        with safe_open(str(path), framework="pt") as handle:
            meta = handle.metadata()
            assert all(handle.get_tensor(k).dtype in (torch.float16, torch.int64) for k in handle.keys())
        assert meta["format"] == FORMAT and meta["model_name"] in path.name and json.loads(meta["signature"])
        assert path.with_suffix(".report.json").is_file() and path.with_suffix(".report.md").is_file()


def test_train_cli_checkpoints_and_resumes(tiny_folder, tmp_path, monkeypatch, capsys):
    from pass_core.train_drafter import main

    monkeypatch.setenv("PASS_PLAYGROUND_CACHE", str(tmp_path / "cache"))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("\n".join(json.dumps({"prompt": f"Say something about {w}."}) for w in "abcdef") + "\n")
    out = tmp_path / "drafter.safetensors"
    common = ["--model", str(tiny_folder), "--num-draft", "3", "--out", str(out), "--train-prompts", str(prompts),
              "--heldout-prompts", str(prompts), "--max-new-tokens", "12", "--batch-size", "2", "--anchors", "4",
              "--draft-vocab", "0", "--checkpoint-every", "2", "--threads", "1"]
    report = main(common + ["--steps", "2"])
    assert out.is_file() and report["heldout"]["accepted_tokens_per_step"] >= 1.0
    capsys.readouterr()
    report = main(common + ["--steps", "4", "--resume"])
    assert "at step 2" in capsys.readouterr().out and report["args"]["steps"] == 4
    assert "k = 3" in out.with_suffix(".report.md").read_text()


def test_verification_pass_returns_the_targets_logits(tiny):
    from pass_core.decoding_parallelspec import _plain_head, _target_pass

    ids = [5, 17, 99, 3, 250, 7]
    with torch.no_grad():
        ref = tiny.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
        cache = new_cache(tiny.model)
        drafter = ParallelDrafter.initialise(tiny, 2)
        logits, hidden = _target_pass(tiny.model, ids[:2], cache, "cpu", drafter)
        logits2, hidden2 = _target_pass(tiny.model, ids[2:], cache, "cpu", drafter)
    assert _plain_head(tiny.model)
    torch.testing.assert_close(torch.cat([logits, logits2]), ref.logits[0], atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(torch.cat([hidden, hidden2], 1), ref.hidden_states[-1], atol=1e-5, rtol=1e-5)
