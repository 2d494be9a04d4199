"""Text output of the benchmark: machine description and markdown tables.

Reads the report dict built by ``pass_core.bench`` (the same as its JSON); computes no
metric. The Plotly HTML report lives outside the core, in the top-level ``bench_report.py``.
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import platform
from pathlib import Path

import torch

#: The speed-up baseline method; ``pass_core.bench`` always runs it.
BASELINE = "ar"


def machine_info(loaded) -> dict:
    """CPU model, cores, library versions, device and date, for the JSON report."""
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    import transformers

    return {"cpu": cpu or "unknown", "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "platform": platform.platform(),
            "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
            "device": str(loaded.device), "dtype": str(loaded.dtype).replace("torch.", ""),
            "gpu": torch.cuda.get_device_name(loaded.device) if loaded.device.type == "cuda" else None,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def _fmt(x, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def _rows(report: dict):
    """(method, setting key, L, T, entry), AR once per temperature (its runs serve every L)."""
    seen = set()
    for m, by_setting in report["summary"].items():
        for key, e in by_setting.items():
            n, t = (part.split("=")[1] for part in key.split(","))
            if m == BASELINE:
                if t in seen:
                    continue
                seen.add(t)
            yield m, key, ("-" if m == BASELINE else n), t, e


def markdown_report(report: dict) -> str:
    """The summary as markdown: a header line, one row per method and setting, speed-up by category."""
    s, mach = report.get("settings", {}), report.get("machine", {})
    lines = [f"{s.get('model', '?')} on {mach.get('device', '?')} ({mach.get('cpu', '?')}, "
             f"{mach.get('torch_threads', '?')} threads); suite {s.get('suite', '?')} ({s.get('num_prompts', '?')} "
             f"prompts), {s.get('repeats', '?')} repeat(s), {s.get('max_new_tokens', '?')} new tokens, "
             f"top-k {s.get('top_k', '?')}, top-p {s.get('top_p', '?')}{', fused step' if s.get('fused') else ''}.",
             "Speed-up = tokens/s of the method / tokens/s of AR in the same run: median over repeats (min-max).",
             ""]
    head = ("| method | L | T | speed-up (min-max) | tokens/s | tokens/pass | mean accepted tokens "
            "| accepted drafts/step | acceptance rate | per-position (conditional) | exact match |")
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    cats: list[str] = []
    for m, _, n, t, e in _rows(report):
        pos = " ".join(_fmt(p) for p in e["per_position_conditional"]) or "-"
        lines.append(f"| {m} | {n} | {t} | {_fmt(e['speedup'])}x ({_fmt(e['speedup_min'])}-{_fmt(e['speedup_max'])}) "
                     f"| {_fmt(e['tokens_per_s'], '.1f')} | {_fmt(e['tokens_per_forward_pass'])} "
                     f"| {_fmt(e['mean_accepted_tokens'])} | {_fmt(e['accepted_drafts_per_step'])} "
                     f"| {_fmt(e['acceptance_rate'])} | {pos} | {_fmt(e['exact_match_rate'], '.0%')} |")
        cats += [c for c in e["by_category"] if c not in cats]
    lines += ["", "Speed-up (mean accepted tokens) by category:", "",
              "| method | L | T | " + " | ".join(cats) + " |", "|---|---|---|" + "---|" * len(cats)]
    for m, _, n, t, e in _rows(report):
        cells = [f"{_fmt(c['speedup'])}x ({_fmt(c['mean_accepted_tokens'])})" if c else "-"
                 for c in (e["by_category"].get(x) for x in cats)]
        lines.append(f"| {m} | {n} | {t} | " + " | ".join(cells) + " |")
    notes = [f"- {k}: {v}" for k, v in report.get("method_notes", {}).items()]
    return "\n".join(lines + ([""] + notes if notes else []))


def load_html_report():
    """The top-level ``bench_report`` module (Plotly figures), imported only when asked for.

    pass_core never imports plotly itself; this import happens only for ``--html``.

    Raises:
        ValueError: bench_report.py is neither importable nor at the repository root.
    """
    try:
        import bench_report
    except ImportError:
        file = Path(__file__).resolve().parent.parent / "bench_report.py"
        if not file.is_file():
            raise ValueError("--html needs bench_report.py at the repository root.") from None
        spec = importlib.util.spec_from_file_location("bench_report", file)
        bench_report = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench_report)
    return bench_report
