"""Issue 15, corrupt files on the page: a damaged shipped look-ahead or drafter file stops that race
with a message naming the file (no folders), and the app keeps serving the next race."""

from __future__ import annotations

import sys
from pathlib import Path

import gradio as gr
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from playground import page  # noqa: E402
from pass_core.drafters.lookahead.embeddings import LookaheadEmbeddings  # noqa: E402
from pass_core.drafters.parallelspec.model import ParallelDrafter  # noqa: E402
from pass_core.drafters.shipped import shipped_drafter_path, shipped_lookahead_path  # noqa: E402
from playground.race_inputs import RaceRequest


@pytest.mark.parametrize("kind", ["lookahead", "drafter"])
def test_damaged_shipped_file_is_named_and_the_app_keeps_serving(tiny, tmp_path, monkeypatch, kind):
    monkeypatch.setenv("PASS_PLAYGROUND_ASSETS", str(tmp_path))
    if kind == "lookahead":
        path = LookaheadEmbeddings.initialise(tiny, 3, "mean").save(shipped_lookahead_path(tiny.name, 3))
        method = "pass"
    else:
        path = ParallelDrafter.initialise(tiny, 3).save(shipped_drafter_path(tiny.name, 3))
        method = "parallelspec"
    data = bytearray(path.read_bytes())
    data[-2] ^= 0xFF  # alter one byte of the tensors: the checksum catches it
    path.write_bytes(bytes(data))
    with pytest.raises(gr.Error) as err:
        list(page.race_handler(tiny, RaceRequest("hi", 3, 0.0, 0, 1.0, 8, 0, True, False, ["ar", method])))
    message = str(err.value)
    assert path.name in message and "altered or damaged" in message and str(tmp_path) not in message
    final = list(page.race_handler(tiny, RaceRequest("hi", 3, 0.0, 0, 1.0, 8, 0, True, False, ["ar", "fixed-token"])))[-1]
    assert any("Finished" in str(value) for value in final if isinstance(value, str))
