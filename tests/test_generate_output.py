"""What ``python -m pass_core.generate`` shows on a terminal, where its output (stdout) and its notes (stderr)
share one screen.

Running the guide's ``--trace`` option showed ``Hello! How can I assist you today?trace: t.json``: the note
that names the trace file was printed on stderr before stdout's output line had ended.
"""

from __future__ import annotations

import io
import sys


def test_the_trace_note_starts_a_line_of_its_own(tiny_folder, tmp_path, monkeypatch):
    from pass_core import generate

    screen = io.StringIO()  # stdout and stderr interleaved, as a terminal shows them
    monkeypatch.setattr(sys, "stdout", screen)
    monkeypatch.setattr(sys, "stderr", screen)
    trace = tmp_path / "t.json"
    assert generate.main(["--method", "ar", "--prompt", "hi", "--model", str(tiny_folder), "--max-new-tokens", "3",
                          "--threads", "1", "--backend", "fp32", "--seed", "0", "--temperature", "1",
                          "--trace", str(trace)]) == 0
    shown = screen.getvalue()
    output = shown[shown.index("\n", shown.index("model: ")) + 1:shown.index(f"trace: {trace}")]
    assert output.strip(), "the run wrote no text, so the test shows nothing"
    assert output.endswith("\n"), f"the trace note continues the output's line: {shown!r}"
    assert shown.endswith(" | finish: max_new_tokens\n") and "\n\n[" in shown  # the legend and summary follow
