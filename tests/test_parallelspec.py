"""ParallelSpec (issue 7): the trained drafter, the confidence gate, training layout, files, CLI.

Losslessness (oracle drafts, EOS, caches, sampled distribution) is in test_lossless.py."""

from __future__ import annotations

import json

import pytest
import torch

from pass_core.decoding.autoregressive import generate_autoregressive
from pass_core.decoding.cache import cache_len, new_cache
from pass_core.training.data import generate_self_data, prompt_lengths
from pass_core.training.parallelspec_data import draft_vocabulary, make_batch, target_features
from pass_core.training.parallelspec_eval import evaluate
from pass_core.decoding.events import output_text, output_token_ids
from pass_core.decoding.metrics import summarize
from pass_core.drafters.parallelspec.model import FORMAT, ParallelDrafter
from pass_core.drafters.parallelspec.drafter import ParallelSpecDrafter
from pass_core.registry import METHODS
from pass_core.runtime.models import load_model
from pass_core.decoding.settings import DecodeSettings
from pass_core.drafters.shipped import assets_dir, resolve_drafter
from pass_core.decoding.speculative import generate_speculative
from pass_core.decoding.target import plain_head, target_forward
from pass_core.training.parallelspec import batch_loss
from tiny import tiny_loaded


def generate_parallelspec(loaded, prompt, settings, drafter, min_confidence=None):
    return generate_speculative(loaded, prompt, settings, ParallelSpecDrafter(drafter, min_confidence),
                                method="parallelspec")


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


def test_greedy_equals_ar_with_trained_drafter(tiny, trained):
    drafter, report = trained
    assert report["per_position_agreement"][0] > 0.3  # it learned something
    settings = DecodeSettings(max_new_tokens=32, num_lookahead=3)
    accepted = 0
    for prompt in PROMPTS:
        events = list(METHODS["parallelspec"].decode(tiny, prompt, settings, drafter))
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
        from pass_core.drafters.parallelspec.layout import additive, group_layout

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


# ---------------------------------------------------------------- files and methods
def test_drafter_file_round_trip_and_refusal(tiny, trained, tmp_path):
    drafter, _ = trained
    path = drafter.save(tmp_path / "d.safetensors")
    back = ParallelDrafter.load(path, tiny)
    assert back.num_draft == 3 and back.model_name == tiny.name and torch.equal(back.draft_vocab, drafter.draft_vocab)
    settings = DecodeSettings(max_new_tokens=16, num_lookahead=3)
    assert output_token_ids(METHODS["parallelspec"].decode(tiny, PROMPTS[1], settings, back)) == \
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
    drafter, message = resolve_drafter(tiny, 3)
    assert "untrained" in message and drafter.num_draft == 3
    settings = DecodeSettings(max_new_tokens=10, num_lookahead=2)
    assert output_token_ids(METHODS["parallelspec"].decode(tiny, "hi", settings)) == _ar_ids(tiny, "hi", settings)


def test_a_shipped_drafter_with_fewer_drafts_than_asked_says_so(tiny, tmp_path, monkeypatch):
    """Asked for k = 8 where the largest shipped drafter drafts 3, the drafter line says both (the CLI's
    ``--num-lookahead 8`` once ran with 3 drafts a step and said only "3 drafts per step")."""
    from pass_core.drafters import shipped

    path = ParallelDrafter.initialise(tiny, 3, seed=0).save(tmp_path / "k3.safetensors")
    monkeypatch.setattr(shipped, "shipped_drafter_path", lambda name, k: path if k == 3 else tmp_path / "none")
    assert resolve_drafter(tiny, 8)[1].endswith("3 drafts per step (not 8: no shipped drafter drafts more)")
    assert "(not " not in resolve_drafter(tiny, 3)[1] and "(not " not in resolve_drafter(tiny, 2)[1]


def test_shipped_drafter_file():
    """The shipped drafter: float16 safetensors under 20 MB, metadata naming its model, a report."""
    files = sorted((assets_dir() / "drafter").glob("*.safetensors"))
    assert files, "no shipped ParallelSpec drafter in assets/drafter"
    from safetensors import safe_open

    for path in files:
        assert path.stat().st_size <= 20 * 2**20
        with safe_open(str(path), framework="pt") as handle:
            meta = handle.metadata()
            assert all(handle.get_tensor(k).dtype in (torch.float16, torch.int64) for k in handle.keys())
        assert meta["format"] == FORMAT and meta["model_name"] in path.name and json.loads(meta["signature"])
        assert path.with_suffix(".report.json").is_file() and path.with_suffix(".report.md").is_file()


def test_train_cli_checkpoints_and_resumes(tiny_folder, tmp_path, monkeypatch, capsys):
    from pass_core.training.parallelspec import main

    monkeypatch.setenv("PASS_PLAYGROUND_CACHE", str(tmp_path / "cache"))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("\n".join(json.dumps({"prompt": f"Say something about {w}."}) for w in "abcdef") + "\n")
    out = tmp_path / "drafter.safetensors"
    common = ["--model", str(tiny_folder), "--num-draft", "3", "--out", str(out), "--train-prompts", str(prompts),
              "--heldout-prompts", str(prompts), "--max-new-tokens", "12", "--batch-size", "2", "--anchors", "4",
              "--draft-vocab", "0", "--checkpoint-every", "2", "--threads", "1"]
    report = main(common + ["--steps", "2", "--resume"])  # nothing to resume yet: said, and it starts at step 0
    assert out.is_file() and "note: --resume: no checkpoint" in capsys.readouterr().err
    # the report measures the saved file: held-out tokens per step (1 + accepted drafts, at most k = 3), the gate
    # threshold stored in the file, and the same numbers in report.json and report.md
    per_step = report["heldout"]["accepted_tokens_per_step"]
    assert 1.0 <= per_step <= 4.0 and 1.0 <= report["heldout_gated_accepted_tokens_per_step"] <= 4.0
    assert ParallelDrafter.load(out, load_model(str(tiny_folder))).info["min_confidence"] == report["min_confidence"]
    saved = json.loads(out.with_suffix(".report.json").read_text())
    assert saved["heldout"]["accepted_tokens_per_step"] == per_step
    assert f"{per_step:.2f} |" in out.with_suffix(".report.md").read_text()
    # the gate's step cost: the defaults say where they were measured; costs given by hand are not called measured
    assert "AR steps (the defaults, measured on the 2-core development CPU" in out.with_suffix(".report.md").read_text()
    from pass_core.training.parallelspec_report import write_report

    write_report(tmp_path / "given.safetensors", {**saved, "args": {**saved["args"], "cost_per_draft": 100.0}})
    assert "1 + 100.0 k + 0.09 AR steps (given with --cost-per-draft and --drafter-cost)." in \
        (tmp_path / "given.report.md").read_text()
    capsys.readouterr()
    report = main(common + ["--steps", "4", "--resume"])
    captured = capsys.readouterr()
    printed = captured.err  # the log; stdout holds the JSON alone (the log was mixed into it: > FILE was not JSON)
    assert json.loads(captured.out)["train_s"] == report["train_s"]
    assert "at step 2" in printed and report["args"]["steps"] == 4
    # the finished run says where its checkpoint stays (about 54 MB for the shipped drafter) and what it is for
    ckpt = tmp_path / "cache" / "drafter-checkpoints"
    assert [f"checkpoint kept: {path}" in printed for path in ckpt.iterdir()] == [True]
    assert "k = 3" in out.with_suffix(".report.md").read_text()
    # the training time counts both runs, the wall time this one (they read as contradicting each other)
    assert f"| training (s; every run of it, --resume included) | {report['train_s']} |" in \
        out.with_suffix(".report.md").read_text()
    # a checkpoint at step 4 with --steps 2: refused, as the look-ahead trainer does (it wrote a report of "2
    # training steps" over a drafter of 4), and the file and its report stay as they were
    before = out.with_suffix(".report.json").read_text()
    with pytest.raises(ValueError, match=r"is at step 4 already, and --steps is 2, so --resume cannot continue from "
                                         r"it\. Give more --steps to train on, or start afresh"):
        main(common + ["--steps", "2", "--resume"])
    assert out.with_suffix(".report.json").read_text() == before


def test_a_resumed_drafter_run_keeps_the_history_of_an_uninterrupted_one(tiny_folder, tmp_path, monkeypatch):
    """Ctrl-C right after a checkpoint at step 15, then --resume: the same weights and the same history as the run
    that went on. The history's entry at step 20 averages steps 11-20; it averaged 16-20 after a resume (the steps
    since the last entry were not kept in the checkpoint)."""
    import pass_core.training.parallelspec as trainer

    monkeypatch.setenv("PASS_PLAYGROUND_CACHE", str(tmp_path / "cache"))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("\n".join(json.dumps({"prompt": f"Say something about {w}."}) for w in "abcdef") + "\n")

    def command(out):
        return ["--model", str(tiny_folder), "--num-draft", "3", "--out", str(out), "--train-prompts", str(prompts),
                "--heldout-prompts", str(prompts), "--max-new-tokens", "12", "--batch-size", "2", "--anchors", "4",
                "--draft-vocab", "0", "--threads", "1", "--steps", "20", "--checkpoint-every", "15",
                "--eval-every", "1000"]

    whole = trainer.main(command(tmp_path / "a.safetensors"))
    save = trainer.save_drafter_checkpoint

    def interrupted(path, drafter, opt, gen, step, *rest):
        save(path, drafter, opt, gen, step, *rest)
        if step == 15:
            raise KeyboardInterrupt
    monkeypatch.setattr(trainer, "save_drafter_checkpoint", interrupted)
    with pytest.raises(KeyboardInterrupt):
        trainer.main(command(tmp_path / "b.safetensors"))
    monkeypatch.setattr(trainer, "save_drafter_checkpoint", save)
    resumed = trainer.main(command(tmp_path / "b.safetensors") + ["--resume"])
    a, b = (ParallelDrafter.load(tmp_path / f"{x}.safetensors", load_model(str(tiny_folder))) for x in "ab")
    for name, tensor in a.state_dict().items():
        torch.testing.assert_close(b.state_dict()[name], tensor, atol=0, rtol=0)
    assert [h for h in resumed["history"] if "loss" in h] == [h for h in whole["history"] if "loss" in h]


def test_train_cli_adds_corpus_answers(tiny_folder, tmp_path, monkeypatch):
    """--answers: the model's own answers to corpus prompts join the training data, featurised in shards."""
    import pass_core.training.corpora as corpora
    from pass_core.training.parallelspec import main

    monkeypatch.setenv("PASS_PLAYGROUND_CACHE", str(tmp_path / "cache"))
    corpus = tmp_path / "sg.json"
    corpus.write_text(json.dumps([{"id": str(i), "conversations": [{"from": "human", "value": f"Tell me about topic {i}."},
                                                                 {"from": "gpt", "value": "ok"}]} for i in range(3)]))
    monkeypatch.setattr(corpora, "sharegpt_path", lambda: corpus)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("\n".join(json.dumps({"prompt": f"Say something about {w}."}) for w in "ab") + "\n")
    out = tmp_path / "drafter.safetensors"
    report = main(["--model", str(tiny_folder), "--num-draft", "2", "--out", str(out), "--train-prompts", str(prompts),
                   "--heldout-prompts", str(prompts), "--max-new-tokens", "8", "--batch-size", "2", "--anchors", "4",
                   "--draft-vocab", "0", "--threads", "1", "--steps", "1", "--answers", "sharegpt:3",
                   "--corpus-shard", "2"])
    assert report["train_sequences"] == 2 + 3 and report["answer_positions"] > 0
    assert report["train_positions"] == report["self_generated_positions"] + report["answer_positions"]
    assert "answers to sharegpt:3 corpus prompts" in out.with_suffix(".report.md").read_text()


def test_verification_pass_returns_the_targets_logits(tiny):
    """target_forward (base model + head, W h^T for 2-8 rows on CPU) gives the model's own logits
    and hidden states, in two cached passes."""
    ids = [5, 17, 99, 3, 250, 7]
    with torch.no_grad():
        ref = tiny.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
        cache = new_cache(tiny.model)
        first = target_forward(tiny.model, cache, torch.arange(2), input_ids=torch.tensor([ids[:2]]), hidden_states=True)
        second = target_forward(tiny.model, cache, torch.arange(4), input_ids=torch.tensor([ids[2:]]),
                                hidden_states=True)
        one = target_forward(tiny.model, new_cache(tiny.model), torch.tensor([-1]), input_ids=torch.tensor([ids]))
    assert plain_head(tiny.model)
    torch.testing.assert_close(torch.cat([first.logits, second.logits]), ref.logits[0], atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(one.logits[0], ref.logits[0, -1], atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(torch.cat([first.hidden_states[-1], second.hidden_states[-1]], 1),
                               ref.hidden_states[-1], atol=1e-5, rtol=1e-5)


@pytest.mark.sampling
def test_trained_drafter_sampling_matches_exact_law(tiny, trained):
    """The drafter's own q path under sampling (processed like p): first 3 tokens (8 outcomes) with 2 sampled drafts
    from the trained tiny drafter. The number of seeded runs n and the bound b come from the exact law
    (``sampling_design.design``: false-alarm rate ALPHA, power 1 - BETA against any law at TV >= DELTA); the TV of
    n runs must stay under b and both broken rules, with the same n, above it (measured, `pytest -s -n 0
    tests/test_parallelspec.py -m sampling`: n = 500, b = 0.0934; TV 0.049, always-accept 1.0, resample-from-p 0.133)."""
    from lossless_helpers import always_accept, exact_law, resample_from_p
    from sampling_design import ALPHA, BETA, DELTA, design, tv_floor

    drafter, _ = trained
    settings = DecodeSettings(max_new_tokens=4, num_lookahead=2, temperature=1.0, top_k=2)
    law = exact_law(tiny, "ab", settings, 3)
    plan = design(law, ALPHA, BETA, DELTA)

    def tv_of(stop_above=None, **kw):  # stop_above: a negative control's b (it stops once its TV is sure to exceed b)
        counts, decisions = {}, set()
        for seed in range(plan.runs):
            if stop_above is not None and tv_floor(law, counts, plan.runs) > stop_above:
                break
            events = list(generate_speculative(tiny, "ab", settings.with_(seed=seed), ParallelSpecDrafter(drafter),
                                               method="parallelspec", **kw))
            key = tuple(output_token_ids(events)[:3])
            counts[key] = counts.get(key, 0) + 1
            decisions |= {d.decision for e in events for d in e.drafts}
        return tv_floor(law, counts, plan.runs), decisions  # once all runs are made, their TV

    tv, decisions = tv_of()
    assert {"accepted", "rejected"} <= decisions
    print(f"\nparallelspec trained: TV {tv:.4f}; {plan.describe()}")
    assert tv < plan.bound, f"ParallelSpec sampling deviates from the target: TV {tv:.4f}; {plan.describe()}"
    for broken in (always_accept, resample_from_p):
        tv_broken = tv_of(stop_above=plan.bound, verify_fn=broken)[0]
        print(f"parallelspec trained {broken.__name__}: TV at least {tv_broken:.4f}")
        assert tv_broken > plan.bound, f"{broken.__name__}: TV {tv_broken:.4f}: the test has no power; {plan.describe()}"
