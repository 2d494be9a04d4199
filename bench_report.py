"""HTML report of a benchmark (``python -m pass_core.bench --html OUT``): Plotly figures.

Kept outside ``pass_core`` so that the core never imports plotly. Reads only the report
dict that ``pass_core.bench`` builds (the same as its JSON); computes no metric.
Usable on a saved JSON too: ``python bench_report.py bench.json bench.html``.
"""

from __future__ import annotations

import html
import json
import sys

import plotly.graph_objects as go
from plotly.subplots import make_subplots

BASELINE = "ar"


def parse_setting(key: str) -> tuple[int, float]:
    """``"L=3,T=0.8"`` -> (3, 0.8)."""
    parts = dict(part.split("=", 1) for part in key.split(","))
    return int(parts["L"]), float(parts["T"])


def _error_y(entries: list[dict]) -> dict:
    """Asymmetric error bars from the min / max speed-up over repeats."""
    up = [(e["speedup_max"] or 0) - (e["speedup"] or 0) for e in entries]
    down = [(e["speedup"] or 0) - (e["speedup_min"] or 0) for e in entries]
    return dict(type="data", symmetric=False, array=up, arrayminus=down)


def _series(report: dict, method: str, fixed: str) -> dict[float | int, list[tuple[float | int, dict]]]:
    """Entries of one method grouped by T (fixed="T") or by L (fixed="L"), sorted by the other."""
    groups: dict = {}
    for key, entry in report["summary"].get(method, {}).items():
        n, t = parse_setting(key)
        group, x = (t, n) if fixed == "T" else (n, t)
        groups.setdefault(group, []).append((x, entry))
    return {g: sorted(points, key=lambda p: p[0]) for g, points in sorted(groups.items())}


def _methods(report: dict) -> list[str]:
    return [m for m in report["summary"] if m != BASELINE]


def _baseline_line(fig: go.Figure) -> None:
    fig.add_hline(y=1.0, line_dash="dot", annotation_text="AR", annotation_position="bottom right")


def speedup_vs_lookahead(report: dict) -> go.Figure:
    """Speed-up over AR against L, one line per method and temperature."""
    fig = go.Figure()
    for m in _methods(report):
        for t, points in _series(report, m, fixed="T").items():
            fig.add_trace(go.Scatter(x=[x for x, _ in points], y=[e["speedup"] for _, e in points],
                                     error_y=_error_y([e for _, e in points]), mode="lines+markers",
                                     name=f"{m}, T={t:g}"))
    _baseline_line(fig)
    fig.update_layout(title="Speed-up vs number of look-ahead tokens L", xaxis_title="L",
                      yaxis_title="speed-up over AR (tokens/s ratio)")
    return fig


def speedup_vs_temperature(report: dict) -> go.Figure:
    """Speed-up over AR against temperature, one line per method and L."""
    fig = go.Figure()
    for m in _methods(report):
        for n, points in _series(report, m, fixed="L").items():
            fig.add_trace(go.Scatter(x=[x for x, _ in points], y=[e["speedup"] for _, e in points],
                                     error_y=_error_y([e for _, e in points]), mode="lines+markers",
                                     name=f"{m}, L={n}"))
    _baseline_line(fig)
    fig.update_layout(title="Speed-up vs temperature", xaxis_title="temperature",
                      yaxis_title="speed-up over AR (tokens/s ratio)")
    return fig


def trained_vs_fixed(report: dict) -> go.Figure:
    """Trained look-ahead ("pass") against the fixed-token baseline: acceptance rate and speed-up."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("draft acceptance rate", "speed-up over AR"))
    present = [m for m in ("pass", "fixed-token") if m in report["summary"]]
    for m in present:
        keys = list(report["summary"][m])
        entries = list(report["summary"][m].values())
        fig.add_trace(go.Bar(x=keys, y=[e["acceptance_rate"] for e in entries], name=m, legendgroup=m,
                             offsetgroup=m), row=1, col=1)
        fig.add_trace(go.Bar(x=keys, y=[e["speedup"] for e in entries], name=m, legendgroup=m, offsetgroup=m,
                             showlegend=False, error_y=_error_y(entries)), row=1, col=2)
    title = "Trained look-ahead vs fixed-token baseline"
    if len(present) < 2:
        title += " (run with --methods ar,pass,fixed-token to compare)"
    fig.update_layout(title=title, barmode="group")
    return fig


def per_position(report: dict) -> go.Figure:
    """Conditional per-position acceptance (accepted at i / reached i) for every method and setting."""
    fig = go.Figure()
    for m in _methods(report):
        for key, e in report["summary"][m].items():
            values = e["per_position_conditional"]
            fig.add_trace(go.Scatter(x=list(range(1, len(values) + 1)), y=values, mode="lines+markers",
                                     name=f"{m}, {key}"))
    fig.update_layout(title="Per-position acceptance, conditional", xaxis_title="draft position i",
                      yaxis_title="accepted at i / steps that reached i", yaxis_range=[0, 1])
    return fig


FIGURES = (speedup_vs_lookahead, speedup_vs_temperature, trained_vs_fixed, per_position)


def render_html(report: dict) -> str:
    """A self-contained HTML page (plotly.js inlined once, works offline)."""
    parts = []
    for i, make in enumerate(FIGURES):
        parts.append(make(report).to_html(full_html=False, include_plotlyjs=(i == 0)))
    machine = ", ".join(f"{k}: {v}" for k, v in report.get("machine", {}).items() if v is not None)
    notes = "".join(f"<li>{html.escape(k)}: {html.escape(v)}</li>" for k, v in report.get("method_notes", {}).items())
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>PaSS Playground benchmark</title></head>"
        "<body style='font-family: sans-serif; max-width: 1100px; margin: auto'>"
        "<h1>PaSS Playground benchmark</h1>"
        f"<p><code>{html.escape(report.get('command', ''))}</code></p>"
        f"<p>{html.escape(machine)}</p><ul>{notes}</ul>"
        "<p>Speed-up = tokens/s of the method / tokens/s of AR measured in the same run; "
        "markers give the median over repeats, bars the min and max.</p>"
        + "".join(parts) + "</body></html>"
    )


def write_html(report: dict, path: str) -> None:
    """Write ``render_html(report)`` to ``path``."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_html(report))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python bench_report.py BENCH.json OUT.html")
    with open(sys.argv[1], encoding="utf-8") as f:
        write_html(json.load(f), sys.argv[2])
