"""Cost-aware draft lengths (issue 14 item 3, an extension): the choice rule against hand-computed values,
and losslessness with ``auto_drafts`` for every registered drafting method (greedy equality with AR while
the chosen k varies, and the sampled distribution against the exact law)."""

from __future__ import annotations

import re

import pytest

import pass_core.registry as registry
from lossless_helpers import CASE_IDS, CASES, NoisyTarget, ar_output, case_drafter, exact_law, oracle_run, partly, run
from pass_core.decoding.draft_length import CostAwareDraftLength
from pass_core.decoding.events import DraftRecord, StepEvent, output_token_ids
from pass_core.decoding.settings import DecodeSettings
from sampling_design import ALPHA, BETA, DELTA, design, total_variation

#: A cost curve under which drafting pays while drafts are accepted: c(w) = 1 + 0.05 (w - 1).
FLAT = [1 + 0.05 * (w - 1) for w in range(1, 17)]
#: A steeper curve, for the sampled-law test: with it the policy chooses at least two draft lengths k within the
#: first 4 tokens in every case (measured over 300 runs: PaSS k = 1 and 2, PaSS fused 0 and 1, ParallelSpec 0, 1
#: and 2). On ``FLAT`` it chose k = 2 in every such step of PaSS and ParallelSpec: their law was that of a fixed k.
VARYING = [1 + 0.2 * (w - 1) for w in range(1, 17)]


def step(decisions: list[str], drafting_s: float = 0.0, drafter_passes: int = 0) -> StepEvent:
    drafts = tuple(DraftRecord(i + 1, 7, "x", 0.5, 0.5, 0.1, d) for i, d in enumerate(decisions))
    return StepEvent(method="pass", step=2, tokens=(), drafts=drafts, drafting_s=drafting_s,
                     drafter_passes=drafter_passes)


def test_choice_against_hand_computed_values():
    policy = CostAwareDraftLength([40.0, 44.0, 48.0, 56.0], max_drafts=3)  # ms: c = 1, 1.1, 1.2, 1.4
    assert [policy.pass_cost(w) for w in (1, 2, 3, 4, 6)] == pytest.approx([1, 1.1, 1.2, 1.4, 1.8])
    assert policy.rate(1) == 0.5  # Laplace prior before any step
    # prior a = 0.5: E_k = 1, 1.5, 1.75, 1.875 for costs 1, 1.1, 1.2, 1.4 -> ratios 1, 1.364, 1.458, 1.339
    choice = policy.choose()
    assert (choice.k, choice.expected_tokens, choice.cost) == (2, pytest.approx(1.75), pytest.approx(1.2))
    assert choice.note.startswith("auto: k = 2 (most tokens per cost: 1.75 tokens for 1.20 AR steps; k = 1:")
    for _ in range(6):  # d_1 accepted 6 times, d_2 rejected 6 times: a_1 = 7/8, a_2 = 1/8
        policy.observe(step(["accepted", "rejected", "not_verified"]))
    assert (policy.rate(1), policy.rate(2), policy.rate(3)) == (7 / 8, 1 / 8, 1 / 2)
    # E_1 = 1.875 / 1.1 = 1.705; E_2 = 1.875 + 7/64 = 1.984 / 1.2 = 1.654: k = 1
    assert policy.choose().k == 1


def test_drafter_cost_is_learned_and_paper_step_pays_its_drafting_pass():
    policy = CostAwareDraftLength([1.0, 1.0], max_drafts=1, drafter_pass=True, one_pass_s=0.04)
    assert policy.drafter_cost() == CostAwareDraftLength.DRAFTER_PRIOR
    policy.observe(step(["rejected"], drafting_s=0.02, drafter_passes=1))
    assert policy.drafter_cost() == pytest.approx(0.5)  # 20 ms per drafter pass / 40 ms per target pass
    # a_1 = 1/3 after one rejection: E_1 = 1.333 for 1 + 0.5 -> 0.89 < 1: a plain step
    assert policy.choose().k == 0
    paper = CostAwareDraftLength([1.0, 1.2, 1.5], max_drafts=2, extra_tokens=1.0, extra_width=3)
    assert paper.evaluate(0) == (2.0, pytest.approx(2.5))  # exact token + 1 for c(3) + c(1)
    # PaSS's drafting pass appends the look-ahead rows of k drafts only: its width is 1 + k, c(1) at k = 0
    narrow = CostAwareDraftLength([1.0, 1.2, 1.5], max_drafts=2, extra_tokens=1.0, extra_width=lambda k: 1 + k)
    assert narrow.evaluate(0) == (2.0, pytest.approx(2.0)) and narrow.evaluate(2)[1] == pytest.approx(1.5 + 1.5)
    from tiny import tiny_loaded  # the drafter says so: 1 + k look-ahead rows (R = 1)
    from pass_core.drafters.lookahead.drafter import LookaheadDrafter
    from pass_core.drafters.lookahead.embeddings import LookaheadEmbeddings
    from pass_core.decoding.drafting import TargetRun
    from pass_core.decoding.settings import DecodeSettings

    loaded = tiny_loaded(0)
    drafter = LookaheadDrafter(LookaheadEmbeddings.initialise(loaded, 3))
    drafter.start(TargetRun(loaded, None, DecodeSettings(), None, None))
    assert [drafter.step_cost()["extra_width"](k) for k in range(4)] == [1, 2, 3, 4]


def test_exploration_drafts_every_nth_step():
    policy = CostAwareDraftLength([1.0, 3.0, 3.0], max_drafts=2, explore_every=4)
    ks = [policy.choose().k for _ in range(8)]
    assert ks == [0, 0, 0, 1, 0, 0, 0, 1] or ks == [0, 0, 0, 2, 0, 0, 0, 2]
    assert "exploring" in CostAwareDraftLength([1.0, 3.0], 1, explore_every=1).choose().note
    with pytest.raises(ValueError, match="pass-cost curve"):
        CostAwareDraftLength([], 2)


def chosen_k(event) -> int:
    """The draft length k the cost-aware policy chose for a step ("auto: k = 2 (...)"), before the loop caps it
    at the tokens left (the event's ``num_verified_drafts`` is after that cap and after a drafter's gate)."""
    return int(re.match(r"auto: k = (\d+)", event.draft_choice).group(1))


@pytest.fixture
def flat_curve(monkeypatch):
    """Every run sees the ``FLAT`` cost curve (1-token pass 40 ms), so that the choices do not depend on
    this machine's timings."""
    monkeypatch.setattr(registry, "usable_pass_cost", lambda loaded, *what: {"c": FLAT, "ms": [40.0 * c for c in FLAT]})


@pytest.mark.parametrize("key, fused", CASES, ids=CASE_IDS)
def test_auto_greedy_equals_ar_while_k_varies(tiny, key, fused, flat_curve):
    settings = DecodeSettings(max_new_tokens=40, num_lookahead=3, fused=fused, auto_drafts=True)
    ks = set()
    for seed, prompt in enumerate(["hello world", "def f(x):\n    return"]):
        for events in (run(tiny, key, prompt, settings), oracle_run(tiny, key, prompt, settings, partly(seed))):
            assert output_token_ids(events) == ar_output(tiny, prompt, settings)
            ks |= {chosen_k(e) for e in events}  # what the policy chose, not what a cap or gate left
            assert all(e.draft_choice.startswith("auto: k = ") for e in events)
    assert len(ks) >= 2, f"the chosen k never varied: {ks}"


def test_auto_chooses_no_more_drafts_than_the_drafter_has(tiny, flat_curve):
    """A ParallelSpec drafter trained for k = 2 under L = 4 (the page falls back to the shipped k = 3 drafter for
    L = 4..8): the policy chooses k <= 2, the drafts a step can run; it chose k = 4, quoting a cost c(5) no step
    paid, with the rates of positions 3 and 4 never observed (left at their prior). Look-ahead embeddings of a
    file's own L (2 here, under L = 4) likewise."""
    from pass_core.decoding.speculative import generate_speculative
    from pass_core.drafters.lookahead.drafter import LookaheadDrafter
    from pass_core.drafters.lookahead.embeddings import LookaheadEmbeddings
    from pass_core.drafters.parallelspec.drafter import ParallelSpecDrafter
    from pass_core.drafters.parallelspec.model import ParallelDrafter

    settings = DecodeSettings(max_new_tokens=16, num_lookahead=4, auto_drafts=True)
    curve = {"c": FLAT, "ms": [40.0 * c for c in FLAT]}
    for key, drafter in (("parallelspec", ParallelSpecDrafter(ParallelDrafter.initialise(tiny, 2))),
                         ("pass", LookaheadDrafter(LookaheadEmbeddings.initialise(tiny, 2, "random")))):
        events = list(generate_speculative(tiny, "hello", settings, drafter, method=key, pass_cost=curve))
        ks = [chosen_k(e) for e in events]
        assert max(ks) == 2 and max(e.num_verified_drafts for e in events) == 2, (key, ks)


@pytest.mark.parametrize("key, fused", [c for c in CASES if c[0] in ("pass", "parallelspec")],
                         ids=[i for c, i in zip(CASES, CASE_IDS) if c[0] in ("pass", "parallelspec")])
@pytest.mark.sampling
def test_auto_sampling_matches_exact_law(tiny, key, fused, monkeypatch):
    """As ``test_lossless``'s distribution test (first 4 tokens, temperature 1, top-k 2, noisy drafts, n runs and
    the bound b from the exact law with the same false-alarm rate and power), with the draft length chosen per
    step, on the ``VARYING`` curve: the policy must choose at least two different k within those 4 tokens (runs
    stop there: a step after them cannot change their law)."""
    monkeypatch.setattr(registry, "usable_pass_cost", lambda loaded, *what: {"c": VARYING,
                                                                              "ms": [40.0 * c for c in VARYING]})
    settings = DecodeSettings(max_new_tokens=4, num_lookahead=2, temperature=1.0, top_k=2, fused=fused,
                              auto_drafts=True)
    law = exact_law(tiny, "ab", settings, 4)
    plan = design(law, ALPHA, BETA, DELTA)
    inner = case_drafter(tiny, key, settings)
    counts, ks = {}, set()
    for seed in range(plan.runs):
        events = run(tiny, key, "ab", settings.with_(seed=seed), NoisyTarget(inner, tiny))
        out = tuple(output_token_ids(events)[:4])
        counts[out] = counts.get(out, 0) + 1
        ks |= {chosen_k(e) for e in events}
    tv = total_variation(law, counts, plan.runs)
    print(f"\nauto {key} fused={fused}: TV {tv:.4f}, k chosen {sorted(ks)}; {plan.describe()}")
    assert len(ks) >= 2, f"the policy chose one draft length only, {ks}: this would test a fixed k"
    assert tv < plan.bound, f"auto draft lengths change the law: TV {tv:.4f}; {plan.describe()}"
