"""The app on another model (``python app.py --model FOLDER``): the methods that need a trained file (PaSS, PaSS +
look-ahead adapters, ParallelSpec) are offered only where a file trained for that model ships; elsewhere the page
offers AR, the fixed-token baseline, prompt lookup and the draft model, ticks AR + prompt lookup + draft model, and
says in one sentence, under the methods, why the others are missing and where to learn to train one. The tiny model
saved to disk stands for the other model; the page is built in this process (no server)."""

from __future__ import annotations

import gradio as gr
import pytest

import app
from pass_core.registry import METHODS, offered_methods
from pass_core.runtime.models import DEFAULT_MODEL, load_model
from playground import page
from playground.race_inputs import OTHER_MODEL_RACE, MethodOffer, method_offer
from playground.teaching_panels import NO_LESSONS
from test_app import OUTPUT_NAMES

TRAINED = ("pass", "pass-lora", "parallelspec")  # the methods whose drafters are trained files


@pytest.fixture(scope="module")
def other(tiny_folder):
    """The tiny model loaded from its folder, as ``app.py --model FOLDER`` loads it (named by the folder's path)."""
    return load_model(str(tiny_folder))


def methods_box(demo) -> gr.CheckboxGroup:
    boxes = [c for c in demo.blocks.values() if isinstance(c, gr.CheckboxGroup) and c.label == "methods to race"]
    assert len(boxes) == 1
    return boxes[0]


def test_trained_methods_are_offered_where_their_file_ships(tmp_path, monkeypatch):
    assert offered_methods(DEFAULT_MODEL) == (tuple(METHODS), ())  # the embedded model: every file ships
    assert method_offer(DEFAULT_MODEL, page.DEFAULT_RACE) == MethodOffer(tuple(METHODS), page.DEFAULT_RACE, "")
    offered, left_out = offered_methods("org/other-model")
    assert left_out == TRAINED and offered == tuple(key for key in METHODS if key not in TRAINED)
    # a file decides, not the name: a ParallelSpec drafter (k = 2) for this model where the resolver looks
    monkeypatch.setenv("PASS_PLAYGROUND_ASSETS", str(tmp_path))
    (tmp_path / "drafter").mkdir()
    (tmp_path / "drafter" / "org--other-model-k2.safetensors").write_bytes(b"")
    assert offered_methods("org/other-model")[1] == ("pass", "pass-lora")
    assert offered_methods(DEFAULT_MODEL)[1] == TRAINED  # and without its files the embedded model loses them
    offer = method_offer("org/other-model", page.DEFAULT_RACE)
    assert offer.default == OTHER_MODEL_RACE and offer.note.startswith("PaSS and PaSS+adapters are not offered")
    assert method_offer(None, page.DEFAULT_RACE).keys == tuple(METHODS)  # replay only: every pane can show


def test_page_on_another_model_offers_the_methods_without_trained_files(other):
    demo = page.build_demo(other)
    box = methods_box(demo)
    assert [key for _, key in box.choices] == ["ar", "fixed-token", "prompt-lookup", "draft-model"]
    assert box.value == ["ar", "prompt-lookup", "draft-model"] == list(OTHER_MODEL_RACE)
    assert box.info == ("any two or more. PaSS, PaSS+adapters and ParallelSpec are not offered for this model: they "
                        "need trained files, and the shipped ones were trained for SmolLM2-135M-Instruct, the "
                        "embedded model; to race them here, train one for this model (docs/training.md).")
    panes = [c for c in demo.blocks.values() if isinstance(c, gr.HighlightedText)]
    assert [p.elem_id for p in panes if p.visible] == [f"pane-{key}" for key in OTHER_MODEL_RACE]
    drafter_line = next(c.value for c in demo.blocks.values() if getattr(c, "elem_id", None) == "drafter-line")
    assert "Draft model" in drafter_line and "untrained" not in drafter_line
    lessons = next(c for c in demo.blocks.values() if getattr(c, "elem_id", None) == "lesson-choice")
    lesson_text = next(c for c in demo.blocks.values() if getattr(c, "elem_id", None) == "lesson-text")
    assert lessons.choices == [] and not lessons.visible and lesson_text.value == NO_LESSONS  # all race PaSS
    # Run with the ticked methods, through the page's own handler: all three race and agree (greedy)
    on_run = next(fn.fn for fn in demo.fns.values() if fn.api_name == "race")
    final = dict(zip(OUTPUT_NAMES, list(on_run("Hello there", 2, 0.0, 0, 1.0, 8, 0, True, False, box.value))[-1]))
    assert set(final["state"]["events"]) == set(OTHER_MODEL_RACE)
    assert all(final[f"{key}_tokens"] for key in OTHER_MODEL_RACE)
    assert "prompt lookup output is identical to AR" in final["greedy_check"]
    assert "draft model output is identical to AR" in final["greedy_check"]


def test_a_method_left_out_is_refused_by_name_through_the_api_too(other):
    """An API caller can send any method key: one the page leaves out (no file trained for this model) is refused
    by name, with the page's reason, by the race's validator (``gradio_client`` gets it as a ValidationError)
    and by the race itself; nothing races its untrained fallback. With ``untrained_drafters`` it races."""
    values = ("Hello there", 2, 0.0, 0, 1.0, 8, 0, True, False)
    race = next(fn for fn in page.build_demo(other).fns.values() if fn.api_name == "race")
    checks = race.validator(*values, ["ar", "parallelspec", "ar"])
    assert [c["is_valid"] for c in checks] == [True] * 9 + [False] + [True] * 3
    assert checks[9]["message"].startswith("Not offered here: 'parallelspec'. PaSS, PaSS+adapters and ParallelSpec "
                                           "are not offered for this model: they need trained files")
    assert checks[9]["message"].endswith("Choose two or more of ar, fixed-token, prompt-lookup, draft-model.")
    assert all(c["is_valid"] for c in race.validator(*values, ["ar", "prompt-lookup"]))
    with pytest.raises(gr.Error, match="Not offered here: 'pass', 'parallelspec'"):
        list(race.fn(*values, ["ar", "pass", "parallelspec"]))
    untrained = next(fn for fn in page.build_demo(other, untrained_drafters=True).fns.values()
                     if fn.api_name == "race")
    assert all(c["is_valid"] for c in untrained.validator(*values, ["ar", "parallelspec"]))
    final = dict(zip(OUTPUT_NAMES, list(untrained.fn(*values, ["ar", "parallelspec"]))[-1]))
    assert set(final["state"]["events"]) == {"ar", "parallelspec"}


def test_untrained_drafters_offers_every_method_again(other, monkeypatch):
    box = methods_box(page.build_demo(other, untrained_drafters=True))
    assert [key for _, key in box.choices] == list(METHODS) and box.value == list(page.DEFAULT_RACE)
    assert box.info == "any two or more"
    built = []  # app.py's flag reaches the page and the warm-up (no model load, no server)
    monkeypatch.setattr(app.ModelHolder, "start", lambda self: self)
    monkeypatch.setattr(app, "build_demo", lambda holder, **kw: built.append((holder.name, holder.methods, kw)) or
                        type("Demo", (), {"launch": lambda self, **_: None})())
    app.main(["--model", other.name, "--device", "cpu", "--backend", "fp32"])
    app.main(["--model", other.name, "--device", "cpu", "--backend", "fp32", "--untrained-drafters"])
    offered = tuple(key for key in METHODS if key not in TRAINED)  # warmed up: the methods the page offers
    assert built == [(other.name, offered, {"untrained_drafters": False}),
                     (other.name, tuple(METHODS), {"untrained_drafters": True})]


def test_a_hub_id_without_network_is_read_from_the_local_cache_at_once(tmp_path, monkeypatch):
    """Where the hub's name does not resolve, a hub id is loaded from the local Hugging Face cache alone: a cached
    model loads, an uncached one fails at once naming the missing network (the hub client retried a failed name
    lookup for 52 s before giving up)."""
    import socket
    import time

    import huggingface_hub.constants
    from tiny import save_tiny

    def no_name(*args, **kwargs):
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_name)
    snapshot = tmp_path / "models--org--tiny" / "snapshots" / ("a" * 40)  # the hub client's cache layout
    snapshot.mkdir(parents=True)
    save_tiny(snapshot)
    (tmp_path / "models--org--tiny" / "refs").mkdir()
    (tmp_path / "models--org--tiny" / "refs" / "main").write_text("a" * 40)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # tests/conftest.py sets it: not here
    start = time.monotonic()
    with pytest.raises(ValueError) as err:
        load_model("org/missing", device="cpu")
    assert time.monotonic() - start < 10, str(err.value)
    assert "org/missing (local Hugging Face cache: the hub's name does not resolve here" in str(err.value)
    assert "local Hugging Face cache" in load_model("org/tiny", device="cpu").source


def test_a_sliding_window_model_is_refused_when_it_loads(tmp_path):
    """A model whose cache has sliding-window layers cannot drop rejected drafts once its window is full: it passed
    the 3-token crop check at load and then failed mid-race with transformers' bare RuntimeError. Now the load
    refuses it by name; a full-attention model of the same size loads."""
    from tiny import tiny_tokenizer
    from transformers import MistralConfig, MistralForCausalLM

    tokenizer = tiny_tokenizer()
    for window, folder in ((4, tmp_path / "sliding"), (None, tmp_path / "full")):
        config = MistralConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, sliding_window=window,
                               max_position_embeddings=256)
        MistralForCausalLM(config).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    with pytest.raises(ValueError, match="DynamicSlidingWindowLayer layers .sliding-window or recurrent attention"):
        load_model(str(tmp_path / "sliding"), device="cpu")
    assert load_model(str(tmp_path / "full"), device="cpu").model.config.sliding_window is None
