"""torchao int8 tried for issue 14 (README, "Backends"; not kept): pass cost c(w) and the 1-token time of the
embedded model in fp32, torchao int8 weight-only and int8 dynamic-activation quantisation (linear layers except
the output head), ``measure_pass_cost`` with 9 rounds.

    .venv/bin/pip install --no-deps torchao==0.18.0   # not a project dependency
    PYTHONPATH=. .venv/bin/python assets/results/torchao_pass_cost.py 1 fp32|int8wo|int8dyn

Measured 2026-12-01 (1 thread, idle): fp32 39.7 ms, c(4) 1.38; int8wo 34.3 ms, c(4) 1.53; int8dyn 57.1 ms, c(4) 1.17.
"""
import sys, time, torch, statistics, json
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
from pass_core.models import load_model
from pass_core.pass_cost import measure_pass_cost
variant = sys.argv[2]
loaded = load_model("smollm2-135m-instruct", dtype="bfloat16" if variant.startswith("bf16") else "float32")
if variant.endswith("int8wo"):
    from torchao.quantization import quantize_, Int8WeightOnlyConfig
    quantize_(loaded.model, Int8WeightOnlyConfig(), filter_fn=lambda m, fqn: isinstance(m, torch.nn.Linear) and 'lm_head' not in fqn)
elif variant.endswith("int8dyn"):
    from torchao.quantization import quantize_, Int8DynamicActivationInt8WeightConfig
    quantize_(loaded.model, Int8DynamicActivationInt8WeightConfig(), filter_fn=lambda m, fqn: isinstance(m, torch.nn.Linear) and 'lm_head' not in fqn)
t=time.perf_counter()
curve = measure_pass_cost(loaded, widths=(1,2,4,8,16), repeats=9)
print(variant, json.dumps({k: curve[k] for k in curve if k in ("ms","c")}), f"{time.perf_counter()-t:.0f}s")
