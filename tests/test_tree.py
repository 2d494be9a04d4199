"""Token trees (docs/algorithms.md section 4b): the shape, its mask and positions against separate chain
passes, the greedy shape construction, the tree acceptance rule, and cache compaction."""

from __future__ import annotations

import itertools

import pytest
import torch

from lossless_helpers import assert_caches_equal, fresh_target_cache
from pass_core.decoding.cache import cache_len, keep_positions, new_cache
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
