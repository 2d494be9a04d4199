"""Text output of the benchmark: machine description and markdown tables.

Reads the report dict built by ``pass_core.bench`` (the same as its JSON); computes no
metric. The Plotly HTML report is drawn from the JSON by ``playground.bench_html`` (the UI package).
"""

from __future__ import annotations

import datetime
import os
import platform

import torch

from pass_core.registry import BASELINE  # the speed-up baseline; pass_core.bench always runs it
from pass_core.decoding.text import count


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
            "device": str(loaded.device), "dtype": loaded.dtype_name,
            "backend": getattr(loaded, "backend", "") or None,
            "gpu": torch.cuda.get_device_name(loaded.device) if loaded.device.type == "cuda" else None,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def training_records(loaded, methods: list[str], num_lookahead: int) -> dict[str, dict]:
    """What the trained files used by ``methods`` say about their training, for the report's training figure.

    Args:
        loaded: the ``LoadedModel``.
        methods: method keys (variants like ``pass+fused`` count once, under their method).
        num_lookahead: L / k asked of the files.

    Returns:
        method key -> {"note": which file, "curve": [{"step", "positions", "top1_agreement": [per draft position]}]
        (held-out agreement against training positions, empty when the file's run did not record one),
        "top1_agreement": the file's final held-out agreement or None, "positions": training positions seen or
        None}; only methods whose file records its training.
    """
    from pass_core.registry import METHODS

    out = {}
    for key in dict.fromkeys(m.split("@")[0].split("+")[0] for m in methods):
        method = METHODS.get(key)
        if method is None or method.file_option is None:
            continue
        try:
            state, note = method.find_files(loaded, num_lookahead)
        except ValueError:
            continue
        info = getattr(state, "info", {}) or {}
        final = (info.get("eval") or {}).get("top1_agreement")
        if info.get("curve") or final:
            positions = info.get("positions_seen") or (info["steps"] * info["batch_positions"]
                                                       if "steps" in info and "batch_positions" in info else None)
            out[key] = {"note": note, "curve": info.get("curve") or [], "top1_agreement": final,
                        "positions": positions}
    return out


def _fmt(x, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def _rows(report: dict):
    """(method, setting key, L, T, entry), AR once per temperature (its runs serve every L)."""
    seen = set()
    for m, by_setting in report["summary"].items():
        ar_like = m.partition("@")[0] == BASELINE or m.startswith("hf-")  # runs that do not depend on L
        for key, e in by_setting.items():
            n, t = (part.split("=")[1] for part in key.split(","))
            if ar_like:
                if (m, t) in seen:
                    continue
                seen.add((m, t))
            yield m, key, ("-" if ar_like else n), t, e


def markdown_report(report: dict) -> str:
    """The summary as markdown: a header line, one row per method and setting, speed-up by category."""
    s, mach = report.get("settings", {}), report.get("machine", {})
    backend = f" (backend {mach['backend']})" if mach.get("backend") else ""
    temps = s.get("temperatures") or [None]
    sampling = ("greedy (T = 0)" if all(t == 0 for t in temps)
                else f"top-k {s.get('top_k', '?')}, top-p {s.get('top_p', '?')} when sampling")
    threads = count(mach["torch_threads"], "thread") if "torch_threads" in mach else "? threads"
    lines = [f"{s.get('model', '?')} in {mach.get('dtype', '?')}{backend} on {mach.get('device', '?')} ({mach.get('cpu', '?')}, "
             f"{threads}); suite {s.get('suite', '?')} "
             f"({count(s['num_prompts'], 'prompt') if 'num_prompts' in s else '? prompts'}), "
             f"{s.get('repeats', '?')} repeat(s), {s.get('max_new_tokens', '?')} new tokens, "
             f"{sampling}{', fused step' if s.get('fused') else ''}"
             f"{', another process spinning on one core (--busy-core)' if s.get('busy_core') else ''}.",
             "Speed-up = tokens/s of the method / tokens/s of AR in the same run, median over repeats (min-max): "
             "vs AR on the run's backend, and vs the fastest AR measured in this run (the baseline a user can get "
             "here)."]
    fastest = {(key.partition("T=")[2], e.get("fastest_ar"), e.get("fastest_ar_tokens_per_s"))
               for by in report["summary"].values() for key, e in by.items() if e.get("fastest_ar")}
    at_t = len({t for t, _, _ in fastest}) > 1  # one line per temperature: say which
    lines += [f"Fastest AR in this run{f' at T = {t}' if at_t else ''}: {name} ({_fmt(rate, '.1f')} tokens/s)."
              for t, name, rate in sorted(fastest, key=str)] + [""]
    head = ("| method | backend | L | T | speed-up vs AR (min-max) | vs fastest AR | tokens/s | tokens/pass "
            "| mean accepted tokens | accepted drafts/step | acceptance rate | per-position (conditional) "
            "| exact match |")
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    cats: list[str] = []
    for m, _, n, t, e in _rows(report):
        pos = " ".join(_fmt(p) for p in e["per_position_conditional"] or ()) or "-"
        lines.append(f"| {m} | {e.get('backend') or '-'} | {n} | {t} | {_fmt(e['speedup'])}x "
                     f"({_fmt(e['speedup_min'])}-{_fmt(e['speedup_max'])}) | {_fmt(e.get('speedup_vs_fastest_ar'))}x "
                     f"| {_fmt(e['tokens_per_s'], '.1f')} | {_fmt(e['tokens_per_forward_pass'])} "
                     f"| {_fmt(e['mean_accepted_tokens'])} | {_fmt(e['accepted_drafts_per_step'])} "
                     f"| {_fmt(e['acceptance_rate'])} | {pos} | {_fmt(e['exact_match_rate'], '.0%')} |")
        cats += [c for c in e["by_category"] if c not in cats]
    lines += ["", "Speed-up (mean accepted tokens) by category:", "",
              "| method | L | T | " + " | ".join(map(_cell, cats)) + " |", "|---|---|---|" + "---|" * len(cats)]
    for m, _, n, t, e in _rows(report):
        cells = [f"{_fmt(c['speedup'])}x ({_fmt(c['mean_accepted_tokens'])})" if c else "-"
                 for c in (e["by_category"].get(x) for x in cats)]
        lines.append(f"| {m} | {n} | {t} | " + " | ".join(cells) + " |")
    notes = [f"- {k}: {v}" for k, v in report.get("method_notes", {}).items()]
    return "\n".join(lines + ([""] + notes if notes else []))


def _cell(text: str) -> str:
    """``text`` (a suite's category: any text) as one markdown table cell: "|" escaped, line breaks as spaces (a
    category "a|b" with a line break split the header row and shifted every column)."""
    return " ".join(text.replace("|", "\\|").split())


#: What ``--html`` says: the Plotly report is drawn by the UI package, from the benchmark's JSON.
HTML_MOVED = ("--html is not part of pass_core (it never imports plotly): write --json BENCH.json, then draw the "
              "figures with `python -m playground.bench_html BENCH.json OUT.html`.")
