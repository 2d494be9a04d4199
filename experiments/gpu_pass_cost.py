"""On a GPU: the pass-cost curve c(w) of a SmolLM2-135M-shaped Llama (random weights: timing does
not depend on the values), float32 and bfloat16, caches of 200 and 1000 tokens.

Run from the repository root with a folder .gpu/ holding SmolLM2's config.json and tokenizer.json
(from the dequantised model cache) and, where the GPU machine's transformers is older, the
transformers 5.24.0 wheel on PYTHONPATH. Writes $OUT/gpu_pass_cost.json
(assets/results/gpu-h200-pass-cost.json: one H200, torch 2.11.0+cu130, 2026-11-30)."""
import json, os, sys, time
import torch, transformers
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast
sys.path.insert(0, os.getcwd())
from pass_core.models import LoadedModel
from pass_core.pass_cost import measure_pass_cost, pass_cost_markdown

out = {"torch": torch.__version__, "transformers": transformers.__version__, "gpu": torch.cuda.get_device_name(0)}
cfg = AutoConfig.from_pretrained(".gpu")
tok = PreTrainedTokenizerFast(tokenizer_file=".gpu/tokenizer.json")
for dtype in (torch.float32, torch.bfloat16):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).to("cuda", dtype).eval().requires_grad_(False)
    loaded = LoadedModel(model=model, tokenizer=tok, name="smollm2-135m-shape (random weights)", source="random init",
                         device=torch.device("cuda"), dtype=dtype)
    for cache_len in (200, 1000):
        t = time.time()
        curve = measure_pass_cost(loaded, cache_len=cache_len, repeats=30)
        curve["wall_s"] = time.time() - t
        out[f"{str(dtype).replace('torch.', '')}-cache{cache_len}"] = curve
        print(pass_cost_markdown(curve), flush=True)
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "gpu_pass_cost.json"), "w"), indent=1)
