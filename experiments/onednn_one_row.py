"""The experiment behind the onednn backend's one-token passes (README, "Backends"): a one-token pass (and
2- and 4-token passes) of the embedded model after a 200-token cache, with the decoder's linear layers on
the plain float32 GEMV for one row (the onednn backend before 2026-12-01) against the packed oneDNN kernel
for every row count (now), interleaved in one process (the order alternates each round), 25 rounds, the
first 3 dropped, medians in ms.

    PYTHONPATH=. .venv/bin/python assets/results/onednn_one_row.py THREADS

Measured 2026-12-01 (2-core AMD EPYC, idle, two runs each): 1 thread 34.2 / 35.2 ms -> 31.5 / 33.3 ms,
2 threads 32.1 / 34.4 ms -> 28.3 / 29.0 ms; max |logit difference| 1.8e-5, same argmax.
"""
import sys, time, statistics, torch
torch.set_num_threads(int(sys.argv[1]))
from pass_core.models import load_model
from pass_core.backends import apply_backend, PackedLinear
from pass_core.target import target_forward, plain_head
from pass_core.cache import new_cache, crop_to
loaded = apply_backend(load_model("smollm2-135m-instruct"), "onednn")
m = loaded.model
head = m.get_output_embeddings()
dec = [mod for mod in m.modules() if isinstance(mod, PackedLinear) and mod is not head]
def mode(one):
    for mod in dec: mod.min_rows = 1 if one else 2  # 2: one-row passes on the plain GEMV (the backend before)
ids = torch.randint(0, 49152, (1, 216), generator=torch.Generator().manual_seed(0))
cache, plain = new_cache(m), plain_head(m)
with torch.no_grad():
    target_forward(m, cache, torch.tensor([199]), input_ids=ids[:, :200], plain=plain)
    t = {(o, w): [] for o in (0, 1) for w in (1, 2, 4)}
    for r in range(25):
        for o in ((1, 0) if r % 2 else (0, 1)):
            mode(o)
            for w in (1, 2, 4):
                s = time.perf_counter()
                out = target_forward(m, cache, torch.arange(w), input_ids=ids[:, 200:200+w], plain=plain)
                t[o, w].append((time.perf_counter() - s) * 1000); crop_to(cache, 200)
    for o in (0, 1):
        print("packed-1row" if o else "gemv-1row  ", {w: round(statistics.median(t[o, w][3:]), 1) for w in (1, 2, 4)})
    mode(0); a = target_forward(m, cache, torch.arange(1), input_ids=ids[:, 200:201], plain=plain).logits; crop_to(cache, 200)
    mode(1); b = target_forward(m, cache, torch.arange(1), input_ids=ids[:, 200:201], plain=plain).logits; crop_to(cache, 200)
    print("max dlogit", float((a-b).abs().max()), bool((a.argmax(-1)==b.argmax(-1)).all()))
