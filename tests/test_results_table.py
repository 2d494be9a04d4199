"""RESULTS.md's first table is what ``experiments/results_table.py`` prints from the saved reports it names, and a
method one run left out reads '-' there (it read '-x', a speed-up of nothing)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "experiments" / "results-2026-12-02"


def test_results_md_holds_the_table_the_script_prints():
    spec = importlib.util.spec_from_file_location("results_table", ROOT / "experiments" / "results_table.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        script.main(RUNS / "quick-t1.json", RUNS / "quick-t2.json")
    table = [line for line in printed.getvalue().splitlines() if line.startswith("| ")]
    assert "| pass | fp32 | - | 0.72x | - / 5.1 |" in "\n".join(table)  # pass ran on 2 threads only
    assert not any("-x" in line for line in table)
    results = (ROOT / "RESULTS.md").read_text(encoding="utf-8").splitlines()
    assert [line for line in table if line not in results] == []
