"""ParallelSpec's confidence gate on the default backend: the shipped k=3 drafter with its calibrated gate (0.3) and
lower ones, against AR, interleaved in one process (per prompt: AR, then every gate, the order rotating each
prompt); the 12 quick-suite prompts, greedy, 48 new tokens, onednn, 2 rounds after a warm-up.

    PYTHONPATH=. .venv/bin/python assets/results/parallelspec_gate.py THREADS [GATE ...]   (default gates 0.3 0.2 0.1 0)

Measured 2026-12-01 (2-core AMD EPYC, idle, 2 threads, two runs): AR 33.7 / 33.1 tokens/s; gate 0.3 (the shipped
drafter's calibrated value) 1.17x / 1.19x, 0.2 1.16x, 0.1 1.15x, 0 (no gate) 1.13x, 0.4 1.17x, 0.5 1.15x; every
output equal to AR's.
"""
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
from pass_core.models import load_model
from pass_core.backends import apply_backend
from pass_core.registry import METHODS
from pass_core.settings import DecodeSettings
loaded = apply_backend(load_model("smollm2-135m-instruct"), "onednn")
ps = METHODS["parallelspec"]
drafter, _ = ps.find_files(loaded, 3)
prompts = [json.loads(line)["prompt"] for line in open("assets/bench/quick.jsonl")]
settings = DecodeSettings(max_new_tokens=48, temperature=0.0, num_lookahead=3)
kinds = ["ar", *(map(float, sys.argv[2:]) if len(sys.argv) > 2 else (0.3, 0.2, 0.1, 0.0))]
sec, tok, out, verify = ({k: 0.0 for k in kinds}, {k: 0 for k in kinds}, {k: [] for k in kinds},
                         {k: [0, 0] for k in kinds})
def run(kind, prompt):
    if kind == "ar":
        return list(METHODS["ar"].decode(loaded, prompt, settings, None))
    drafter.info["min_confidence"] = kind
    return list(ps.decode(loaded, prompt, settings, drafter))
for kind in kinds:
    run(kind, prompts[0])
for r in range(2):
    for i, p in enumerate(prompts):
        order = kinds[i % len(kinds):] + kinds[:i % len(kinds)]
        for kind in order:
            t = time.perf_counter()
            events = run(kind, p)
            sec[kind] += time.perf_counter() - t
            ids = [x for e in events for x in e.new_token_ids]
            tok[kind] += len(ids)
            out[kind].append(ids)
for kind in kinds:
    print(f"{'AR' if kind == 'ar' else f'gate {kind}'}: {tok[kind] / sec[kind]:.1f} tokens/s, "
          f"{tok['ar'] / sec['ar'] and (tok[kind] / sec[kind]) / (tok['ar'] / sec['ar']):.2f}x AR, "
          f"same tokens as AR: {out[kind] == out['ar']}")
