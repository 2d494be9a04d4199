"""What ``python -m pass_core.generate`` shows on a terminal, where its output (stdout) and its notes (stderr)
share one screen.

Running the guide's ``--trace`` option showed ``Hello! How can I assist you today?trace: t.json``: the note
that names the trace file was printed on stderr before stdout's output line had ended.
"""

from __future__ import annotations

import io
import sys
from dataclasses import fields


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


def test_control_characters_of_the_model_are_shown_not_sent_to_the_terminal(tiny_folder, monkeypatch):
    """A model's token may hold control characters (an escape sequence, a carriage return): they reached the
    terminal raw, where they recolour, clear or rewrite it. The text shows them as ``\\x1b`` and the like; newlines
    and tabs stay; ``--json`` keeps the text as it is."""
    import json

    from pass_core import generate
    from pass_core.decoding.events import StepEvent, TokenRecord

    assert generate.visible("a\x1b[2Jb\rc\td\ne\x7f") == "a\\x1b[2Jb\\x0dc\td\ne\\x7f"

    ar = generate.METHODS["ar"]

    class Escaping(type(ar)):  # AR whose one step writes a token that holds an escape sequence
        def decode(self, *args, **kwargs):
            yield StepEvent(method="ar", step=1, tokens=(TokenRecord(token_id=1, text="x\x1b[2Jy", label="target"),),
                            step_s=0.01, finish_reason="max_new_tokens")

    monkeypatch.setitem(generate.METHODS, "ar", Escaping(**{f.name: getattr(ar, f.name) for f in fields(ar)}))
    argv = ["--method", "ar", "--prompt", "hi", "--model", str(tiny_folder), "--threads", "1", "--backend", "fp32"]
    for json_out in (False, True):
        screen = io.StringIO()
        monkeypatch.setattr(sys, "stdout", screen)
        assert generate.main(argv + ["--json"] * json_out) == 0
        shown = screen.getvalue()
        if json_out:
            assert json.loads(shown)["text"] == "x\x1b[2Jy"
        else:
            assert "x\\x1b[2Jy" in shown and "\x1b" not in shown, repr(shown)


def test_an_output_that_cannot_be_written_is_said_in_one_line(tiny_folder, tmp_path, monkeypatch, capsys):
    """``python -m pass_core.generate ... > /dev/full`` ended in a traceback (and Python's own error at exit)."""
    from pass_core import generate

    class Full(io.StringIO):
        def write(self, text):
            raise OSError(28, "No space left on device")

        def fileno(self):  # the CLI then points its stdout at /dev/null: here, at a file of the test
            return sink.fileno()

    with open(tmp_path / "sink", "w") as sink:
        monkeypatch.setattr(sys, "stdout", Full())
        assert generate.cli(["--method", "ar", "--prompt", "hi", "--model", str(tiny_folder), "--threads", "1",
                             "--backend", "fp32", "--max-new-tokens", "3"]) == 1
    assert capsys.readouterr().err.endswith("error: the output could not be written (No space left on device)\n")
