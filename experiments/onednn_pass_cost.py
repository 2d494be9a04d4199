"""The experiment behind the onednn backend (README, "Backends"): pass times of the embedded model with plain
float32 linear layers against decoder linear layers packed for oneDNN (used for passes over 2+ tokens; the
output head stays plain here), interleaved in one process, 8 rounds, a 200-token cache.

    PYTHONPATH=. .venv/bin/python assets/results/onednn_pass_cost.py THREADS

Measured 2026-12-01 (2-core AMD EPYC, idle): 1 thread c(4) 1.38 -> 1.17, 2 threads c(2..4) 1.31-1.58 -> 0.99-1.01;
max |logit difference| 3.1e-5, same argmax. The shipped version is ``pass_core.backends.PackedLinear``.
"""
import sys, time, statistics, torch
import torch.nn.functional as F
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
from pass_core.models import load_model
from pass_core.target import target_forward, plain_head
from pass_core.cache import new_cache, crop_to
MODE = {"on": False, "min": 2}
class Hybrid(torch.nn.Linear):
    def forward(self, x):
        rows = x.numel() // x.shape[-1]
        if not MODE["on"] or rows < MODE["min"]:
            return F.linear(x, self.weight, self.bias)
        y = torch._C._nn.mkldnn_linear(x.reshape(rows, x.shape[-1]).to_mkldnn(), self.packed, self.packed_bias).to_dense()
        return y.reshape(*x.shape[:-1], y.shape[-1])
loaded = load_model("smollm2-135m-instruct")
m = loaded.model
n = 0
for mod in m.get_decoder().modules():
    for cname, child in list(mod.named_children()):
        if type(child) is torch.nn.Linear:
            child.__class__ = Hybrid
            child.packed = child.weight.detach().to_mkldnn()
            child.packed_bias = (child.bias if child.bias is not None else torch.zeros(child.out_features)).detach().to_mkldnn()
            n += 1
print("converted", n)
g = torch.Generator().manual_seed(0)
ids = torch.randint(0, 49152, (1, 216), generator=g)
cache, plain = new_cache(m), plain_head(m)
with torch.no_grad():
    target_forward(m, cache, torch.tensor([199]), input_ids=ids[:, :200], plain=plain)
    widths = (1, 2, 3, 4, 5, 6, 8, 12, 16)
    times = {(mo, w): [] for mo in (False, True) for w in widths}
    for r in range(8):
        for mo in (False, True):
            MODE["on"] = mo
            for w in widths:
                t = time.perf_counter()
                out = target_forward(m, cache, torch.arange(w), input_ids=ids[:, 200:200 + w], plain=plain)
                dt = time.perf_counter() - t
                crop_to(cache, 200)
                if r: times[mo, w].append(dt * 1000)
    base = statistics.median(times[False, 1])
    for mo in (False, True):
        ms = [statistics.median(times[mo, w]) for w in widths]
        print("hybrid" if mo else "plain ", " ".join(f"w{w}:{x:.1f}ms(c{x/base:.2f})" for w, x in zip(widths, ms)))
    # numerics: logits difference plain vs hybrid for w=4
    MODE["on"] = False; a = target_forward(m, cache, torch.arange(4), input_ids=ids[:, 200:204], plain=plain).logits; crop_to(cache, 200)
    MODE["on"] = True; b = target_forward(m, cache, torch.arange(4), input_ids=ids[:, 200:204], plain=plain).logits; crop_to(cache, 200)
    print("max |dlogit|", float((a - b).abs().max()), "argmax equal", bool((a.argmax(-1) == b.argmax(-1)).all()))
