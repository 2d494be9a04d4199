"""Before/after of the "one speculative loop" refactor (issue 11): the old decoders (commit 829d4b0,
imported as ``pass_core_old``) and the new loop, interleaved per prompt in one process on one model
(quick suite, greedy, 48 tokens, L=3, 1 thread). Each method's speed-up is against its own AR.

Setup (from the repository root):
    mkdir -p /tmp/old && git archive 829d4b0 pass_core | tar -x -C /tmp/old
    mv /tmp/old/pass_core /tmp/old/pass_core_old && ln -sfn "$PWD/assets" /tmp/old/assets
    .venv/bin/python assets/results/before_after_one_loop.py   # writes /tmp/beforeafter.json
"""
import sys, time, json, statistics
sys.path.insert(0, "/tmp/old")
import torch
torch.set_num_threads(1)
from pass_core.models import load_model
from pass_core.registry import METHODS
from pass_core.bench import load_suite
from pass_core.events import summarize, output_token_ids
from pass_core_old.events import summarize as old_summarize
from pass_core.settings import DecodeSettings
import pass_core_old.methods as old
from pass_core_old.settings import DecodeSettings as OldSettings

loaded = load_model()
prompts = load_suite("quick")
new_s = DecodeSettings(max_new_tokens=48, num_lookahead=3)
old_s = OldSettings(max_new_tokens=48, num_lookahead=3)
state = {k: METHODS[k].find_files(loaded, 3)[0] for k in ("pass", "parallelspec")}
old_la, _ = old.resolve_lookahead(loaded, 3)
old_dr, _ = old.resolve_drafter(loaded, 3)
variants = {
    "new ar": lambda p, s=new_s: METHODS["ar"].decode(loaded, p, s),
    "old ar": lambda p, s=old_s: old.make_decoder("ar", loaded, p, s),
    "new pass": lambda p, s=new_s: METHODS["pass"].decode(loaded, p, s, state["pass"]),
    "old pass": lambda p, s=old_s: old.make_decoder("pass", loaded, p, s, lookahead=old_la),
    "new pass-fused": lambda p, s=new_s.with_(fused=True): METHODS["pass"].decode(loaded, p, s, state["pass"]),
    "old pass-fused": lambda p, s=old_s.with_(fused=True): old.make_decoder("pass", loaded, p, s, lookahead=old_la),
    "new parallelspec": lambda p, s=new_s: METHODS["parallelspec"].decode(loaded, p, s, state["parallelspec"]),
    "old parallelspec": lambda p, s=old_s: old.make_decoder("parallelspec", loaded, p, s, drafter=old_dr),
}
for name, make in variants.items():  # warm-up
    list(make("Hello there"))
events = {name: [] for name in variants}
ids = {name: [] for name in variants}
t0 = time.time()
for i, pr in enumerate(prompts):
    order = list(variants) if i % 2 == 0 else list(reversed(variants))
    for name in order:
        ev = list(variants[name](pr.prompt))
        events[name] += ev
        ids[name].append(output_token_ids(ev))
    print(i, f"{time.time() - t0:.0f}s", file=sys.stderr)
out = {}
for name, ev in events.items():
    gen, which = name.split(" ")
    s = (summarize if gen == "new" else old_summarize)(ev)
    out[name] = dict(tokens_per_s=s.tokens_per_s, ms_per_step=s.ms_per_step, tokens=s.tokens,
                     same_as_ar=sum(a == b for a, b in zip(ids[name], ids[f"{gen} ar"])) / len(prompts))
for name, r in out.items():
    gen = name.split(" ")[0]
    r["speedup_vs_own_ar"] = r["tokens_per_s"] / out[f"{gen} ar"]["tokens_per_s"]
    print(f"{name:18s} {r['tokens_per_s']:6.2f} tok/s  speed-up vs its AR {r['speedup_vs_own_ar']:.3f}  "
          f"greedy == AR {r['same_as_ar']:.0%}")
json.dump(out, open("/tmp/beforeafter.json", "w"), indent=1)
