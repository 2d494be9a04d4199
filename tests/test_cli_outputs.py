"""The command lines refuse bad output paths and out-of-range training arguments before any work (found by trying
to break them): ``bench --json`` into a path it cannot write used to run the whole benchmark and then end in a
FileNotFoundError traceback, ``train_drafter --num-draft -1`` started minutes of data generation, and a trainer's
``--out`` was first touched after the data and the training. Each case here fails if the model is loaded first.
"""

from __future__ import annotations

import pytest

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


def test_generate_trace_path_and_a_prompt_that_is_not_text_are_refused(no_model, a_file, capsys):
    from pass_core.generate import main

    with pytest.raises(SystemExit) as exit_:
        main(["--prompt", "hi", "--trace", str(a_file / "t.json")])
    assert exit_.value.code == 2 and "is a file" in capsys.readouterr().err
    assert main(["--prompt", "hi \udcff there"]) == 2  # bytes that were not UTF-8 on the command line
    assert "not valid text: character 4" in capsys.readouterr().err
    assert main(["--prompt", "hi", "--method", "parallelspec", "--drafter", str(a_file) + "-missing"]) == 2
    assert "does not exist" in capsys.readouterr().err  # said before the model loads (15 s), not after


@pytest.mark.parametrize("args, message", [
    (["--num-draft", "-1"], r"--num-draft \(k\) must be between 1 and 8, got -1"),
    (["--num-draft", "9"], r"between 1 and 8, got 9"),
    (["--steps", "0", "--anchors", "0"], r"--steps must be at least 1, got 0; --anchors must be at least 1, got 0"),
    (["--lr", "0"], r"--lr must be a positive learning rate"),
    (["--draft-vocab", "-1"], r"--draft-vocab, --sampled-copies and --warmup must be 0 or more"),
])
def test_drafter_trainer_refuses_bad_arguments_first(no_model, args, message):
    from pass_core.training.parallelspec import main

    with pytest.raises(ValueError, match=message):
        main(args)


def test_trainers_refuse_an_out_they_cannot_write_first(no_model, a_file, tmp_path, capsys):
    from pass_core.training import lookahead, parallelspec

    with pytest.raises(ValueError, match="is a file, so no folder can be made there"):
        parallelspec.main(["--out", str(a_file / "d.safetensors")])
    with pytest.raises(ValueError, match=r"is a folder: give a file name, e.g. .*drafter.safetensors"):
        parallelspec.main(["--out", str(tmp_path)])
    assert lookahead.main(["--out", str(a_file / "la.safetensors"), "--steps", "1"]) == 2
    assert "is a file, so no folder can be made there" in capsys.readouterr().err
