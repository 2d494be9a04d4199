"""AR on the fp32 backend against AR on onednn (the default), interleaved in one process: two copies of the embedded
model, the 12 quick-suite prompts, greedy, 48 new tokens, the order alternating per prompt, 2 rounds after a warm-up.

    PYTHONPATH=. .venv/bin/python assets/results/ar_fp32_vs_onednn.py THREADS

Measured 2026-12-01 (2-core AMD EPYC, idle): 2 threads fp32 26.4, onednn 33.2 tokens/s; 1 thread fp32 26.7, onednn
27.9 tokens/s; the same tokens on both.
"""
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
from pass_core.models import load_model
from pass_core.backends import apply_backend
from pass_core.autoregressive import generate_autoregressive
from pass_core.settings import DecodeSettings
models = {"fp32": apply_backend(load_model("smollm2-135m-instruct"), "fp32"),
          "onednn": apply_backend(load_model("smollm2-135m-instruct"), "onednn")}
prompts = [json.loads(line)["prompt"] for line in open("assets/bench/quick.jsonl")]
settings = DecodeSettings(max_new_tokens=48, temperature=0.0)
sec, tok, out = {k: 0.0 for k in models}, {k: 0 for k in models}, {k: [] for k in models}
for loaded in models.values():
    list(generate_autoregressive(loaded, prompts[0], settings))
for r in range(2):
    for i, p in enumerate(prompts):
        for name in (("fp32", "onednn") if (r + i) % 2 else ("onednn", "fp32")):
            t = time.perf_counter()
            events = list(generate_autoregressive(models[name], p, settings))
            sec[name] += time.perf_counter() - t
            ids = [x for e in events for x in e.new_token_ids]
            tok[name] += len(ids)
            out[name].append(ids)
for name in models:
    print(f"AR on {name}: {tok[name] / sec[name]:.1f} tokens/s ({sec[name]:.1f} s)")
print("same tokens:", out["fp32"] == out["onednn"])
