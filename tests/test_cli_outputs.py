"""The command lines refuse bad output paths and out-of-range training arguments before any work (found by trying
to break them): ``bench --json`` into a path it cannot write used to run the whole benchmark and then end in a
FileNotFoundError traceback, ``train_drafter --num-draft -1`` started minutes of data generation, and a trainer's
``--out`` was first touched after the data and the training. Each case here fails if the model is loaded first.
"""

from __future__ import annotations

import json
import re

import pytest
import torch

from pass_core.runtime.outputs import check_output_path


@pytest.fixture
def no_model(monkeypatch):
    """Any load of a model fails the test: the refusal must come before it."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the bad argument was refused")

    import pass_core.bench.run as bench_run
    import pass_core.generate as generate
    import pass_core.training.lookahead as lookahead
    import pass_core.training.parallelspec as parallelspec

    for module in (bench_run, generate, lookahead, parallelspec):
        monkeypatch.setattr(module, "load_model", refuse)


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("not a folder")
    return path


def test_check_output_path(tmp_path, a_file):
    assert check_output_path(tmp_path / "new" / "deeper" / "out.json", "--json") == tmp_path / "new" / "deeper" / \
        "out.json"  # missing folders are fine: the writers make them
    with pytest.raises(ValueError, match=r"--json .* is a folder: give a file name, e.g. .*out.json"):
        check_output_path(tmp_path, "--json")
    with pytest.raises(ValueError, match=r"--out .*a-file is a file, so no folder can be made there"):
        check_output_path(a_file / "sub" / "x.safetensors", "--out")


def test_bench_json_path_is_refused_before_the_run(no_model, a_file, capsys):
    from pass_core.bench.run import main

    with pytest.raises(SystemExit) as exit_:
        main(["--suite", "quick", "--limit", "1", "--json", str(a_file / "out.json")])
    assert exit_.value.code == 2
    assert "is a file, so no folder can be made there" in capsys.readouterr().err


def test_an_output_option_replaces_only_a_file_of_its_own_kind(no_model, tmp_path, capsys):
    """Found by the CLI helper: ``train --out`` and ``train_drafter --out`` replaced a model's own weights
    (model.safetensors), ``generate --trace`` and ``bench --json`` its config.json, ``train --report`` a notes .md
    beside it, each with exit 0. A file of the option's own kind (a look-ahead file, a drafter, a trace, a report) is
    still replaced, as a rerun does."""
    from safetensors.torch import save_file

    from pass_core import generate
    from pass_core.bench.run import main as bench
    from pass_core.runtime.outputs import json_with, safetensors_of
    from pass_core.training import lookahead, parallelspec

    weights, config = tmp_path / "model.safetensors", tmp_path / "config.json"
    save_file({"w": torch.zeros(2)}, str(weights))  # a model's weights: no 'format' of ours
    config.write_text('{"model_type": "llama"}', encoding="utf-8")
    kept = weights.read_bytes()
    assert lookahead.main(["--out", str(weights)]) == 2
    assert (f"--out {weights} exists and is not a safetensors file of format pass-lookahead/1 or pass-lora/1, as this "
            "option writes: it would be replaced. Give a new name") in capsys.readouterr().err
    with pytest.raises(ValueError, match="exists and is not a safetensors file of format pass-parallelspec/1"):
        parallelspec.main(["--out", str(weights)])
    for main, args in ((generate.main, ["--prompt", "hi", "--trace"]), (bench, ["--suite", "quick", "--json"])):
        with pytest.raises(SystemExit) as exit_:
            main([*args, str(config)])
        assert exit_.value.code == 2 and f"{config} exists and is not a JSON file with" in capsys.readouterr().err
    notes = tmp_path / "report.md"
    notes.write_text("my notes", encoding="utf-8")
    assert lookahead.main(["--out", str(tmp_path / "la.safetensors"), "--report", str(tmp_path / "report.json")]) == 2
    assert f"{notes}, where the report's markdown goes, exists and is not a training report" in capsys.readouterr().err
    assert weights.read_bytes() == kept and config.read_text(encoding="utf-8") == '{"model_type": "llama"}'
    assert notes.read_text(encoding="utf-8") == "my notes"
    # files of the option's own kind are replaced (a rerun)
    save_file({"w": torch.zeros(2)}, str(tmp_path / "la.safetensors"), metadata={"format": "pass-lookahead/1"})
    (tmp_path / "trace.json").write_text(json.dumps({"schema": "pass-playground-trace/1"}), encoding="utf-8")
    assert check_output_path(tmp_path / "la.safetensors", "--out", replaceable=safetensors_of("pass-lookahead/1"))
    assert check_output_path(tmp_path / "trace.json", "--trace",
                             replaceable=json_with(schema="pass-playground-trace/1"))


def test_the_trainers_files_beside_out_are_checked_before_any_work(tmp_path, capsys):
    """The trainers write more than ``--out``: the look-ahead trainer its checkpoint OUT.ckpt.safetensors beside it,
    the drafter trainer its report OUT.report.json and .md beside it and its checkpoint in the cache. A file of the
    user's there was replaced unsaid (exit 0), and a folder there ended in a traceback after the first checkpoint's
    steps (found by a bad-input helper). Each is now refused before the model loads, the file kept; the trainer's
    own checkpoint, damaged or not, is still replaced by a run without --resume."""
    from safetensors.torch import save_file

    from pass_core.training import lookahead, parallelspec
    from pass_core.training.checkpoint import drafter_checkpoint_path, is_lookahead_checkpoint

    ckpt = tmp_path / "v.ckpt.safetensors"
    ckpt.write_text("precious ckpt", encoding="utf-8")
    assert lookahead.main(["--out", str(tmp_path / "v.safetensors")]) == 2
    assert (f"{ckpt}, where its training checkpoint goes, exists and is not a training checkpoint: it would be "
            "replaced") in capsys.readouterr().err and ckpt.read_text(encoding="utf-8") == "precious ckpt"
    ckpt.unlink()
    ckpt.mkdir()
    assert lookahead.main(["--out", str(tmp_path / "v.safetensors")]) == 2
    assert f"its training checkpoint {ckpt} is a folder" in capsys.readouterr().err
    save_file({"param": torch.zeros(2)}, str(tmp_path / "ok.ckpt.safetensors"), metadata={"step": "3", "args": "{}"})
    whole = (tmp_path / "ok.ckpt.safetensors").read_bytes()
    (tmp_path / "cut.ckpt.safetensors").write_bytes(whole[:20])  # damaged mid-write: still the trainer's
    save_file({"w": torch.zeros(2)}, str(tmp_path / "w.safetensors"))  # safetensors, but no step: not a checkpoint
    assert [is_lookahead_checkpoint(tmp_path / name) for name in ("ok.ckpt.safetensors", "cut.ckpt.safetensors",
                                                                   "w.safetensors")] == [True, True, False]
    out = tmp_path / "e.safetensors"
    for name, text in (("e.report.md", "my notes"), ("e.report.json", '{"mine": 1}')):
        (tmp_path / name).write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match="would be replaced"):
            parallelspec.main(["--out", str(out)])
        assert (tmp_path / name).read_text(encoding="utf-8") == text
        (tmp_path / name).unlink()
    folder = drafter_checkpoint_path(out)
    folder.mkdir(parents=True)
    try:
        with pytest.raises(ValueError, match=f"its training checkpoint {folder} is a folder"):
            parallelspec.main(["--out", str(out)])
    finally:
        folder.rmdir()


def test_a_full_standard_output_loses_no_report_and_ends_in_one_line(tiny_folder, tmp_path, monkeypatch, capsys):
    """``bench --json FILE > /dev/full`` ended in a traceback after the whole run, and the JSON report was lost (the
    table was printed before the file was written); ``train`` and ``train_drafter`` ended in tracebacks too. The
    report is now written first, and each command line's entry point answers a failed standard output in one line
    (``outputs.stdout_failed``); an error of a named file is not taken for one."""
    import io
    import sys

    from pass_core.bench.run import main as bench
    from pass_core.runtime.outputs import stdout_failed

    class Full(io.StringIO):
        def write(self, text):
            raise OSError(28, "No space left on device")

        def fileno(self):  # stdout_failed points it at /dev/null: here, at a file of the test
            return sink.fileno()

    report = tmp_path / "b.json"
    with open(tmp_path / "sink", "w") as sink:
        monkeypatch.setattr(sys, "stdout", Full())
        with pytest.raises(OSError, match="No space left"):
            bench(["--model", str(tiny_folder), "--backend", "fp32", "--threads", "1", "--limit", "1",
                   "--max-new-tokens", "3", "--methods", "ar", "--no-progress", "--json", str(report)])
        assert "summary" in json.loads(report.read_text(encoding="utf-8"))  # written before the table
        assert stdout_failed(OSError(28, "No space left on device")) == 1
        with pytest.raises(FileNotFoundError):  # a named file's error is raised again, not called the output's
            stdout_failed(FileNotFoundError(2, "No such file or directory", "x.json"))
    assert capsys.readouterr().err.endswith("error: the output could not be written (No space left on device)\n")


def test_bench_refuses_a_report_named_as_its_suite(no_model, tmp_path, capsys):
    """``--json`` naming the ``--suite`` file replaced the prompts with the report, exit 0."""
    from pass_core.bench.run import main as bench

    suite = tmp_path / "same.json"  # JSON lines under a .json name: read as a suite, and a name --json takes
    suite.write_text('{"category": "chat", "prompt": "Hello"}\n', encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        bench(["--suite", str(suite), "--json", str(suite)])
    assert exit_.value.code == 2 and "is the --suite file: the report would replace the prompts" in \
        capsys.readouterr().err
    assert suite.read_text(encoding="utf-8") == '{"category": "chat", "prompt": "Hello"}\n'


def test_generate_trace_path_and_a_prompt_that_is_not_text_are_refused(no_model, a_file, capsys):
    from pass_core.generate import main

    with pytest.raises(SystemExit) as exit_:
        main(["--prompt", "hi", "--trace", str(a_file / "t.json")])
    assert exit_.value.code == 2 and "is a file" in capsys.readouterr().err
    assert main(["--prompt", "hi \udcff there"]) == 2  # bytes that were not UTF-8 on the command line
    assert "not valid text: character 4" in capsys.readouterr().err
    assert main(["--prompt", "hi", "--method", "parallelspec", "--drafter", str(a_file) + "-missing"]) == 2
    assert "does not exist" in capsys.readouterr().err  # said before the model loads (15 s), not after


@pytest.mark.parametrize("name", ["", "t.txt", "t.json.txt"])
def test_generate_refuses_a_trace_name_that_is_not_a_json_file(no_model, tmp_path, name, capsys):
    """``--trace ""`` was ignored without a word and ``--trace t.txt`` was written, though the app's replay takes
    .json files only: both are refused before the model loads, with the name given."""
    from pass_core.generate import main

    trace = str(tmp_path / name) if name else ""
    with pytest.raises(SystemExit) as exit_:
        main(["--prompt", "hi", "--trace", trace])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.endswith(f"error: --trace {trace or repr('')}: a trace is a .json file (the app "
                                            "replays .json files only): give a name ending in .json, e.g. trace.json\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (["--num-draft", "-1"], r"--num-draft \(k\) must be between 1 and 8, got -1"),
    (["--num-draft", "9"], r"between 1 and 8, got 9"),
    (["--steps", "0", "--anchors", "0"], r"--steps must be at least 1, got 0; --anchors must be at least 1, got 0"),
    (["--lr", "0"], r"--lr must be a positive learning rate"),
    (["--draft-vocab", "-1"], r"^--draft-vocab -1: must be 0 or more"),
    (["--warmup", "-2", "--sampled-copies", "-1"], r"^--sampled-copies -1, --warmup -2: must be 0 or more"),
    # NaN trained on to "diverged: lower the learning rate", or calibrated the confidence gate to 0 and exited 0
    (["--feature-weight", "nan", "--cost-per-draft", "nan"], r"--feature-weight nan, --cost-per-draft nan: each "
                                                             r"must be a finite number, 0 or more"),
    (["--drafter-cost=-inf"], r"--drafter-cost -inf: each must be a finite number"),
    (["--sampled-temperature", "0"], r"--sampled-temperature must be above 0, got 0.0"),  # was transformers' own
    # taken as given: 0 tokens per sequence or conversations per shard made empty data, after the model loaded
    (["--corpus-tokens", "0", "--corpus-shard", "0"], r"--corpus-tokens must be at least 1, got 0; --corpus-shard "
                                                      r"must be at least 1, got 0"),
    # read once the model had loaded; the held-out file after all the training data (minutes to hours)
    (["--heldout-prompts", "missing.jsonl"], r"^--heldout-prompts: Prompt file 'missing.jsonl' does not exist"),
    (["--train-prompts", "missing.jsonl"], r"^--train-prompts: Prompt file 'missing.jsonl' does not exist"),
    (["--batch-size", "100000"], r"^--batch-size must be at most 512"),  # ran the machine out of memory (helper 68)
    (["--lr", "1e300"], r"^--lr must be a positive learning rate, at most 10, got 1e\+300"),  # a traceback in AdamW
    (["--answers", ""], r"^--answers '': use CORPUS:COUNT"),  # taken as no answers (helper 68)
])
def test_drafter_trainer_refuses_bad_arguments_first(no_model, args, message):
    from pass_core.training.parallelspec import main

    with pytest.raises(ValueError, match=message):
        main(args)


def test_the_same_file_for_training_and_held_out_prompts_is_noted(no_model, tmp_path, capsys):
    """``train_drafter --train-prompts p.jsonl --heldout-prompts p.jsonl`` measured its "held-out" agreement and its
    confidence gate on training prompts, unsaid (helper 68): a note says so before the model loads."""
    from pass_core.training import parallelspec

    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "Hello there"}\n{"prompt": "Tell me a joke"}\n', encoding="utf-8")
    out = ["--out", str(tmp_path / "d.safetensors")]
    for heldout, noted in ((prompts, True), (tmp_path / "." / "p.jsonl", True), (None, False)):
        args = ["--train-prompts", str(prompts), *(["--heldout-prompts", str(heldout)] if heldout else [])]
        with pytest.raises(AssertionError, match="a model was loaded"):  # the checks passed: the model would load
            parallelspec.main([*out, *args])
        assert ("note: --heldout-prompts is the --train-prompts file" in capsys.readouterr().err) == noted, heldout


def test_adapter_options_without_adapters_are_noted(no_model, tmp_path, capsys):
    """``--adapter-lr`` and ``--adapter-alpha`` apply to the adapters only: with ``--adapter-rank 0`` (the default)
    they changed nothing, unsaid; now a note says so before the model loads (``no_model``: it stops there)."""
    from pass_core.training import lookahead

    out = ["--out", str(tmp_path / "la.safetensors")]
    for args, note in ((["--adapter-lr", "0.01"], "note: --adapter-lr applies to the adapters only, and "
                                                  "--adapter-rank is 0 (no adapters): it changes nothing."),
                       (["--adapter-lr", "0.01", "--adapter-alpha", "4"], "note: --adapter-lr and --adapter-alpha "
                                                                          "apply to the adapters only, and "
                                                                          "--adapter-rank is 0 (no adapters): they "
                                                                          "change nothing."),
                       (["--adapter-rank", "2", "--adapter-lr", "0.01"], None), ([], None)):
        with pytest.raises(AssertionError, match="a model was loaded"):  # the checks passed: the model would load
            lookahead.main([*out, *args])
        err = capsys.readouterr().err
        assert (note in err) if note else "--adapter-rank is 0" not in err, (args, err)


def test_trainers_refuse_an_out_they_cannot_write_first(no_model, a_file, tmp_path, capsys):
    from pass_core.training import lookahead, parallelspec

    with pytest.raises(ValueError, match="is a file, so no folder can be made there"):
        parallelspec.main(["--out", str(a_file / "d.safetensors")])
    with pytest.raises(ValueError, match=r"is a folder: give a file name, e.g. .*drafter.safetensors"):
        parallelspec.main(["--out", str(tmp_path)])
    assert lookahead.main(["--out", str(a_file / "la.safetensors"), "--steps", "1"]) == 2
    assert "is a file, so no folder can be made there" in capsys.readouterr().err
    # a refusal after --out's check leaves no folder behind: the check made --out's folder to write in it, and a
    # missing --data or prompt file then left new/deeper/ there (helper 66)
    new = tmp_path / "new" / "deeper"
    assert lookahead.main(["--out", str(new / "la.safetensors"), "--data", str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt' does not exist" in capsys.readouterr().err and not (tmp_path / "new").exists()
    with pytest.raises(ValueError, match="missing.jsonl' does not exist"):
        parallelspec.main(["--out", str(new / "d.safetensors"), "--train-prompts", str(tmp_path / "missing.jsonl")])
    assert not (tmp_path / "new").exists()


def test_the_look_ahead_trainer_makes_the_folders_of_its_out(tiny_folder, tmp_path):
    """``--out`` in folders that do not exist yet: its check removes the folders it made to write in them, and the
    trainer makes them again for its checkpoint, its file and its report."""
    from pass_core.training import lookahead

    data, out = tmp_path / "data.txt", tmp_path / "new" / "deeper" / "la.safetensors"
    data.write_text("The quick brown fox jumps over the lazy dog. " * 8 + "\n", encoding="utf-8")
    assert lookahead.main(["--model", str(tiny_folder), "--num-lookahead", "2", "--out", str(out), "--data",
                           str(data), "--batch-positions", "16", "--steps", "2", "--stop-at", "2", "--checkpoint-every",
                           "1", "--eval-prompts", "0", "--eval-sequences", "0", "--gen-tokens", "8", "--threads", "1",
                           "--report", str(tmp_path / "r" / "report.json")]) == 0
    assert (tmp_path / "r" / "report.json").is_file() and any(out.parent.iterdir())


def test_an_output_folder_that_cannot_be_made_is_refused_even_for_root(no_model, capsys):
    """Found by trying to break the CLIs as root: permissions said /proc was writable, so ``generate --trace`` and
    ``bench --json`` into /proc/... ran and then ended in a FileNotFoundError traceback. Now the folder is made and
    written to first."""
    from pass_core.bench.run import main as bench
    from pass_core.generate import main as generate

    with pytest.raises(ValueError, match=r"--json /proc/pass-playground-no/out.json: cannot write in "
                                         r"/proc/pass-playground-no \(No such file or directory\)"):
        check_output_path("/proc/pass-playground-no/out.json", "--json")
    for main, args in ((generate, ["--prompt", "hi", "--trace"]), (bench, ["--suite", "quick", "--json"])):
        with pytest.raises(SystemExit) as exit_:
            main([*args, "/proc/pass-playground-no/t.json"])
        assert exit_.value.code == 2 and "cannot write in /proc/pass-playground-no" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:  # --limit 0 ran no prompt and exited 0
        bench(["--suite", "quick", "--limit", "0"])
    assert exit_.value.code == 2 and "--limit 0: --repeats, --limit and --threads must be" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:  # built its schedule for minutes, in gigabytes, before any run
        bench(["--suite", "quick", "--repeats", "1000000000"])
    assert exit_.value.code == 2 and "--repeats 1,000,000,000: at most 1,000 runs" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--lr", "-1"], r"--lr -1.0: a learning rate must be a positive number"),
    # 1e300 overflowed in Adam in a traceback; 1e30 wrote weights of 1e29 without a word (helper 68)
    (["--lr", "1e300", "--adapter-lr", "1e30"], r"--lr 1e\+300, --adapter-lr 1e\+30: a learning rate must be a "
                                                 r"positive number, at most 10"),
    (["--lr", "nan", "--adapter-lr", "inf"], r"--lr nan, --adapter-lr inf: a learning rate must be a positive"),
    (["--answers", "sharegpt:abc"], r"--answers 'sharegpt:abc': use CORPUS:COUNT"),
    (["--answers", "chitchat:5,reddit:3"], r"--answers 'reddit:3'"),
    (["--checkpoint-every", "0"], r"--checkpoint-every 0: must be at least 1"),  # a ZeroDivisionError after step 1
    (["--stop-at", "0", "--steps", "-2"], r"--steps -2, --stop-at 0: must be at least 1"),  # a checkpoint at step 0
    (["--position-decay", "nan"], r"--position-decay must be a positive number, at most 1, got nan"),  # "diverged"
    (["--position-decay", "1e6"], r"--position-decay must be a positive number, at most 1, got 1000000.0 \(above 1"),
    (["--answers", ""], r"--answers '': use CORPUS:COUNT"),  # taken as no answers (helper 68)
    # found by the CLI helper: --eval-tokens 0 was refused after training, by a message that named no option;
    # --adapter-alpha nan trained to "diverged" (blamed on the learning rate); the others were taken as given
    (["--eval-tokens", "0"], r"--eval-tokens must be between 1 and 1024 \(the decoder's max new tokens\), got 0"),
    (["--adapter-rank", "2", "--adapter-alpha", "nan"], r"--adapter-alpha must be a positive number, got nan"),
    (["--seed", "-1"], r"--seed must be between 0 and 2,147,483,647, got -1"),
    (["--eval-prompts", "-1"], r"--eval-prompts -1: must be 0 or more"),
    (["--gen-tokens", "0"], r"--gen-tokens 0: must be at least 1"),
    (["--tokens-per-draft", "100"], r"--tokens-per-draft must be at most 8, got 100"),  # killed for memory
])
def test_lookahead_trainer_refuses_bad_arguments_first(no_model, tmp_path, args, message, capsys):
    """Each of these started the look-ahead trainer's data generation (about 11 minutes) before it was refused, or
    never was: found by trying to break the CLIs."""
    from pass_core.training import lookahead

    assert lookahead.main(["--out", str(tmp_path / "la.safetensors"), *args]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_trainers_refuse_a_seed_file_or_feature_layers_the_model_cannot_use_before_the_data(tiny_folder, tmp_path,
                                                                                           monkeypatch, capsys):
    """Checked once the model has loaded, before any data is made: an ``--init-from`` file that is not a look-ahead
    file, ``--feature-layers`` beyond the model's hidden states or naming one twice (each started minutes of data
    generation); a ``--topk`` above the vocabulary (a torch traceback after the data) and generation lengths beyond
    the model's context (they generated past it)."""
    from pass_core.runtime.models import load_model
    from pass_core.training import lookahead, parallelspec

    def no_data(*args, **kwargs):
        raise AssertionError("training data was made before the bad argument was refused")

    monkeypatch.setattr(lookahead, "load_sequences", no_data)
    monkeypatch.setattr(parallelspec, "_split", no_data)
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_text("garbage")
    assert lookahead.main(["--model", str(tiny_folder), "--out", str(tmp_path / "la.safetensors"),
                           "--init-from", str(garbage)]) == 2
    assert "garbage.safetensors" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"--feature-layers -1 99: this model has 3 hidden states, so each index must "
                                         r"be between -3 and 2 \(-1 = the last\)"):
        parallelspec.main(["--model", str(tiny_folder), "--out", str(tmp_path / "d.safetensors"),
                           "--feature-layers", "-1", "99", "--threads", "1"])
    with pytest.raises(ValueError, match=r"--feature-layers 2 -1: a hidden state is named twice \(of this model's 3, "
                                         r"-1 and 2 are the same one\)"):  # it trained on the last layer twice
        parallelspec.main(["--model", str(tiny_folder), "--out", str(tmp_path / "d.safetensors"),
                           "--feature-layers", "2", "-1", "--threads", "1"])
    drafter = ["--model", str(tiny_folder), "--out", str(tmp_path / "d.safetensors"), "--threads", "1"]
    loaded = load_model(str(tiny_folder))
    vocab, context = loaded.vocab_size, loaded.max_positions
    with pytest.raises(ValueError, match=f"--topk {vocab + 1} is above this model's vocabulary of {vocab} tokens"):
        parallelspec.main([*drafter, "--topk", str(vocab + 1)])
    parallelspec.check_against_model(parallelspec.parse_args([*drafter, "--topk", str(vocab)]), loaded)  # taken
    with pytest.raises(ValueError, match=f"--max-new-tokens {context} does not fit this model's context of {context} "
                                         f"tokens beside a prompt: give fewer than {context}"):
        parallelspec.main([*drafter, "--max-new-tokens", str(context)])
    parallelspec.check_against_model(parallelspec.parse_args([*drafter, "--max-new-tokens", str(context - 1)]),
                                     loaded)
    capsys.readouterr()
    parallelspec.check_against_model(parallelspec.parse_args([*drafter, "--draft-vocab", str(vocab)]), loaded)
    assert f"note: --draft-vocab {vocab} is this model's whole vocabulary of {vocab} tokens or more: the drafter " \
           "drafts from the full vocabulary" in capsys.readouterr().err  # it was taken so, unsaid
    for args, message in ((["--seed", "-1"], "--seed must be between 0 and 2,147,483,647, got -1"),
                          (["--anchors", "100000"], "--anchors must be at most 320 .mask groups per sequence., got")):
        with pytest.raises(ValueError, match=message):  # the seed as train's; 100,000 anchors: out of memory
            parallelspec.check_arguments(parallelspec.parse_args([*drafter, *args]))
    la = ["--model", str(tiny_folder), "--out", str(tmp_path / "la.safetensors")]
    assert lookahead.main([*la, "--eval-tokens", str(context - 12)]) == 2  # it was refused after the training
    assert "--eval-tokens" in capsys.readouterr().err
    assert lookahead.main([*la, "--adapter-rank", "100000"]) == 2
    assert "--adapter-rank 100,000 is above this model's width of" in capsys.readouterr().err
    assert lookahead.main(["--model", str(tiny_folder), "--out", str(tmp_path / "la.safetensors"),
                           "--gen-tokens", "100000"]) == 2
    assert f"--gen-tokens 100,000 does not fit this model's context of {context} tokens" in capsys.readouterr().err
    # below the context alone, not beside the prompts: 511 new tokens after a 57-token prompt made 568-token data;
    # refused where the data would be made (the prompts are read there), before the first generation
    from pass_core.training import data
    from pass_core.training.data import default_prompt_file, prompt_lengths, read_prompts

    monkeypatch.undo()
    monkeypatch.setattr(data, "tqdm", no_data)  # the generation's progress bar: the first thing it makes
    longest = max(prompt_lengths(loaded, read_prompts(default_prompt_file("train"))))
    beside = f"does not fit this model's context of {context} tokens beside the longest prompt ({longest} tokens): " \
             f"give at most {context - longest}"
    assert lookahead.main([*la, "--gen-tokens", str(context - longest + 1)]) == 2
    assert f"--gen-tokens {context - longest + 1} {beside}" in capsys.readouterr().err
    with pytest.raises(ValueError, match=re.escape(f"--max-new-tokens {context - 1} {beside}")):
        parallelspec.main([*drafter, "--max-new-tokens", str(context - 1)])


def test_the_drafter_trainer_replaces_a_shipped_drafter_only_when_out_names_it(tiny_folder, tmp_path, monkeypatch):
    """Without ``--out`` the drafter trainer writes the shipped path: a one-step trial run replaced the shipped
    drafter (and its reports) unsaid, and the page then raced that file. Where a file is there it is refused, once
    the model has loaded (the path names the model), before any data; the file is left as it was."""
    from pass_core.training import parallelspec

    shipped = tmp_path / "tiny-k3.safetensors"
    shipped.write_bytes(b"the shipped drafter")
    monkeypatch.setattr(parallelspec, "shipped_drafter_path", lambda name, k: shipped)
    monkeypatch.setattr(parallelspec, "_split", lambda *a, **k: pytest.fail("training data was made"))
    with pytest.raises(ValueError, match=f"--out not given: this run would replace the shipped drafter {shipped}. "
                                         f"Give --out {shipped} to replace it"):
        parallelspec.main(["--model", str(tiny_folder), "--threads", "1"])
    assert shipped.read_bytes() == b"the shipped drafter"


def test_the_trainers_help_gives_each_option_its_meaning_and_default(capsys):
    """``python -m pass_core.train --help`` left --model, --steps, --lr, --seed and others without a word or a
    default, while the docs' table had them."""
    from pass_core.training.lookahead_cli import build_parser

    text = " ".join(build_parser().format_help().split())
    for option in ("--model MODEL target model", "--steps STEPS optimizer steps (default: 600)",
                   "--lr LR learning rate", "--seed SEED seed", "--checkpoint-every CHECKPOINT_EVERY checkpoint "
                   "interval (steps) (default: 100)", "--threads THREADS torch CPU threads"):
        assert option in text, option
    from pass_core.training.parallelspec_cli import parse_args  # the drafter trainer's showed no default at all

    with pytest.raises(SystemExit):
        parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for option in ("--steps STEPS optimizer steps (default: 900)", "--seed SEED seed of the drafter's initialisation "
                   "and of its batches (default: 0)", "--device DEVICE cpu, cuda or mps (default: cpu)"):
        assert option in text, option


@pytest.mark.parametrize("cli, args, message", [
    ("bench", ["--suite", "quick", "--json", "out.html"], "--json out.html: the report is a JSON file (python -m "
                                                          "playground.bench_html draws it): give a name ending in "
                                                          ".json, e.g. bench.json"),
    ("lookahead", ["--out", "a.txt"], "--out a.txt: look-ahead embeddings are safetensors: give a "
                                      "name ending in .safetensors, e.g. lookahead.safetensors"),
    ("lookahead", ["--out", "la.safetensors", "--report", "r.txt"], "--report r.txt: the report is JSON (a .md beside "
                                                                    "it): give a name ending in .json"),
    ("parallelspec", ["--out", "d.bin"], "--out d.bin: a drafter is saved as a safetensors file: give a name ending "
                                         "in .safetensors, e.g. drafter.safetensors"),
])
def test_an_output_named_for_another_kind_of_file_is_refused_first(no_model, tmp_path, monkeypatch, capsys, cli,
                                                                     args, message):
    """``bench --json out.html`` wrote JSON into out.html, and the trainers wrote safetensors into a.txt or d.bin
    (found by trying to break the CLIs): each is refused before the model loads, and nothing is written."""
    from pass_core.bench.run import main as bench
    from pass_core.training import lookahead, parallelspec

    monkeypatch.chdir(tmp_path)
    main = {"bench": bench, "lookahead": lookahead.main, "parallelspec": parallelspec.main}[cli]
    try:
        code = main(args)
    except SystemExit as exit_:  # argparse's error (bench)
        code = exit_.code
    except ValueError as err:  # train_drafter raises, its __main__ prints "error: ..."
        code, _ = 2, print(err, file=__import__("sys").stderr)
    assert code == 2 and message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (["--temperature", "-1"], "--temperature must be between 0 and 2, got -1.0 (use 0 for greedy decoding)"),
    (["--num-lookahead", "9"], "--num-lookahead must be between 1 and 8, got 9"),
    (["--top-p", "2"], "--top-p must be between 0.01 and 1, got 2.0 (1 disables it)"),
    (["--max-new-tokens", "0"], "--max-new-tokens must be between 1 and 1,024, got 0"),
])
def test_generate_and_bench_name_the_option_of_a_bad_setting(no_model, args, message, capsys):
    """A setting out of range is named by its option, as typed (it was the page's label: "number of look-ahead tokens
    L must be between 1 and 8", "max new tokens must be ..."), before the model loads."""
    from pass_core import generate
    from pass_core.bench.run import main as bench

    assert generate.main(["--prompt", "hi", *args]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    with pytest.raises(SystemExit) as exit_:
        bench(["--suite", "quick", *args])
    assert exit_.value.code == 2 and capsys.readouterr().err.endswith(f"error: {message}\n")


def test_a_prompt_too_long_for_the_context_names_the_option_to_lower(tiny_folder, capsys):
    """generate said "Lower max new tokens to at most 491", the page's label, where bench names --max-new-tokens."""
    from pass_core import generate

    assert generate.main(["--model", str(tiny_folder), "--method", "ar", "--prompt", "hi",
                          "--max-new-tokens", "1024"]) == 2
    err = capsys.readouterr().err
    assert "context of 512 positions. Lower --max-new-tokens to at most " in err and "max new tokens" not in err
