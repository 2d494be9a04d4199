"""Which cheaper copy of the target should draft for it (method draft-model's offline default)?

For each candidate: its cost per draft token (a one-token pass after ~150 cached tokens, median of interleaved
repeats, relative to the target's one-token pass on the same backend), its greedy top-1 agreement with the target
(teacher-forced over the target's own greedy continuations of the quick suite's prompts, 48 tokens each), and
the speed-up this predicts for k = 1..4 drafts from the truncated-geometric law (docs/algorithms.md section 4):
S = E_k / (c(k + 1) + k c_d), with E_k = (1 - a^(k+1)) / (1 - a) and c(w) the pass-cost curve.

    .venv/bin/python experiments/draft_model_candidates.py [--threads 1] [--backend auto] [--json out.json]

Results (2026-12-01/02, 1 thread, backend fp32 chosen by auto, a 2-core AMD EPYC under a load average of 6-10 from
other jobs, so the ms are 7-10x the idle ones and the costs rough; the agreements are exact):
cpu-draft-model-candidates-t1-a.json (all 16 quick prompts, 48 tokens; first 4/8/12/15/20 layers, int8 of every
linear layer, bf16) and -b.json (8 prompts, 32 tokens; first 10/20, int8 of the decoder, int8-all, bf16).
Agreement: bf16 0.988 / 0.992, int8 (decoder) 0.559, int8-all 0.563 / 0.523, first n layers 0.04-0.18.
Cost per draft token: bf16 0.77 / 0.74, int8 0.63, int8-all 0.86 / 0.51, first n about n / 30 + the head.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from pass_core.bench.suites import load_suite
from pass_core.decoding.cache import crop_to, new_cache
from pass_core.decoding.events import output_token_ids
from pass_core.decoding.settings import DecodeSettings
from pass_core.decoding.text import encode_prompt
from pass_core.drafters.draft_model.models import built_in, first_layers
from pass_core.registry import METHODS
from pass_core.runtime.backends import prepare_backend, set_cpu_threads
from pass_core.runtime.models import load_model
from pass_core.runtime.pass_cost import measure_pass_cost

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, default=1)
p.add_argument("--backend", default="auto")
p.add_argument("--layers", default="4,8,12,15,20")
p.add_argument("--tokens", type=int, default=48)
p.add_argument("--prompts", type=int, default=0, help="use every n-th prompt of the suite (0: all)")
p.add_argument("--only", default="int8,int8-all,bf16", help="built-in candidates besides first-N")
p.add_argument("--json")
args = p.parse_args()
set_cpu_threads(args.threads)
loaded = prepare_backend(load_model(), args.backend, args.threads)
target = loaded.model
total = len(target.get_decoder().layers)
candidates = {f"first-{n}": first_layers(target, n) for n in map(int, args.layers.split(","))}
for name in filter(None, args.only.split(",")):
    candidates[name] = built_in(loaded, name).model
for m in candidates.values():
    m.eval().requires_grad_(False)


@torch.inference_mode()
def pass_time(model, context: torch.Tensor, repeats: int) -> list[float]:
    cache = new_cache(model)
    model(input_ids=context, cache=cache, use_cache=True, logits_to_keep=1)
    n = context.shape[1]
    x = context[:, -1:]
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        model(input_ids=x, cache=cache, use_cache=True, logits_to_keep=1)
        times.append(time.perf_counter() - t)
        crop_to(cache, n)
    return times


context = torch.randint(100, 40000, (1, 150))
times = {name: [] for name in ["target", *candidates]}
for _ in range(3):  # interleaved rounds: drift hits every model alike
    for name, model in [("target", target), *candidates.items()]:
        times[name] += pass_time(model, context, 15)
ms = {name: statistics.median(t) * 1000 for name, t in times.items()}
cost = {name: ms[name] / ms["target"] for name in ms}

prompts = load_suite("quick")[:: args.prompts or 1]
print("costs (ms per one-token pass): " + ", ".join(f"{k} {v:.2f}" for k, v in ms.items()), flush=True)
settings = DecodeSettings(max_new_tokens=args.tokens, temperature=0.0)
agree = {name: [0, 0] for name in candidates}
by_category: dict[str, dict[str, list[int]]] = {}
with torch.inference_mode():
    for bp in prompts:
        ids = encode_prompt(loaded.tokenizer, bp.prompt, True)
        out = output_token_ids(METHODS["ar"].decode(loaded, bp.prompt, settings))
        seq = torch.tensor([ids + out])
        rows = slice(len(ids) - 1, len(ids) + len(out) - 1)  # predicting each output token
        truth = target(input_ids=seq).logits[0, rows].argmax(-1)
        print(f"agreement: {bp.category} prompt done", flush=True)
        for name, model in candidates.items():
            guess = model(input_ids=seq).logits[0, rows].float().argmax(-1)
            same = int((guess == truth).sum())
            agree[name][0] += same
            agree[name][1] += len(out)
            cat = by_category.setdefault(bp.category, {}).setdefault(name, [0, 0])
            cat[0] += same
            cat[1] += len(out)

curve = measure_pass_cost(loaded, widths=range(1, 6))["c"]
rows_out = {}
print(f"target one-token pass {ms['target']:.2f} ms ({loaded.describe()}, {args.threads} thread(s)); c(w) = "
      + ", ".join(f"{c:.2f}" for c in curve))
print(f"{'candidate':10} {'ms/token':>9} {'cost':>6} {'agree':>6}  predicted speed-up k=1..4")
for name in candidates:
    a = agree[name][0] / agree[name][1]
    predicted = []
    for k in range(1, 5):
        e = (1 - a ** (k + 1)) / (1 - a) if a < 1 else k + 1
        predicted.append(e / (curve[k] + k * cost[name]))
    rows_out[name] = dict(ms=ms[name], cost=cost[name], agreement=a, predicted=predicted,
                          by_category={c: v[name][0] / v[name][1] for c, v in by_category.items()})
    print(f"{name:10} {ms[name]:9.2f} {cost[name]:6.2f} {a:6.3f}  " + " ".join(f"{s:.2f}" for s in predicted))
if args.json:
    with open(args.json, "w") as f:
        json.dump(dict(target_ms=ms["target"], curve=curve, threads=args.threads, backend=loaded.backend,
                       candidates=rows_out), f, indent=1)
