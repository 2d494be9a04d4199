"""Classic speculative sampling with a draft model (``pass_core/drafters/draft_model/``): greedy equality with AR
with partial acceptance, the draft cache after partial acceptance equal to a fresh draft pass, q = the draft
model's processed distribution, the sampled law with its own drafts (two broken rules must fail), transformers'
assisted generation, and the draft models offered (built from the target, or loaded with the same vocabulary).

The losslessness suite (tests/test_lossless.py) runs draft-model too: its cases come from the registry.
"""

from __future__ import annotations

import pytest
import torch

from lossless_helpers import always_accept, assert_caches_equal, exact_law, fresh_target_cache, resample_from_p, run
from pass_core import generate
from pass_core.decoding.cache import new_cache
from pass_core.decoding.draft_length import CostAwareDraftLength
from pass_core.decoding.events import output_token_ids
from pass_core.decoding.metrics import summarize
from pass_core.decoding.sampling import logits_to_probs
from pass_core.decoding.settings import DecodeSettings
from pass_core.decoding.text import encode_prompt
from pass_core.drafters.draft_model.drafter import DraftModelDrafter
from pass_core.drafters.draft_model.models import (DraftModel, built_in, first_layers, load_draft_model,
                                                   resolve_draft_model)
from pass_core.registry import METHODS
from sampling_design import ALPHA, BETA, DELTA, design, tv_floor
from tiny import save_tiny, tiny_model, tiny_tokenizer

GREEDY = DecodeSettings(max_new_tokens=40, temperature=0.0, num_lookahead=3)
PROMPTS = ["hello world", "def f(x):\n    return", "Grüße 😀 ok"]


def default_drafter(loaded) -> DraftModelDrafter:
    """The registered method's drafter (its offline default: a bfloat16 copy of the target)."""
    state, _ = METHODS["draft-model"].find_files(loaded, 3)
    return DraftModelDrafter(state)


def first_layer_drafter(loaded) -> DraftModelDrafter:
    """The target's first layer with its head: right often, wrong often on the tiny random model."""
    return DraftModelDrafter(built_in(loaded, "first-layers"))


def other_model_drafter(loaded, seed: int = 1) -> DraftModelDrafter:
    """A second tiny random model with the same tokenizer (one layer): a weak drafter."""
    return DraftModelDrafter(DraftModel(tiny_model(loaded.vocab_size, seed=seed, layers=1), f"tiny seed {seed}"))


# ------------------------------------------------------------------ greedy
@pytest.mark.parametrize("which", ["first-layers", "default", "other-model"])
def test_greedy_equals_ar_with_partial_acceptance(tiny, which):
    partial = accepted = rejected = drafted = 0
    for prompt in PROMPTS:
        drafter = {"first-layers": first_layer_drafter, "default": default_drafter,
                   "other-model": other_model_drafter}[which](tiny)
        events = run(tiny, "draft-model", prompt, GREEDY, drafter)
        assert output_token_ids(events) == output_token_ids(run(tiny, "ar", prompt, GREEDY))
        partial += sum(0 < e.num_accepted < e.num_verified_drafts for e in events)
        rejected += sum(e.num_accepted < e.num_verified_drafts for e in events)
        accepted += summarize(events).accepted_drafts
        drafted += summarize(events).drafted_tokens
        assert all(e.drafter_passes == e.num_verified_drafts for e in events)  # one draft pass per draft
    if which == "first-layers":  # the target's first layer agrees with it often on this random model
        assert partial >= 3 and accepted >= 20, (partial, accepted)
    elif which == "default":  # a bfloat16 copy of the target: nearly always right
        assert accepted >= 0.8 * drafted, (accepted, drafted)
    else:  # another random model: mostly rejected drafts
        assert rejected >= 20, rejected


def test_greedy_tokens_equal_transformers_assisted_generation(tiny):
    draft = first_layer_drafter(tiny).draft.model
    for prompt in PROMPTS:
        ids = encode_prompt(tiny.tokenizer, prompt, True)
        x = torch.tensor([ids])
        hf = tiny.model.generate(x, attention_mask=torch.ones_like(x), assistant_model=draft, do_sample=False,
                                 max_new_tokens=GREEDY.max_new_tokens, temperature=None, top_p=None, top_k=None)
        ours = output_token_ids(run(tiny, "draft-model", prompt, GREEDY))
        assert ours == hf[0, len(ids):].tolist()


# ------------------------------------------------------------------ caches and q
def test_draft_cache_after_partial_acceptance_equals_a_fresh_draft_pass(tiny):
    """After every step with 0 < m < k: the draft model's cache holds exactly the committed tokens but the pending
    one (keys and values equal a fresh draft pass over them), the rejected drafts rolled back; the target's too."""
    checked, after_step = 0, []
    for prompt in PROMPTS:
        drafter = first_layer_drafter(tiny)
        for event in run(tiny, "draft-model", prompt, GREEDY, drafter, stream=True, inspect_fn=after_step.append):
            state = after_step.pop()
            if 0 < event.num_accepted < event.num_verified_drafts and not event.finished:
                context = state["committed"][:-1]
                assert drafter.held == context
                ref = new_cache(drafter.draft.model)
                with torch.no_grad():
                    drafter.draft.model(input_ids=torch.tensor([context]), cache=ref, use_cache=True)
                assert_caches_equal(drafter.cache, ref, "draft model cache")
                assert_caches_equal(state["target_cache"], fresh_target_cache(tiny, context)[0], "target cache")
                checked += 1
    assert checked >= 3, f"only {checked} partial-acceptance steps checked"


def test_q_is_the_draft_models_processed_distribution(tiny):
    settings = GREEDY.with_(temperature=0.8, top_k=20, top_p=0.9, max_new_tokens=20)
    drafter = first_layer_drafter(tiny)
    seen, original = [], drafter.propose

    def recording(uncached, committed, max_drafts):
        prop = original(uncached, committed, max_drafts)
        seen.append((list(committed), prop))
        return prop

    drafter.propose = recording
    run(tiny, "draft-model", PROMPTS[1], settings, drafter)
    checked = 0
    for committed, prop in seen:
        for i in range(len(prop.drafts)):
            context = committed + prop.drafts[:i].tolist()
            with torch.no_grad():
                logits = drafter.draft.model(input_ids=torch.tensor([context])).logits[0, -1]
            torch.testing.assert_close(prop.q[i], logits_to_probs(logits, settings), atol=1e-5, rtol=1e-4)
            assert prop.q[i][prop.drafts[i]] > 0  # d_i was drawn from q_i
            checked += 1
    assert checked >= 15


# ------------------------------------------------------------------ sampling with its own drafts
WINDOW = 4


def _tv(tiny, settings, law, runs, stop_above=None, **kw):
    """(TV of ``runs`` seeded runs' first WINDOW tokens to ``law``, the token labels seen). ``stop_above``: a negative
    control's bound b; its runs stop once their TV is sure to exceed b, and the TV returned is then ``tv_floor``'s."""
    counts, decisions = {}, set()
    drafter = first_layer_drafter(tiny)
    for seed in range(runs):
        if stop_above is not None and tv_floor(law, counts, runs) > stop_above:
            break
        events = run(tiny, "draft-model", "ab", settings.with_(seed=seed), drafter, **kw)
        out = tuple(output_token_ids(events)[:WINDOW])
        counts[out] = counts.get(out, 0) + 1
        decisions |= {t.label for e in events for t in e.tokens}
    return tv_floor(law, counts, runs), decisions  # once all runs are made, their TV


@pytest.mark.sampling
def test_sampling_with_its_own_drafts_matches_the_exact_law_and_broken_rules_fail(tiny):
    """First 4 tokens at T = 1, top-k 2, k = 2 drafts from the target's first layer's processed q. The number of
    seeded runs n and the bound b come from the exact law (``sampling_design.design``: false-alarm rate ALPHA,
    power 1 - BETA against any law at TV >= DELTA); the TV of n runs must stay under b, and always-accept and
    resample-from-p, with the same n, above it."""
    settings = DecodeSettings(max_new_tokens=WINDOW, num_lookahead=2, temperature=1.0, top_k=2)
    law = exact_law(tiny, "ab", settings, WINDOW)
    assert len(law) == 16 and abs(sum(law.values()) - 1) < 1e-5
    plan = design(law, ALPHA, BETA, DELTA)
    tv, seen = _tv(tiny, settings, law, plan.runs)
    assert {"accepted", "rejected", "bonus", "resampled"} <= seen, f"not every decision happened: {seen}"
    print(f"\nTV draft-model: {tv:.4f}; {plan.describe()}")
    assert tv < plan.bound, f"draft-model sampling differs from the target's law: TV {tv:.4f}; {plan.describe()}"
    for broken in (always_accept, resample_from_p):
        tv_broken, _ = _tv(tiny, settings, law, plan.runs, stop_above=plan.bound, verify_fn=broken)
        print(f"TV draft-model {broken.__name__}: at least {tv_broken:.4f}")
        assert tv_broken > plan.bound, f"{broken.__name__}: TV {tv_broken:.4f}: the test has no power; {plan.describe()}"


# ------------------------------------------------------------------ which draft model
def test_first_layers_shares_weights_and_leaves_the_target_alone(tiny):
    x = torch.tensor([[5, 9, 40, 41]])
    with torch.no_grad():
        before = tiny.model(input_ids=x).logits
        draft = first_layers(tiny.model, 1)
        after = tiny.model(input_ids=x).logits
        short = draft(input_ids=x).logits
    torch.testing.assert_close(before, after, atol=0, rtol=0)
    assert len(tiny.model.get_decoder().layers) == 2 and len(draft.get_decoder().layers) == 1
    assert draft.get_decoder().layers[0] is tiny.model.get_decoder().layers[0]
    assert draft.get_output_embeddings() is tiny.model.get_output_embeddings()
    assert not torch.allclose(short, before)  # one layer fewer: other logits
    with pytest.raises(ValueError, match="1..2"):
        first_layers(tiny.model, 3)


@pytest.mark.parametrize("name", ["bf16", "int8", "int8-all"])
def test_copies_of_a_packed_target_work_and_leave_the_global_rng_alone(name):
    """A target on the onednn backend holds packed weights that cannot be copied: the copies start from plain
    linear layers; making one draws nothing from the global RNG."""
    from pass_core.runtime.backends import pack_linears
    from tiny import tiny_loaded

    packed = tiny_loaded(seed=0)
    pack_linears(packed.model)
    before = torch.get_rng_state()
    draft = built_in(packed, name)
    assert torch.equal(torch.get_rng_state(), before)
    events = run(packed, "draft-model", PROMPTS[1], GREEDY, DraftModelDrafter(draft))
    assert output_token_ids(events) == output_token_ids(run(packed, "ar", PROMPTS[1], GREEDY))
    assert summarize(events).accepted_drafts > 0


def test_a_folder_with_the_same_vocabulary_drafts(tiny, tiny_folder):
    draft = load_draft_model(tiny, str(tiny_folder))
    assert "tiny-model" in draft.name or tiny_folder.name in draft.name
    events = run(tiny, "draft-model", PROMPTS[0], GREEDY, DraftModelDrafter(draft))
    assert output_token_ids(events) == output_token_ids(run(tiny, "ar", PROMPTS[0], GREEDY))
    state, note = resolve_draft_model(tiny, 3, None)
    assert "bfloat16 copy" in note and "offline default" in note
    assert next(state.model.parameters()).dtype == torch.bfloat16
    assert state is resolve_draft_model(tiny, 3, None)[0]  # built once per target
    assert "first 1 of 2 layers" in resolve_draft_model(tiny, 3, "first-layers")[1]


def test_another_vocabulary_or_a_missing_model_is_refused_by_name(tiny, tmp_path):
    folder = save_tiny(tmp_path / "other-vocab", seed=2)
    tokenizer = tiny_tokenizer()
    tokenizer.add_tokens(["<extra>"])
    tokenizer.save_pretrained(folder)
    with pytest.raises(ValueError, match="other-vocab.*another vocabulary"):
        load_draft_model(tiny, str(folder))
    with pytest.raises(ValueError, match="'no-such-model' could not be loaded"):
        load_draft_model(tiny, "no-such-model")


def test_cli_draft_model_option(tiny_folder, tmp_path, capsys):
    base = ["--prompt", "hi", "--model", str(tiny_folder), "--max-new-tokens", "6", "--backend", "fp32", "--json"]
    assert generate.main(["--method", "draft-model", "--draft-model", str(tiny_folder), *base]) == 0
    assert '"method": "draft-model"' in capsys.readouterr().out
    other = save_tiny(tmp_path / "wrong-vocab", seed=2)
    tokenizer = tiny_tokenizer()
    tokenizer.add_tokens(["<extra>"])
    tokenizer.save_pretrained(other)
    assert generate.main(["--method", "draft-model", "--draft-model", str(other), *base]) == 2
    assert "wrong-vocab" in capsys.readouterr().err


def test_cost_aware_lengths_charge_one_draft_pass_per_draft():
    policy = CostAwareDraftLength([1.0, 1.0, 1.0, 1.0], max_drafts=3, drafter_pass=True, per_draft=True,
                                  drafter_prior=0.3)
    assert [policy.evaluate(k)[1] for k in range(4)] == pytest.approx([1.0, 1.3, 1.6, 1.9])
    once = CostAwareDraftLength([1.0, 1.0, 1.0, 1.0], max_drafts=3, drafter_pass=True, drafter_prior=0.3)
    assert once.evaluate(3)[1] == pytest.approx(1.3)


# ------------------------------------------------------------------ the embedded model
@pytest.mark.slow
def test_embedded_model_greedy_equals_ar(smollm):
    settings = GREEDY.with_(max_new_tokens=32)
    prompt = "Repeat this sentence exactly: The quick brown fox jumps over the lazy dog."
    events = run(smollm, "draft-model", prompt, settings)
    assert output_token_ids(events) == output_token_ids(run(smollm, "ar", prompt, settings))
    assert summarize(events).accepted_drafts > 0
