"""Helpers of the losslessness suite: every registered drafting method as a test case, oracle
drafters that are right for a chosen number of drafts, and reference computations from scratch."""

from __future__ import annotations

import dataclasses
import random
import weakref

import torch

from pass_core.decoding.cache import new_cache
from pass_core.decoding.drafting import Drafter
from pass_core.decoding.events import output_token_ids
from pass_core.drafters.lookahead.adapters import GatedLoRA
from pass_core.drafters.parallelspec.layout import causal_mask
from pass_core.drafters.parallelspec.model import ParallelDrafter
from pass_core.registry import METHODS
from pass_core.decoding.sampling import logits_to_probs
from pass_core.decoding.speculative import generate_speculative
import pass_core.registry as registry
from pass_core.decoding.text import encode_prompt
from pass_core.teaching.lab import always_accept, exact_law  # noqa: F401 - re-exported for the tests
from pass_core.decoding.verification import VerificationResult, verify_drafts

#: (method key, fused) for every registered drafting method; fusable methods run both ways.
CASES = [(key, fused) for key, m in METHODS.items() if m.drafter is not None
         for fused in ((False, True) if m.fusable else (False,))]
CASE_IDS = [f"{key}{'-fused' if fused else ''}" for key, fused in CASES]


def active_adapters(loaded, seed: int = 0) -> GatedLoRA:
    """Look-ahead adapters with random B (``b_std`` chosen so that they change the tiny model's look-ahead logits
    visibly), seeded."""
    return GatedLoRA.initialise(loaded.model.get_decoder(), rank=4, generator=torch.Generator().manual_seed(seed),
                                b_std=0.05)


def make_drafter(loaded, key: str, settings, gate: float | None = None) -> Drafter:
    """The method's own drafter on ``loaded`` (its untrained fallback on a tiny model). ``gate``
    switches ParallelSpec's confidence gate on at that threshold."""
    method = METHODS[key]
    state, _ = method.find_files(loaded, settings.num_lookahead)
    if gate is not None and isinstance(state, ParallelDrafter):
        state.info["min_confidence"] = gate
    if getattr(state, "adapters", None) is not None:  # pass-lora: adapters that act (the fallback's B = 0 would not)
        state = dataclasses.replace(state, adapters=active_adapters(loaded))
    return method.drafter(state, settings)


#: Drafters built by ``case_drafter``: (id of the model, method key, settings but the seed, gate) -> (the model,
#: its drafter); holding the model keeps its id from being reused by another.
_BUILT: dict[tuple, tuple] = {}


def case_drafter(loaded, key: str, settings, gate: float | None = None) -> Drafter:
    """``make_drafter``, built once per model, method, settings (but the seed) and gate, and reused by every run of
    a test case (``Drafter.start`` begins each run with fresh caches, and building one initialises a random drafter
    or adapters, which costs more than a short run). A test that alters its drafter must use ``make_drafter``."""
    k = (id(loaded), key, settings.with_(seed=0), gate)
    if k not in _BUILT:
        _BUILT[k] = (loaded, make_drafter(loaded, key, settings, gate))
    return _BUILT[k][1]


def run(loaded, key, prompt, settings, drafter=None, stream=False, **kw):
    """All events of one run of ``key`` (AR or a drafting method) with an optional drafter (default: the case's,
    ``case_drafter``; ``stream``: the generator itself, so a test can look at the caches between steps)."""
    if drafter is None and METHODS[key].drafter is None:
        events = METHODS[key].decode(loaded, prompt, settings)
    else:
        drafter = drafter or case_drafter(loaded, key, settings)
        if settings.auto_drafts:  # read through the registry module, so that a test can replace the curve there
            kw.setdefault("pass_cost", registry.usable_pass_cost(loaded))
        events = generate_speculative(loaded, prompt, settings, drafter, method=key, **kw)
    return events if stream else list(events)


#: AR's outputs by ``ar_key``, each with its model (holding it keeps its id from being reused by another).
_AR: dict[tuple, tuple] = {}


def ar_key(loaded, prompt, settings) -> tuple:
    """What AR's output depends on: the model (its id, the float64 sum of its weights, so that a test that alters
    them in place gets a fresh run, and its EOS ids), the prompt and the settings."""
    model = loaded.model
    with torch.no_grad():
        weights = float(sum(p.sum(dtype=torch.float64) for p in model.parameters()))
    eos = (model.config.eos_token_id, model.generation_config.eos_token_id)
    return id(loaded), weights, repr(eos), prompt, settings


def ar_output(loaded, prompt, settings) -> list[int]:
    """AR's output token ids, run once per ``ar_key``: the cases of a test compare their method's output with the
    same AR run (of 371 AR runs in the decoding tests' files, 330 repeated an earlier one)."""
    key = ar_key(loaded, prompt, settings)
    if key not in _AR:
        _AR[key] = (loaded, output_token_ids(METHODS["ar"].decode(loaded, prompt, settings)))
    return list(_AR[key][1])


class Oracle(Drafter):
    """Wraps a method's drafter (which still runs: its passes, blocks and caches) and replaces its
    drafts with ones that are right (= ``truth``, the greedy continuation) for the first j drafts
    and wrong after; q is one-hot. ``right(k)`` picks j for a step with k drafts."""

    def __init__(self, inner: Drafter, truth: list[int], vocab_size: int, right):
        self.inner, self.truth, self.vocab_size, self.right = inner, truth, vocab_size, right

    @property
    def reads_hidden_states(self):
        return self.inner.reads_hidden_states

    @property
    def caches(self):
        return self.inner.caches

    def step_cost(self):
        return self.inner.step_cost()

    def start(self, run):
        super().start(run)
        self.inner.start(run)

    def propose(self, uncached, committed, max_drafts):
        prop = self.inner.propose(uncached, committed, max_drafts)
        k = len(prop.drafts)
        if not k:
            return prop
        first = len(committed) + (prop.exact is not None)  # index of d_1 in prompt + output
        j = self.right(k)
        truth = [self.truth[i] if i < len(self.truth) else 0 for i in range(first, first + k)]
        ids = torch.tensor([t if i < j else (t + 1) % self.vocab_size for i, t in enumerate(truth)])
        return dataclasses.replace(prop, drafts=ids, q=torch.nn.functional.one_hot(ids, self.vocab_size).float())

    def extension(self, n_cached, num_real, k):
        return self.inner.extension(n_cached, num_real, k)

    def accepted(self, m, out, extra_rows, num_new):
        self.inner.accepted(m, out, extra_rows, num_new)


class NoisyTarget(Oracle):
    """Wraps a method's drafter (which still runs) and replaces its drafts with samples from
    q_i = 0.25 p_i + 0.75 one-hot(the target's second most likely token), p_i computed here by a
    fresh forward over the context and the earlier drafts: drafts that are often but not always
    accepted, with a residual norm(max(0, p - q)) far from p (so a rule that resamples from p fails)."""

    def __init__(self, inner: Drafter, loaded):
        self.inner, self.loaded = inner, loaded

    def propose(self, uncached, committed, max_drafts):
        prop = self.inner.propose(uncached, committed, max_drafts)
        context = committed + ([prop.exact] if prop.exact is not None else [])
        drafts, qs = [], []
        for _ in range(len(prop.drafts)):
            logits = last_logits(self.loaded.model, context + drafts)
            second = torch.zeros_like(logits).index_fill(0, logits.topk(2).indices[1:], 1.0)
            q = 0.25 * logits_to_probs(logits, self.run.settings) + 0.75 * second
            drafts.append(int(torch.multinomial(q, 1, generator=self.run.generator)))
            qs.append(q)
        if not drafts:
            return prop
        return dataclasses.replace(prop, drafts=torch.tensor(drafts), q=torch.stack(qs))


#: The target's last-position logits by context, per model (``last_logits``).
_LOGITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def last_logits(model, ids: list[int]) -> torch.Tensor:
    """(V,) float32 logits of ``model`` at the last of ``ids``, from a fresh forward, remembered per model: the
    sampling tests' runs (top-k 2, a few tokens) meet the same few contexts again and again, and a lookup costs far
    less than the forward. (The drafts are only proposals: the test's claim holds whatever q they come from.)"""
    table = _LOGITS.setdefault(model, {})
    if tuple(ids) not in table:
        with torch.no_grad():
            table[tuple(ids)] = model(input_ids=torch.tensor([ids])).logits[0, -1]
    return table[tuple(ids)]


def always(j=None):
    """``right`` for Oracle: always right (j = None) or right for exactly j drafts."""
    return lambda k: k if j is None else min(j, k)


def partly(seed: int):
    """``right`` for Oracle: a random j in 0..k per step (forces 0 < m < k)."""
    rng = random.Random(seed)
    return lambda k: rng.randint(0, k)


def oracle_run(loaded, key, prompt, settings, right, truth_output: list[int] | None = None, **kw):
    truth = encode_prompt(loaded.tokenizer, prompt, settings.chat_template) + (
        truth_output if truth_output is not None else ar_output(loaded, prompt, settings))
    drafter = Oracle(case_drafter(loaded, key, settings), truth, loaded.vocab_size, right)
    return run(loaded, key, prompt, settings, drafter, **kw)


# ------------------------------------------------------------------ references from scratch
def fresh_target_cache(loaded, ids: list[int]):
    """(cache, last hidden states (1, T, D)) of one plain forward over ``ids``."""
    cache = new_cache(loaded.model)
    with torch.no_grad():
        out = loaded.model(input_ids=torch.tensor([ids]), cache=cache, use_cache=True, output_hidden_states=True)
    return cache, out.hidden_states


def assert_caches_equal(kept, ref, what: str, atol: float = 1e-4, rtol: float = 1e-4):
    assert len(kept.layers) == len(ref.layers), what
    for i, (a, b) in enumerate(zip(kept.layers, ref.layers)):
        torch.testing.assert_close(a.keys, b.keys, atol=atol, rtol=rtol, msg=lambda m: f"{what} keys, layer {i}: {m}")
        torch.testing.assert_close(a.values, b.values, atol=atol, rtol=rtol,
                                   msg=lambda m: f"{what} values, layer {i}: {m}")


def check_drafter_caches(loaded, drafter: Drafter, committed: list[int], hidden_states) -> int | None:
    """Compare a drafter's own caches with a fresh computation; returns the positions checked
    (None for a drafter without caches).

    Raises AssertionError for a drafter with caches but no reference here: a new method must add one.
    """
    caches = drafter.caches
    if not caches:
        return None
    inner = getattr(drafter, "inner", drafter)
    if set(caches) == {"draft_model_cache"}:
        return check_draft_model_cache(inner, committed, oracle=inner is not drafter)
    assert hasattr(inner, "pending_hidden") and set(caches) == {"drafter_cache"}, (
        f"no from-scratch reference for the caches of {type(inner).__name__}: add one to lossless_helpers.py")
    cache, model, parts = caches["drafter_cache"], inner.drafter, inner.parts
    n = cache.get_seq_length()
    hidden = model.read_features(hidden_states)  # (1, C, F*D) of committed[:-1]
    torch.testing.assert_close(inner.pending_hidden, hidden[:, n:], atol=1e-4, rtol=1e-4)
    if n:
        ref = model.new_cache()
        with torch.no_grad():
            model(parts, torch.tensor([committed[1:n + 1]]), torch.tensor([committed[:n]]), hidden[:, :n],
                  torch.zeros(0, dtype=torch.long), torch.arange(n)[None], causal_mask(0, n, torch.float32, "cpu"), ref)
        assert_caches_equal(cache, ref, "drafter cache")
    return n


def check_draft_model_cache(inner, committed: list[int], oracle: bool) -> int:
    """A draft model's cache after partial acceptance (0 < m < k): it holds the committed tokens but the pending one
    (keys and values = a fresh draft-model pass over the ids it holds), the rejected drafts rolled back. Under an
    ``Oracle`` the m kept entries are the draft model's own drafts d_1..d_m, which the oracle replaced (the next
    proposal re-feeds them from the committed tokens), so only their number and the earlier tokens are compared."""
    held = inner.held
    assert len(held) == len(committed) - 1, f"draft cache holds {len(held)} tokens, not {len(committed) - 1}"
    assert held[:inner.proposed_from] == committed[:inner.proposed_from]
    if not oracle:
        assert held == committed[:-1]
    ref = new_cache(inner.draft.model)
    with torch.no_grad():
        inner.draft.model(input_ids=torch.tensor([held]), cache=ref, use_cache=True)
    # a bfloat16 draft model: one pass over T tokens and T passes of one round differently (about 1e-3)
    loose = next(inner.draft.model.parameters()).dtype != torch.float32
    assert_caches_equal(inner.cache, ref, "draft model cache", *((2e-2, 2e-2) if loose else ()))
    return len(held)


# ------------------------------------------------------------------ broken rules
#: The next token of the marking rules (tests/test_lossless.py, tests/test_tree.py), which show that a loop path
#: commits what its verification rule returns: the tiny tokenizer's last id (its pad token), in no outcome (checked).
SENTINEL = 258


def resample_from_p(draft_ids, draft_probs, target_probs, generator):
    """Subtly broken rule (negative control): after a rejection draw from p, not norm(max(0, p - q))."""
    res = verify_drafts(draft_ids, draft_probs, target_probs, generator)
    if res.num_accepted < int(draft_ids.shape[0]):
        res = dataclasses.replace(res, next_token=int(torch.multinomial(target_probs[res.num_accepted], 1,
                                                                        generator=generator)))
    return res


def accept_first(j_of_step):
    """A rule that accepts a chosen number of drafts (not lossless: for draft-alignment tests only)."""
    def rule(draft_ids, draft_probs, target_probs, generator) -> VerificationResult:
        res = verify_drafts(draft_ids, draft_probs, target_probs, generator)
        k = int(draft_ids.shape[0])
        m = min(j_of_step(k), k)
        token = int(torch.multinomial(target_probs[m], 1, generator=generator))
        return dataclasses.replace(res, num_accepted=m, next_token=token, next_is_bonus=m == k)
    return rule
