"""Benchmark: ``python -m pass_core.bench`` runs the decoding methods over a prompt suite.

Protocol (docs/algorithms.md section 7): load the model once, warm up each method once, then for
every temperature, prompt and repeat run AR and, right after it, every other method at every
L. AR does not depend on L, so one AR run serves all L values of that prompt and repeat.
Runs never overlap; each decoder times only its model work (``StepEvent.step_s``, device
synchronised). Speed-up of one repeat = (tokens / compute time of the method over the whole
suite) / (the same for AR in that repeat); the report gives the median and min / max over
repeats. Every other metric (docs/algorithms.md section 6) is ``summarize()`` of the concatenated
events of all runs, so counts are summed over prompts, never averaged per prompt.
"""

from __future__ import annotations

from contextlib import nullcontext
import json
import shlex
import sys
import time
from pathlib import Path

import torch

from pass_core.runtime.backend_choice import BusyCore, choice_line
from pass_core.runtime.backends import prepare_backend, resolve_backend, set_cpu_threads
from pass_core.bench.summary import (BenchRun, RunKey, aggregate, greedy_notes,  # noqa: F401 (setting_key re-exported)
                                     setting_key)
from pass_core.bench.report import HTML_MOVED, machine_info, markdown_report, training_records
from pass_core.decoding.events import StepEvent, output_token_ids
from pass_core.runtime.models import load_model, pick_device
from pass_core.runtime.outputs import check_output_path, json_with, write_text_atomically
from pass_core.runtime.pass_cost import cpu_busy, cpu_load, measure_pass_cost, pass_cost_markdown
from pass_core.registry import BASELINE, METHODS
from pass_core.decoding.settings import SETTING_RANGES, DecodeSettings, command_line_message
from pass_core.decoding.text import count
from pass_core.bench.copies import load_backend_copies, method_backend, split_backend
from pass_core.bench.suites import SUITES, BenchPrompt, fitting_prompts, load_suite  # noqa: F401 (the bench's API)
from pass_core.bench.cli import build_parser, check_methods, csv_values, split_variant
from pass_core.bench.peers import PEERS, check_peers, generate_peer, wall_time_note

WARMUP_TOKENS = 8

#: The most runs per prompt and method (``--repeats``).
MAX_REPEATS = 1000


def is_ar_like(name: str) -> bool:
    """True for AR on any backend and for the peers: runs that do not depend on L."""
    return name in PEERS or split_backend(name)[0] == BASELINE


#: The ``method_notes`` key of a run stopped with Ctrl-C (``run_bench``): its report holds the rounds made.
INTERRUPTED = "interrupted"


def schedule(methods: list[str], lookaheads: list[int], temperatures: list[float],
             num_prompts: int, repeats: int) -> list[RunKey]:
    """The run order: per T, prompt and repeat, AR first, then AR on other backends and the peers, then every
    (L, method) right after them.

    Interleaving the methods per prompt and repeat (A B A B ...) makes slow machine drift
    hit every method alike.
    """
    keys = []
    for t in temperatures:
        for i in range(num_prompts):
            for r in range(repeats):
                if BASELINE in methods:
                    keys.append(RunKey(BASELINE, None, t, r, i))
                keys += [RunKey(m, None, t, r, i) for m in methods if m != BASELINE and is_ar_like(m)]
                keys += [RunKey(m, n, t, r, i) for n in lookaheads for m in methods if not is_ar_like(m)]
    return keys


def run_bench(loaded, prompts: list[BenchPrompt], methods: list[str], lookaheads: list[int],
              temperatures: list[float], base: DecodeSettings, repeats: int,
              progress: bool = True, models: dict | None = None) -> tuple[list[BenchRun], dict[str, str]]:
    """Warm up, then run ``schedule(...)`` one decoder at a time.

    The seed of repeat r is ``base.seed + r`` for every method (sampling only). ``loaded`` runs the entries
    without a backend suffix; ``models`` maps a backend name to its own loaded copy, for "method@backend"
    entries (and for the peers: "fp32" when present, the plain eager model a transformers user gets).

    Returns:
        (the runs in the order they ran, {"method L=n": which look-ahead embeddings were used}).
    """
    from tqdm.auto import tqdm

    models = models or {}

    def model_for(name: str):
        if name in PEERS:
            return models.get("fp32", loaded)
        return models[split_backend(name)[1]] if split_backend(name)[1] else loaded

    state, notes = {}, {}
    for m in methods:
        for n in lookaheads if not is_ar_like(m) else ():
            state[m, n], note = METHODS[split_variant(m)[0]].find_files(model_for(m), n)
            if note:
                notes[f"{m} L={n}"] = note
                if progress:
                    print(f"{m} L={n}: {note}", file=sys.stderr)

    def run(key: RunKey, **changes) -> list[StepEvent]:
        prompt = prompts[key.prompt_index].prompt
        if key.method in PEERS:
            settings = base.with_(temperature=key.temperature, seed=base.seed + key.repeat, **changes)
            return generate_peer(model_for(key.method), key.method, prompt, settings)
        method, variant = split_variant(key.method)
        variant = {"fused": base.fused and METHODS[method].fusable, **variant}  # --fused: the fusable methods only
        settings = base.with_(temperature=key.temperature, num_lookahead=key.num_lookahead or lookaheads[0],
                              seed=base.seed + key.repeat, **variant, **changes)
        return list(METHODS[method].decode(model_for(key.method), prompt, settings,
                                           state.get((key.method, key.num_lookahead))))

    methods = list(methods)
    for m in list(methods):  # warm-up: first calls pay for allocations and kernel selection
        try:
            run(RunKey(m, None if is_ar_like(m) else lookaheads[0], temperatures[0], 0, 0),
                max_new_tokens=min(WARMUP_TOKENS, base.max_new_tokens))
        except ValueError as exc:  # e.g. +tree when this machine's pass-cost curve is not physical: the rest runs
            methods.remove(m)
            notes[m] = f"skipped: {exc}"
            print(f"{m}: skipped: {exc}", file=sys.stderr)
    runs, keys = [], schedule(methods, lookaheads, temperatures, len(prompts), repeats)
    try:
        for key in tqdm(keys, desc="bench", unit="run", disable=not progress, file=sys.stderr):
            runs.append(BenchRun(key, prompts[key.prompt_index].category, run(key)))
    except KeyboardInterrupt:  # Ctrl-C: a report of the complete rounds (every method on a prompt), not nothing
        group = len(keys) // (len(temperatures) * len(prompts) * repeats)  # the runs of one (T, prompt, repeat)
        kept = len(runs) - len(runs) % group
        notes[INTERRUPTED] = (f"Ctrl-C after {len(runs)} of {len(keys)} runs: this report holds the first {kept}, "
                              f"{kept // group} complete round(s) of every method on one prompt and repeat")
        runs = runs[:kept]
    return runs, notes


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print markdown; exit 1 if a greedy run differs from AR (a bug)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        named = [m.strip() for m in args.methods.split(",") if m.strip()]
        if not named:  # --methods "" ran AR alone and said nothing
            raise ValueError(f"--methods {args.methods!r} names no method: give one or more of {', '.join(METHODS)}.")
        methods = list(dict.fromkeys([BASELINE] + named))
        fused_note = check_methods(methods, args.fused)  # raises for an unknown method, variant or backend
        methods += check_peers([b.strip() for b in args.baselines.split(",") if b.strip()])
        lookaheads = csv_values(args.num_lookahead, int, "--num-lookahead")
        temperatures = csv_values(args.temperature, float, "--temperature")
        given = {"--repeats": args.repeats, "--limit": args.limit, "--threads": args.threads}  # None: not given
        low = [f"{name} {value}" for name, value in given.items() if value is not None and value < 1]
        if low:  # --limit 0 once ran nothing and exited 0
            raise ValueError(f"{', '.join(low)}: --repeats, --limit and --threads must be at least 1.")
        if args.repeats > MAX_REPEATS:  # 1e9 built its schedule for minutes, in gigabytes, before the first run
            raise ValueError(f"--repeats {args.repeats:,}: at most {MAX_REPEATS:,} runs per prompt and method.")
        base = DecodeSettings(max_new_tokens=args.max_new_tokens, top_k=args.top_k, top_p=args.top_p,
                              seed=args.seed, fused=args.fused)
        for n in lookaheads:
            for t in temperatures:
                base.with_(num_lookahead=n, temperature=t)  # validates every setting before loading
        high = SETTING_RANGES["seed"][1]
        if args.seed + args.repeats - 1 > high:  # repeat r runs seed + r: it quoted a seed nobody gave
            raise ValueError(f"--seed {args.seed} with --repeats {args.repeats} runs seeds up to "
                             f"{args.seed + args.repeats - 1:,}: the last must be at most {high:,}.")
        if args.suite == "none" and not args.pass_cost:
            raise ValueError("--suite none runs nothing: add --pass-cost (the curve alone) or name a suite.")
        prompts = [] if args.suite == "none" else load_suite(args.suite)[: args.limit]
        if args.html:  # pass_core never imports plotly: the figures live with the UI (playground/)
            raise ValueError(HTML_MOVED)
        if args.json:  # before the run: a report that cannot be written at its end would lose the run
            if Path(args.suite).is_file() and Path(args.json).resolve() == Path(args.suite).resolve():
                raise ValueError(f"--json {args.json} is the --suite file: the report would replace the prompts. "
                                 "Give the report another name.")
            check_output_path(args.json, "--json", "bench.json", "the report is a JSON file (python -m "
                              "playground.bench_html draws it)", json_with("summary", "machine"))
        set_cpu_threads(args.threads)
    except ValueError as err:
        parser.error(command_line_message(err))
    if fused_note:
        print(fused_note, file=sys.stderr)
    start = time.perf_counter()
    log = lambda msg: print(msg, file=sys.stderr)  # noqa: E731
    try:
        device = pick_device(args.device)
        backend, dtype = resolve_backend(args.backend, args.dtype, device)
        loaded = load_model(args.model, device=args.device, dtype=dtype, progress=log)
        if backend:
            prepare_backend(loaded, backend, args.threads, progress=log)
        if loaded.backend_choice:
            log(choice_line(loaded.backend_choice))
        methods, models, skipped = load_backend_copies(args, methods, loaded, device, log)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    given, (prompts, left_out) = len(prompts), fitting_prompts(loaded, prompts, base, max(lookaheads))
    for name, note in left_out.items():
        print(f"{name}: {note}", file=sys.stderr)
    if given and not prompts:
        none = "the prompt does not fit" if given == 1 else f"none of the {given} prompts fits"
        reasons = "the reason is" if given == 1 else "the reasons are"
        print(f"error: {none} the model's context ({reasons} above).", file=sys.stderr)
        return 2
    print(f"model: {loaded.describe()}; {count(len(prompts), 'prompt')}", file=sys.stderr)
    load, cores = cpu_load()
    if loaded.device.type == "cpu" and cpu_busy(load, cores):
        print(f"warning: the CPU is busy (load {load:.1f} on {cores} cores): timings will be noisy; "
              "on a shared CPU --threads 1 avoids the worst slow-downs", file=sys.stderr)
    curve = None
    if args.pass_cost:
        curve = measure_pass_cost(loaded)
        print(pass_cost_markdown(curve) + "\n")
    with BusyCore() if args.busy_core else nullcontext():
        runs, notes = run_bench(loaded, prompts, methods, lookaheads, temperatures, base, args.repeats,
                                progress=not args.no_progress, models=models) if prompts else ([], {})
    notes.update(skipped)
    notes.update(left_out)
    if any(m in PEERS for m in methods):
        notes["hf-* peers"] = wall_time_note()
    backends = {m: method_backend(m, loaded, models) for m in methods}
    report = {
        "command": "python -m pass_core.bench " + shlex.join(sys.argv[1:] if argv is None else argv),
        "machine": machine_info(loaded),
        "settings": {**{k: v for k, v in base.to_dict().items() if k not in ("num_lookahead", "temperature")},
                     "suite": args.suite, "num_prompts": len(prompts), "methods": methods,
                     "num_lookahead": lookaheads, "temperatures": temperatures, "repeats": args.repeats,
                     "model": loaded.name, "model_description": loaded.describe(), "limit": args.limit,
                     "threads": torch.get_num_threads(), "warmup_tokens": WARMUP_TOKENS,
                     "method_backends": backends, "backend_choice": loaded.backend_choice,
                     "busy_core": args.busy_core,
                     "backend": loaded.backend_name},
        "method_notes": notes,
        **({"pass_cost": curve} if curve else {}),
        "training": training_records(loaded, methods, lookaheads[-1]),
        "summary": aggregate(runs, lookaheads, temperatures, loaded.dtype_name,
                             backends=backends),
        "runs": [{"method": r.key.method, "num_lookahead": r.key.num_lookahead, "temperature": r.key.temperature,
                  "repeat": r.key.repeat, "prompt_index": r.key.prompt_index, "category": r.category,
                  "tokens": len(output_token_ids(r.events)), "steps": len(r.events),
                  "compute_time_s": sum(e.step_s for e in r.events),
                  "finish_reason": r.events[-1].finish_reason if r.events else None} for r in runs],
    }
    report["wall_s"] = time.perf_counter() - start
    failed = False
    if INTERRUPTED in notes and not runs and prompts:  # Ctrl-C before the first complete round: it said "every
        # method was skipped" and wrote a report with an empty summary
        print("interrupted (Ctrl-C) before the first complete round: nothing was measured, so no report was written.",
              file=sys.stderr)
        return 130
    if args.json:
        try:
            write_text_atomically(args.json, json.dumps(report, indent=1))
        except OSError as err:  # the table is printed below; the greedy check still runs
            print(f"error: the report {args.json} could not be written ({err.strerror or err}); nothing was "
                  "changed there", file=sys.stderr)
            failed = True
    if runs:  # after the report's file: a stdout that cannot be written (> /dev/full) lost it
        print(markdown_report(report))
    did = f"warm-up and {count(len(runs), 'run')}" if prompts else "the pass-cost curve"  # --suite none: the curve
    print(f"\nwall time {report['wall_s']:.1f} s (model loaded, {did})", file=sys.stderr)
    if not runs and prompts:  # each method skipped (a prompt too long for every one): nothing measured
        failed = True
        print("error: no run was made: every method was skipped (the reasons are above), so nothing was measured.",
              file=sys.stderr)
    tie_notes, bad = greedy_notes(report["summary"], report["machine"]["dtype"])
    for note in tie_notes:
        print(note, file=sys.stderr)
    if bad:
        print(f"BUG: greedy output differs from AR for {', '.join(bad)} (the decoders must be lossless).",
              file=sys.stderr)
        return 1
    if INTERRUPTED in notes:  # after the report of the rounds made, the shell's code for Ctrl-C
        print(f"{INTERRUPTED}: {notes[INTERRUPTED]}", file=sys.stderr)
        return 130
    return 1 if failed else 0

