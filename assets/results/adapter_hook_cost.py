"""Time of a 4-token pass (200 cached tokens, 1 thread) with and without look-ahead adapters at 3 rows, interleaved.

    .venv/bin/python assets/results/adapter_hook_cost.py
"""
import time, torch, statistics
torch.set_num_threads(1)
from pass_core.models import load_model
from pass_core.shipped import resolve_adapters
from pass_core.cache import new_cache, crop_to
loaded = load_model("smollm2-135m-instruct")
la, _ = resolve_adapters(loaded, 3)
m, dec = loaded.model, loaded.model.get_decoder()
cache = new_cache(m)
with torch.inference_mode():
    m(input_ids=torch.randint(0, 1000, (1, 200)), cache=cache, use_cache=True)
    x = torch.randint(0, 1000, (1, 4))
    rows = torch.arange(1, 4)
    plain, gated = [], []
    for i in range(40):
        for kind in ("p", "g"):
            t = time.perf_counter()
            if kind == "g":
                with la.adapters.gated(dec, rows):
                    m.base_model(input_ids=x, cache=cache, use_cache=True)
            else:
                m.base_model(input_ids=x, cache=cache, use_cache=True)
            (plain if kind == "p" else gated).append(time.perf_counter() - t)
            crop_to(cache, 200)
p, g = statistics.median(plain[5:]), statistics.median(gated[5:])
print(f"4-token pass, 200 cached, 1 thread: plain {p*1e3:.1f} ms, with adapters at 3 rows {g*1e3:.1f} ms, ratio {g/p:.2f}")
