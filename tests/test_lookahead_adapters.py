"""Look-ahead adapters (method ``pass-lora``, an extension; issue 13 item 4) on the tiny model: real positions
compute exactly the frozen model's logits, the adapters act at look-ahead rows only and leave no hooks behind,
files round-trip and are refused for another model, training and --resume work. The losslessness suite
(``test_lossless.py``) runs ``pass-lora`` with active adapters through every other check."""

from __future__ import annotations

import dataclasses
import threading

import pytest
import torch

from lossless_helpers import active_adapters
from pass_core.training import lookahead as train_mod
from pass_core.decoding.cache import new_cache
from pass_core.drafters.lookahead.embeddings import LookaheadEmbeddings
from pass_core.drafters.lookahead.drafter import fused_mask
from pass_core.registry import METHODS
from pass_core.drafters.shipped import resolve_adapters, shipped_adapters_path
from test_train import run_train
from tiny import tiny_loaded

SEQ = list(range(40, 70))  # 30 real tokens


def with_adapters(loaded, num_lookahead: int = 3) -> LookaheadEmbeddings:
    la = LookaheadEmbeddings.initialise(loaded, num_lookahead, "random", generator=torch.Generator().manual_seed(1))
    return dataclasses.replace(la, adapters=active_adapters(loaded))


@torch.no_grad()
def test_real_positions_equal_the_frozen_model_over_a_whole_sequence(tiny):
    """Drafting-pass layout [x_0..x_29, LA_1..LA_3] and the fused layout (one block per real token): every real
    row's logits with adapters on equal the frozen model's; the look-ahead rows do change."""
    la = with_adapters(tiny)
    weight, decoder, embed = la.for_model(tiny), tiny.model.get_decoder(), tiny.model.get_input_embeddings()
    frozen = tiny.model(input_ids=torch.tensor([SEQ])).logits[0]  # (30, V)
    x = torch.cat([embed(torch.tensor([SEQ])), weight[None]], 1)  # (1, 33, D)
    block = torch.arange(len(SEQ), len(SEQ) + la.block_len)
    plain = tiny.model(inputs_embeds=x).logits[0]
    with la.adapters.gated(decoder, block):
        gated = tiny.model(inputs_embeds=x).logits[0]
    torch.testing.assert_close(gated[: len(SEQ)], frozen, atol=1e-5, rtol=1e-5)
    assert torch.equal(gated[: len(SEQ)], plain[: len(SEQ)])  # the real rows are not touched at all
    assert (gated[len(SEQ):] - plain[len(SEQ):]).abs().max() > 1e-3, "the adapters did not act on the look-ahead rows"
    # fused layout after a cached prefix: 10 cached, 20 real tokens with one look-ahead block after each
    cache = new_cache(tiny.model)
    tiny.model(input_ids=torch.tensor([SEQ[:10]]), cache=cache, use_cache=True)
    num_real, num_blocks = 20, 20
    mask, positions = fused_mask(10, num_real, la.block_len, num_blocks, torch.float32, "cpu")
    x = torch.cat([embed(torch.tensor([SEQ[10:]])), weight.repeat(num_blocks, 1)[None]], 1)
    extra = torch.arange(num_real, num_real + num_blocks * la.block_len)
    with la.adapters.gated(decoder, extra):
        fused = tiny.model(inputs_embeds=x, attention_mask=mask, position_ids=positions, cache=cache).logits[0]
    torch.testing.assert_close(fused[:num_real], frozen[10:], atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_consecutive_rows_take_the_in_place_path_with_the_same_result(tiny, monkeypatch):
    """Consecutive look-ahead rows (every decoding pass) become a slice and the adapters add in place on a view;
    the general gather + index_add path gives the same logits, and scattered rows still work."""
    import pass_core.drafters.lookahead.adapters as module

    assert module.as_slice(torch.arange(5, 9)) == slice(5, 9) and module.as_slice(torch.tensor([7])) == slice(7, 8)
    scattered = torch.tensor([3, 5, 6])
    assert module.as_slice(scattered) is scattered and module.as_slice(None) is None
    la = with_adapters(tiny)
    decoder, embed = tiny.model.get_decoder(), tiny.model.get_input_embeddings()
    x = torch.cat([embed(torch.tensor([SEQ])), la.for_model(tiny)[None]], 1)  # (1, 33, D)
    block = torch.arange(len(SEQ), len(SEQ) + la.block_len)
    kinds = []
    real_hook = module._gated_hook
    monkeypatch.setattr(module, "_gated_hook", lambda *a, **k: kinds.append(type(k["rows"])) or real_hook(*a, **k))
    with la.adapters.gated(decoder, block):
        sliced = tiny.model(inputs_embeds=x).logits[0]
    assert set(kinds) == {slice}
    monkeypatch.setattr(module, "as_slice", lambda rows: rows)  # force the general path
    with la.adapters.gated(decoder, block):
        general = tiny.model(inputs_embeds=x).logits[0]
    assert set(kinds) == {slice, torch.Tensor}
    torch.testing.assert_close(sliced, general, atol=1e-6, rtol=1e-6)
    with la.adapters.gated(decoder, scattered):
        apart = tiny.model(inputs_embeds=x).logits[0]
    plain = tiny.model(inputs_embeds=x).logits[0]
    assert torch.equal(apart[:3], plain[:3]) and (apart[3] - plain[3]).abs().max() > 1e-3


@torch.no_grad()
def test_adapters_add_alpha_over_r_times_b_a_x_on_every_path(tiny):
    """The update is exactly (alpha / r) B A x at the gated rows, with a scale other than 1, on the slice path
    (consecutive rows), the index_add path (scattered rows), the all-rows path (training) and after the adapters'
    alpha changes (the pre-scaled copy of B is not reused)."""
    import dataclasses as dc

    from pass_core.drafters.lookahead.adapters import GatedLoRA, adapter_targets

    decoder = tiny.model.get_decoder()
    lora = GatedLoRA.initialise(decoder, rank=2, alpha=6.0, generator=torch.Generator().manual_seed(3), b_std=0.5)
    assert lora.scale == 3.0
    name, lin = next(iter(adapter_targets(decoder).items()))
    a, b = lora.weights[name]
    x = torch.randn(1, 7, lin.in_features, generator=torch.Generator().manual_seed(4))
    plain = lin(x)
    for adapters, scale in ((lora, 3.0), (dc.replace(lora, alpha=2.0), 1.0), (lora, 3.0)):
        for rows in (torch.arange(3, 7), torch.tensor([1, 4, 5]), None):
            with adapters.gated(decoder, rows):
                out = lin(x)
            expected = plain.clone()
            picked = torch.arange(7) if rows is None else rows
            expected[:, picked] += scale * ((x[:, picked] @ a.T) @ b.T)
            torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_hooks_are_removed_after_a_pass_and_after_an_error(tiny):
    la = with_adapters(tiny)
    decoder = tiny.model.get_decoder()
    hooked = lambda: sum(len(m._forward_hooks) for m in decoder.modules())  # noqa: E731
    before = hooked()  # transformers may keep hooks of its own
    with la.adapters.gated(decoder, torch.arange(2)):
        assert hooked() == before + len(la.adapters.weights) > before
    with pytest.raises(RuntimeError, match="boom"), la.adapters.gated(decoder, None):
        raise RuntimeError("boom")
    assert hooked() == before


@torch.no_grad()
def test_another_threads_pass_during_a_gated_pass_sees_the_frozen_model(tiny):
    """The app shares one model: a pass in another thread (the next race starting while a cancelled one finishes
    its step) must not pick up the adapters, even with a different number of rows."""
    la = with_adapters(tiny)
    decoder = tiny.model.get_decoder()
    frozen = tiny.model(input_ids=torch.tensor([SEQ[:1]])).logits
    seen = {}
    with la.adapters.gated(decoder, torch.arange(5, 8)):
        worker = threading.Thread(target=lambda: seen.update(out=tiny.model(input_ids=torch.tensor([SEQ[:1]])).logits))
        worker.start()
        worker.join()
        gated_all = torch.cat([tiny.model.get_input_embeddings()(torch.tensor([SEQ[:5]])), la.for_model(tiny)[None]], 1)
        mine = tiny.model(inputs_embeds=gated_all).logits[0, 5:]
    assert torch.equal(seen["out"], frozen)
    assert (mine - tiny.model(inputs_embeds=gated_all).logits[0, 5:]).abs().max() > 1e-3  # this thread: adapted


def test_file_round_trip_and_refusals(tiny, tmp_path):
    la = with_adapters(tiny)
    path = la.save(tmp_path / "lora.safetensors")
    back = LookaheadEmbeddings.load(path, tiny, adapters=True)
    assert back.adapters.rank == 4 and set(back.adapters.weights) == set(la.adapters.weights)
    for name, (a, b) in la.adapters.weights.items():
        assert torch.equal(back.adapters.weights[name][0], a) and torch.equal(back.adapters.weights[name][1], b)
    assert "rank-4 look-ahead adapters" in back.describe()
    assert back.truncate(2).adapters is back.adapters  # truncation is exact: same adapters, fewer rows
    with pytest.raises(ValueError, match="use it with method 'pass-lora'"):
        LookaheadEmbeddings.load(path, tiny)  # an adapter file is not a plain PaSS file
    plain = LookaheadEmbeddings.initialise(tiny, 3).save(tmp_path / "plain.safetensors")
    with pytest.raises(ValueError, match="use it with method 'pass'"):
        METHODS["pass-lora"].find_files(tiny, 3, str(plain))
    with pytest.raises(ValueError, match="not for the loaded model"):
        METHODS["pass-lora"].find_files(tiny_loaded(seed=1), 3, str(path))
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(path.read_bytes()[:-50])
    with pytest.raises(ValueError, match="pass-lora|readable|altered"):
        METHODS["pass-lora"].find_files(tiny, 3, str(bad))
    with pytest.raises(ValueError, match="does not exist"):
        METHODS["pass-lora"].find_files(tiny, 3, str(tmp_path / "missing.safetensors"))


def test_shipped_file_and_fallback(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("PASS_PLAYGROUND_ASSETS", str(tmp_path))
    la, note = resolve_adapters(tiny, 3)
    assert "no trained look-ahead adapters" in note and "drafts exactly like PaSS" in note
    assert all(not b.any() for _, b in la.adapters.weights.values())  # B = 0: an exact no-op
    with_adapters(tiny, 4).save(shipped_adapters_path(tiny.name, 4))
    la, note = resolve_adapters(tiny, 2)
    assert la.num_lookahead == 2 and la.adapters is not None and "first 2 of" in note


def test_training_with_adapters_saves_a_pass_lora_file_and_resumes(tiny_folder, tmp_path):
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
    report = run_train(tiny_folder, tmp_path / "a", "--steps", "6", "--adapter-rank", "2", "--adapter-lr", "0.01")
    assert report["adapter_rank"] == 2 and report["adapter_parameters"] > 0
    stopped = run_train(tiny_folder, tmp_path / "b", "--steps", "6", "--adapter-rank", "2", "--adapter-lr", "0.01",
                        "--stop-at", "3")
    assert stopped["stopped_at"] == 3
    run_train(tiny_folder, tmp_path / "b", "--steps", "6", "--adapter-rank", "2", "--adapter-lr", "0.01", "--resume")
    a = LookaheadEmbeddings.load(tmp_path / "a" / "la.safetensors", adapters=True)
    b = LookaheadEmbeddings.load(tmp_path / "b" / "la.safetensors", adapters=True)
    assert any(bb.abs().max() > 0 for _, bb in a.adapters.weights.values()), "the adapters did not train"
    torch.testing.assert_close(a.weight, b.weight, atol=1e-5, rtol=1e-5)
    for name, (aa, ab) in a.adapters.weights.items():
        torch.testing.assert_close(b.adapters.weights[name][1], ab, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="adapter-rank"):  # a checkpoint of another rank is not resumed
        run_train(tiny_folder, tmp_path / "b", "--steps", "8", "--adapter-rank", "3", "--resume")


def test_training_records_the_agreement_curve(tiny_folder, tmp_path):
    report = run_train(tiny_folder, tmp_path, "--steps", "4", "--curve-every", "2", "--curve-sequences", "2")
    assert [c["step"] for c in report["curve"]] == [0, 2, 4]  # step 0: the initialisation
    assert all(len(c["top1_agreement"]) == 2 for c in report["curve"])
    assert [c["positions"] for c in report["curve"]] == sorted({c["positions"] for c in report["curve"]})
    assert report["curve"][0]["positions"] == 0
    md = train_mod.report_markdown(report, "cmd")
    assert "agreement-vs-data curve" in md
    # run_train evaluates nothing (--eval-prompts 0 --eval-sequences 0): its row says so (it printed "nan")
    assert "| trained | not measured (--eval-sequences 0) | not measured (--eval-prompts 0) |" in md
    assert "nan" not in md
