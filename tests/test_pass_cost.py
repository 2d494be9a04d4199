"""The pass-cost curve c(w) (issue 14, part 1): measured on the tiny model, written to the bench JSON."""

from __future__ import annotations

import json
import os

import pytest

from pass_core.bench import run as bench
from pass_core.runtime.pass_cost import measure_pass_cost, pass_cost_markdown


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
    captured = capsys.readouterr()
    assert "| w (tokens per pass) | ms | c(w) |" in captured.out
    assert "(model loaded, the pass-cost curve)" in captured.err and "0 runs" not in captured.err
    with pytest.raises(SystemExit):
        bench.main(["--suite", "none", "--model", str(tiny_folder)])  # runs nothing: refused


def test_bench_html_shows_the_pass_cost_curve(tiny_folder, tmp_path):
    from playground import bench_html

    html_out, json_out = tmp_path / "pc.html", tmp_path / "pc.json"
    assert bench.main(["--suite", "none", "--pass-cost", "--model", str(tiny_folder), "--json", str(json_out),
                       "--threads", "1"]) == 0
    assert bench_html.main([str(json_out), str(html_out)]) == 0
    page = html_out.read_text()
    assert "Pass cost c(w) on cpu" in page and "cache of 200 tokens" in page
    assert "c(w) (float32, 1 thread)" in page


def test_bench_method_variants(tiny_folder, tmp_path, fixed_pass_cost):
    """``--methods parallelspec+auto,pass+fused`` runs each variant under its own name, beside its plain method (on a
    fixed physical curve: a busy CPU's measurement, refused, left the auto variant out of a full run)."""
    out = tmp_path / "v.json"
    assert bench.main(["--suite", "quick", "--limit", "1", "--max-new-tokens", "8", "--model", str(tiny_folder),
                       "--methods", "pass,pass+fused,parallelspec+auto", "--json", str(out), "--threads", "1",
                       "--no-progress"]) == 0
    report = json.loads(out.read_text())
    assert set(report["summary"]) == {"ar", "pass", "pass+fused", "parallelspec+auto"}
    for bad in ("ar+auto", "parallelspec+fused", "pass+turbo"):
        with pytest.raises(SystemExit):
            bench.main(["--suite", "quick", "--limit", "1", "--model", str(tiny_folder), "--methods", bad])


def test_cost_points_and_cost_chart():
    from pass_core.decoding.events import StepEvent, TokenRecord
    from pass_core.teaching.race import cost_points
    from playground.cost_charts import pass_cost_figure, pass_cost_markdown

    def ev(method, step, n_tokens, k, step_s):
        return StepEvent(method=method, step=step, tokens=tuple(TokenRecord(1, "a", "exact") for _ in range(n_tokens)),
                         num_verified_drafts=k, step_s=step_s)
    events = {"ar": [ev("ar", s, 1, 0, 0.9 if s == 1 else 0.040) for s in (1, 2, 3)],
              "parallelspec": [ev("parallelspec", 1, 1, 0, 0.5), ev("parallelspec", 2, 3, 3, 0.060),
                               ev("parallelspec", 3, 1, 3, 0.060)]}
    points = cost_points(events)  # the prefill steps left out; AR's mean step is the unit
    assert points["parallelspec"] == pytest.approx((4.0, 2.0, 1.5))
    assert points["ar"] == pytest.approx((1.0, 1.0, 1.0))
    assert cost_points({"pass": events["parallelspec"]}) == {}  # no AR and no curve: no unit
    assert cost_points({"pass": events["parallelspec"]}, one_pass_s=0.03)["pass"][2] == pytest.approx(2.0)
    curve = {"widths": [1, 2, 4, 8], "c": [1.0, 1.1, 1.2, 1.5], "ms": [30.0, 33.0, 36.0, 45.0], "device": "cpu",
             "dtype": "bfloat16", "threads": 1}
    fig = pass_cost_figure(curve, points)
    assert [t.name for t in fig.data] == ["c(w) (bfloat16, 1 thread)",
                                         "ParallelSpec: tokens per step (2.00)",
                                         "ParallelSpec: cost per step (1.50 AR steps)"]
    text = pass_cost_markdown(curve, points)
    assert "c(2) = 1.10, c(4) = 1.20, c(8) = 1.50" in text and "1.33x, faster than AR" in text
    assert "(verification passes 4.0 wide on average, at most k + 1; a gated or cut step verifies fewer)" in text
    # a tree's width is N + 1 at most, not k + 1; "mean width N + 1 ... = 5.4" of a tree of 8 read as a wrong sum
    tree = pass_cost_markdown(curve, {"parallelspec+tree8": (5.4, 2.4, 1.6)})
    assert "(verification passes 5.4 wide on average, at most N + 1, the tree's nodes and the root; a gated" in tree
    assert "busy" not in text  # no load recorded (an older curve): no warning


def test_a_curve_measured_on_a_busy_cpu_says_so(tiny, monkeypatch):
    from pass_core.runtime.pass_cost import busy_warning, cpu_busy, cpu_load
    from playground.cost_charts import pass_cost_markdown as page_markdown

    load_before = os.getloadavg()[0]
    curve = measure_pass_cost(tiny, widths=(1, 2), cache_len=8, repeats=1)
    load_after = os.getloadavg()[0]
    assert curve["cores"] == cpu_load()[1] and 1 <= curve["cores"] <= (os.cpu_count() or 1)
    # the OS's 1-minute load average at the time of the measurement (it changes every 5 s: bracketed)
    assert min(load_before, load_after) <= curve["load_average_1min"] <= max(load_before, load_after)
    assert curve["busy"] is None and curve["other_cores"] is None  # well under 0.5 s: too short to tell
    from pass_core.runtime import machine_load

    monkeypatch.setattr(machine_load, "MIN_WALL_S", 0.0)  # any length counts: the verdict is recorded
    # long enough for /proc/stat's counters to move (10 ms a tick: over one repeat, a few ms, they often had not)
    counted = measure_pass_cost(tiny, widths=(1, 2), cache_len=8, repeats=40)
    assert type(counted["busy"]) is bool and 0 <= counted["other_cores"] <= (os.cpu_count() or 1) + 0.1, counted
    busy = {**curve, "load_average_1min": curve["cores"] + 1.5}  # a curve without the counters' verdict
    idle = {**curve, "load_average_1min": 0.2}
    assert "the CPU was busy (load average" in busy_warning(busy) and busy_warning(idle) == ""
    assert "*Re-measure pass cost*" in busy_warning(busy)  # the page measures again without a restart
    # the counters' verdict over the passes wins over the load average, which lags by a minute and counted this
    # app's own model loading: the first start warned on an idle machine (helper)
    assert busy_warning({**busy, "busy": False, "other_cores": 0.1}) == ""
    assert "other programs took 1.3 of" in busy_warning({**idle, "busy": True, "other_cores": 1.3})
    assert busy_warning({**busy, "device": "cuda"}) == ""
    assert cpu_busy(2.6, 2) and not cpu_busy(2.4, 2) and not cpu_busy(None, 2)  # a GPU's curve does not depend on the CPU load
    assert "busy" in pass_cost_markdown(busy) and "busy" not in pass_cost_markdown(idle)
    assert "--threads 1" in page_markdown(busy) and "busy" not in page_markdown(idle)
