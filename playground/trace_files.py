"""Where the page keeps the traces of its races: one new folder per race under the machine's one traces folder,
the newest ``TRACES_KEPT`` of them kept."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from pathlib import Path

TRACES_KEPT = 64  # a long-running server keeps the newest race traces only


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
