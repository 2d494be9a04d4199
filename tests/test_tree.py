"""Token trees (docs/algorithms.md section 4b): the shape, its mask and positions against separate chain
passes, the greedy shape construction, the tree acceptance rule, and cache compaction."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random

import pytest
import torch

from lossless_helpers import (SENTINEL, ar_output, assert_caches_equal, check_drafter_caches, fresh_target_cache,
                              make_drafter, run)
from pass_core.decoding.drafting import Drafter
from pass_core.decoding.events import DraftRecord, output_token_ids
from pass_core.decoding.settings import DecodeSettings
from pass_core.decoding.text import encode_prompt
from pass_core.registry import METHODS
from pass_core.teaching.lab import exact_law, total_variation, tv_bound
from sampling_design import tv_floor
from pass_core.decoding.cache import cache_len, keep_positions
from pass_core.decoding.target import target_forward
from pass_core.decoding.tree import TreeSpec, best_tree, chain
from pass_core.decoding.tree_verification import verify_tree
from pass_core.decoding.verification import verify_drafts

#: A tree with siblings at two depths and a chain under the top candidate.
SHAPE = TreeSpec(((0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0)))


def test_tree_structure():
    tree = TreeSpec(((0, 1), (1,), (0,), (0, 0)))  # any order in, node order out
    assert tree.paths == ((0,), (1,), (0, 0), (0, 1))
    assert tree.parents == (-1, -1, 0, 0) and tree.depths == (1, 1, 2, 2) and tree.ranks == (0, 1, 0, 1)
    assert tree.children(-1) == (0, 1) and tree.children(0) == (2, 3) and tree.children(1) == ()
    assert tree.leaf_paths() == [[1], [0, 2], [0, 3]]
    assert tree.within(1).paths == ((0,), (1,)) and tree.count_within(1) == 2
    assert chain(3).paths == ((0,), (0, 0), (0, 0, 0)) and chain(3).is_chain and not tree.is_chain
    assert SHAPE.path_to(6) == [0, 3, 6]
    anc = SHAPE.ancestors()
    assert anc[6].nonzero().flatten().tolist() == [0, 3, 6] and anc[5].nonzero().flatten().tolist() == [1, 5]
    for bad in [((0, 0),), ((0,), (0,)), ((),), ((-1,),)]:
        with pytest.raises(ValueError):
            TreeSpec(bad)
    assert TreeSpec.from_json(tree.to_json()) == tree
    with pytest.raises(ValueError, match="shapes.json"):
        TreeSpec.from_json([[0], "1"], where="shapes.json")


def test_mask_and_positions():
    mask = SHAPE.attention_mask(n_cached=4, num_real=2, dtype=torch.float32)  # (1, 1, 2 + 7, 4 + 2 + 7)
    allowed = (mask[0, 0] == 0)
    assert mask.shape == (1, 1, 9, 13)
    assert allowed[:, :4].all()  # everybody sees the cache
    assert allowed[0, 4:].tolist() == [True] + [False] * 8  # real tokens: causal
    assert allowed[2 + 6].nonzero().flatten().tolist() == [0, 1, 2, 3, 4, 5, 6, 9, 12]  # node (0,0,0)
    assert SHAPE.position_ids(4, 2).tolist() == [[4, 5, 6, 6, 6, 7, 7, 7, 8]]


@pytest.mark.parametrize("num_real", [1, 3])
def test_tree_pass_equals_separate_chain_passes(tiny, num_real):
    """One pass over every node under the tree mask gives, at each node, the logits of a plain causal pass over
    the prefix and the node's path (Llama with a 4-D float mask and explicit position ids)."""
    model = tiny.model
    gen = torch.Generator().manual_seed(0)
    prefix = torch.randint(0, tiny.vocab_size, (12,), generator=gen).tolist()
    nodes = torch.randint(0, tiny.vocab_size, (SHAPE.num_nodes,), generator=gen).tolist()
    cached, real = prefix[:-num_real], prefix[-num_real:]
    cache, _ = fresh_target_cache(tiny, cached)
    n = cache_len(cache)
    ids = torch.tensor([real + nodes])
    rows = torch.arange(num_real - 1, num_real + SHAPE.num_nodes)
    with torch.no_grad():
        tree_logits = target_forward(model, cache, rows, input_ids=ids,
                                     attention_mask=SHAPE.attention_mask(n, num_real, torch.float32),
                                     position_ids=SHAPE.position_ids(n, num_real)).logits  # (1 + N, V)
        for j in [-1] + list(range(SHAPE.num_nodes)):
            path = [nodes[a] for a in SHAPE.path_to(j)] if j >= 0 else []
            ref = model(input_ids=torch.tensor([prefix + path])).logits[0, -1]
            torch.testing.assert_close(tree_logits[j + 1], ref, atol=1e-4, rtol=1e-4, msg=f"node {j}")
    # the broken control: without the mask every node would see its siblings (it must differ)
    cache2, _ = fresh_target_cache(tiny, cached)
    with torch.no_grad():
        causal = target_forward(model, cache2, rows, input_ids=ids, position_ids=SHAPE.position_ids(n, num_real)).logits
    assert not torch.allclose(causal[1 + 6], tree_logits[1 + 6], atol=1e-3)


def test_keep_positions_equals_a_fresh_forward(tiny):
    """After a tree pass, gathering the accepted path's K/V gives the cache of a plain forward over the committed
    tokens (keys and values, every layer)."""
    gen = torch.Generator().manual_seed(1)
    prefix = torch.randint(0, tiny.vocab_size, (9,), generator=gen).tolist()
    nodes = torch.randint(0, tiny.vocab_size, (SHAPE.num_nodes,), generator=gen).tolist()
    cache, _ = fresh_target_cache(tiny, prefix[:-1])
    n = cache_len(cache)
    with torch.no_grad():
        target_forward(tiny.model, cache, torch.arange(1), input_ids=torch.tensor([prefix[-1:] + nodes]),
                       attention_mask=SHAPE.attention_mask(n, 1, torch.float32), position_ids=SHAPE.position_ids(n, 1))
    path = [1, 5]  # (1,), (1, 0): through a non-first sibling
    keep_positions(cache, n + 1, [n + 1 + j for j in path])
    ref, _ = fresh_target_cache(tiny, prefix + [nodes[j] for j in path])
    assert cache_len(cache) == n + 1 + len(path)
    assert_caches_equal(cache, ref, "tree cache after compaction")


def test_best_tree_greedy_construction():
    """Medusa's recipe: the node with the largest product of acceptance rates along its path comes next."""
    acceptance = [[0.5, 0.2, 0.1], [0.4, 0.1], [0.3]]
    tree = best_tree(acceptance, 4)
    # values: (0)=.5, (0,0)=.2, (1)=.2, (0,0,0)=.06, (2)=.1, (0,1)=.05 ...
    assert tree.paths == ((0,), (1,), (2,), (0, 0))  # node order: by depth
    assert tree.expected_tokens(acceptance) == pytest.approx(1 + 0.5 + 0.2 + 0.2 + 0.1)
    assert best_tree(acceptance, 1).paths == ((0,),)
    universe = best_tree(acceptance, 100).paths
    assert len(universe) == 3 + 3 * 2 + 3 * 2 * 1  # everything the table allows
    for n in range(1, 6):  # no tree of n nodes (closed under parents) expects more than the greedy one
        best = max(TreeSpec(sub).expected_tokens(acceptance) for sub in itertools.combinations(universe, n)
                   if all(len(x) == 1 or x[:-1] in sub for x in sub))
        assert best_tree(acceptance, n).expected_tokens(acceptance) == pytest.approx(best), n
    with pytest.raises(ValueError):
        best_tree([[1.5]], 2)


def test_verify_tree_on_a_chain_is_verify_drafts():
    """For a chain the tree rule is the chain rule, and uses the generator identically."""
    vocab = 7
    for seed in range(200):
        gen = torch.Generator().manual_seed(seed)
        k = int(torch.randint(1, 4, (1,), generator=gen))
        q = torch.rand(k, vocab, generator=gen).pow(3).softmax(-1) if seed % 2 else torch.rand(k, vocab, generator=gen)
        q = q / q.sum(-1, keepdim=True)
        p = torch.rand(k + 1, vocab, generator=gen).pow(4)
        p = p / p.sum(-1, keepdim=True)
        drafts = torch.multinomial(q, 1, generator=gen).flatten()
        chain_result = verify_drafts(drafts, q, p, torch.Generator().manual_seed(seed))
        tree_result = verify_tree(chain(k), drafts, q, p, torch.Generator().manual_seed(seed))
        assert (tree_result.num_accepted, tree_result.next_token, tree_result.next_is_bonus) == (
            chain_result.num_accepted, chain_result.next_token, chain_result.next_is_bonus), seed
        assert tree_result.path == tuple(range(chain_result.num_accepted))


def _two_token_law(rule, draws: int, seed: int = 0):
    """Empirical and exact law of the first two committed tokens of one tree step over a 5-token vocabulary:
    SHAPE with deterministic candidates (q one-hot), random p per row. After a node a is accepted the second
    token comes from p at a; when every child of the root is rejected, the step ends (second token None)."""
    gen = torch.Generator().manual_seed(seed)
    vocab = 5
    p = torch.rand(SHAPE.num_nodes + 1, vocab, generator=gen).pow(2)
    p = p / p.sum(-1, keepdim=True)
    ids = torch.tensor([3, 0, 4, 1, 2, 4, 0])  # siblings distinct
    q = torch.nn.functional.one_hot(ids, vocab).float()
    row_of = {int(ids[c]): c + 1 for c in SHAPE.children(-1)}
    exact = {}
    for a in range(vocab):
        for b in (range(vocab) if a in row_of else [None]):
            exact[(a, b)] = float(p[0, a]) * (float(p[row_of[a], b]) if b is not None else 1.0)
    counts = {}
    for _ in range(draws):
        result = rule(SHAPE, ids, q, p, gen)
        tokens = [int(ids[j]) for j in result.path] + [result.next_token]
        key = (tokens[0], tokens[1] if result.path else None)
        counts[key] = counts.get(key, 0) + 1 / draws
    return exact, counts


def test_verify_tree_keeps_the_target_law():
    """The tree rule commits tokens distributed exactly as p (first token from p at the root, the next from p at
    the accepted node); drawing from p instead of p_res after rejections (a negative control) does not."""
    draws = 3000
    exact, counts = _two_token_law(verify_tree, draws)
    bound = tv_bound(exact, draws)
    tv = total_variation(exact, counts)
    _, broken = _two_token_law(resample_from_p_tree, draws)
    tv_broken = total_variation(exact, broken)
    print(f"TV {tv:.4f}, resample from p {tv_broken:.4f}, bound {bound:.4f}")
    assert tv < bound < tv_broken


def test_verify_tree_greedy():
    """Greedy: the path whose every node is the target's argmax, then the argmax after it."""
    vocab = 6
    ids = torch.tensor([1, 2, 3, 4, 5, 0, 2])  # SHAPE's nodes
    p = torch.zeros(SHAPE.num_nodes + 1, vocab)
    p[:, 3] = 1.0
    p[0] = torch.nn.functional.one_hot(torch.tensor(2), vocab)  # root: token 2 = node (1,)
    p[1 + 1] = torch.nn.functional.one_hot(torch.tensor(0), vocab)  # at node 1: token 0 = node (1, 0)
    p[1 + 5] = torch.nn.functional.one_hot(torch.tensor(5), vocab)  # at node 5 (a leaf): the bonus
    q = torch.nn.functional.one_hot(ids, vocab).float()
    result = verify_tree(SHAPE, ids, q, p, None)
    assert result.path == (1, 5) and result.next_token == 5 and result.next_is_bonus
    assert result.decisions == ("rejected", "accepted", "not_verified", "not_verified", "not_verified",
                                "accepted", "not_verified")
    with pytest.raises(ValueError, match="0..5"):
        verify_tree(SHAPE, ids + 10, q, p, None)


# ------------------------------------------------------------------ the loop with trees, every tree-capable method
TREE_CASES = [key for key, m in METHODS.items() if m.tree]
PROMPTS = ["hello world", "def f(x):\n    return", "Grüße 😀 ok"]


def tree_drafter(loaded, key, settings, tree=SHAPE):
    """The method's own drafter (untrained fallback on the tiny model) drafting ``tree``."""
    drafter = make_drafter(loaded, key, settings)
    drafter.shape = tree
    return drafter


class TreeOracle(Drafter):
    """Wraps a method's tree drafter (which still runs: its passes and caches) and replaces the node tokens: at
    position d the target's greedy token (``truth``) is the candidate of rank ``ranks[d - 1]`` (None: of no rank),
    every other candidate is wrong. ``choose(tree) -> ranks`` runs once per step; ``expected`` maps the index
    of a step's first draft in prompt + output to the path it must accept (the longest along those ranks)."""

    def __init__(self, inner, truth, vocab_size, choose):
        self.inner, self.truth, self.vocab_size, self.choose, self.expected = inner, truth, vocab_size, choose, {}

    reads_hidden_states = property(lambda self: self.inner.reads_hidden_states)
    caches = property(lambda self: self.inner.caches)

    def start(self, run):
        super().start(run)
        self.inner.start(run)

    def propose(self, uncached, committed, max_drafts):
        prop = self.inner.propose(uncached, committed, max_drafts)
        if prop.tree is None or not len(prop.drafts):
            return prop
        first, tree = len(committed) + (prop.exact is not None), prop.tree
        ranks = self.choose(tree)
        ids = []
        for path in tree.paths:
            truth = self.truth[first + len(path) - 1] if first + len(path) - 1 < len(self.truth) else 0
            ids.append(truth if path[-1] == ranks[len(path) - 1] else (truth + 1 + path[-1]) % self.vocab_size)
        path = ()
        while len(path) < len(ranks) and path + (ranks[len(path)],) in tree.paths:
            path += (ranks[len(path)],)
        self.expected[first] = path
        ids = torch.tensor(ids)
        return dataclasses.replace(prop, drafts=ids, q=torch.nn.functional.one_hot(ids, self.vocab_size).float())

    def extension(self, n_cached, num_real, k):
        return self.inner.extension(n_cached, num_real, k)

    def accepted(self, m, out, extra_rows, num_new):
        self.inner.accepted(m, out, extra_rows, num_new)


def right(seed):
    """Ranks along a random root-to-leaf path of the tree: the whole path is right."""
    rng = random.Random(seed)
    return lambda tree: list(tree.paths[rng.choice(tree.leaf_paths())[-1]]) + [None] * tree.max_depth


def wrong(tree):
    return [None] * tree.max_depth


def partly(seed):
    """Ranks along a random path, cut at a random depth: right for 0..depth nodes, then wrong."""
    rng = random.Random(seed)

    def choose(tree):
        ranks = list(tree.paths[rng.choice(tree.leaf_paths())[-1]])
        cut = rng.randint(0, len(ranks))
        return ranks[:cut] + [None] * (tree.max_depth - cut + 1)
    return choose


def oracle_tree_run(loaded, key, prompt, settings, choose, truth_output=None, tree=SHAPE, **kw):
    truth = encode_prompt(loaded.tokenizer, prompt, settings.chat_template) + (
        truth_output if truth_output is not None else ar_output(loaded, prompt, settings))
    oracle = TreeOracle(tree_drafter(loaded, key, settings, tree), truth, loaded.vocab_size, choose)
    return oracle, run(loaded, key, prompt, settings, oracle, **kw)


def accepted_paths(event) -> tuple[int, ...]:
    """The accepted node's ranks of a tree step (from its drafts and tree_parents alone)."""
    ranks = []
    for j, d in enumerate(event.drafts):
        if d.decision == "accepted":
            siblings = [i for i, parent in enumerate(event.tree_parents) if parent == event.tree_parents[j]]
            ranks.append(siblings.index(j))
    return tuple(ranks)


@pytest.mark.parametrize("key", TREE_CASES)
@pytest.mark.parametrize("kind", ["right", "wrong", "partly"])
def test_tree_greedy_equals_ar(tiny, key, kind):
    """Greedy output with right, wrong and partly-right trees equals AR; each full step accepts exactly the path
    the oracle put the target's tokens on, and right / partly-right trees accept paths through later siblings."""
    settings = DecodeSettings(max_new_tokens=24, num_lookahead=3)
    through_sibling = 0
    for seed, prompt in enumerate(PROMPTS):
        choose = {"right": right(seed), "wrong": wrong, "partly": partly(seed)}[kind]
        oracle, events = oracle_tree_run(tiny, key, prompt, settings, choose)
        assert output_token_ids(events) == ar_output(tiny, prompt, settings), (key, kind, prompt)
        tree_steps, first = [], len(encode_prompt(tiny.tokenizer, prompt, settings.chat_template))
        for event in events:
            exact = event.tokens[0].label == "exact"
            if event.num_verified_drafts == SHAPE.num_nodes and not event.finished:
                expected = oracle.expected[first + exact]
                assert accepted_paths(event) == expected
                assert len(event.new_token_ids) == exact + len(expected) + 1
                tree_steps.append(event)
            first += len(event.new_token_ids)
        assert len(tree_steps) >= 3
        through_sibling += sum(any(r > 0 for r in accepted_paths(e)) for e in tree_steps)
        if kind == "wrong":
            assert all(e.num_accepted == 0 for e in events)
    if kind != "wrong":
        assert through_sibling > 0, "no accepted path went through a non-first sibling"


@pytest.mark.parametrize("key", TREE_CASES)
def test_tree_own_drafts_equal_ar(tiny, key):
    settings = DecodeSettings(max_new_tokens=24, num_lookahead=3)
    for prompt in PROMPTS:
        events = run(tiny, key, prompt, settings, tree_drafter(tiny, key, settings))
        assert output_token_ids(events) == ar_output(tiny, prompt, settings)
        assert any(e.tree_parents == SHAPE.parents for e in events)


@pytest.mark.parametrize("key", TREE_CASES)
def test_a_tree_pane_shows_every_rejected_node_it_tried(tiny, key):
    """A tree step's tokens show every node tried: each accepted node after its rejected elder siblings, then the
    last accepted node's rejected children before the resampled token (the pane showed one rejected child and
    hid the rest, so it undercounted the rejections that the tree figure and α count); a click on any of them
    opens its own node (``pane_node``). By hand on the SHAPE tree too."""
    from pass_core.decoding.tree_verification import tree_token_records
    from playground.tree_race import pane_node

    settings = DecodeSettings(max_new_tokens=24, num_lookahead=3, temperature=1.0, top_k=4)
    greedy = DecodeSettings(max_new_tokens=24, num_lookahead=3)
    runs = [run(tiny, key, prompt, settings.with_(seed=seed), tree_drafter(tiny, key, settings))
            for seed, prompt in enumerate(PROMPTS)]  # sampled: rejections; an oracle's right paths: later siblings
    runs += [oracle_tree_run(tiny, key, PROMPTS[0], greedy, choose)[1] for choose in (right(1), partly(2))]
    elders = 0
    for events in runs:
        for e in events:
            if not e.tree_parents or e.tokens[-1].label not in ("resampled", "bonus"):
                continue
            struck = [t for t in e.tokens if t.label == "rejected"]
            assert len(struck) == sum(d.decision == "rejected" for d in e.drafts), (e.step, e.tokens)
            for i, t in enumerate(e.tokens):
                if t.label in ("accepted", "rejected"):
                    node = e.drafts[int(pane_node(e, i))]
                    assert (node.token_id, node.decision) == (t.token_id, t.label), (e.step, i)
            path = [j for j, d in enumerate(e.drafts) if d.decision == "accepted"]
            elders += any(e.drafts[j].decision == "rejected" and e.tree_parents[j] != (path[-1] if path else -1)
                          for j in range(len(e.drafts)))
    assert elders, "no step rejected a sibling before accepting one: the case was not exercised"

    def shown(decisions, records):  # SHAPE's nodes 0..6 are tokens 10..16, named n0..n6
        drafts = tuple(DraftRecord(position=len(p), token_id=10 + j, text=f"n{j}", q=1.0, p=0.5, u=0.5, decision=d)
                       for j, (p, d) in enumerate(zip(SHAPE.paths, decisions)))
        return [(t.text, t.label) for t in tree_token_records(records, drafts, SHAPE.parents)]
    nv = "not_verified"
    leaf = ("rejected", "accepted", nv, nv, nv, "accepted", nv)  # n0 rejected, n1 then its child n5 accepted
    assert shown(leaf, [(11, "accepted", "n1"), (15, "accepted", "n5"), (99, "bonus", "x")]) == [
        ("n0", "rejected"), ("n1", "accepted"), ("n5", "accepted"), ("x", "bonus")]
    cut = leaf[:5] + (nv, nv)  # EOS at n1 (tree_draft_records then calls n5 not verified): nothing shown past it
    assert shown(cut, [(11, "accepted", "n1")]) == [("n0", "rejected"), ("n1", "accepted")]
    resampled = ("rejected", "accepted", nv, nv, nv, "rejected", nv)  # n5 rejected under n1: y resampled
    assert shown(resampled, [(11, "accepted", "n1"), (50, "resampled", "y")]) == [
        ("n0", "rejected"), ("n1", "accepted"), ("n5", "rejected"), ("y", "resampled")]
    # the token budget ended the step before its resampled token: its rejected child is not shown, as in a chain
    assert shown(resampled, [(11, "accepted", "n1")]) == [("n0", "rejected"), ("n1", "accepted")]


def test_children_tried_after_an_eos_node_are_not_judged():
    """EOS the last node of the accepted path: its children, tried against the target past the output's end, count
    as not verified, rejected ones too (they counted as judged, so alpha depended on what the rule said there);
    a sibling rejected before the path went on was judged inside the output and stays rejected."""
    from pass_core.decoding.tree_verification import TreeVerification, tree_draft_records

    class Detok:
        def token_text(self, tid):
            return f"n{tid - 10}"

    nv, tried = "not_verified", (0, 1, 5)  # n0 rejected, n1 accepted, then n1's child n5 rejected
    decisions = ("rejected", "accepted", nv, nv, nv, "rejected", nv)
    result = TreeVerification(path=(1,), next_token=50, next_is_bonus=False, decisions=decisions,
                              uniforms=tuple(0.5 if j in tried else None for j in range(7)),
                              accept_probs=tuple(0.4 if j in tried else None for j in range(7)), p_draft=(0.4,) * 7,
                              p_res=tuple(0.4 if j in tried else None for j in range(7)), q_draft=(1.0,) * 7)
    ids = list(range(10, 17))
    ended = tree_draft_records(Detok(), SHAPE, ids, result, [(11, "accepted", "n1")])  # n1 was EOS
    assert [d.decision for d in ended] == ["rejected", "accepted", nv, nv, nv, nv, nv]
    assert ended[5].u is None and ended[0].u == 0.5
    going_on = tree_draft_records(Detok(), SHAPE, ids, result, [(11, "accepted", "n1"), (50, "resampled", "y")])
    assert [d.decision for d in going_on] == list(decisions)


@pytest.mark.parametrize("key", TREE_CASES)
def test_tree_eos_on_a_path(tiny, key, monkeypatch):
    """EOS = the token at output index e: every run ends exactly there like AR; EOS arrives as an accepted node
    of a tree path (also through a later sibling), and accepted nodes past EOS do not count as accepted."""
    settings = DecodeSettings(max_new_tokens=20, num_lookahead=3)
    full = ar_output(tiny, PROMPTS[0], settings)
    firsts = [e for e, t in enumerate(full) if t not in full[:e]][:8]
    roles, sibling_eos = set(), 0
    for e in firsts:
        monkeypatch.setattr(tiny.model.generation_config, "eos_token_id", full[e])
        for choose in (right(e), partly(e), right(e + 100)):
            _, events = oracle_tree_run(tiny, key, PROMPTS[0], settings, choose, truth_output=full)
            assert output_token_ids(events) == full[: e + 1] and events[-1].finish_reason == "eos"
            last = events[-1]
            role = [t for t in last.tokens if t.committed][-1].label
            roles.add(role)
            assert last.num_accepted == sum(t.label == "accepted" for t in last.tokens)
            if role == "accepted" and last.tree_parents:
                sibling_eos += any(r > 0 for r in accepted_paths(last))
    assert "accepted" in roles and sibling_eos > 0, (roles, sibling_eos)


@pytest.mark.parametrize("key", TREE_CASES)
def test_tree_caches_after_compaction_equal_fresh_forward(tiny, key):
    """After every tree step that accepted a path with a later sibling: target cache (keys and values, every
    layer) = a fresh forward over the committed tokens but the pending one; drafter caches likewise."""
    settings = DecodeSettings(max_new_tokens=40, num_lookahead=3)
    checked = 0
    for seed, prompt in enumerate(PROMPTS):
        after_step = []
        _, events = oracle_tree_run(tiny, key, prompt, settings, partly(seed), stream=True,
                                    inspect_fn=after_step.append)
        for event in events:
            state = after_step.pop()
            if event.num_accepted and any(r > 0 for r in accepted_paths(event)) and not event.finished:
                ref, hidden = fresh_target_cache(tiny, state["committed"][:-1])
                assert_caches_equal(state["target_cache"], ref, "target cache")
                check_drafter_caches(tiny, state["drafter"], state["committed"], hidden)
                checked += 1
    assert checked >= 3, f"only {checked} steps through a later sibling checked"


@pytest.mark.parametrize("key", TREE_CASES)
def test_one_chain_tree_gives_the_chain_events(tiny, key):
    """A tree that is one chain (top-1 candidates) gives exactly the chain's events (greedy; timings aside)."""
    settings = DecodeSettings(max_new_tokens=24, num_lookahead=3)
    timing = {"drafting_s", "verification_s", "step_s"}
    for prompt in PROMPTS:
        as_chain = run(tiny, key, prompt, settings, make_drafter(tiny, key, settings))
        as_tree = run(tiny, key, prompt, settings, tree_drafter(tiny, key, settings, chain(3)))
        strip = [{k: v for k, v in e.to_dict().items() if k not in timing} for e in as_chain]
        assert strip == [{k: v for k, v in e.to_dict().items() if k not in timing} for e in as_tree]


# ------------------------------------------------------------------ sampled distribution
WINDOW, RUNS = 4, 600
#: Depth 2 (L = 2): two candidates for the first position, one under each.
SAMPLING_SHAPE = TreeSpec(((0,), (1,), (0, 0), (1, 0)))


class NoisyTree(TreeOracle):
    """Wraps a method's tree drafter (which still runs) and replaces each node's token with a deterministic
    candidate from the target's own ranking at the node's parent (a fresh forward, memoised): on contexts of even
    token sum the ranks are (2nd, 3rd) of p, else (1st, 2nd). With top-k 2 the 3rd has p = 0, so every decision
    happens: a first child accepted, a later sibling accepted, all children rejected (resampled from p_res, far
    from p), a leaf reached (bonus)."""

    def __init__(self, inner, loaded):
        self.inner, self.loaded, self.memo = inner, loaded, {}

    def ranking(self, context: list[int]) -> list[int]:
        key = tuple(context)
        if key not in self.memo:
            with torch.no_grad():
                logits = self.loaded.model(input_ids=torch.tensor([context])).logits[0, -1]
            top = logits.topk(3).indices.tolist()
            self.memo[key] = top[1:] if sum(context) % 2 == 0 else top[:2]
        return self.memo[key]

    def propose(self, uncached, committed, max_drafts):
        prop = self.inner.propose(uncached, committed, max_drafts)
        if prop.tree is None or not len(prop.drafts):
            return prop
        context, ids = committed + ([prop.exact] if prop.exact is not None else []), []
        for j, path in enumerate(prop.tree.paths):
            above = [ids[a] for a in prop.tree.path_to(j)[:-1]]
            ids.append(self.ranking(context + above)[path[-1]])
        ids = torch.tensor(ids)
        return dataclasses.replace(prop, drafts=ids, q=torch.nn.functional.one_hot(ids, self.loaded.vocab_size).float())


def always_accept_tree(tree, draft_ids, draft_probs, target_probs, generator):
    """Broken rule (negative control): follow the first child down to a leaf, the bonus from p there."""
    result = verify_tree(tree, draft_ids, draft_probs, target_probs, generator)
    path = [tree.children(-1)[0]]
    while tree.children(path[-1]):
        path.append(tree.children(path[-1])[0])
    token = int(torch.multinomial(target_probs[path[-1] + 1], 1, generator=generator))
    return dataclasses.replace(result, path=tuple(path), next_token=token, next_is_bonus=True)


def resample_from_p_tree(tree, draft_ids, draft_probs, target_probs, generator):
    """Subtly broken rule (negative control): when every child is rejected, draw from p, not from p_res."""
    result = verify_tree(tree, draft_ids, draft_probs, target_probs, generator)
    if not result.next_is_bonus:
        row = result.path[-1] + 1 if result.path else 0
        result = dataclasses.replace(result, next_token=int(torch.multinomial(target_probs[row], 1,
                                                                                  generator=generator)))
    return result


def tree_outcomes(tiny, key, settings, law=None, stop_above=None, **kw):
    """({first WINDOW tokens: share of the RUNS seeded runs}, labels and decisions seen). ``stop_above``: a negative
    control's bound; its runs stop once their TV to the exact ``law`` is sure to exceed it (``tv_floor``)."""
    inner = tree_drafter(tiny, key, settings, SAMPLING_SHAPE)
    noisy = NoisyTree(inner, tiny)
    counts, seen = {}, set()
    for seed in range(RUNS):
        if stop_above is not None and tv_floor(law, counts, 1) > stop_above:  # counts are shares
            break
        events = run(tiny, key, "ab", settings.with_(seed=seed), noisy, **kw)
        out = tuple(output_token_ids(events)[:WINDOW])
        counts[out] = counts.get(out, 0) + 1 / RUNS
        seen |= {t.label for e in events for t in e.tokens} | {d.decision for e in events for d in e.drafts}
        seen |= {"sibling"} if any(any(r > 0 for r in accepted_paths(e)) for e in events if e.tree_parents) else set()
    return counts, seen


#: The tree case whose runs with the two broken rules show the sampled-law test's power: every tree case verifies
#: with the same rule (``verify_tree``), and ``test_tree_sampling_matches_exact_law`` checks for each case that
#: what the loop commits is what that rule returned.
CONTROL_TREE_CASE = "pass"


def marking_tree_rule(tree, draft_ids, draft_probs, target_probs, generator):
    """A rule (not lossless) that accepts the root's first child only and then commits ``SENTINEL``."""
    result = verify_tree(tree, draft_ids, draft_probs, target_probs, generator)
    first = tree.children(-1)[0]
    return dataclasses.replace(result, path=(first,), next_token=SENTINEL, next_is_bonus=not tree.children(first))


def tree_sampling_settings() -> DecodeSettings:
    return DecodeSettings(max_new_tokens=WINDOW, num_lookahead=2, temperature=1.0, top_k=2)


@pytest.mark.sampling
@pytest.mark.parametrize("key", TREE_CASES)
def test_tree_sampling_matches_exact_law(tiny, key):
    """First 4 tokens at temperature 1, top-k 2 (16 outcomes; a bonus token can fall inside the window), L = 2:
    the empirical law of the tree rule stays within ``lab.tv_bound`` of the exact law. The loop path must commit
    what its rule returns (``marking_tree_rule``, a few runs), so that the broken rules, run once on
    ``CONTROL_TREE_CASE`` (``test_broken_tree_rules_exceed_the_bound``), would act here as they act there."""
    settings = tree_sampling_settings()
    law = exact_law(tiny, "ab", settings, WINDOW)
    assert tiny.vocab_size - 1 == SENTINEL and all(SENTINEL not in outcome for outcome in law)
    bound = tv_bound(law, RUNS)
    counts, seen = tree_outcomes(tiny, key, settings)
    assert {"accepted", "rejected", "resampled", "bonus", "sibling"} <= seen, seen
    tv = total_variation(law, counts)
    print(f"\n{key} tree: TV {tv:.4f}, bound {bound:.4f}")
    assert tv < bound
    noisy, marked = NoisyTree(tree_drafter(tiny, key, settings, SAMPLING_SHAPE), tiny), 0
    for seed in range(8):
        events = run(tiny, key, "ab", settings.with_(seed=seed, max_new_tokens=12), noisy,
                     verify_tree_fn=marking_tree_rule)
        for e in events:
            if e.tree_parents and not e.finished:
                committed = [t for t in e.tokens if t.committed]  # [exact], the first child, the rule's token
                exact = sum(t.label == "exact" for t in committed)
                assert len(committed) == exact + 2 and committed[-1].token_id == SENTINEL, (
                    f"step {e.step} of {key} did not commit what its tree rule returned: {committed}")
                marked += 1
    assert marked >= 4, f"only {marked} tree steps checked"


@pytest.mark.sampling
def test_broken_tree_rules_exceed_the_bound(tiny):
    """The tree test's power, shown on ``CONTROL_TREE_CASE`` with the same runs and bound: both broken rules
    (always accept; resample from p instead of p_res) exceed it (each stops once that is sure: ``tv_floor``)."""
    settings = tree_sampling_settings()
    law = exact_law(tiny, "ab", settings, WINDOW)
    bound = tv_bound(law, RUNS)
    for broken in (always_accept_tree, resample_from_p_tree):
        shares = tree_outcomes(tiny, CONTROL_TREE_CASE, settings, law=law, stop_above=bound, verify_tree_fn=broken)[0]
        tv_broken = tv_floor(law, shares, 1)  # the TV of all RUNS runs, or less: sure to exceed the bound
        print(f"{CONTROL_TREE_CASE} tree {broken.__name__}: TV at least {tv_broken:.4f}")
        assert tv_broken > bound, f"{broken.__name__}: TV {tv_broken:.4f} under the bound {bound:.4f}"


# ------------------------------------------------------------------ shipped shapes, settings, the embedded model
def test_tree_shapes_records_each_drafters_step_cost(tiny):
    """``python -m pass_core.bench.tree_shapes`` writes each drafter's step cost as numbers the size choice reads:
    PaSS's drafting-pass width (a function of k) at L, 1 + L; ParallelSpec's yes/no ``drafter_pass`` (dropped
    before, so the choice left the drafter's pass out)."""
    from pass_core.bench.tree_shapes import matches

    settings = DecodeSettings(max_new_tokens=8, num_lookahead=3)
    assert matches(tiny, "pass", ["hello world"], settings, 4)[1] == {"extra_tokens": 1.0, "extra_width": 4}
    assert matches(tiny, "parallelspec", ["hello world"], settings, 4)[1] == {"drafter_pass": True}


def test_tree_settings_and_shipped_shapes(tmp_path):
    """tree_nodes is checked at the boundary; shipped shapes load, name what is missing, and the size chosen per
    machine maximises expected tokens per unit of pass cost."""
    from pass_core.bench.cli import split_variant
    from pass_core.drafters.trees import choose_tree_size, pass_cost_at, shipped_tree

    for bad in (dict(tree_nodes=65), dict(tree_nodes=-2), dict(tree_nodes=2.5), dict(tree_nodes=8, fused=True),
                dict(tree_nodes=8, auto_drafts=True)):
        with pytest.raises(ValueError, match="tree"):
            DecodeSettings(**bad)
    assert split_variant("parallelspec+tree8") == ("parallelspec", {"tree_nodes": 8})
    with pytest.raises(ValueError, match="token trees apply to"):
        split_variant("fixed-token+tree8")
    with pytest.raises(ValueError, match="^--methods entry 'pass\\+fused\\+tree8': token trees .* fused step"):
        split_variant("pass+fused+tree8")  # the entry named (the settings' message named neither it nor --methods)
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps({"methods": {"parallelspec": {
        "trees": {"4": SHAPE.within(1).to_json() + [[0, 0]], "8": SHAPE.to_json() + [[2, 0]]},
        "expected_tokens": {"4": 2.0, "8": 2.4}}}}))
    assert shipped_tree("parallelspec", 0, shapes) is None
    assert shipped_tree("parallelspec", 4, shapes).num_nodes == 4
    with pytest.raises(ValueError, match="shipped sizes: 4, 8"):
        shipped_tree("parallelspec", 16, shapes)
    flat, steep = {"c": [1.0] * 16}, {"c": [1.0 + 0.1 * w for w in range(16)]}
    assert choose_tree_size("parallelspec", flat, shapes) == 8  # 2.4 / 1 > 2.0 / 1
    assert choose_tree_size("parallelspec", steep, shapes) == 4  # 2.0 / 1.4 > 2.4 / 1.8
    assert pass_cost_at([1.0, 1.5, 2.0], 5) == pytest.approx(3.0)
    data = json.loads(shapes.read_text())  # PaSS: its drafting pass (1 exact token, a 4-token pass) joins the rate
    data["methods"]["pass"] = {**data["methods"]["parallelspec"], "step_cost": {"extra_tokens": 1.0, "extra_width": 4}}
    data["methods"]["pass"]["expected_tokens"] = {"4": 2.0, "8": 2.3, "chain": 1.5}
    data["methods"]["no-drafting-pass"] = {**data["methods"]["pass"], "step_cost": {}}
    shapes.write_text(json.dumps(data))
    steeper = {"c": [1.0 + 0.05 * w for w in range(16)]}
    assert choose_tree_size("pass", steeper, shapes) == 8  # (2.3 + 1) / (1.4 + 1.15) > (2 + 1) / (1.2 + 1.15)
    assert choose_tree_size("no-drafting-pass", steeper, shapes) == 4  # 2 / 1.2 > 2.3 / 1.4
    # a separate drafter's pass (d = 0.25 AR steps) is the same for every N, yet it moves the argmax of the ratio
    data["methods"]["drafter"] = {**data["methods"]["parallelspec"], "step_cost": {"drafter_pass": True}}
    shapes.write_text(json.dumps(data))
    close = {"c": [1.0 + 0.065 * w for w in range(16)]}
    assert choose_tree_size("parallelspec", close, shapes) == 4  # 2 / 1.26 > 2.4 / 1.52
    assert choose_tree_size("drafter", close, shapes) == 8  # 2.4 / (1.52 + 0.25) > 2 / (1.26 + 0.25)
    with pytest.raises(ValueError, match="not a readable JSON"):
        (tmp_path / "bad.json").write_text("{")
        shipped_tree("parallelspec", 4, tmp_path / "bad.json")
    with pytest.raises(ValueError, match="does not draft token trees"):
        METHODS["fixed-token"].decode(None, "hi", DecodeSettings(tree_nodes=8))


#: AR's greedy output on the embedded model per prompt, shared by the shipped-tree cases (a run costs seconds)
_EMBEDDED_AR: dict[str, list[int]] = {}


@pytest.mark.parametrize("key", ["parallelspec", "pass-lora"])
def test_shipped_tree_greedy_equals_ar_on_the_embedded_model(smollm, key):
    """The shipped 8-node tree through the registry (the bench's path): greedy output identical to AR."""
    settings = DecodeSettings(max_new_tokens=32, tree_nodes=8)
    for prompt in ["Write a haiku about autumn leaves.", "def fibonacci(n):"]:
        events = list(METHODS[key].decode(smollm, prompt, settings))
        if prompt not in _EMBEDDED_AR:
            _EMBEDDED_AR[prompt] = ar_output(smollm, prompt, settings.with_(tree_nodes=0))
        assert output_token_ids(events) == _EMBEDDED_AR[prompt]
        assert any(e.tree_parents for e in events) and sum(e.num_accepted for e in events) > 0


def test_tree_events_survive_a_trace_and_old_traces_load(tiny, tmp_path):
    """Tree steps (tree_parents, p_res) round-trip through a JSON trace; an event written before token trees
    (no tree_parents, no p_res) still loads, as a chain step; a tree step without its parents (its drafts'
    positions are depths, not 1, 2, ...) is refused."""
    from pass_core.teaching.trace import load_trace, make_trace, same_events, save_trace, trace_to_dict

    settings = DecodeSettings(max_new_tokens=16, num_lookahead=3, temperature=1.0, top_k=4)
    events = run(tiny, "pass", PROMPTS[0], settings, tree_drafter(tiny, "pass", settings))
    assert any(e.tree_parents for e in events) and any(d.p_res is not None for e in events for d in e.drafts)
    trace = make_trace(tiny, PROMPTS[0], settings, {"pass": events})
    back = load_trace(save_trace(trace, tmp_path / "t.json")).events["pass"]
    assert len(back) == len(events) and all(same_events(a, b) for a, b in zip(back, events))
    chain = run(tiny, "pass", PROMPTS[0], settings, make_drafter(tiny, "pass", settings))  # drafts d_1..d_L
    old = trace_to_dict(make_trace(tiny, PROMPTS[0], settings, {"pass": chain}))
    for event in old["methods"]["pass"]["events"]:
        event.pop("tree_parents")
        for draft in event["drafts"]:
            draft.pop("p_res")
    assert all(e.tree_parents == () for e in load_trace(old).events["pass"])
    orphaned = trace_to_dict(trace)
    for event in orphaned["methods"]["pass"]["events"]:
        event.pop("tree_parents")
    with pytest.raises(ValueError, match=r"drafts\[\d+\]\.position' is \d+: drafts are d_1, d_2, \.\.\. in order"):
        load_trace(orphaned)


def test_tree_entries_that_contradict_each_other_or_their_steps_are_refused(tiny):
    """A race writes one tree entry per tree-capable method, whose steps hold at most its N drafts. A hand-made
    trace with 18 entries of PaSS (pass+tree1 .. pass+tree64, each holding the 8-node steps) replayed in one pane
    with 18 metric lines (helper 71)."""
    from pass_core.teaching.trace import load_trace, make_trace, trace_to_dict

    settings = DecodeSettings(max_new_tokens=16, num_lookahead=3, tree_nodes=8)
    events = run(tiny, "pass", PROMPTS[0], settings, tree_drafter(tiny, "pass", settings))
    assert max(len(e.drafts) for e in events) > 4
    chains = settings.with_(tree_nodes=0)  # as the page writes a race's settings: its tree entries race beside
    good = trace_to_dict(make_trace(tiny, PROMPTS[0], chains, {"ar": run(tiny, "ar", PROMPTS[0], chains),
                                                                "pass+tree8": events}))
    assert list(load_trace(good).events) == ["ar", "pass+tree8"]
    ar, entry = good["methods"]["ar"], good["methods"]["pass+tree8"]
    for methods, message in (
            ({"ar": ar, "pass+tree8": entry, "pass+tree16": entry},
             r"method 'pass' has two token-tree entries, 'pass\+tree8' and 'pass\+tree16': a race runs one per method"),
            ({"ar": ar, "pass+tree4": entry}, r"'methods\.pass\+tree4\.events\[\d+\]\.drafts' holds \d+ drafts, but "
                                              r"the entry 'pass\+tree4' is a tree of 4 nodes")):
        with pytest.raises(ValueError, match=message):
            load_trace(json.loads(json.dumps(dict(good, methods=methods))))
