"""RESULTS.md's first table from two bench JSONs (1 and 2 threads) of the same command:
``python experiments/results_table.py quick-t1.json quick-t2.json``. Methods missing from one run show '-'."""

import json
import sys


def rows(path):
    report = json.load(open(path, encoding="utf-8"))
    out = {}
    for method, by_setting in report["summary"].items():
        entry = next(iter(by_setting.values()))
        out[method] = entry
    return report, out


def fmt(entry, key, spec):
    if entry is None or entry.get(key) is None:
        return "-"
    return format(entry[key], spec)


def main(one, two):
    (r1, a), (r2, b) = rows(one), rows(two)
    print(f"Fastest AR: {next(iter(a.values()))['fastest_ar']} at 1 thread "
          f"({next(iter(a.values()))['fastest_ar_tokens_per_s']:.1f} tokens/s), "
          f"{next(iter(b.values()))['fastest_ar']} at 2 threads ({next(iter(b.values()))['fastest_ar_tokens_per_s']:.1f} tokens/s).\n")
    print("| method | backend | vs fastest AR, 1 thread | vs fastest AR, 2 threads | tokens/s (1 / 2 threads) "
          "| mean accepted tokens per verification step | tokens per target pass | greedy = fp32 AR |")
    print("|---|---|---|---|---|---|---|---|")
    for m in list(dict.fromkeys([*b, *a])):
        e1, e2 = a.get(m), b.get(m)
        e = e2 or e1
        exact = e.get("exact_match_rate")
        print(f"| {m} | {e['backend']} | {fmt(e1, 'speedup_vs_fastest_ar', '.2f')}x | {fmt(e2, 'speedup_vs_fastest_ar', '.2f')}x "
              f"| {fmt(e1, 'tokens_per_s', '.1f')} / {fmt(e2, 'tokens_per_s', '.1f')} "
              f"| {fmt(e, 'mean_accepted_tokens', '.2f')} "
              f"| {fmt(e, 'tokens_per_forward_pass', '.2f')} | {'-' if exact is None else f'{exact:.0%}'} |")


if __name__ == "__main__":
    main(*sys.argv[1:3])
