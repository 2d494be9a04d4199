"""The pass-cost curve c(w) (issue 14, part 1): measured on the tiny model, written to the bench JSON."""

from __future__ import annotations

import json

import pytest

from pass_core import bench
from pass_core.pass_cost import measure_pass_cost, pass_cost_markdown


def test_pass_cost_curve_fields_on_the_tiny_model(tiny):
    curve = measure_pass_cost(tiny, widths=(1, 2, 4, 8), cache_len=32, repeats=2)
    assert curve["widths"] == [1, 2, 4, 8] and curve["cache_len"] == 32 and curve["repeats"] == 2
    assert len(curve["ms"]) == len(curve["c"]) == 4 and curve["c"][0] == 1.0
    assert all(m > 0 for m in curve["ms"])
    assert curve["c"] == pytest.approx([m / curve["ms"][0] for m in curve["ms"]])
    assert curve["device"] == "cpu" and curve["dtype"] == "float32" and curve["threads"] >= 1
    assert "| 8 |" in pass_cost_markdown(curve)
    with pytest.raises(ValueError, match="context"):
        measure_pass_cost(tiny, widths=(1, 16), cache_len=510)
    with pytest.raises(ValueError, match="at least 1"):
        measure_pass_cost(tiny, widths=(0, 2))


def test_bench_pass_cost_only(tiny_folder, tmp_path, capsys):
    out = tmp_path / "pc.json"
    assert bench.main(["--suite", "none", "--pass-cost", "--model", str(tiny_folder), "--json", str(out),
                       "--threads", "1"]) == 0
    report = json.loads(out.read_text())
    assert report["pass_cost"]["widths"] == list(range(1, 17)) and report["runs"] == []
    assert "| w (tokens per pass) | ms | c(w) |" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench.main(["--suite", "none", "--model", str(tiny_folder)])  # runs nothing: refused
