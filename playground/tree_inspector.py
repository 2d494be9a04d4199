"""The nodes of the current token-tree step to choose from, and the token inspector for one node: its token, q, p,
p_res and decision, why a node was never tried, the step's node table and the tree rule (docs/algorithms.md
section 4b).

Pure: events in, markdown and Plotly figures out; no Gradio, no tensors (the step's shape: ``tree_view``)."""

from __future__ import annotations

from dataclasses import replace

import plotly.graph_objects as go

from pass_core.decoding.events import StepEvent, TokenRecord
from pass_core.decoding.inspection import PositionInspection
from playground.race_charts import short_name
from playground.teaching import _code, greedy_step, inspector_figure
from playground.tree_view import NEXT, accepted_path, label, last_token, tree_step
from playground.style import number

#: The inspector's rule line for a tree step (docs/algorithms.md section 4b).
TREE_RULE = ("Token tree: at each node its children are tried in rank order; child x is accepted when "
             "u < min(1, p_res(x)/q(x)), where p_res starts as p at the node and loses each rejected sibling "
             "(p_res ← norm(max(0, p_res − q))). The candidates are the drafter's top-i tokens, each proposed "
             "outright (q is one-hot at it: q(x) = 1 for every node). When every child is rejected the next token is "
             "drawn from p_res (resampled); at a leaf it is drawn from p (bonus).")
#: Added to ``TREE_RULE`` for a greedy run's step.
TREE_GREEDY = (" Greedy (temperature 0): p is one-hot too, so a child is accepted exactly when it is the target's "
               "argmax at its parent, and no uniform draw u plays a part (not used: greedy).")


def node_choices(events: dict[str, list[StepEvent]]) -> list[tuple[str, str]]:
    """The current tree step's nodes of every method, for the node chooser: (label, "entry|node|step"), then its last
    token as "entry|next|step" (the step named: a live race moves on before a node is chosen); texts labelled as in
    the figure (``label``: a list collapsed "\\n   " to "\\n ")."""
    out = []
    for key, evs in events.items():
        event = tree_step(evs)
        if event is None:
            continue
        for j, d in enumerate(event.drafts):
            out.append((f"{short_name(key)} · step {event.step} · node {j} (depth {d.position}) "  # as the figure
                        f"'{label(d.text)}' · {d.decision.replace('_', ' ')}", f"{key}|{j}|{event.step}"))
        final = last_token(event)
        if final is not None:
            out.append((f"{short_name(key)} · step {event.step} · {final.label} token '{label(final.text)}'",
                        f"{key}|{NEXT}|{event.step}"))
    return out


def untried_reason(event: StepEvent, node: int) -> str:
    """Why a node was never tried: its parent was not accepted, an earlier sibling was, or the step ended first."""
    parent = event.tree_parents[node]
    if parent >= 0 and event.drafts[parent].decision != "accepted":
        return f"its parent, node {parent}, was not accepted"
    kept = [j for j in range(node) if event.tree_parents[j] == parent and event.drafts[j].decision == "accepted"]
    return f"an earlier sibling, node {kept[0]}, was accepted" if kept else "the step ended before it"


def _node_event(event: StepEvent, node: int) -> tuple[StepEvent, int] | None:
    """The tree step seen as a chain up to ``node`` (its accepted ancestors, then the node itself), for
    ``inspector_figure``: (that event, the node's token index). None for a node never tried."""
    if (draft := event.drafts[node]).decision not in ("accepted", "rejected"):
        return None
    exact = tuple(event.tokens[:1]) if event.tokens and event.tokens[0].label == "exact" else ()
    above = [event.drafts[j] for j in accepted_path(event) if event.drafts[j].position < draft.position]
    tokens = exact + tuple(TokenRecord(d.token_id, d.text, "accepted") for d in above)
    tokens += (TokenRecord(draft.token_id, draft.text, draft.decision),)
    return replace(event, tokens=tokens, drafts=(*above, draft)), len(tokens) - 1


def _final_event(event: StepEvent, final: TokenRecord) -> tuple[StepEvent, int] | None:
    """The step's resampled or bonus token with the p of the last accepted node (and a resampled token's p_res),
    for ``inspector_figure``."""
    m = len(accepted_path(event))
    if (at := next((pi for pi in event.inspection if pi.position == m + 1), None)) is None:
        return None
    return replace(event, tokens=(final,), inspection=(PositionInspection(1, at.p, None, at.residual),)), 0


def node_table(event: StepEvent, selected: int | None = None) -> list[str]:
    """Markdown rows of every node of a tree step: parent, depth, token, q(x), p(x), p_res(x), min(1, p_res/q), u
    (sampled runs only: in a greedy one no uniform draw decides, ``teaching.greedy_step``) and the decision; the
    ``selected`` node's index in bold; p(x) "–" for a node never tried, as in the chain's inspector (1.0000 there)."""
    greedy = greedy_step(event)
    lines = ["| node | parent | depth | token | q(x) | p(x) | p_res(x) | min(1, p_res/q) |" + ("" if greedy else " u |")
             + " decision |", "|---|---|---|---|---|---|---|---|" + ("" if greedy else "---|") + "---|"]
    for j, (d, parent) in enumerate(zip(event.drafts, event.tree_parents)):
        name = f"**{j}**" if j == selected else str(j)
        p = None if d.decision == "not_verified" else d.p
        lines.append(f"| {name} | {'root' if parent < 0 else parent} | {d.position} | {_code(d.text)} | {d.q:.4f} | "
                     f"{number(p, '.4f')} | {number(d.p_res, '.4f')} | {number(d.acceptance_probability, '.4f')} |"
                     + ("" if greedy else f" {number(d.u, '.4f')} |") + f" {d.decision.replace('_', ' ')} |")
    return lines


def inspect_node(events: dict[str, list[StepEvent]], choice: str, decode=str) -> tuple[str, go.Figure | None] | None:
    """The token inspector for a chosen node ("entry|node" or "entry|next" of the current tree step, with "|step"
    that step, from ``node_choices``; a live race's current step moved on, and the chooser's node 1 of step 5
    opened step 7's): the node's token, q, p, p_res and decision, the step's node table and the tree rule, and
    ``teaching.inspector_figure``'s bars of the p the node was tried against (the accepted path's p, recorded by
    the inspector; None for a node never tried). None when the choice does not name a node of the current step."""
    entry, which, step = (str(choice or "").split("|") + ["", ""])[:3]
    steps = [e for e in events.get(entry, []) if e.tree_parents and str(e.step) == step]
    event = (steps[-1] if steps else None) if step else tree_step(events.get(entry, []))
    if event is None or not (which == NEXT or (which.isdigit() and int(which) < len(event.drafts))):
        return None
    head = f"**{short_name(entry)}, step {event.step}** ({len(event.drafts)}-node tree). "
    if which == NEXT:
        final = last_token(event)
        if final is None:
            return None
        how = ("drawn from p at the leaf the accepted path ends in" if final.label == "bonus" else
               "drawn from p_res at the last accepted node: p there with every rejected child taken out and "
               "renormalised (the bars show p and p_res)")
        text = f"Selected: {_code(final.text)} (token id {final.token_id}, **{final.label}**), {how}."
        shown, node = _final_event(event, final), None
    else:
        node = int(which)
        d = event.drafts[node]
        parent = event.tree_parents[node]
        text = (f"Selected: node {node}, {_code(d.text)} (token id {d.token_id}, "
                f"**{d.decision.replace('_', ' ')}**), depth {d.position}, "
                f"parent {'the root' if parent < 0 else f'node {parent}'}: q(x) = {d.q:.4f}, "
                f"p(x) = {number(None if d.decision == 'not_verified' else d.p, '.4f')}, "
                f"p_res(x) = {number(d.p_res, '.4f')}"
                + ("" if d.p_res is not None else f" (never tried: {untried_reason(event, node)})") + ".")
        shown = _node_event(event, node)
    rule = TREE_RULE + (TREE_GREEDY if greedy_step(event) else "")
    markdown = "\n".join([text, "", head, "", *node_table(event, node), "", rule])
    return markdown, inspector_figure(*shown, decode, mark="" if node is None else f"node {node}") if shown else None
