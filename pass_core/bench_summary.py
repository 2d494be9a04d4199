"""The benchmark's runs and their summary: ``aggregate`` turns the runs of ``pass_core.bench`` into
``summary[method]["L=3,T=0"]`` (speed-up per repeat, exact match against AR, every ``RunSummary`` field).

Metrics come from ``pass_core.events`` (algorithms.md section 6): counts are summed over the prompts of a
setting (``summarize`` of the concatenated events), never averaged per prompt.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from .events import StepEvent, compare_outputs, speedup, summarize
from .registry import BASELINE

#: ``RunSummary`` fields copied into every summary entry.
SUMMARY_FIELDS = ("tokens_per_forward_pass", "mean_accepted_tokens", "accepted_drafts_per_step",
                  "acceptance_rate", "per_position_conditional", "per_position_unconditional",
                  "acceptance_histogram", "tokens_per_s", "ms_per_step", "tokens", "steps",
                  "forward_passes", "drafted_tokens", "accepted_drafts", "compute_time_s", "verification_steps",
                  "drafter_passes")

@dataclass(frozen=True)
class RunKey:
    """Which run: method, L (None for AR: its output does not depend on L), T, repeat, prompt."""

    method: str
    num_lookahead: int | None
    temperature: float
    repeat: int
    prompt_index: int


@dataclass
class BenchRun:
    """One decoding run and all its events."""

    key: RunKey
    category: str
    events: list[StepEvent]


def setting_key(num_lookahead: int, temperature: float) -> str:
    """Summary key of one setting, e.g. ``"L=3,T=0"``."""
    return f"L={num_lookahead},T={temperature:g}"


def _repeat_summary(runs: list[BenchRun], repeat: int):
    """``summarize`` of one repeat's runs, concatenated (counts summed over prompts)."""
    return summarize([e for r in runs if r.key.repeat == repeat for e in r.events])


def _entry(sel: list[BenchRun], ar_sel: list[BenchRun], ar_runs: dict, greedy: bool, dtype: str) -> dict:
    """Summary fields of one method and setting (optionally one category).

    Speed-up per repeat is ``events.speedup`` of the repeat's summaries; the exact-match rate is
    the share of runs whose output ``events.compare_outputs`` finds identical to AR's, and
    ``near_tie_differences`` counts the differing runs whose first difference is a near-tie
    within ``dtype`` rounding (``OutputComparison.near_tie``).
    """
    s = summarize([e for r in sel for e in r.events], method=sel[0].key.method)
    out = {f: getattr(s, f) for f in SUMMARY_FIELDS}
    ups = [up for rep in sorted({r.key.repeat for r in sel})
           if (up := speedup(_repeat_summary(sel, rep), _repeat_summary(ar_sel, rep))) is not None]
    out.update(speedup=statistics.median(ups) if ups else None, speedup_min=min(ups, default=None),
               speedup_max=max(ups, default=None), speedup_per_repeat=ups, runs=len(sel))
    cmps = [compare_outputs(ar_runs[r.key.temperature, r.key.repeat, r.key.prompt_index].events, r.events)
            for r in sel if (r.key.temperature, r.key.repeat, r.key.prompt_index) in ar_runs]
    out["exact_match_rate"] = sum(c.identical for c in cmps) / len(cmps) if greedy and cmps else None
    out["near_tie_differences"] = sum(not c.identical and bool(c.near_tie(dtype)) for c in cmps) if greedy else None
    return out


def aggregate(runs: list[BenchRun], lookaheads: list[int], temperatures: list[float], dtype: str = "float32") -> dict:
    """``summary[method][setting_key(L, T)]`` -> metrics, with ``by_category`` inside.

    AR entries repeat the same AR runs under every L (speed-up 1.0 by definition).
    ``exact_match_rate`` (greedy only, else None): share of runs whose token ids equal AR's
    for the same prompt and repeat; ``dtype`` (the model's) judges near-ties among the others.
    """
    ar_runs = {(r.key.temperature, r.key.repeat, r.key.prompt_index): r for r in runs if r.key.method == BASELINE}
    methods = list(dict.fromkeys(r.key.method for r in runs))
    categories = list(dict.fromkeys(r.category for r in runs))
    summary: dict = {}
    for m in methods:
        for t in temperatures:
            ar_t = [r for r in runs if r.key.method == BASELINE and r.key.temperature == t]
            for n in lookaheads:
                sel = [r for r in runs if r.key.method == m and r.key.temperature == t
                       and (m == BASELINE or r.key.num_lookahead == n)]
                if not sel:
                    continue
                entry = _entry(sel, ar_t, ar_runs, t == 0, dtype)
                entry["by_category"] = {
                    c: _entry([r for r in sel if r.category == c], [r for r in ar_t if r.category == c],
                              ar_runs, t == 0, dtype)
                    for c in categories if any(r.category == c for r in sel)}
                summary.setdefault(m, {})[setting_key(n, t)] = entry
    return summary
