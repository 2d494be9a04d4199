"""RESULTS.md's first table from two bench JSONs (1 and 2 threads) of the same command:
``python experiments/results_table.py quick-t1.json quick-t2.json``. Methods missing from one run show '-'.

"vs fastest AR" is recomputed here from each report's runs (tokens / summed compute time, one repeat per run)
with today's rule (``pass_core.bench.summary``): the fastest of AR on every backend and transformers'
``generate()`` (``peers.AR_PEERS``). The reports of 2026-12-02 were written before ``generate()`` counted as an
AR, so their own ``speedup_vs_fastest_ar`` is against our AR alone."""

import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pass_core.bench.peers import AR_PEERS  # noqa: E402


def rows(path):
    report = json.load(open(path, encoding="utf-8"))
    out = {}
    for method, by_setting in report["summary"].items():
        out[method] = dict(next(iter(by_setting.values())))
    tokens, seconds = defaultdict(int), defaultdict(float)
    for run in report["runs"]:
        if len({r["repeat"] for r in report["runs"]}) != 1 or run["temperature"] != 0:
            raise SystemExit(f"{path}: this table is for one greedy repeat")
        tokens[run["method"]] += run["tokens"]
        seconds[run["method"]] += run["compute_time_s"]
    rate = {m: tokens[m] / seconds[m] for m in tokens if seconds[m]}
    for m, entry in out.items():  # the run's own tokens/s, recomputed from its runs: the same numbers
        assert abs(rate[m] - entry["tokens_per_s"]) < 1e-6 * rate[m], (path, m, rate[m], entry["tokens_per_s"])
    fastest = max((m for m in rate if m.partition("@")[0] == "ar" or m in AR_PEERS), key=rate.get)
    for m, entry in out.items():
        entry.update(fastest_ar=fastest, fastest_ar_tokens_per_s=rate[fastest],
                     speedup_vs_fastest_ar=rate[m] / rate[fastest])
    return report, out


def fmt(entry, key, spec):
    if entry is None or entry.get(key) is None:
        return "-"
    return format(entry[key], spec)


def ratio(entry):
    """A speed-up as '1.01x', or '-' for a method the run left out."""
    value = fmt(entry, "speedup_vs_fastest_ar", ".2f")
    return value if value == "-" else f"{value}x"


def main(one, two):
    (r1, a), (r2, b) = rows(one), rows(two)
    print(f"Fastest AR: {next(iter(a.values()))['fastest_ar']} at 1 thread "
          f"({next(iter(a.values()))['fastest_ar_tokens_per_s']:.2f} tokens/s), "
          f"{next(iter(b.values()))['fastest_ar']} at 2 threads ({next(iter(b.values()))['fastest_ar_tokens_per_s']:.2f} tokens/s).\n")
    print("| method | backend | vs fastest AR, 1 thread | vs fastest AR, 2 threads | tokens/s (1 / 2 threads) "
          "| mean accepted tokens per verification step | tokens per target pass | greedy = fp32 AR |")
    print("|---|---|---|---|---|---|---|---|")
    for m in list(dict.fromkeys([*b, *a])):
        e1, e2 = a.get(m), b.get(m)
        e = e2 or e1
        exact = e.get("exact_match_rate")
        print(f"| {m} | {e['backend']} | {ratio(e1)} | {ratio(e2)} "
              f"| {fmt(e1, 'tokens_per_s', '.1f')} / {fmt(e2, 'tokens_per_s', '.1f')} "
              f"| {fmt(e, 'mean_accepted_tokens', '.2f')} "
              f"| {fmt(e, 'tokens_per_forward_pass', '.2f')} | {'-' if exact is None else f'{exact:.0%}'} |")


if __name__ == "__main__":
    main(*sys.argv[1:3])
