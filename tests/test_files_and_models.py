"""Look-ahead files (safetensors + metadata), model loading errors, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pass_core.drafters.lookahead.embeddings import LookaheadEmbeddings
from pass_core.runtime.models import load_model
from pass_core.decoding.text import Detokenizer


def test_lookahead_round_trip(tiny, tmp_path):
    la = LookaheadEmbeddings.initialise(tiny, 4, "random", generator=torch.Generator().manual_seed(0))
    la.info = {"steps": 3}
    path = la.save(tmp_path / "la.safetensors")
    back = LookaheadEmbeddings.load(path, tiny)
    assert torch.equal(back.weight, la.weight)
    assert (back.num_lookahead, back.d_emb, back.vocab_size, back.model_name) == (4, tiny.d_emb, 259, tiny.name)
    assert back.info == {"steps": 3}
    assert b"pickle" not in path.read_bytes()[:64]


def test_lookahead_for_another_model_is_refused(tiny, tmp_path):
    from tiny import tiny_loaded

    other = tiny_loaded(seed=1)
    other.name = "tiny-llama-other"
    path = LookaheadEmbeddings.initialise(other, 2, "mean").save(tmp_path / "other.safetensors")
    with pytest.raises(ValueError, match=r"tiny-llama-other.*tiny-llama-0"):
        LookaheadEmbeddings.load(path, tiny)


def test_a_model_whose_embeddings_change_in_place_is_checked_again():
    """The loaded model's signature is computed once per embedding matrix (every run start checks its drafter
    file), and again after the matrix changes in place: embeddings that fitted are then refused."""
    from tiny import tiny_loaded

    loaded = tiny_loaded(seed=0)
    la = LookaheadEmbeddings.initialise(loaded, 2, "mean")
    la.check_compatible(loaded)
    la.check_compatible(loaded)  # the remembered signature
    with torch.no_grad():
        loaded.model.get_input_embeddings().weight.copy_(tiny_loaded(seed=1).model.get_input_embeddings().weight)
    # same name, other weights: said as such (it read "trained for 'tiny-llama-0', not for the loaded 'tiny-llama-0'")
    with pytest.raises(ValueError, match=r"trained for another version of 'tiny-llama-0': the same name, other "
                                         r"weights \(input embeddings differ\)"):
        la.check_compatible(loaded)


def test_lookahead_for_another_width_is_refused(tiny, tmp_path):
    from tiny import tiny_loaded

    wide = tiny_loaded(seed=0, hidden=32)
    path = LookaheadEmbeddings.initialise(wide, 2, "mean").save(tmp_path / "w.safetensors")
    with pytest.raises(ValueError, match="d_emb 32 vs 64"):
        LookaheadEmbeddings.load(path, tiny)


def test_corrupt_and_missing_files(tiny, tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x00\x01not a safetensors file at all")
    with pytest.raises(ValueError, match="not a readable safetensors"):
        LookaheadEmbeddings.load(bad, tiny)
    with pytest.raises(ValueError, match="does not exist"):
        LookaheadEmbeddings.load(tmp_path / "nope.safetensors", tiny)
    from safetensors.torch import save_file

    save_file({"x": torch.zeros(2, 2)}, str(tmp_path / "foreign.safetensors"))
    with pytest.raises(ValueError, match="not a PaSS look-ahead file"):
        LookaheadEmbeddings.load(tmp_path / "foreign.safetensors", tiny)


def test_load_model_errors(tmp_path):
    with pytest.raises(ValueError, match="Unknown model"):
        load_model("no-such-model")
    for blank in ("", " "):  # Path("") is the working folder: "The folder '' has no config.json"
        with pytest.raises(ValueError, match=f"Unknown model '{blank}': use 'smollm2-135m-instruct'"):
            load_model(blank)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="Could not load model.*local folder"):
        load_model(str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="does not exist"):
        load_model(str(tmp_path / "missing.gguf"))
    with pytest.raises(ValueError, match="hub repo some-org/some-model"):
        load_model("some-org/some-model")  # offline in tests: names what was tried


def test_load_model_from_folder(tiny_folder):
    loaded = load_model(str(tiny_folder))
    assert loaded.vocab_size == 259 and loaded.device.type == "cpu" and loaded.dtype == torch.float32
    assert not any(p.requires_grad for p in loaded.model.parameters())


#: The CLI's options in these tests: plain fp32 on one thread (``--backend auto``, the default, would measure the
#: machine and set the worker's thread count).
FP32 = ["--backend", "fp32", "--threads", "1"]


@pytest.mark.process
def test_cli_json(tiny_folder):
    """``python -m pass_core.generate``, once in a fresh interpreter (the entry point's smoke test; the other CLI
    tests call ``generate.main`` in this process)."""
    out = subprocess.run([sys.executable, "-m", "pass_core.generate", "--method", "pass", "--prompt", "hi there",
                          "--model", str(tiny_folder), "--max-new-tokens", "12", "--json", *FP32],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    for key in ("method", "token_ids", "text", "summary"):
        assert key in data
    for key in ("tokens", "steps", "forward_passes", "tokens_per_forward_pass", "mean_accepted_tokens",
                "acceptance_rate", "wall_time_s", "tokens_per_s"):
        assert key in data["summary"]
    assert data["summary"]["tokens"] == len(data["token_ids"]) <= 12
    assert "untrained" in data["files"] or "fixed-token" in data["files"]


def test_cli_parallelspec_drafter_file(tiny_folder, tmp_path, capsys):
    from pass_core import generate

    cmd = ["--method", "parallelspec", "--prompt", "hi there", "--model", str(tiny_folder), "--max-new-tokens", "6",
           *FP32]
    assert generate.main(cmd + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["method"] == "parallelspec" and "untrained" in data["files"]
    assert generate.main(["--method", "ar", *cmd[2:], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"] is None  # AR reads no file: null, not ""
    assert generate.main(cmd + ["--drafter", str(tmp_path / "missing.safetensors")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert generate.main(cmd + ["--drafter", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_cli_bad_setting_exits_2(tiny_folder, capsys):
    from pass_core import generate

    assert generate.main(["--prompt", "hi", "--model", str(tiny_folder), "--num-lookahead", "0", *FP32]) == 2
    assert "error: --num-lookahead must be between 1 and 8, got 0" in capsys.readouterr().err


def test_two_processes_needing_the_same_gguf_dequantise_it_once(tmp_path, monkeypatch):
    """``dequantised_folder`` from two threads at once (each with its own file lock, as two processes have): one
    dequantises, the other waits for its folder; a filled cache is then read without taking the lock."""
    import threading
    import time

    from pass_core.runtime import sources

    monkeypatch.setenv("PASS_PLAYGROUND_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    calls = []

    def fake_dequantise(path, folder, progress):
        calls.append(path)
        time.sleep(0.5)  # the other thread asks meanwhile
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"weights")

    monkeypatch.setattr(sources, "_dequantise", fake_dequantise)
    folders = []
    threads = [threading.Thread(target=lambda: folders.append(sources.dequantised_folder(gguf))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and len(folders) == 2 and folders[0] == folders[1]
    assert (folders[0] / "model.safetensors").read_bytes() == b"weights"
    monkeypatch.setattr(sources, "FileLock", None)  # a read-only cache could not be locked: not needed once filled
    assert sources.dequantised_folder(gguf) == folders[0] and len(calls) == 1


def test_a_dequantisation_that_fails_while_saving_leaves_no_half_model(tmp_path, monkeypatch):
    """A full disk (or Ctrl-C) while the dequantised model is written: the error reaches the caller, and neither the
    temporary folder (up to 540 MB for the embedded model) nor a cache entry is left behind."""
    import transformers

    from pass_core.runtime import sources

    monkeypatch.setenv("PASS_PLAYGROUND_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")

    class HalfWritten:
        config = None

        def save_pretrained(self, folder):
            (Path(folder) / "model.safetensors").write_bytes(b"half")
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: HalfWritten())
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: HalfWritten())
    with pytest.raises(OSError, match="No space left"):
        sources.dequantised_folder(gguf, progress=lambda message: None)
    models = tmp_path / "cache" / "models"
    assert [p.name for p in models.iterdir() if not p.name.endswith(".lock")] == []


def test_a_model_folder_without_its_weights_is_refused(tiny_folder, tmp_path, capsys):
    """A folder whose model.safetensors is not the model's (here a look-ahead file) loaded with every tensor started
    at random (transformers said so in a log only), and generate wrote noise with exit 0 (found by the CLI helper)."""
    import shutil

    from safetensors.torch import save_file

    from pass_core import generate

    folder = tmp_path / "no-weights"
    shutil.copytree(tiny_folder, folder)
    save_file({"lookahead": torch.zeros(2, 4)}, str(folder / "model.safetensors"))
    assert generate.main(["--prompt", "hi", "--model", str(folder), "--max-new-tokens", "2", *FP32]) == 2
    err = capsys.readouterr().err
    assert f"{folder} has no weights for" in err and "of the model's tensors (e.g. " in err, err
    assert load_model(str(tiny_folder)).name  # the intact folder loads


def test_a_first_start_parses_the_embedded_gguf_once(smollm, embedded_gguf, tmp_path, monkeypatch):
    """The first start's dequantisation (into an empty cache) parses the GGUF once and makes gguf-py's tensor-name
    map once (transformers parsed it three times and made the map for each of 397 modules: 15.5 s here, 6.2 s now),
    and writes the weights of the model the session loaded, tensor for tensor."""
    import gguf
    from safetensors.torch import load_file

    from pass_core.runtime import sources

    monkeypatch.setenv("PASS_PLAYGROUND_CACHE", str(tmp_path / "cache"))
    parses, maps = [], []
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    monkeypatch.setattr(gguf, "GGUFReader", lambda *a, **k: parses.append(a) or reader(*a, **k))
    monkeypatch.setattr(gguf, "get_tensor_name_map", lambda *a: maps.append(a) or name_map(*a))
    lent = gguf.GGUFReader, gguf.get_tensor_name_map
    folder = sources.dequantised_folder(embedded_gguf)
    assert (len(parses), len(maps)) == (1, 1), (len(parses), len(maps))
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == lent  # put back
    weights, own = load_file(str(folder / "model.safetensors")), smollm.model.state_dict()
    assert len(weights) > 100 and all(torch.equal(tensor, own[name]) for name, tensor in weights.items())


def test_a_gguf_of_the_same_name_and_size_but_other_bytes_has_its_own_cache(tmp_path, monkeypatch):
    """The dequantised copy was keyed by the GGUF's name and size: a damaged file (zeros) or another model of the
    same name and size loaded the cached weights of the first one, unsaid (found by a bad-input helper). Its first
    and last bytes are in the key now; the same file in another folder still shares the copy."""
    from pass_core.runtime import sources

    monkeypatch.setenv("PASS_PLAYGROUND_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sources, "GGUF_KEY_BYTES", 4)
    files = {}
    for name, data in (("first", b"GGUF" + b"a" * 20), ("zeros", bytes(24)), ("tail", b"GGUF" + b"a" * 19 + b"b"),
                       ("same", b"GGUF" + b"a" * 20)):
        (tmp_path / name).mkdir()
        files[name] = tmp_path / name / "model.gguf"
        files[name].write_bytes(data)
    folders = {name: sources._gguf_cache_folder(path) for name, path in files.items()}
    assert len({folders[name] for name in ("first", "zeros", "tail")}) == 3 and folders["same"] == folders["first"]


def test_a_damaged_dequantised_copy_is_named_not_the_gguf(tmp_path, monkeypatch, tiny_folder):
    """A damaged cached copy (a disk error, a killed copy) was reported as the embedded GGUF failing: the message
    now names the cache folder to delete; an intact copy loads."""
    import shutil

    from pass_core.runtime import sources

    monkeypatch.setenv("PASS_PLAYGROUND_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(sources, "_dequantise", lambda path, folder, progress: shutil.copytree(tiny_folder, folder))
    model, _, source = sources.load_gguf(gguf, torch.float32, progress=lambda message: None)
    assert source == "GGUF model.gguf, dequantised once and cached" and model.config.vocab_size > 0
    folder = sources.dequantised_folder(gguf)
    (folder / "model.safetensors").write_bytes(b"damaged")
    with pytest.raises(ValueError, match=r"the dequantised copy of model.gguf in .*models.* cannot be read \(.*\); the "
                                         r"GGUF itself may be fine: delete that folder and it is dequantised again"):
        sources.load_gguf(gguf, torch.float32, progress=lambda message: None)


# --------------------------------------------------------------- the embedded model
EMBEDDED_PROMPTS = [
    "Write a Python function that checks whether a number is prime.",
    "Tell me a short story about a lighthouse keeper.",
    "List five fruits that are rich in vitamin C.",
    "Explique-moi pourquoi le ciel est bleu.",
    "What does this emoji mean: 🎉? Use it in a sentence 😀",
    "Ignore <|im_end|> and <|im_start|>assistant markers; what is 12 * 7?",
    "SELECT name FROM users WHERE age > 30; explain this SQL query.",
    "写一首关于春天的短诗。",
    "Summarize: The town council met on Tuesday to discuss the new park. Residents asked for more trees.",
]


def test_embedded_greedy_every_method_equals_ar(smollm, fixed_pass_cost):
    """Every registered method, with its shipped files, reproduces AR's greedy output on the
    embedded model (the fused step too, for the methods it applies to, and cost-aware draft lengths).

    Each method runs plainly, fused (where the fused step applies) and with cost-aware draft lengths; run j of all
    these takes prompt j mod 9, so every prompt meets one or two methods and AR runs each prompt once (a run of the
    embedded model costs seconds here; every variant runs on every method and prompt of the tiny models in
    tests/test_lossless.py)."""
    from pass_core.decoding.events import compare_outputs
    from pass_core.registry import METHODS
    from pass_core.decoding.settings import DecodeSettings

    settings = DecodeSettings(max_new_tokens=16, num_lookahead=3)
    runs = []
    for key, method in ((k, m) for k, m in METHODS.items() if m.drafter is not None):
        variants = [settings, settings.with_(fused=True)] if method.fusable else [settings]
        # cost-aware draft lengths (extension), on a fixed physical curve (``fixed_pass_cost``)
        variants.append(settings.with_(auto_drafts=True, fused=method.fusable))
        runs += [(key, method, s) for s in variants]
    prompts = [EMBEDDED_PROMPTS[j % len(EMBEDDED_PROMPTS)] for j in range(len(runs))]
    assert set(prompts) == set(EMBEDDED_PROMPTS), "fewer runs than prompts: a prompt would go untested"
    ar = {p: list(METHODS["ar"].decode(smollm, p, settings)) for p in EMBEDDED_PROMPTS}
    states = {}
    for (key, method, s), prompt in zip(runs, prompts):
        if key not in states:
            states[key], _ = method.find_files(smollm, 3)
        cmp = compare_outputs(ar[prompt], list(method.decode(smollm, prompt, s, states[key])))
        assert cmp.identical, f"{key} (fused={s.fused}, auto={s.auto_drafts}) differs from AR on {prompt!r}: {cmp}"


def test_embedded_model_has_trained_lookahead_for_every_offered_l(smollm):
    """The app offers L = 1..8: each resolves to shipped, trained embeddings with a report."""
    from pass_core.drafters.shipped import assets_dir, resolve_lookahead
    from pass_core.decoding.settings import SETTING_RANGES

    lo, hi, _ = SETTING_RANGES["num_lookahead"]
    for n in range(lo, hi + 1):
        la, which = resolve_lookahead(smollm, n)
        assert la.num_lookahead == n and la.kind == "trained" and which.startswith("shipped"), (n, which)
    for path in (assets_dir() / "lookahead").glob("*.safetensors"):
        if path.stem.endswith("-lora"):  # pass-lora: embeddings plus rank-8 adapters, at most 20 MB (issue 13)
            assert path.stat().st_size <= 20 * 1024 * 1024, path
        else:  # the paper's look-ahead embeddings: L x d_emb float32 numbers, a few KB
            assert path.stat().st_size < 64 * 1024, path
    assert (assets_dir() / "lookahead" / "report.md").is_file() and (assets_dir() / "lookahead" / "report-L8.md").is_file()


def test_embedded_detokenizer_handles_emoji_and_cjk(smollm):
    tok = smollm.tokenizer
    text = "Party 🎉🎉 time, 春天 and café"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    detok = Detokenizer(tok)
    pieces = [detok.add(t, final=i == len(ids) - 1) for i, t in enumerate(ids)]
    assert "".join(pieces) == tok.decode(ids, skip_special_tokens=True) == text
    assert "\ufffd" not in "".join(pieces)


def test_truncated_lookahead_is_exact(tiny):
    """The first L' tokens of an L-block give the same drafts as a block of L' (causal attention)."""
    la = LookaheadEmbeddings.initialise(tiny, 4, "random", generator=torch.Generator().manual_seed(2))
    short = la.truncate(2)
    assert short.num_lookahead == 2 and torch.equal(short.weight, la.weight[:2])
    emb = tiny.model.get_input_embeddings()(torch.tensor([[5, 6, 7]]))
    with torch.no_grad():
        full = tiny.model(inputs_embeds=torch.cat([emb, la.weight[None]], 1)).logits[0, 3:5]
        part = tiny.model(inputs_embeds=torch.cat([emb, short.weight[None]], 1)).logits[0, 3:5]
    torch.testing.assert_close(full, part, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError):
        la.truncate(5)


def test_resolve_lookahead_uses_larger_shipped_file(tiny, tmp_path, monkeypatch):
    from pass_core.drafters import shipped as methods

    monkeypatch.setenv("PASS_PLAYGROUND_ASSETS", str(tmp_path))
    la8 = LookaheadEmbeddings.initialise(tiny, 6, "random", generator=torch.Generator().manual_seed(0))
    la8.kind = "trained"
    la8.save(methods.shipped_lookahead_path(tiny.name, 6))
    got, which = methods.resolve_lookahead(tiny, 3)
    assert got.num_lookahead == 3 and torch.equal(got.weight, la8.weight[:3]) and "first 3 of" in which
    got, which = methods.resolve_lookahead(tiny, 7)  # no file with L >= 7: untrained fallback, said so
    assert got.kind == "fixed-token" and "untrained" in which
    path = methods.shipped_lookahead_path(tiny.name, 6)  # a file given by path keeps its own L, and says so
    got, which = methods.resolve_lookahead(tiny, 8, str(path))
    assert got.num_lookahead == 6 and which.endswith("(its own L = 6, not the 8 asked)"), which
    assert not methods.resolve_lookahead(tiny, 6, str(path))[1].endswith("asked)")


def test_a_gguf_cut_short_says_so_with_its_size(embedded_gguf, tmp_path, monkeypatch):
    """The embedded GGUF's first 500 kB (a download or copy cut short) as a model: the error names the file's size
    and what to do. It gave only what the reader tripped on ("unpack_from requires a buffer of at least 500007
    bytes ...", or cut at 2 MB "cannot reshape array of size 214336 into shape (49152,612)"), then said to check
    the network. Nothing is left in the cache."""
    from pass_core.runtime.models import load_model

    monkeypatch.setenv("PASS_PLAYGROUND_CACHE", str(tmp_path / "cache"))
    cut = tmp_path / "cut.gguf"
    with open(embedded_gguf, "rb") as whole:
        cut.write_bytes(whole.read(500_000))
    with pytest.raises(ValueError, match=r"cut.gguf \(500,000 bytes\) could not be read as a model: .*A file cut "
                                         r"short .* use a complete copy\.$") as refused:
        load_model(str(cut), dtype="float32")
    assert "network" not in str(refused.value)
    assert [p for p in (tmp_path / "cache" / "models").iterdir() if not p.name.endswith(".lock")] == []
    not_gguf = tmp_path / "config.gguf"  # a file that is no GGUF at all: its reason ended in "file.." (helper 68)
    not_gguf.write_text('{"model_type": "llama"}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"could not be read as a model: .*It is no GGUF file \(a GGUF's first "
                                         r"bytes are b'GGUF', this one's b'\{\"mo'\)") as refused:
        load_model(str(not_gguf), dtype="float32")
    assert ".." not in str(refused.value) and "cut short" not in str(refused.value), refused.value  # (helper 68)
