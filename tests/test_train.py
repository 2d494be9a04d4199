"""Training look-ahead embeddings on a tiny model: loss goes down, files round-trip, resume continues."""

from __future__ import annotations

import os
import shutil

import pytest
import torch

from pass_core.training import lookahead as train_mod
from pass_core.decoding.cache import new_cache
from pass_core.drafters.lookahead.embeddings import LookaheadEmbeddings
from pass_core.training.lookahead_batch import block_mask, lookahead_logits

TEXT = "\n".join([
    "the cat sat on the mat and the cat sat on the mat again",
    "one two three four five six seven eight nine ten",
    "abcabcabcabcabcabcabcabcabcabcabcabcabc",
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b",
] * 3)


def run_train(tiny_folder, tmp_path, *extra):
    data = tmp_path / "data.txt"
    data.write_text(TEXT)
    args = train_mod.build_parser().parse_args([
        "--model", str(tiny_folder), "--num-lookahead", "2", "--out", str(tmp_path / "la.safetensors"),
        "--data", str(data), "--batch-positions", "16", "--lr", "0.05", "--eval-prompts", "0",
        "--eval-sequences", "0", "--checkpoint-every", "2", "--gen-tokens", "8", *extra])
    return train_mod.train(args)


def test_block_mask_layout():
    mask, pos = block_mask(5, torch.tensor([1, 3]), 2, torch.float32)
    allowed = (mask[0, 0] == 0)
    assert allowed.shape == (4, 9)
    assert allowed[0, :5].tolist() == [True, True, False, False, False]   # block at t=1 sees x_0..x_1
    assert allowed[2, :5].tolist() == [True, True, True, True, False]     # block at t=3 sees x_0..x_3
    assert allowed[1, 5:].tolist() == [True, True, False, False]          # own block, causal
    assert allowed[2, 5:].tolist() == [False, False, True, False]         # not the other block
    assert pos[0].tolist() == [2, 3, 4, 5]


def test_batched_blocks_equal_separate_drafting_passes(tiny):
    """One pass over P blocks gives the same draft logits as P separate drafting passes."""
    la = LookaheadEmbeddings.initialise(tiny, 3, "random", generator=torch.Generator().manual_seed(0))
    seq = list(range(40, 60))
    cache = new_cache(tiny.model)
    with torch.no_grad():
        tiny.model(input_ids=torch.tensor([seq]), cache=cache, use_cache=True)
        batched = lookahead_logits(tiny.model, cache, len(seq), torch.tensor([4, 9, 15]), la.weight,
                                   la.draft_indices())
        for row, t in enumerate([4, 9, 15]):
            emb = tiny.model.get_input_embeddings()(torch.tensor([seq[: t + 1]]))
            full = tiny.model(inputs_embeds=torch.cat([emb, la.weight[None]], 1)).logits[0, t + 1:]
            torch.testing.assert_close(batched[row], full, atol=1e-4, rtol=1e-4)
    assert cache.get_seq_length() == len(seq)


def kl_loss(loaded, weight, seqs, num_lookahead):
    """Mean KL(p || q) of the look-ahead drafts over every position of ``seqs`` (fixed data)."""
    total, count = 0.0, 0
    for seq in seqs:
        cache = new_cache(loaded.model)
        with torch.no_grad():
            teacher = loaded.model(input_ids=torch.tensor([seq]), cache=cache, use_cache=True).logits[0]
            starts = torch.arange(0, len(seq) - num_lookahead)
            logits = lookahead_logits(loaded.model, cache, len(seq), starts, weight,
                                      list(range(num_lookahead)))
        target = teacher[starts[:, None] + torch.arange(1, num_lookahead + 1)[None]]
        kl = torch.nn.functional.kl_div(logits.log_softmax(-1), target.log_softmax(-1), log_target=True,
                                        reduction="none").sum(-1)
        total, count = total + float(kl.sum()), count + kl.numel()
    return total / count


def test_training_lowers_loss_and_saves(tiny_folder, tmp_path):
    report = run_train(tiny_folder, tmp_path, "--steps", "60", "--lr", "0.01")
    from pass_core.runtime.models import load_model

    loaded = load_model(str(tiny_folder))
    la = LookaheadEmbeddings.load(tmp_path / "la.safetensors", loaded)
    assert la.num_lookahead == 2 and la.kind == "trained" and la.info["steps"] == 60
    assert report["positions_per_s"] > 0
    init = LookaheadEmbeddings.initialise(loaded, 2, "mean", generator=torch.Generator().manual_seed(0))
    seqs = [loaded.tokenizer(line, add_special_tokens=False)["input_ids"] for line in TEXT.splitlines()[:4] if line]
    before, after = kl_loss(loaded, init.weight, seqs, 2), kl_loss(loaded, la.weight, seqs, 2)
    assert after < 0.95 * before, f"training did not lower the loss on its data: {before:.4f} -> {after:.4f}"


def test_resume_continues_from_checkpoint(tiny_folder, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    run_train(tiny_folder, tmp_path / "a", "--steps", "6")
    stopped = run_train(tiny_folder, tmp_path / "b", "--steps", "6", "--stop-at", "3")
    assert stopped["stopped_at"] == 3
    run_train(tiny_folder, tmp_path / "b", "--steps", "6", "--resume")
    a = LookaheadEmbeddings.load(tmp_path / "a" / "la.safetensors").weight
    b = LookaheadEmbeddings.load(tmp_path / "b" / "la.safetensors").weight
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_sequences_too_short_for_l_are_left_out_so_a_resumed_run_equals_an_uninterrupted_one(tiny_folder, tmp_path):
    """Lines of 3 tokens give L = 3 no position to train on. Their steps passed with no update yet counted: a
    resumed run set Adam's step to the loop's (6, for 3 updates) and its weights differed from an uninterrupted run's
    by 2e-3, the curve and checkpoints due at such steps were skipped, and data of short lines alone wrote a
    "trained" file of 0 updates. Now they are left out of the data: a resumed run equals the uninterrupted one,
    report included (its first steps' loss was the resumed part's); data of short lines alone is refused."""
    data = tmp_path / "data.txt"
    data.write_text("the cat sat on the mat and the cat sat on the mat again\nabc\nxyz\nqrs\n"
                    "one two three four five six seven eight nine ten\n")

    def train(folder, *extra):
        folder.mkdir(exist_ok=True)
        return run_train(tiny_folder, folder, "--num-lookahead", "3", "--data", str(data), "--steps", "12",
                         "--curve-every", "2", "--curve-sequences", "2", *extra)

    whole = train(tmp_path / "a")
    assert train(tmp_path / "b", "--stop-at", "6")["stopped_at"] == 6
    resumed = train(tmp_path / "b", "--resume")
    a, b = (LookaheadEmbeddings.load(tmp_path / f / "la.safetensors").weight for f in "ab")
    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)
    assert [point["step"] for point in whole["curve"]] == list(range(0, 13, 2))
    assert whole["train_sequences"] == 2 and whole["positions_seen"] == 12 * 16
    for key in ("initial_loss", "final_loss", "final_loss_steps", "positions_seen", "curve"):
        assert resumed[key] == whole[key], key
    data.write_text("abc\nxyz\nqrs\n")
    with pytest.raises(ValueError, match="each needs at least 4 tokens after its prompt for L = 3"):
        train(tmp_path / "c")


def test_a_mismatched_checkpoint_is_refused_before_the_data_is_made(tiny_folder, tmp_path, monkeypatch):
    """``--resume`` with another ``--num-lookahead`` was refused only after the training data was made (about 26
    minutes of self-distillation on the embedded model): now at once, before any data. A checkpoint of another
    model of the same shapes, or of ``--shared``, was continued unsaid, and one at step 2 "continued" to ``--steps
    1`` (found by the CLI helper): each option that differs is named."""
    run_train(tiny_folder, tmp_path, "--steps", "4", "--stop-at", "2")
    monkeypatch.setattr(train_mod, "load_sequences", lambda *a, **k: pytest.fail("the data was made first"))
    with pytest.raises(ValueError, match=r"was written by a run with --num-lookahead 2 \(this run: 3\), so --resume "
                                         r"cannot continue from it\. Give the same to continue it, or start afresh"):
        run_train(tiny_folder, tmp_path, "--steps", "4", "--resume", "--num-lookahead", "3")
    with pytest.raises(ValueError, match=r"--shared False \(this run: True\)"):
        run_train(tiny_folder, tmp_path, "--steps", "4", "--resume", "--shared")
    other = tmp_path / "other-model"
    shutil.copytree(tiny_folder, other)  # the same shapes: its checkpoint's tensors fit
    with pytest.raises(ValueError, match=f"--model {tiny_folder} \\(this run: {other}\\)"):
        run_train(other, tmp_path, "--steps", "4", "--resume")
    with pytest.raises(ValueError, match=r"is at step 2 already, and --steps is 2, so --resume cannot continue from "
                                         r"it\. Give more --steps to train on, or start afresh: run"):
        run_train(tiny_folder, tmp_path, "--steps", "2", "--resume")
    # the same folder spelled otherwise is the same model (it was refused as another one): the run goes on to
    # make its data (which this test's stand-in refuses)
    spelled = os.path.join(tiny_folder, "..", tiny_folder.name)
    with pytest.raises(pytest.fail.Exception, match="the data was made first"):
        run_train(spelled, tmp_path, "--steps", "4", "--resume")


def test_resume_without_a_checkpoint_says_that_it_starts_at_step_0(tiny_folder, tmp_path, capsys):
    """It started silently (a mistyped --out would begin again unnoticed); said before the model loads."""
    run_train(tiny_folder, tmp_path, "--steps", "1", "--resume")
    assert f"note: --resume: no checkpoint {tmp_path / 'la.ckpt.safetensors'} yet, so training starts at step 0." \
        in capsys.readouterr().err


def test_report_says_what_the_data_was(tiny_folder, tmp_path):
    """A run on ``--data FILE.txt`` was reported as "sequences of the model's own greedy generations" (found by a
    tester): the report names the file and says that its text was used as given."""
    run_train(tiny_folder, tmp_path, "--steps", "2", "--report", str(tmp_path / "r.json"))
    data_line = next(line for line in (tmp_path / "r.md").read_text().splitlines() if line.startswith("- data:"))
    lines = sum(1 for line in TEXT.splitlines() if line.strip())
    assert f"the given text of data.txt ({lines} lines), not self-generated" in data_line, data_line
    assert "own greedy generations" not in data_line
    from pass_core.training.data import describe_data  # a .jsonl file of prompts and text rows

    assert describe_data([{"prompt": "hi"}, {"text": "as is"}], "mixed.jsonl") == (
        "the given text of mixed.jsonl (1 row), not self-generated; self-generated: the model's own greedy "
        "generations for 1 prompt of mixed.jsonl")


def test_report_compares_first_and_last_steps_that_do_not_overlap(tiny_folder, tmp_path):
    """The report compared the first 5 steps with the last 20: for a run of 5 steps both were the same 5 steps."""
    report = run_train(tiny_folder, tmp_path, "--steps", "5", "--report", str(tmp_path / "r.json"))
    assert (report["initial_loss_steps"], report["final_loss_steps"]) == (2, 3)
    assert report["initial_loss"] != report["final_loss"]
    assert "(first 2 steps) -> " in (tmp_path / "r.md").read_text()
    report = run_train(tiny_folder, tmp_path, "--steps", "1", "--report", str(tmp_path / "r.json"))
    assert report["final_loss"] is None
    assert "(a run of one step: too short to compare first and last steps)" in (tmp_path / "r.md").read_text()


def test_eval_sequences_generates_only_the_sequences_asked_for(tiny_folder, tmp_path, monkeypatch):
    """``--eval-sequences 1`` generated the model's answers to all 60 held-out prompts, then used one."""
    from pass_core.training import lookahead_eval

    asked = []

    def answers(loaded, prompts, **kwargs):  # stands in for the model's greedy answers (160 tokens each)
        asked.append(len(prompts))
        return [list(range(3, 40)) for _ in prompts]

    monkeypatch.setattr(lookahead_eval, "generate_self_data", answers)
    report = run_train(tiny_folder, tmp_path, "--steps", "1", "--eval-sequences", "1")
    assert asked == [1] and report["eval"]["agreement_sequences"] == 1


def test_data_that_is_not_utf8_is_refused_with_its_name(tiny_folder, tmp_path, monkeypatch, capsys):
    """A --data file in Latin-1 ended in "'utf-8' codec can't decode byte 0xe9 in position 3", naming no file, after
    the model had loaded; the option is named too."""
    data = tmp_path / "latin1.txt"
    data.write_bytes("café au lait\n".encode("latin-1"))
    monkeypatch.setattr(train_mod, "load_model", lambda *a, **k: pytest.fail("the model loaded before the check"))
    assert train_mod.main(["--model", str(tiny_folder), "--out", str(tmp_path / "la.safetensors"),
                           "--data", str(data)]) == 2
    # a .txt is training text, not prompts: "Prompt file" misnamed it (a CLI helper)
    assert capsys.readouterr().err == (f"error: --data: Text file {str(data)!r} is not UTF-8 text (byte 0xe9 at "
                                       "offset 3): save it as UTF-8 text.\n")


def test_a_json_document_as_data_or_prompts_is_refused_by_both_trainers(tiny_folder, tmp_path, monkeypatch, capsys):
    """A .json file (a JSON document such as a ShareGPT export) was read as plain text, one training row a line, so
    its brackets and keys were trained on (helper 68): refused before the model loads, with the two forms taken."""
    from pass_core.training import parallelspec

    data = tmp_path / "chats.json"
    data.write_text('[\n  {"prompt": "Hello there"}\n]\n', encoding="utf-8")
    monkeypatch.setattr(train_mod, "load_model", lambda *a, **k: pytest.fail("the model loaded before the check"))
    assert train_mod.main(["--model", str(tiny_folder), "--out", str(tmp_path / "la.safetensors"),
                           "--data", str(data)]) == 2
    assert capsys.readouterr().err == (f"error: --data: {str(data)!r} is a .json file: give a .jsonl file (one JSON "
                                       "object a line, with a 'prompt' or a 'text' field) or a .txt file (one text a "
                                       "line).\n")
    with pytest.raises(ValueError, match=r"^--train-prompts: .*chats.json' is a .json file: give a .jsonl file"):
        parallelspec.main(["--out", str(tmp_path / "d.safetensors"), "--train-prompts", str(data)])


def test_init_from_seeds_the_first_rows(tiny_folder, tmp_path):
    (tmp_path / "small").mkdir()
    (tmp_path / "big").mkdir()
    run_train(tiny_folder, tmp_path / "small", "--steps", "4")
    small = LookaheadEmbeddings.load(tmp_path / "small" / "la.safetensors").weight  # (2, D)
    run_train(tiny_folder, tmp_path / "big", "--steps", "1", "--lr", "1e-9", "--num-lookahead", "3",
              "--init-from", str(tmp_path / "small" / "la.safetensors"))
    big = LookaheadEmbeddings.load(tmp_path / "big" / "la.safetensors")
    assert big.num_lookahead == 3 and big.info["init_from"].endswith("la.safetensors")
    torch.testing.assert_close(big.weight[:2], small, atol=1e-6, rtol=1e-6)  # seeded, barely moved
    assert not torch.allclose(big.weight[2], small[1])  # the new row comes from --init
    with pytest.raises(ValueError, match="tokens per draft"):
        run_train(tiny_folder, tmp_path / "big", "--steps", "1", "--tokens-per-draft", "2",
                  "--init-from", str(tmp_path / "small" / "la.safetensors"))


def test_bad_arguments(tiny_folder, tmp_path, monkeypatch):
    """Refused before any work: an L outside what decoding takes (a file of L = 100 was trained, then refused by
    every decoder), a --report that cannot be written (it was written last: the report of the whole run was lost)."""
    with pytest.raises(ValueError, match="num-lookahead"):
        run_train(tiny_folder, tmp_path, "--steps", "1", "--num-lookahead", "0")
    with pytest.raises(ValueError, match="--num-lookahead must be between 1 and 8 .*, got 100"):
        run_train(tiny_folder, tmp_path, "--steps", "1", "--num-lookahead", "100")
    (tmp_path / "a-file").write_text("")
    monkeypatch.setattr(train_mod, "load_model", lambda *a, **k: pytest.fail("the model loaded before the check"))
    with pytest.raises(ValueError, match="--report .*a-file is a file, so no folder can be made there"):
        run_train(tiny_folder, tmp_path, "--steps", "1", "--report", str(tmp_path / "a-file" / "r.json"))
    monkeypatch.undo()
    assert train_mod.main(["--model", str(tiny_folder), "--out", str(tmp_path / "x.safetensors"),
                           "--data", str(tmp_path / "missing.txt")]) == 2


@pytest.mark.parametrize("module, args, code, says", [
    ("pass_core.train", ["--data", "missing.txt"], 2, "missing.txt"),
    ("pass_core.train_drafter", ["--help"], 0, "--num-draft"),
])
@pytest.mark.process
def test_trainers_run_as_modules(tiny_folder, tmp_path, module, args, code, says):
    """``python -m`` smoke test of each trainer's entry point in a fresh interpreter (the trainers themselves are
    tested in this process): its exit code and its message."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", module, "--model", str(tiny_folder), "--out",
                          str(tmp_path / "x.safetensors"), *args], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == code, out.stderr[-3000:]
    assert says in out.stdout + out.stderr


def test_text_rows_alone_show_no_empty_generation_bar(tiny, capsys):
    """``--data FILE.txt``: every row is used as given, nothing is generated; a "self-distillation data: 0prompt"
    bar stood in the output."""
    from pass_core.training.data import generate_self_data

    seqs = generate_self_data(tiny, [{"text": "hello there"}], max_new_tokens=4, cache=False)
    assert len(seqs) == 1 and seqs[0]
    assert "self-distillation data" not in capsys.readouterr().err


def test_an_empty_file_name_is_refused_by_every_command_line(capsys):
    """``--out ''`` and the like were taken as "not given": a trainer wrote to its default path under a name
    beginning with "--", and ``bench --json ''`` wrote no report, exit 0. Now argparse refuses them (exit 2)."""
    from pass_core import generate
    from pass_core.bench.run import main as bench_main
    from pass_core.training import parallelspec

    for main, args in ((generate.main, ["--prompt", "hi", "--lookahead", ""]),
                       (generate.main, ["--prompt", "hi", "--drafter", " "]),
                       # taken as "not given": the shipped adapters, the bf16 copy (a third CLI helper)
                       (generate.main, ["--prompt", "hi", "--method", "pass-lora", "--adapters", ""]),
                       (generate.main, ["--prompt", "hi", "--method", "draft-model", "--draft-model", " "]),
                       (bench_main, ["--json", ""]),
                       (train_mod.main, ["--out", ""]),
                       (train_mod.main, ["--out", "x.safetensors", "--report", ""]),
                       (train_mod.main, ["--out", "x.safetensors", "--init-from", ""]),
                       (parallelspec.main, ["--out", ""]),
                       # taken as the default prompts, or called a folder (found by the second CLI helper)
                       (bench_main, ["--suite", ""]), (train_mod.main, ["--out", "x.safetensors", "--data", ""]),
                       (parallelspec.main, ["--train-prompts", ""]), (parallelspec.main, ["--heldout-prompts", " "])):
        with pytest.raises(SystemExit) as stop:
            main(args)
        assert stop.value.code == 2, args
        assert "give a file name, not " in capsys.readouterr().err, args
