"""Losslessness of every registered drafting method (issue 11): greedy equality with AR for
always-right, always-wrong, partly-right and the method's own drafts; EOS in every role; caches
after partial acceptance; the sampled distribution against the exact law, with two negative
controls; the fused step's drafts against a plain drafting pass.

Cases come from the registry (``lossless_helpers.CASES``): a new method runs all of this.
"""

from __future__ import annotations

import dataclasses
from contextlib import nullcontext

import pytest
import torch

from lossless_helpers import (CASE_IDS, CASES, SENTINEL, accept_first, always, always_accept, ar_output,
                              assert_caches_equal, case_drafter, check_drafter_caches, exact_law, fresh_target_cache,
                              make_drafter, NoisyTarget, oracle_run, partly, resample_from_p, run)
from pass_core.decoding.events import output_text, output_token_ids
from pass_core.decoding.metrics import summarize
from pass_core.registry import METHODS
from pass_core.decoding.sampling import logits_to_probs
from pass_core.decoding.settings import DecodeSettings
from pass_core.decoding.verification import verify_drafts
from sampling_design import ALPHA, BETA, DELTA, design, total_variation, tv_floor

PROMPTS = ["hello world", "def f(x):\n    return", "Grüße 😀 ok"]
L = 3
#: ParallelSpec's confidence gate for the untrained tiny drafter: about the median of its top-1
#: probability for d_1 (measured 0.009-0.026), so that some steps draft and some do not.
TINY_GATE = 0.0145


def settings_for(fused: bool, **kw) -> DecodeSettings:
    return DecodeSettings(max_new_tokens=kw.pop("max_new_tokens", 24), num_lookahead=kw.pop("num_lookahead", L),
                          fused=fused, **kw)


# ------------------------------------------------------------------ greedy equality
@pytest.mark.parametrize("key, fused", CASES, ids=CASE_IDS)
def test_greedy_own_drafts_equal_ar(tiny, key, fused):
    settings = settings_for(fused)
    for prompt in PROMPTS:
        events = run(tiny, key, prompt, settings)
        assert output_token_ids(events) == ar_output(tiny, prompt, settings)
        assert output_text(events) == tiny.tokenizer.decode(output_token_ids(events), skip_special_tokens=True)


@pytest.mark.parametrize("key, fused", CASES, ids=CASE_IDS)
def test_greedy_always_right_accepts_every_draft(tiny, key, fused):
    settings = settings_for(fused)
    events = oracle_run(tiny, key, PROMPTS[1], settings, always())
    assert output_token_ids(events) == ar_output(tiny, PROMPTS[1], settings)
    verifying = [e for e in events if e.verified_drafts]
    assert len(verifying) >= 3
    for e in verifying:
        assert e.num_accepted == e.num_verified_drafts, f"step {e.step} rejected a right draft"
        if not e.finished:
            assert e.tokens[-1].label == "bonus"
    # every full step yields k + 1 tokens (+ PaSS's exact token) for its passes (steps that drafted: prompt
    # lookup drafts only when the context holds a match)
    s = summarize(verifying)
    per_pass = (L + 2) / 2 if events[1].forward_passes == 2 else L + 1
    assert s.tokens_per_forward_pass > 0.6 * per_pass


@pytest.mark.parametrize("key, fused", CASES, ids=CASE_IDS)
def test_greedy_always_wrong_accepts_nothing(tiny, key, fused):
    settings = settings_for(fused)
    events = oracle_run(tiny, key, PROMPTS[2], settings, always(0))
    assert output_token_ids(events) == ar_output(tiny, PROMPTS[2], settings)
    s = summarize(events)
    assert s.accepted_drafts == 0 and s.verification_steps >= 3
    rejected = [e for e in events if any(t.label == "rejected" for t in e.tokens)]
    assert len(rejected) == s.verification_steps
    assert {t.label for e in events for t in e.tokens} <= {"exact", "resampled", "rejected"}


@pytest.mark.parametrize("key, fused", CASES, ids=CASE_IDS)
def test_greedy_partly_right_drafts_equal_ar(tiny, key, fused):
    """Right for d_1..d_j, wrong at d_{j+1}, j random per step: forces 0 < m < k and the cache crop."""
    settings = settings_for(fused, max_new_tokens=40)
    partial = 0
    for seed, prompt in enumerate(PROMPTS):
        events = oracle_run(tiny, key, prompt, settings, partly(seed))
        assert output_token_ids(events) == ar_output(tiny, prompt, settings)
        partial += sum(0 < e.num_accepted < e.num_verified_drafts for e in events)
        for e in events:  # the accepted drafts are exactly the committed tokens labelled so
            assert e.num_accepted == sum(t.label == "accepted" for t in e.tokens)
    assert partial >= 3, f"only {partial} steps with partial acceptance"


# ------------------------------------------------------------------ EOS in every role
@pytest.mark.parametrize("key, fused", CASES, ids=CASE_IDS)
def test_eos_as_exact_accepted_resampled_and_bonus(tiny, key, fused, monkeypatch):
    """EOS = the token at output index e (its first occurrence) of the greedy continuation. Each
    run must end exactly there, like AR, with finish reason ``eos``; over the runs EOS must arrive
    as an accepted draft, the resampled token, the bonus token and, for a method whose steps label a
    token exact (PaSS's drafting pass, a step without drafts), the exact token. A draft model drafts
    at every step, the prefill included, so its tokens are never exact before the last one."""
    settings = settings_for(fused, max_new_tokens=20)
    prompt = PROMPTS[0]
    full = ar_output(tiny, prompt, settings)
    firsts = [e for e, t in enumerate(full) if t not in full[:e]][:8]
    roles, labels = set(), set()
    for e in firsts:
        monkeypatch.setattr(tiny.model.generation_config, "eos_token_id", full[e])
        expected = full[: e + 1]
        assert ar_output(tiny, prompt, settings) == expected
        for right in (always(), always(0), always(1), partly(e), partly(e + 100)):
            events = oracle_run(tiny, key, prompt, settings, right, truth_output=full)
            assert output_token_ids(events) == expected
            assert events[-1].finish_reason == "eos"
            last = [t for t in events[-1].tokens if t.committed][-1]
            assert last.token_id == full[e]
            roles.add(last.label)
            labels |= {t.label for ev in events for t in ev.tokens}
            assert events[-1].num_accepted == sum(t.label == "accepted" for t in events[-1].tokens)
    assert roles >= {"accepted", "resampled", "bonus"} | ({"exact"} & labels), f"EOS only arrived as {roles}"


# ------------------------------------------------------------------ caches after partial acceptance
@pytest.mark.parametrize("key, fused", CASES, ids=CASE_IDS)
def test_caches_after_partial_acceptance_equal_fresh_forward(tiny, key, fused):
    """After every step with 0 < m < k: target cache (keys and values) = a fresh forward over the
    committed tokens but the pending one; drafter caches = a fresh drafter pass over them."""
    settings = settings_for(fused, max_new_tokens=40)
    checked, drafter_positions, after_step = [], [], []
    for seed, prompt in enumerate(PROMPTS):
        # the loop calls inspect_fn just before yielding the step's event and waits at the yield
        for event in oracle_run(tiny, key, prompt, settings, partly(seed), stream=True,
                                inspect_fn=after_step.append):
            state = after_step.pop()
            if 0 < event.num_accepted < event.num_verified_drafts and not event.finished:
                ref, hidden = fresh_target_cache(tiny, state["committed"][:-1])
                assert_caches_equal(state["target_cache"], ref, "target cache")
                drafter_positions.append(check_drafter_caches(tiny, state["drafter"], state["committed"], hidden))
                checked.append(event.num_accepted)
    assert len(checked) >= 3, f"only {len(checked)} partial-acceptance steps checked"
    if any(n is not None for n in drafter_positions):
        assert max(drafter_positions) > 0, "the drafter cache was never checked with content"


# ------------------------------------------------------------------ sampled distribution
WINDOW = 4


def sample_outcomes(tiny, key, settings, runs, law=None, stop_above=None, **kw):
    """Outcome counts of the first WINDOW tokens of ``runs`` seeded runs with noisy drafts around the case's own
    drafter (built once), the decisions seen, and the steps the confidence gate closed. ``stop_above``: a
    negative control's bound b; its runs stop once their TV to the exact ``law`` is sure to exceed b (``tv_floor``)."""
    inner = case_drafter(tiny, key, settings, gate=TINY_GATE)
    counts, decisions, gated = {}, set(), 0
    for seed in range(runs):
        if stop_above is not None and tv_floor(law, counts, runs) > stop_above:
            break
        events = run(tiny, key, "ab", settings.with_(seed=seed), NoisyTarget(inner, tiny), **kw)
        out = tuple(output_token_ids(events)[:WINDOW])
        counts[out] = counts.get(out, 0) + 1
        decisions |= {d.decision for e in events for d in e.drafts}
        decisions |= {t.label for e in events for t in e.tokens}
        gated += sum(e.drafter_passes > 0 and not e.verified_drafts for e in events)
    return counts, decisions, gated


#: Methods whose sampling runs the loop path of another method (``loop_path``): fixed-token is PaSS with other
#: look-ahead vectors, and the sampling test's drafts come from ``NoisyTarget`` whatever the vectors are, so its
#: runs would repeat PaSS's (about 2 x 2,250 tiny-model runs). ``test_sampling_cases_cover_every_loop_path`` checks
#: that each method left out still shares its path, so a method that changes its drafter gets its own case again.
SAME_LOOP_PATH = {"fixed-token": "pass"}
SAMPLING_CASES = [c for c in CASES if c[0] not in SAME_LOOP_PATH]
SAMPLING_IDS = [i for c, i in zip(CASES, CASE_IDS) if c[0] not in SAME_LOOP_PATH]


def loop_path(tiny, key, fused) -> tuple:
    """What the loop runs for a case, but the numbers its drafter holds: the drafter's class, its fused step, its
    block of look-ahead rows (learned tokens per block, draft rows), its adapters, tree and gate (or None)."""
    drafter = make_drafter(tiny, key, settings_for(fused, num_lookahead=2))
    la = getattr(drafter, "lookahead", None)
    return (type(drafter).__name__, getattr(drafter, "fused", None),
            (la.block_len, tuple(la.draft_indices()), la.adapters is not None) if la is not None else None,
            getattr(drafter, "shape", None), getattr(drafter, "tree", None))


def test_sampling_cases_cover_every_loop_path(tiny):
    for (key, fused) in CASES:
        if key in SAME_LOOP_PATH:
            twin = SAME_LOOP_PATH[key]
            assert loop_path(tiny, key, fused) == loop_path(tiny, twin, fused), (
                f"{key} no longer runs {twin}'s loop path: remove it from SAME_LOOP_PATH so that it is sampled")
    assert {k for k, _ in SAMPLING_CASES} == {k for k, _ in CASES} - set(SAME_LOOP_PATH)


#: The case whose runs with the two broken rules show the sampled-law test's power (``test_broken_rules_exceed_the_
#: bound``): every case verifies with the same rule (``verify_drafts``), and ``test_sampling_matches_exact_law``
#: checks for each case that what the loop commits is what that rule returned.
CONTROL_CASE = ("pass", False)

def marking_rule(draft_ids, draft_probs, target_probs, generator):
    """A rule (not lossless) that accepts d_1 only and then commits ``SENTINEL``: shows that a loop path commits
    exactly what its verification rule returns (the accepted count and the next token)."""
    res, k = verify_drafts(draft_ids, draft_probs, target_probs, generator), int(draft_ids.shape[0])
    return dataclasses.replace(res, num_accepted=min(1, k), next_token=SENTINEL, next_is_bonus=k <= 1)


def sampling_settings(fused: bool) -> DecodeSettings:
    return settings_for(fused, max_new_tokens=WINDOW, num_lookahead=2, temperature=1.0, top_k=2)


@pytest.mark.sampling
@pytest.mark.parametrize("key, fused", SAMPLING_CASES, ids=SAMPLING_IDS)
def test_sampling_matches_exact_law(tiny, key, fused):
    """First 4 tokens at temperature 1, top-k 2 (16 outcomes, the bonus token inside the window), L = 2,
    ParallelSpec with its confidence gate on. The number of seeded runs n and the bound b come from the exact law
    (``sampling_design.design``: false-alarm rate ALPHA, power 1 - BETA against any law at TV >= DELTA); the TV of
    n runs must stay under b. The loop path must commit what its rule returns (``marking_rule``, a few runs), so
    that the broken rules, run once on ``CONTROL_CASE`` (``test_broken_rules_exceed_the_bound``), would act here
    as they act there.

    Drafts come from ``NoisyTarget`` (q = 0.25 p + 0.75 one-hot of the second most likely token),
    wrapped around the method's own drafter, which still runs (passes, exact token, fused blocks,
    caches, ParallelSpec's gate): an untrained drafter on a random model is almost never accepted,
    so it could not show both decisions.

    Measured (tiny-llama-0, `pytest tests/test_lossless.py -k "sampling and (pass-fused or parallelspec)" -s`):
    n = 625, b = 0.1018; TV with the real rule 0.0656 (pass-fused), 0.0596 (parallelspec).
    """
    settings = sampling_settings(fused)
    law = exact_law(tiny, "ab", settings, WINDOW)
    assert len(law) == 16 and abs(sum(law.values()) - 1) < 1e-5
    assert tiny.vocab_size - 1 == SENTINEL and all(SENTINEL not in outcome for outcome in law)
    plan = design(law, ALPHA, BETA, DELTA)
    counts, seen, gated = sample_outcomes(tiny, key, settings, plan.runs)
    assert {"accepted", "rejected", "bonus", "resampled"} <= seen, f"not every decision happened: {seen}"
    if key == "parallelspec":
        assert gated > 0, "the confidence gate never closed"
    tv = total_variation(law, counts, plan.runs)
    print(f"\n{key} fused={fused}: TV {tv:.4f}; {plan.describe()}")  # shown with pytest -s, and on failure
    assert tv < plan.bound, f"{key} sampling differs from the target's law: TV {tv:.4f}; {plan.describe()}"
    inner = case_drafter(tiny, key, settings, gate=TINY_GATE)
    marked = 0
    for seed in range(8):
        events = run(tiny, key, "ab", settings.with_(seed=seed, max_new_tokens=12), NoisyTarget(inner, tiny),
                     verify_fn=marking_rule)
        for e in events:
            if e.verified_drafts and not e.finished:
                committed = [t.token_id for t in e.tokens if t.committed]
                assert e.num_accepted == min(1, e.num_verified_drafts) and committed[-1] == SENTINEL, (
                    f"step {e.step} of {key} did not commit what its rule returned: {committed}")
                marked += 1
    assert marked >= 4, f"only {marked} verification steps checked"


@pytest.mark.sampling
def test_broken_rules_exceed_the_bound(tiny):
    """The sampled-law test's power, shown on ``CONTROL_CASE`` with the same n and b: both broken rules (always
    accept; resample from p instead of the residual) must exceed b. (Measured, n = 625, b = 0.1018: always-accept
    TV 0.555, resample-from-p 0.174.) Each stops once the TV of its n runs is sure to exceed b (``tv_floor``)."""
    key, fused = CONTROL_CASE
    settings = sampling_settings(fused)
    law = exact_law(tiny, "ab", settings, WINDOW)
    plan = design(law, ALPHA, BETA, DELTA)
    for broken in (always_accept, resample_from_p):
        counts = sample_outcomes(tiny, key, settings, plan.runs, law=law, stop_above=plan.bound, verify_fn=broken)[0]
        tv_broken, made = tv_floor(law, counts, plan.runs), sum(counts.values())
        print(f"{key} fused={fused} {broken.__name__}: TV of {plan.runs} runs >= {tv_broken:.4f} after {made}")
        assert tv_broken > plan.bound, (f"{broken.__name__}: TV {tv_broken:.4f} under the bound, the test has no "
                                        f"power; {plan.describe()}")


# ------------------------------------------------------------------ look-ahead rows and fused blocks
@pytest.mark.parametrize("key, fused", [c for c in CASES if METHODS[c[0]].fusable],
                         ids=[i for c, i in zip(CASES, CASE_IDS) if METHODS[c[0]].fusable])
def test_lookahead_drafts_equal_a_plain_drafting_pass(tiny, key, fused):
    """Each step's q equals (allclose) the q of a plain drafting pass over the committed tokens
    + [LA_1..LA_L], computed here from scratch. For the fused step that is block m's q after m
    accepted drafts (m forced to 0..k by a rule that accepts a chosen number of drafts). The paper's step
    appends only the look-ahead rows of the drafts it can verify (min(L, max_drafts): at a run's end, after its
    exact token, or a cost-aware k): its j drafts' q equal the whole block's first j (causal attention), and
    none for 0."""
    settings = settings_for(fused, temperature=1.0, max_new_tokens=30)
    drafter = make_drafter(tiny, key, settings)
    la = drafter.lookahead.for_model(tiny)  # (L, D)
    embed = tiny.model.get_input_embeddings()
    proposals, ms = [], []
    original = drafter.propose

    def recording_propose(uncached, committed, max_drafts):
        prop = original(uncached, committed, max_drafts)
        proposals.append((list(committed), prop))
        if not fused:
            assert len(prop.drafts) == min(L, max_drafts), (len(prop.drafts), max_drafts)
        return prop

    drafter.propose = recording_propose
    events = run(tiny, key, PROMPTS[0], settings, drafter, verify_fn=accept_first(partly(7)))
    checked = cut = 0
    for committed, prop in proposals:
        if not len(prop.drafts):
            continue
        # paper: the block follows the pending token; fused: the last accepted token (the pending
        # token is the resampled / bonus one that block m's exact position produced)
        context = committed if prop.exact is not None else committed[:-1]
        adapters = drafter.lookahead.adapters  # pass-lora: the adapters act at the block's rows only
        block = torch.arange(len(context), len(context) + L)
        with torch.no_grad(), adapters.gated(tiny.model.get_decoder(), block) if adapters else nullcontext():
            x = torch.cat([embed(torch.tensor([context])), la[None]], 1)
            logits = tiny.model(inputs_embeds=x).logits[0, -L:]  # (L, V): LA_1..LA_L
        torch.testing.assert_close(prop.q, logits_to_probs(logits, settings)[:len(prop.q)], atol=1e-5, rtol=1e-4)
        checked += 1
        cut += len(prop.q) < L
    ms = [e.num_accepted for e in events if e.verified_drafts]
    assert checked >= 5 and len(set(ms)) >= 3, f"checked {checked} steps, accepted counts {sorted(set(ms))}"
    assert fused or cut, "no step drafted fewer than L: the narrower pass was not exercised"
    if not fused:  # each row appended is verified: the exact token's position is left out of the budget (at the run's
        # end the pass appended one look-ahead row more than its step could verify)
        assert [len(p.drafts) for _, p in proposals] == [e.num_verified_drafts for e in events]


def test_every_registered_method_is_a_case():
    drafting = [k for k, m in METHODS.items() if m.drafter is not None]
    assert {k for k, _ in CASES} == set(drafting) and len(drafting) >= 3
