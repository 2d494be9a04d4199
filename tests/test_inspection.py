"""The token inspector's data (issue 12, item 2): top-n of p, q and the residual per verified position,
consistent with the step's drafts and tokens."""

from __future__ import annotations

import pytest
import torch

from pass_core.decoding.inspection import inspect_verification, top_n
from pass_core.registry import METHODS
from pass_core.decoding.settings import DecodeSettings


def test_inspection_matches_the_drafts_and_tokens_of_every_step(tiny):
    """Top-k 4 keeps every distribution inside the top-10, so the inspector must hold exactly the
    event's q_i(d_i) and p_i(d_i), the resampled token inside the residual's support, the bonus token
    inside p_{k+1}'s, and PaSS's exact token inside position 0's p."""
    settings = DecodeSettings(max_new_tokens=40, num_lookahead=3, temperature=1.0, top_k=4, inspect=True)
    seen = set()
    for key in METHODS:
        for prompt in ("hello", "abc"):
            for event in METHODS[key].decode(tiny, prompt, settings):
                pos = {pi.position: pi for pi in event.inspection}
                assert event.inspection, (key, event.step)
                for d in event.drafts:
                    if d.decision == "not_verified":
                        continue
                    entry = pos[d.position]
                    q = dict(zip(entry.q.ids, entry.q.probs))
                    p = dict(zip(entry.p.ids, entry.p.probs))
                    assert q[d.token_id] == pytest.approx(d.q, rel=1e-5)
                    assert p.get(d.token_id, 0.0) == pytest.approx(d.p, rel=1e-5, abs=1e-7)
                committed = [t for t in event.tokens if t.committed]
                if 0 in pos:  # PaSS: the step's first token is the exact token of its drafting pass
                    assert committed[0].label == "exact" and committed[0].token_id in pos[0].p.ids
                    seen.add("exact")
                    committed = committed[1:]
                for token in committed:
                    if token.label == "resampled":
                        residual = next(pi.residual for pi in event.inspection if pi.residual is not None)
                        assert token.token_id in residual.ids and sum(residual.probs) == pytest.approx(1.0)
                        seen.add("resampled")
                    if token.label == "bonus":
                        assert token.token_id in pos[event.num_verified_drafts + 1].p.ids
                        seen.add("bonus")
                    if token.label in ("target", "exact"):  # AR, a prefill or a step that verified no draft
                        assert token.token_id in pos[1].p.ids
    assert seen >= {"resampled", "exact"}


def test_inspection_is_off_by_default_and_top_n_by_hand(tiny):
    events = list(METHODS["pass"].decode(tiny, "hi", DecodeSettings(max_new_tokens=6)))
    assert all(e.inspection == () for e in events)
    top = top_n(torch.tensor([0.1, 0.6, 0.0, 0.3]), n=3)
    assert top.ids == (1, 3, 0) and top.probs == pytest.approx((0.6, 0.3, 0.1))
    p = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])
    q = torch.tensor([[0.25, 0.75, 0.0], [0.0, 0.0, 1.0]])
    got = inspect_verification(p, q, m=1)  # d_2 rejected: residual norm(max(0, p_2 - q_2)) = (0.4, 0.6, 0)
    assert [g.position for g in got] == [1, 2] and got[1].residual.ids == (1, 0)
    assert got[1].residual.probs == pytest.approx((0.6, 0.4)) and got[0].residual is None
    assert [g.position for g in inspect_verification(p, q, m=2)] == [1, 2, 3]  # all accepted: the bonus position


def test_a_tree_steps_resampled_token_shows_p_res_and_its_bonus_token_p(tiny):
    """A token tree's resampled token is drawn from p_res at the last accepted node, p with every rejected child
    taken out and renormalised (docs/algorithms.md section 4b): the inspector holds that law at position m + 1
    (it held only p there, and the pane's figure of a resampled tree token was empty): the rejected children's
    tokens have no mass, the resampled token has some, and the rest is p's renormalised. The node chooser's "next"
    draws p and p_res for a resampled token, p for a bonus one."""
    from playground.tree_inspector import inspect_node
    from playground.tree_view import NEXT

    settings = DecodeSettings(max_new_tokens=40, num_lookahead=3, temperature=1.0, top_k=4, inspect=True,
                              tree_nodes=8)
    seen = set()
    for prompt in ("hello", "abc", "abcab abcab"):
        for event in METHODS["parallelspec"].decode(tiny, prompt, settings):
            if not event.tree_parents:
                continue
            last = event.tokens[-1]
            m = sum(t.label == "accepted" for t in event.tokens)
            at = next(pi for pi in event.inspection if pi.position == m + 1)
            _, fig = inspect_node({"parallelspec+tree8": [event]}, f"parallelspec+tree8|{NEXT}")
            if last.label == "bonus":
                assert at.residual is None and [t.name for t in fig.data] == ["p (bonus position)"]
                seen.add("bonus")
                continue
            assert last.label == "resampled", event.tokens
            parent = ([-1] + [j for j, d in enumerate(event.drafts) if d.decision == "accepted"])[-1]
            rejected = {d.token_id for j, d in enumerate(event.drafts)
                        if event.tree_parents[j] == parent and d.decision == "rejected"}
            law = dict(zip(at.residual.ids, at.residual.probs))
            assert rejected and not rejected & set(law) and law.get(last.token_id, 0) > 0, (rejected, law, last)
            p = {i: x for i, x in zip(at.p.ids, at.p.probs) if i not in rejected}
            assert law == pytest.approx({i: x / sum(p.values()) for i, x in p.items()}, rel=1e-4)
            assert [t.name for t in fig.data] == ["p", "p_res (p, every rejected child taken out)"]
            seen.add("resampled")
    assert seen == {"bonus", "resampled"}
