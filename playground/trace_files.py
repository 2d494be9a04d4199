"""Where the page keeps the traces of its races: one new folder per race under the machine's one traces folder,
the newest ``TRACES_KEPT`` of them kept; a trace written for a visitor names no server folder."""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
import time
from pathlib import Path

from pass_core.runtime.machine_load import MachineLoad
from pass_core.teaching.trace import make_trace, save_trace
from playground.race_inputs import hide_paths

TRACES_KEPT = 64  # a long-running server keeps the newest race traces only


def save_race_trace(loaded, prompt: str, settings, events: dict, machine_load: MachineLoad | None) -> Path:
    """``make_trace`` of a race of the page (its ``events``: method key -> step events), with the model named as the
    page names it (``hide_paths``: a model loaded from a folder was named by the server's whole path in the trace
    and in its replay's run line), saved to a new ``trace_path``. Returns the file's path."""
    trace = make_trace(loaded, prompt, settings, events, machine_load)
    return save_trace(dataclasses.replace(trace, model_name=hide_paths(trace.model_name)), trace_path())


def trace_path() -> Path:  # a new folder; a name with the local time, so that several downloads differ
    return _trace_folder() / time.strftime("pass-playground-trace-%Y%m%d-%H%M%S.json")


def _trace_folder() -> Path:
    """A new folder for one race's trace under the traces folder that every app process on the machine shares;
    the oldest beyond ``TRACES_KEPT`` go (a folder another process removed meanwhile is passed over)."""
    root = Path(tempfile.gettempdir()) / "pass-playground-traces"
    root.mkdir(exist_ok=True)
    dated = []
    for entry in root.iterdir():
        with contextlib.suppress(FileNotFoundError):  # removed by another process since iterdir listed it
            dated.append((entry.stat().st_mtime, entry))
    for _, old in sorted(dated)[:-TRACES_KEPT]:
        shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(dir=root))
