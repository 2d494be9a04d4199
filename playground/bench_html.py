"""HTML report of a benchmark (``python -m pass_core.bench --json BENCH.json`` first): Plotly figures.

Reads only the report dict that ``pass_core.bench`` builds (the same as its JSON); computes no
metric. Method names and colours come from ``pass_core.registry`` (a method the registry no
longer knows keeps its key as name and Plotly's default colour). Usable on a saved JSON too::

    python -m playground.bench_html BENCH.json OUT.html
"""

from __future__ import annotations

import html
import json
import os
import sys
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pass_core.registry import BASELINE
from pass_core.decoding.text import count
from pass_core.runtime.outputs import check_output_path, write_text_atomically

from playground.cost_charts import pass_cost_figure
from playground.race_charts import colour, short_name

#: How every page this module writes begins (``a_benchmark_page`` knows its own pages by it).
PAGE_HEAD = "<!doctype html><html><head><meta charset='utf-8'><title>PaSS Playground benchmark</title></head>"
#: Line dashes that tell apart the settings of one method (its colour stays the same).
_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def parse_setting(key: str) -> tuple[int, float]:
    """``"L=3,T=0.8"`` -> (3, 0.8).

    Raises:
        ValueError: a key of another form (a hand-edited report), named with the form expected.
    """
    try:
        parts = dict(part.split("=", 1) for part in key.split(","))
        return int(parts["L"]), float(parts["T"])
    except (ValueError, KeyError):  # "dictionary update sequence element #0 has length 1; 2 is required"
        raise ValueError(f"the setting {key!r} in the summary is not of the form 'L=3,T=0.8'; write the report "
                         "again with python -m pass_core.bench --json") from None


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
    fig.add_hline(y=1.0, line_dash="dot", annotation_text=short_name(BASELINE), annotation_position="bottom right")


def _speedup_lines(report: dict, fixed: str, label: str) -> go.Figure:
    fig = go.Figure()
    for m in _methods(report):
        for j, (group, points) in enumerate(_series(report, m, fixed=fixed).items()):
            fig.add_trace(go.Scatter(x=[x for x, _ in points], y=[e["speedup"] for _, e in points],
                                     error_y=_error_y([e for _, e in points]), mode="lines+markers",
                                     line=dict(color=colour(m), dash=_DASHES[j % len(_DASHES)]),
                                     name=f"{short_name(m)}, {label}={group:g}"))
    _baseline_line(fig)
    return fig


def speedup_vs_lookahead(report: dict) -> go.Figure:
    """Speed-up over AR against L, one line per method and temperature."""
    fig = _speedup_lines(report, fixed="T", label="T")
    fig.update_layout(title="Speed-up vs number of look-ahead tokens L", xaxis_title="L",
                      yaxis_title="speed-up over AR (tokens/s ratio)")
    return fig


def speedup_vs_temperature(report: dict) -> go.Figure:
    """Speed-up over AR against temperature, one line per method and L."""
    fig = _speedup_lines(report, fixed="L", label="L")
    fig.update_layout(title="Speed-up vs temperature", xaxis_title="temperature",
                      yaxis_title="speed-up over AR (tokens/s ratio)")
    return fig


def trained_vs_fixed(report: dict) -> go.Figure:
    """Trained look-ahead ("pass") against the fixed-token baseline: acceptance rate and speed-up.

    The paper's own comparison (Monea et al. 2023, section 3), so it names these two methods.
    """
    fig = make_subplots(rows=1, cols=2, subplot_titles=("draft acceptance rate", "speed-up over AR"))
    present = [m for m in ("pass", "fixed-token") if m in report["summary"]]
    for m in present:
        keys = list(report["summary"][m])
        entries = list(report["summary"][m].values())
        style = dict(name=short_name(m), legendgroup=m, offsetgroup=m, marker=dict(color=colour(m)))
        fig.add_trace(go.Bar(x=keys, y=[e["acceptance_rate"] for e in entries], **style), row=1, col=1)
        fig.add_trace(go.Bar(x=keys, y=[e["speedup"] for e in entries], showlegend=False, error_y=_error_y(entries),
                             **style), row=1, col=2)
    title = "Trained look-ahead vs fixed-token baseline"
    if len(present) < 2:
        title += " (run with --methods ar,pass,fixed-token to compare)"
    fig.update_layout(title=title, barmode="group")
    return fig


def per_position(report: dict) -> go.Figure:
    """Conditional per-position acceptance (accepted at i / verification steps that reached i), every
    method and setting; a position never reached (None) leaves a gap, not a 0. A baseline that drafts nothing
    (transformers' ``generate``: None) has no line (its report could not be drawn)."""
    fig = go.Figure()
    for m in _methods(report):
        for j, (key, e) in enumerate(report["summary"][m].items()):
            values = e["per_position_conditional"]
            if values is None:
                continue
            fig.add_trace(go.Scatter(x=list(range(1, len(values) + 1)), y=values, mode="lines+markers",
                                     line=dict(color=colour(m), dash=_DASHES[j % len(_DASHES)]),
                                     name=f"{short_name(m)}, {key}"))
    fig.update_layout(title="Per-position acceptance, conditional", xaxis_title="draft position i",
                      yaxis_title="accepted at i / verification steps that reached i", yaxis_range=[0, 1])
    return fig


def training_curves(report: dict) -> go.Figure:
    """Held-out top-1 agreement of each trained file against the training positions it saw (the paper's "trained
    vs untrained look-ahead" analysis, extended to a curve): one line per draft position (LA_1 solid, LA_2 dashed,
    ...) for a file whose training recorded a curve, a marker for a file that records only its final agreement.
    Reads ``report["training"]`` (``bench_report.training_records``)."""
    fig = go.Figure()
    for key, rec in report.get("training", {}).items():
        if rec["curve"]:
            x = [c["positions"] for c in rec["curve"]]
            for i in range(len(rec["curve"][0]["top1_agreement"])):
                fig.add_scatter(x=x, y=[c["top1_agreement"][i] for c in rec["curve"]], mode="lines+markers",
                                name=f"{short_name(key)} d_{i + 1}", line=dict(color=colour(key), dash=_DASHES[i % 6]))
        elif rec["top1_agreement"] and rec["positions"]:
            fig.add_scatter(x=[rec["positions"]] * len(rec["top1_agreement"]), y=rec["top1_agreement"],
                            mode="markers", name=f"{short_name(key)} (final, d_1..d_{len(rec['top1_agreement'])})",
                            marker=dict(color=colour(key), size=9))
    return fig.update_layout(title="Held-out top-1 agreement of the drafts against training positions seen",
                             xaxis_title="training positions (prefix positions that got a look-ahead block)",
                             yaxis_title="top-1 agreement with the model", yaxis_tickformat=".0%")


FIGURES = (speedup_vs_lookahead, speedup_vs_temperature, trained_vs_fixed, per_position)


def pass_cost_title(curve: dict) -> str:
    """The pass-cost figure's title: cache length and repeats of the measurement."""
    return (f"Pass cost c(w) on {curve['device']} ({curve['dtype']}, {count(curve['threads'], 'thread')}): median of "
            f"{curve['repeats']} interleaved rounds, cache of {curve['cache_len']} tokens")


def render_html(report: dict) -> str:
    """A self-contained HTML page (plotly.js inlined once, works offline)."""
    figures = [make(report) for make in FIGURES]
    if any(rec["curve"] or rec["top1_agreement"] for rec in report.get("training", {}).values()):
        figures.append(training_curves(report))
    if report.get("pass_cost"):  # bench --pass-cost: this machine's curve first
        figures.insert(0, pass_cost_figure(report["pass_cost"]).update_layout(
            title=pass_cost_title(report["pass_cost"])))
    parts = [fig.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, fig in enumerate(figures)]
    machine = ", ".join(f"{k}: {v}" for k, v in report.get("machine", {}).items() if v is not None)
    notes = "".join(f"<li>{html.escape(k)}: {html.escape(v)}</li>" for k, v in report.get("method_notes", {}).items())
    return (
        PAGE_HEAD + "<body style='font-family: sans-serif; max-width: 1100px; margin: auto'>"
        "<h1>PaSS Playground benchmark</h1>"
        f"<p><code>{html.escape(report.get('command', ''))}</code></p>"
        f"<p>{html.escape(machine)}</p><ul>{notes}</ul>"
        "<p>Speed-up = tokens/s of the method / tokens/s of AR measured in the same run; "
        "markers give the median over repeats, bars the min and max.</p>"
        + "".join(parts) + "</body></html>"
    )


def a_benchmark_page(path: Path) -> bool:
    """``check_output_path``'s ``replaceable`` test for OUT: a page this module wrote (it begins with ``PAGE_HEAD``);
    any other file, e.g. the visitor's own notes.html, is refused (it was replaced without a word)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(len(PAGE_HEAD)) == PAGE_HEAD
    except OSError:
        return False


a_benchmark_page.what = "a page written by python -m playground.bench_html"


def write_html(report: dict, path: str) -> None:
    """Write ``render_html(report)`` to ``path`` (its missing folders made, as every writer of the project does; the
    file replaced at once, never left half-written)."""
    write_text_atomically(path, render_html(report))


def main(argv: list[str] | None = None) -> int:
    """``python -m playground.bench_html BENCH.json OUT.html``: the report of a saved JSON. Exit 0 when written, 2
    for bad input (arguments, a report that cannot be read or drawn, an OUT that cannot be made), 1 when writing
    OUT failed (a full disk)."""
    argv = sys.argv[1:] if argv is None else argv
    usage = "usage: python -m playground.bench_html BENCH.json OUT.html"
    if "-h" in argv or "--help" in argv:  # it printed the usage as an error, exit 2 (with a second word: "--help:
        # No such file or directory")
        print(f"{usage}\n\nDraw the Plotly figures of a benchmark report (python -m pass_core.bench --json "
              "BENCH.json) into one HTML file.")
        return 0
    if len(argv) != 2:
        print(usage, file=sys.stderr)
        return 2
    if "" in argv:  # "error: : No such file or directory"
        print(f"error: give a file name, not '' ({usage.removeprefix('usage: ')})", file=sys.stderr)
        return 2
    if all(map(os.path.exists, argv)) and os.path.samefile(*argv):  # the report was replaced by its HTML
        print(f"error: {argv[1]} is the report itself: give the HTML file another name", file=sys.stderr)
        return 2
    write_one = "write one with python -m pass_core.bench --json"
    try:
        with open(argv[0], encoding="utf-8") as f:
            report = json.load(f)
        summary = report.get("summary") if isinstance(report, dict) else None
        if not isinstance(summary, dict) or not all(isinstance(v, dict) and all(isinstance(e, dict) for e in v.values())
                                                    for v in summary.values()):
            raise ValueError(f"not a benchmark report (no 'summary'); {write_one}")
        if not any(summary.values()) and not report.get("pass_cost"):  # {"summary": {}}: a page of empty figures
            raise ValueError(f"a benchmark report with no measured method in its 'summary' and no pass-cost curve; "
                             f"{write_one}")
    except RecursionError:  # arrays nested 100,000 deep: a traceback
        print(f"error: {argv[0]}: nested too deeply to be a benchmark report; {write_one}", file=sys.stderr)
        return 2
    except (json.JSONDecodeError, UnicodeDecodeError) as err:  # "Expecting value: line 1 column 6" (or a codec's
        # "can't decode byte 0xf3") alone said nothing of what to do
        what = f"not JSON ({err})" if isinstance(err, json.JSONDecodeError) else "not a UTF-8 text file, so not JSON"
        print(f"error: {argv[0]}: {what}; {write_one}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else err  # not the path twice
        print(f"error: {argv[0]}: {reason}", file=sys.stderr)
        return 2
    try:  # an OUT named out.json, or where no file can be written: refused before drawing
        check_output_path(argv[1], "OUT.html", "bench.html", "the figures are one HTML page", a_benchmark_page)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        write_html(report, argv[1])
    except OSError as err:  # the output's problem, named as such (it was blamed on the report)
        print(f"error: {argv[1]} could not be written: {err.strerror or err}", file=sys.stderr)
        return 1
    except ValueError as err:  # a report whose figures cannot be drawn
        print(f"error: {argv[0]}: {err}", file=sys.stderr)
        return 2
    except (KeyError, IndexError, TypeError, AttributeError) as err:  # valid JSON, a field missing or malformed
        print(f"error: {argv[0]}: a field of the report is missing or malformed ({type(err).__name__}: {err}); "
              "write the report again with python -m pass_core.bench --json", file=sys.stderr)
        return 2
    print(f"wrote {argv[1]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
