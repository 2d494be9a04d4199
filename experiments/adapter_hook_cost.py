"""Time of a 4-token pass (200 cached tokens, 1 thread) with and without look-ahead adapters at 3 rows, interleaved:
plain, adapters by in-place slices (consecutive rows, the decoding passes' case) and adapters by gather + index_add
(the general path, and the only one before 2026-12-01).

    .venv/bin/python assets/results/adapter_hook_cost.py [BACKEND]     (BACKEND: fp32 (default) or onednn)

Measured 2026-12-01 (2-core AMD EPYC, idle, onednn, before its one-token passes were packed): plain 36.9 ms,
slices 43.9 ms (1.19x), index_add 44.4 ms (1.20x), max |slices - index_add| = 0. After the slice path became one
addmm_ on the rows' view (and the adapted layers are looked up once): plain 37.4 ms, slices 43.6 ms (1.16x),
index_add 44.3 ms (1.18x), max |slices - index_add| = 0.
"""
import statistics
import sys
import time

import torch

import pass_core.lookahead_adapters as adapters_module
from pass_core.backends import apply_backend
from pass_core.cache import crop_to, new_cache
from pass_core.models import load_model
from pass_core.shipped import resolve_adapters

torch.set_num_threads(1)
backend = sys.argv[1] if len(sys.argv) > 1 else "fp32"
loaded = apply_backend(load_model("smollm2-135m-instruct"), backend)
la, _ = resolve_adapters(loaded, 3)
m, dec = loaded.model, loaded.model.get_decoder()
cache = new_cache(m)
slice_rows = adapters_module.as_slice
times = {"plain": [], "slices": [], "index_add": []}
with torch.inference_mode():
    m(input_ids=torch.randint(0, 1000, (1, 200)), cache=cache, use_cache=True)
    x = torch.randint(0, 1000, (1, 4))
    rows = torch.arange(1, 4)
    outs = {}
    for i in range(45):
        for kind in times:
            adapters_module.as_slice = slice_rows if kind == "slices" else (lambda r: r)
            t = time.perf_counter()
            if kind == "plain":
                out = m.base_model(input_ids=x, cache=cache, use_cache=True)
            else:
                with la.adapters.gated(dec, rows):
                    out = m.base_model(input_ids=x, cache=cache, use_cache=True)
            times[kind].append(time.perf_counter() - t)
            outs[kind] = out.last_hidden_state
            crop_to(cache, 200)
med = {k: statistics.median(v[5:]) * 1e3 for k, v in times.items()}
print(f"4-token pass, 200 cached, 1 thread, backend {backend}: plain {med['plain']:.1f} ms; adapters at 3 rows: "
      f"slices {med['slices']:.1f} ms ({med['slices'] / med['plain']:.2f}x), index_add {med['index_add']:.1f} ms "
      f"({med['index_add'] / med['plain']:.2f}x); max |slices - index_add| = "
      f"{(outs['slices'] - outs['index_add']).abs().max().item():.2e}")
