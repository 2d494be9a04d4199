"""The benchmark's runs and their summary: ``aggregate`` turns the runs of ``pass_core.bench`` into
``summary[method]["L=3,T=0"]`` (speed-up per repeat, exact match against AR, every ``RunSummary`` field).

Metrics come from ``pass_core.events`` (docs/algorithms.md section 6): counts are summed over the prompts of a
setting (``summarize`` of the concatenated events), never averaged per prompt.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from pass_core.decoding.events import StepEvent, compare_outputs
from pass_core.decoding.metrics import speedup, summarize
from pass_core.decoding.settings import GREEDY_BELOW
from pass_core.registry import BASELINE

#: ``RunSummary`` fields copied into every summary entry.
SUMMARY_FIELDS = ("tokens_per_forward_pass", "mean_accepted_tokens", "accepted_drafts_per_step",
                  "acceptance_rate", "per_position_conditional", "per_position_unconditional",
                  "acceptance_histogram", "tokens_per_s", "ms_per_step", "tokens", "steps",
                  "forward_passes", "drafted_tokens", "accepted_drafts", "compute_time_s", "verification_steps",
                  "drafter_passes", "judged_drafts")

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


def _ar_entries(methods: list[str], backends: dict[str, str]) -> dict[str, str]:
    """{AR entry: its backend} for AR on every backend of the run ("ar", "ar@fp32", ...)."""
    return {m: backends.get(m, "") for m in methods if m.partition("@")[0] == BASELINE}


def _fastest(runs: list[BenchRun], names: list[str]) -> tuple[str, float]:
    """Of the entries ``names``, the one with the highest median tokens/s over repeats, and that rate."""
    rates = {}
    for name in names:
        sel = [r for r in runs if r.key.method == name]
        per_repeat = [_repeat_summary(sel, rep).tokens_per_s for rep in sorted({r.key.repeat for r in sel})]
        per_repeat = [x for x in per_repeat if x]
        if per_repeat:
            rates[name] = statistics.median(per_repeat)
    best = max(rates, key=rates.get)
    return best, rates[best]


def _ratio(sel: list[BenchRun], ref: list[BenchRun]) -> float | None:
    """Median over repeats of ``speedup`` of ``sel`` against ``ref``."""
    ups = [up for rep in sorted({r.key.repeat for r in sel})
           if (up := speedup(_repeat_summary(sel, rep), _repeat_summary(ref, rep))) is not None]
    return statistics.median(ups) if ups else None


def aggregate(runs: list[BenchRun], lookaheads: list[int], temperatures: list[float], dtype: str = "float32",
              backends: dict[str, str] | None = None) -> dict:
    """``summary[method][setting_key(L, T)]`` -> metrics, with ``by_category`` inside.

    AR entries (on any backend) and the peers repeat the same runs under every L. ``speedup`` is against AR on
    the run's backend ("ar"); ``speedup_same_backend`` against AR on the entry's own backend when that ran (else None);
    ``speedup_vs_fastest_ar`` against the AR entry with the highest tokens/s of the run (named in
    ``fastest_ar``; AR on every backend, and transformers' ``generate()`` when it ran: ``peers.AR_PEERS``), the
    baseline a user could actually get on this machine.
    ``exact_match_rate`` (greedy only, else None): share of runs whose token ids equal fp32 AR's ("ar@fp32",
    else "ar") for the same prompt and repeat; near-ties among the others are judged in the entry's dtype.
    """
    from pass_core.bench.peers import AR_PEERS, PEERS, blank_unseen

    backends = backends or {}
    methods = list(dict.fromkeys(r.key.method for r in runs))
    ar_names = _ar_entries(methods, backends)
    reference = next((m for m, b in ar_names.items() if b == "fp32"), BASELINE)
    candidates = [*ar_names, *(m for m in methods if m in AR_PEERS)]  # transformers' own generate() is AR too
    ar_runs = {(r.key.temperature, r.key.repeat, r.key.prompt_index): r for r in runs if r.key.method == reference}
    categories = list(dict.fromkeys(r.category for r in runs))
    summary: dict = {}
    for m in methods:
        m_dtype = "bfloat16" if backends.get(m) == "bf16" else dtype
        same = next((a for a, b in ar_names.items() if b and b == backends.get(m)), None)  # no AR there: None
        for t in temperatures:
            ar_t = [r for r in runs if r.key.method == BASELINE and r.key.temperature == t]
            runs_t = [r for r in runs if r.key.temperature == t]
            fastest, fastest_rate = _fastest(runs_t, candidates) if candidates else (BASELINE, None)
            for n in lookaheads:
                sel = [r for r in runs_t if r.key.method == m and (r.key.num_lookahead in (None, n))]
                if not sel:
                    continue
                entry = _entry(sel, ar_t, ar_runs, t < GREEDY_BELOW, m_dtype)
                entry.update(backend=backends.get(m), fastest_ar=fastest, fastest_ar_tokens_per_s=fastest_rate,
                             speedup_vs_fastest_ar=_ratio(sel, [r for r in runs_t if r.key.method == fastest]),
                             speedup_same_backend=_ratio(sel, [r for r in runs_t if r.key.method == same])
                             if same else None,
                             exact_match_reference=reference if t < GREEDY_BELOW else None)
                entry["by_category"] = {
                    c: {**_entry([r for r in sel if r.category == c], [r for r in ar_t if r.category == c],
                                 ar_runs, t < GREEDY_BELOW, m_dtype),
                        "speedup_vs_fastest_ar": _ratio([r for r in sel if r.category == c],
                                                        [r for r in runs_t if r.key.method == fastest
                                                         and r.category == c])}
                    for c in categories if any(r.category == c for r in sel)}
                summary.setdefault(m, {})[setting_key(n, t)] = blank_unseen(entry) if m in PEERS else entry
    return summary


def greedy_notes(summary: dict, dtype: str) -> tuple[list[str], list[str]]:
    """The benchmark's closing lines on greedy outputs that differ from fp32 AR's (``aggregate``'s
    ``exact_match_rate`` below 1): (notes, bugs). An entry whose every difference is a near-tie within its own
    dtype's rounding (``near_tie_differences``) is named in a note for its dtype, with the reason: on the run's
    ``dtype``, wide and one-token passes round differently; on another (an "@bf16" entry of a float32 run), its
    weights and passes round differently from the float32 AR it is compared with (the note said "within float32
    rounding" and "wide and one-token passes" for bfloat16 AR, which has no wide pass). Any other difference is
    a bug: "METHOD SETTING" names in ``bugs``."""
    ties: dict[str, list[str]] = {}
    bugs = []
    for m, by_setting in summary.items():
        for key, e in by_setting.items():
            if e["exact_match_rate"] is None or e["exact_match_rate"] >= 1.0:
                continue
            if e["near_tie_differences"] != round((1 - e["exact_match_rate"]) * e["runs"]):
                bugs.append(f"{m} {key}")
                continue
            ties.setdefault("bfloat16" if e.get("backend") == "bf16" else dtype, []).append(f"{m} {key}")
    notes = [f"note: greedy output differs from AR for {', '.join(names)} only at near-ties within {kind} "
             "rounding (" + ("wide and one-token passes round differently; use float32)." if kind == dtype else
                f"their {kind} weights and passes round differently from the {dtype} AR they are compared with).")
             for kind, names in ties.items()]
    return notes, bugs
