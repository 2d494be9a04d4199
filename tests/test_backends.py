"""Backends (issue 14 item 2): names, refusals with a clear message, the bf16 backend's greedy outputs on
the embedded model (identical to bf16 AR, or differing only at near-ties within bfloat16's rounding), and the
onednn backend (packed oneDNN linear layers): the same logits as fp32 up to float32 rounding, the packed kernel
really used, autograd untouched, and greedy outputs of every method identical to AR's on the embedded model."""

from __future__ import annotations

import copy

import pytest
import torch

import app

import pass_core.runtime.backends as backends
from pass_core.bench import run as bench
from pass_core.runtime.backends import BACKENDS, PackedLinear, apply_backend, check_backend, default_backend, pack_linears
from pass_core.decoding.cache import new_cache
from pass_core.decoding.target import target_forward


def test_backend_names_and_refusals(monkeypatch):
    assert set(BACKENDS) == {"fp32", "bf16", "onednn"}
    assert default_backend("cpu") == "auto" and default_backend("cuda") == "fp32"  # auto: chosen by measuring
    assert check_backend("fp32", "cpu").dtype == "float32" and check_backend("onednn", "cpu").dtype == "float32"
    with pytest.raises(ValueError, match="Unknown backend 'turbo': choose one of auto, fp32, bf16, onednn"):
        check_backend("turbo", "cpu")
    with pytest.raises(ValueError, match="onednn backend runs on a CPU .* use --backend fp32 or bf16"):
        check_backend("onednn", "cuda")
    monkeypatch.setattr(backends, "cpu_has_native_bf16", lambda: False)
    with pytest.raises(ValueError, match="native bfloat16 matmuls .* use --backend fp32"):
        check_backend("bf16", "cpu")
    assert check_backend("bf16", "cuda").dtype == "bfloat16"  # a GPU computes bfloat16 natively


def test_refused_backend_is_a_clear_cli_error(monkeypatch, capsys, tiny_folder):
    monkeypatch.setattr(backends, "cpu_has_native_bf16", lambda: False)
    with pytest.raises(SystemExit):
        app.main(["--backend", "bf16", "--device", "cpu"])
    assert "native bfloat16 matmuls" in capsys.readouterr().err
    assert bench.main(["--suite", "none", "--pass-cost", "--model", str(tiny_folder), "--backend", "bf16",
                       "--device", "cpu"]) == 2
    assert "native bfloat16 matmuls" in capsys.readouterr().err


def greedy_comparisons(loaded, max_new_tokens: int = 16):
    """Yield ("method settings on prompt", ``OutputComparison`` against AR) for every drafting method with its
    shipped files, plain and with its fused / auto variants, on one of the first three embedded-model test prompts
    per method (rotating: method i runs prompt i mod 3, so AR runs three prompts)."""
    from pass_core.decoding.events import compare_outputs
    from pass_core.registry import METHODS
    from pass_core.decoding.settings import DecodeSettings
    from test_files_and_models import EMBEDDED_PROMPTS

    settings = DecodeSettings(max_new_tokens=max_new_tokens, num_lookahead=3)
    ar: dict[str, list] = {}
    for i, (key, method) in enumerate((k, m) for k, m in METHODS.items() if m.drafter is not None):
        prompt = EMBEDDED_PROMPTS[i % 3]
        if prompt not in ar:
            ar[prompt] = list(METHODS["ar"].decode(loaded, prompt, settings))
        state, _ = method.find_files(loaded, 3)
        for s in (settings, settings.with_(auto_drafts=True, fused=method.fusable)):
            yield f"{key} {s} on {prompt!r}", compare_outputs(ar[prompt], list(method.decode(loaded, prompt, s, state)))


@pytest.mark.slow
def test_bf16_greedy_outputs_equal_ar_up_to_near_ties(smollm, fixed_pass_cost):
    """On the bf16 backend every drafting method's greedy output equals bf16 AR's, or first differs at a near-tie
    (top-two logit margin within bfloat16 rounding, ``comparison.rounding_tolerance``): wide verification passes
    and one-token passes round differently in bfloat16. Skips where bf16 is refused (no native bfloat16)."""
    from pass_core.runtime.models import load_model

    try:
        check_backend("bf16", smollm.device)
    except ValueError as err:
        pytest.skip(str(err))
    loaded = load_model(dtype="bfloat16")  # its own copy: the session's float32 model stays as it is
    differing = 0
    for what, cmp in greedy_comparisons(loaded):
        assert cmp.identical or cmp.near_tie("bfloat16"), f"{what}: {cmp}"
        differing += not cmp.identical
    print(f"\nbf16: {differing} of {4 * 2 * 3} runs differ from AR, each at a near-tie")


def packed_copy(tiny):
    """A deep copy of a loaded model (the tiny one, or the embedded one) prepared for the onednn backend (the
    session's model stays plain)."""
    other = copy.copy(tiny)
    other.model = copy.deepcopy(tiny.model)
    return apply_backend(other, "onednn")


def test_onednn_logits_equal_fp32_and_use_the_packed_kernel(tiny, monkeypatch):
    packed = packed_copy(tiny)
    layers = [m for m in packed.model.modules() if isinstance(m, torch.nn.Linear)]
    assert layers and all(isinstance(m, PackedLinear) for m in layers)
    assert pack_linears(packed.model) == 0  # idempotent
    assert "backend onednn" in packed.describe() and "backend" not in tiny.describe()
    calls = []
    real = torch._C._nn.mkldnn_linear
    monkeypatch.setattr(torch._C._nn, "mkldnn_linear", lambda *a: calls.append(a[0].shape[0]) or real(*a))
    ids = torch.randint(0, tiny.vocab_size, (1, 30), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        for width in (1, 2, 4, 9):
            caches = new_cache(tiny.model), new_cache(packed.model)
            outs = []
            for loaded, cache in zip((tiny, packed), caches):
                target_forward(loaded.model, cache, torch.tensor([19]), input_ids=ids[:, :20])
                outs.append(target_forward(loaded.model, cache, torch.arange(width), input_ids=ids[:, 20:20 + width]))
            torch.testing.assert_close(outs[1].logits, outs[0].logits, atol=1e-4, rtol=1e-4)
    head = packed.model.get_output_embeddings()
    assert head.uses_packed(1) and not head.uses_packed(4) and head.uses_packed(9)
    assert set(calls) == {20, 1, 2, 4, 9}  # decoder layers for every pass, the head for 1 row and 9+ rows
    decoder_layers = sum(isinstance(m, PackedLinear) for m in packed.model.modules()) - 1
    assert calls.count(1) == 5 + decoder_layers  # the head of 5 one-row logits, every decoder layer of the 1-token pass


def test_onednn_leaves_autograd_and_other_dtypes_alone(tiny):
    packed = packed_copy(tiny)
    layer = next(m for m in packed.model.modules() if isinstance(m, PackedLinear) and m.in_features == 64
                 and m is not packed.model.get_output_embeddings())
    x = torch.randn(3, layer.in_features, requires_grad=True)
    layer(x).sum().backward()  # autograd: the plain float32 path, so the gradient exists and is exact
    x2 = x.detach().clone().requires_grad_(True)
    torch.nn.functional.linear(x2, layer.weight, layer.bias).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)
    bf16 = copy.deepcopy(tiny.model).to(torch.bfloat16)
    with pytest.raises(ValueError, match="packs float32 CPU weights"):
        pack_linears(bf16)


def test_onednn_greedy_equals_ar_on_tiny(tiny, fixed_pass_cost):
    """Every drafting method (and its fused / auto variants, on a fixed physical curve) on the onednn backend:
    greedy output = AR's there."""
    from lossless_helpers import run
    from pass_core.decoding.events import output_token_ids
    from pass_core.registry import METHODS
    from pass_core.decoding.settings import DecodeSettings

    packed = packed_copy(tiny)
    settings = DecodeSettings(max_new_tokens=16, num_lookahead=3)
    for prompt in ("hello world", "def f(x):"):
        ar = output_token_ids(METHODS["ar"].decode(packed, prompt, settings))
        assert ar == output_token_ids(METHODS["ar"].decode(tiny, prompt, settings))
        for key, method in METHODS.items():
            if method.drafter is None:
                continue
            for s in (settings, settings.with_(auto_drafts=True, fused=method.fusable)):
                assert output_token_ids(run(packed, key, prompt, s)) == ar, (key, s)


@pytest.mark.slow
def test_onednn_greedy_outputs_equal_ar_on_the_embedded_model(smollm, fixed_pass_cost):
    """The onednn backend keeps float32: every method's greedy output (with its shipped files, fused and auto
    variants included) is identical to AR's on the same backend, token for token."""
    loaded = packed_copy(smollm)  # its own copy: the session's model stays plain
    for what, cmp in greedy_comparisons(loaded):
        assert cmp.identical, f"{what}: {cmp}"


def test_cli_backend_and_dtype_conflicts_and_trace_folder(tiny_folder, tmp_path, capsys):
    """``--backend`` sets the dtype, so a different ``--dtype`` beside it is refused; ``--trace`` naming a folder is
    refused before the model loads; ``--json`` names the backend the run used."""
    import json

    from pass_core import generate

    for main, args in ((generate.main, ["--prompt", "hi"]), (bench.main, ["--suite", "quick", "--limit", "1"])):
        assert main([*args, "--model", str(tiny_folder), "--backend", "onednn", "--dtype", "bfloat16"]) == 2
        assert "--backend onednn sets the dtype (float32): drop --dtype bfloat16" in capsys.readouterr().err
        # --backend auto too (a KeyError: 'auto' and a traceback)
        assert main([*args, "--model", str(tiny_folder), "--backend", "auto", "--dtype", "float32"]) == 2
        assert "--backend auto sets the dtype (with the backend it chooses): drop --dtype float32" in \
            capsys.readouterr().err
    with pytest.raises(SystemExit):
        generate.main(["--prompt", "hi", "--trace", str(tmp_path)])
    assert "is a folder: give a file name" in capsys.readouterr().err
    assert generate.main(["--method", "ar", "--prompt", "hi", "--model", str(tiny_folder), "--max-new-tokens", "3",
                          "--threads", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # no --backend: auto measured and chose one of the exact backends, and the run says which
    assert out["backend"] in ("fp32", "onednn") and f"backend {out['backend']}" in out["model_description"]


def test_more_threads_than_cpus_are_refused_before_any_work(tiny_folder, tmp_path, capsys, monkeypatch):
    """``--threads`` above the CPUs this process may use is refused by every command line before the model loads
    (5,000 threads hung the backend measurement for minutes; 100,000 crashed the process)."""
    from pass_core import generate
    from pass_core.runtime import backends
    from pass_core.training import lookahead, parallelspec

    cpus = backends.usable_cpus()
    assert cpus >= 1
    for module in (generate, lookahead, parallelspec):  # the model must not load
        monkeypatch.setattr(module, "load_model", lambda *a, **k: pytest.fail("loaded before the check"))
    for main, args in ((generate.main, ["--prompt", "hi"]), (bench.main, ["--suite", "quick", "--limit", "1"])):
        with pytest.raises(SystemExit):
            main([*args, "--model", str(tiny_folder), "--threads", str(cpus + 1)])
        assert f"--threads {cpus + 1}: this machine gives this process {cpus} CPU(s)" in capsys.readouterr().err
    trainer = ["--model", str(tiny_folder), "--out", str(tmp_path / "x.safetensors"), "--threads", str(cpus + 1)]
    assert lookahead.main(trainer) == 2 and f"use at most {cpus}" in capsys.readouterr().err
    with pytest.raises(ValueError, match=f"use at most {cpus}"):  # the train_drafter module says "error: ..."
        parallelspec.main(trainer)


def test_onednn_packs_a_copy_of_the_parallelspec_drafter(tiny, monkeypatch):
    """On the onednn backend ParallelSpec drafts with a packed copy of its drafter (linear layers and the
    draft-vocabulary head through oneDNN, made per run); the original stays plain; its draft logits equal the plain
    drafter's up to float32 rounding; the packed kernel really runs for the drafter's layers and head."""
    from pass_core.drafters.parallelspec.model import ParallelDrafter
    from pass_core.drafters.parallelspec.drafter import ParallelSpecDrafter, packed_for_onednn
    from pass_core.decoding.settings import DecodeSettings
    from pass_core.decoding.speculative import generate_speculative

    packed = packed_copy(tiny)
    drafter = ParallelDrafter.initialise(tiny, 3, torch.arange(0, tiny.vocab_size, 2), seed=0).for_model(tiny)
    parts = drafter.target_parts(tiny)
    rng = torch.random.get_rng_state()
    copy_a, parts_a = packed_for_onednn(drafter, parts)
    assert torch.equal(rng, torch.random.get_rng_state())  # nothing was randomly initialised
    assert copy_a is not drafter and parts.head is None and parts_a.head.weight.data_ptr() == parts.head_weight.data_ptr()
    assert not any(isinstance(m, PackedLinear) for m in drafter.modules())  # the original stays plain
    assert sum(isinstance(m, PackedLinear) for m in copy_a.modules()) == 8  # fc + q, k, v, o, gate, up, down
    context = torch.randint(0, tiny.vocab_size, (40,), generator=torch.Generator().manual_seed(1)).tolist()
    hidden = torch.randn(1, 30, tiny.d_emb, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        plain_logits = drafter.draft(parts, context, hidden, 3, drafter.new_cache())
        packed_logits = copy_a.draft(parts_a, context, hidden, 3, copy_a.new_cache())
    finite = torch.isfinite(plain_logits)
    assert torch.equal(finite, torch.isfinite(packed_logits)) and finite.sum() == 3 * len(drafter.draft_vocab)
    torch.testing.assert_close(packed_logits[finite], plain_logits[finite], atol=1e-4, rtol=1e-4)

    rows = []
    real = torch._C._nn.mkldnn_linear
    monkeypatch.setattr(torch._C._nn, "mkldnn_linear",
                        lambda x, w, b: rows.append((x.shape[0], w.shape[0], id(w))) or real(x, w, b))
    seen = {}
    events = list(generate_speculative(packed, "hello world", DecodeSettings(max_new_tokens=12, num_lookahead=3),
                                       ParallelSpecDrafter(drafter, min_confidence=0.0), method="parallelspec",
                                       inspect_fn=lambda s: seen.update(s)))
    run_drafter = seen["drafter"]
    assert run_drafter.drafter is drafter and run_drafter.pass_drafter is not drafter
    assert sum(isinstance(m, PackedLinear) for m in run_drafter.pass_drafter.modules()) == 8
    head_rows = [r for r, out, _ in rows if out == len(drafter.draft_vocab)]
    assert head_rows and set(head_rows) <= {1, 2, 3}  # the packed draft head: d_1..d_k rows
    drafter_layers = {id(m.packed_weight) for m in run_drafter.pass_drafter.modules() if isinstance(m, PackedLinear)}
    assert {w for _, _, w in rows} >= drafter_layers  # every packed drafter layer ran through oneDNN
    assert sum(e.num_verified_drafts for e in events) > 0
