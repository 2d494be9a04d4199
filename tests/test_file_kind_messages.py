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
