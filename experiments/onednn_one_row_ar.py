"""AR decoding end to end on the onednn backend with the decoder's one-row passes on the plain GEMV (before
2026-12-01) against the packed oneDNN kernel (now), interleaved in one process: the 12 quick-suite prompts,
greedy, 48 new tokens, the two modes alternating per prompt (order swapped each round), 2 rounds.

    PYTHONPATH=. .venv/bin/python assets/results/onednn_one_row_ar.py THREADS

Measured 2026-12-01 (2-core AMD EPYC, idle): 1 thread 28.9 -> 29.3 tokens/s, 2 threads 29.6 -> 33.2 tokens/s
(GEMV -> packed), the same tokens.
"""
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
from pass_core.models import load_model
from pass_core.backends import apply_backend, PackedLinear
from pass_core.autoregressive import generate_autoregressive
from pass_core.settings import DecodeSettings
loaded = apply_backend(load_model("smollm2-135m-instruct"), "onednn")
head = loaded.model.get_output_embeddings()
dec = [m for m in loaded.model.modules() if isinstance(m, PackedLinear) and m is not head]
prompts = [json.loads(line)["prompt"] for line in open("assets/bench/quick.jsonl")]
settings = DecodeSettings(max_new_tokens=48, temperature=0.0)
seconds, tokens, outputs = {1: 0.0, 2: 0.0}, {1: 0, 2: 0}, {1: [], 2: []}
list(generate_autoregressive(loaded, prompts[0], settings))  # warm-up
for r in range(2):
    for p in prompts:
        for rows in ((1, 2) if r % 2 else (2, 1)):
            for m in dec:
                m.min_rows = rows
            t = time.perf_counter()
            events = list(generate_autoregressive(loaded, p, settings))
            seconds[rows] += time.perf_counter() - t
            ids = [tok for e in events for tok in e.new_token_ids]
            tokens[rows] += len(ids)
            outputs[rows].append(ids)
for rows in (2, 1):
    print(f"decoder packed from {rows} row(s): {tokens[rows] / seconds[rows]:.1f} tokens/s ({seconds[rows]:.1f} s)")
print("same tokens:", outputs[1] == outputs[2])
