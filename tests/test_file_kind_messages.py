"""A trained file given where another kind is read names the method it is for: a ParallelSpec drafter given to
``--lookahead`` (or look-ahead embeddings given to ``--drafter``) was refused with its format name only
("not a PaSS look-ahead file of format 'pass-lookahead/1' (format 'pass-parallelspec/1')"), which does not say
what to do; only the swap of plain and adapter look-ahead files said which method takes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pass_core.drafters.files import read_model_file

ASSETS = Path(__file__).resolve().parents[1] / "assets"
LOOKAHEAD = ASSETS / "lookahead" / "smollm2-135m-instruct-L4.safetensors"
ADAPTERS = ASSETS / "lookahead" / "smollm2-135m-instruct-L4-lora.safetensors"
DRAFTER = ASSETS / "drafter" / "smollm2-135m-instruct-k3.safetensors"


@pytest.mark.parametrize("path, what, fmt, use", [
    (DRAFTER, "PaSS look-ahead file", "pass-lookahead/1", "use it with method 'parallelspec' (--drafter)"),
    (DRAFTER, "PaSS look-ahead adapter file", "pass-lora/1", "use it with method 'parallelspec' (--drafter)"),
    (LOOKAHEAD, "ParallelSpec drafter file", "pass-parallelspec/1", "use it with method 'pass' (--lookahead)"),
    (ADAPTERS, "ParallelSpec drafter file", "pass-parallelspec/1", "use it with method 'pass-lora' (--adapters)"),
    (LOOKAHEAD, "PaSS look-ahead adapter file", "pass-lora/1", "use it with method 'pass' (--lookahead)"),
    (ADAPTERS, "PaSS look-ahead file", "pass-lookahead/1", "use it with method 'pass-lora' (--adapters)"),
])
def test_a_file_of_another_kind_names_its_method(path, what, fmt, use):
    with pytest.raises(ValueError, match=f"but not a {what} of format '{fmt}'") as refused:
        read_model_file(path, what, fmt)
    assert use in str(refused.value)


def test_a_training_checkpoint_is_named_as_one(tmp_path):
    """Training's own checkpoint (``OUT.ckpt.safetensors``, beside the file it will write) given as a look-ahead
    file was refused as "(format None)"; it says what it is and how to get the file. A safetensors file with no
    metadata says that it has no format instead of "None"."""
    from argparse import Namespace

    import torch
    from safetensors.torch import save_file

    from pass_core.training.checkpoint import save_checkpoint

    param = torch.nn.Parameter(torch.zeros(2, 4))
    opt = torch.optim.Adam([param])
    param.grad = torch.ones_like(param)
    opt.step()
    checkpoint = tmp_path / "mine.ckpt.safetensors"
    save_checkpoint(checkpoint, {"param": param}, opt, 120, Namespace(steps=600))
    with pytest.raises(ValueError, match=r"is a training checkpoint \(step 120 of python -m pass_core.train\), not "
                                         r"a PaSS look-ahead file: .* to --out when it ends; .* --resume") as refused:
        read_model_file(checkpoint, "PaSS look-ahead file", "pass-lookahead/1")
    assert "None" not in str(refused.value)
    bare = tmp_path / "bare.safetensors"
    save_file({"x": torch.zeros(2)}, str(bare))
    with pytest.raises(ValueError, match=r"of format 'pass-lookahead/1' \(no 'format' in its metadata\)\.$"):
        read_model_file(bare, "PaSS look-ahead file", "pass-lookahead/1")
