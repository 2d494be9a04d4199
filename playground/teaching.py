"""Teaching views from events alone: the token inspector and the replay's note (theory beside measurement lives in
``theory_view``, the losslessness lab's views in ``lab_view``). Pure: events in, markdown and Plotly figures out;
no Gradio.
"""

from __future__ import annotations

import html
import re

import plotly.graph_objects as go

from pass_core.decoding.events import StepEvent
from pass_core.decoding.inspection import TopN
from pass_core.decoding.text import count
from pass_core.registry import METHODS, tree_entry_nodes
from pass_core.runtime.machine_load import busy_line
from pass_core.teaching.trace import Trace

from playground.race_inputs import hide_paths
from playground.race_panes import entry_source, pane_entries
from playground.style import BOTTOM_LEGEND, GRID, number
# the lab's views moved to lab_view.py; re-exported for the page, the handlers and the tests
from playground.lab_view import (LAB_DEFAULT_RUNS, LAB_INTRO, LAB_PROMPT, LAB_WAITING, lab_figure,  # noqa: F401
                                 lab_markdown)

_P, _Q, _RESIDUAL, _DRAWN = "#0072B2", "#E69F00", "#009E73", "#D55E00"


def _code(text: str) -> str:
    """A token's text as inline code in a markdown table cell: its repr (whitespace visible), "|" escaped
    (it would end the cell) and backticks doubled around when it holds one."""
    shown = repr(text).replace("|", "\\|")
    return f"`` {shown} ``" if "`" in shown else f"`{shown}`"


def greedy_step(event: StepEvent) -> bool:
    """True for a step of a greedy run: its tokens carry the target's top-1 minus top-2 logit margin, which the
    loop records in greedy runs only (``TokenRecord.margin``)."""
    return any(t.margin is not None for t in event.tokens)


#: The inspector's rule line, sampled and greedy (docs/algorithms.md sections 2.3 and 2.4).
RULE_SAMPLED = ("A draft is accepted when u < min(1, p/q); the first rejected one is replaced by a token drawn from "
                "norm(max(0, p − q)); after the last accepted draft of a full step, a bonus token is drawn from p.")
RULE_GREEDY = ("Greedy (temperature 0): p and q are one-hot, so a draft is accepted exactly when it is the "
               "target's argmax; no uniform draw u plays a part (not used: greedy). The first rejected draft is "
               "replaced by the argmax of p, and a full step adds p's argmax as the bonus token.")


#: Under a table with drafts after the first rejection (their p was computed after a token that was not kept).
NOT_VERIFIED_NOTE = "*Not verified*: after the first rejected draft; the rule never reached it, so p, min(1, p/q), u: –."


def rejection_line(event: StepEvent, greedy: bool) -> str:
    """One sentence on why the step's first rejected draft was rejected, from its numbers, and where the token in
    its place came from; "" when the step rejected no draft. A tree node is tried against the residual p_res. It
    names the draft as the step's (any token of the step shows it: "Why '\\n' (d_1)" under a selected exact '\\n'
    read as if the selected token had been rejected)."""
    d = next((d for d in event.drafts if d.decision == "rejected"), None)
    if d is None:
        return ""
    after = next((t for t in event.tokens if t.label == "resampled"), None)
    if greedy:
        instead = f": the target's argmax {_code(after.text)} takes its place" if after else ""
        return (f"**Why this step's draft d_{d.position}, {_code(d.text)}, was rejected:** it is not the target's "
                f"most likely token{instead}.")
    p_name, p = ("p_res", d.p_res) if d.p_res is not None else ("p", d.p)
    u = "" if d.u is None else f"u = {d.u:.3f} ≥ min(1, {p_name}/q) = {number(d.acceptance_probability)}: "
    instead = (f" The {_code(after.text)} after it was drawn from norm(max(0, p − q)) instead." if after else "")
    return (f"**Why this step's draft d_{d.position}, {_code(d.text)}, was rejected:** {u}the target gives it "
            f"{p_name} = {p:.3g} against the drafter's q = {d.q:.3g}, so it is kept only with probability "
            f"{p_name}/q.{instead}")


def inspector_markdown(event: StepEvent, method_label: str, lookahead: bool, greedy: bool | None = None) -> str:
    """The inspector's table for one step: each draft d_i with q_i(d_i), p_i(d_i), min(1, p/q), the
    uniform draw u (sampling only) and the decision (PaSS: which look-ahead token LA_i drafted it), then the
    step's tokens and its drafting / verification times; the first rejected draft's reason above the table
    (``rejection_line``).

    Args:
        event: the step.
        method_label: the method's name, for the heading.
        lookahead: the method drafts with look-ahead tokens (PaSS): name LA_i per draft.
        greedy: a greedy run (no u column; the rule's greedy form); None: ``greedy_step(event)``.
    """
    greedy = greedy_step(event) if greedy is None else greedy
    # a step that verified no draft (AR, a prefill, PaSS's last step) gives its time whole: "verification 288.3 ms"
    # beside "verified no draft" read as a contradiction
    times = (f"drafting {event.drafting_s * 1000:.1f} ms, verification {event.verification_s * 1000:.1f} ms"
             if event.drafts else f"{event.step_s * 1000:.1f} ms")
    lines = [f"**{method_label}, step {event.step}**: {times}, {count(event.forward_passes, 'target pass')}"
             + (f", {count(event.drafter_passes, 'drafter pass')}" if event.drafter_passes else "") + "."]
    why = rejection_line(event, greedy)
    lines += ["", why] if why else []
    if event.drafts:
        u_head, u_rule = ("", "") if greedy else (" u |", "---|")
        lines += ["", f"| draft | token | q(d) | p(d) | min(1, p/q) |{u_head} decision |",
                  f"|---|---|---|---|---|{u_rule}---|"]
        for d in event.drafts:
            tried = d.decision != "not_verified"  # after the first rejection p, p/q and u meant nothing: "–"
            source = f"d_{d.position}" + (f" (LA_{d.position})" if lookahead else "")
            u = "" if greedy else f" {number(d.u if tried else None)} |"
            lines.append(f"| {source} | {_code(d.text)} | {number(d.q)} | {number(d.p if tried else None)} | "
                         f"{number(d.acceptance_probability)} |{u} {d.decision.replace('_', ' ')} |")
        lines.append("")
        untried = any(d.decision == "not_verified" for d in event.drafts)
        lines += [RULE_GREEDY if greedy else RULE_SAMPLED] + [NOT_VERIFIED_NOTE] * untried
    else:
        lines.append(NO_DRAFT_NOTE)
    tokens = ", ".join(f"{_code(t.text)} ({t.label})" for t in event.tokens)
    choice = ["", f"Draft length: {event.draft_choice}."] if event.draft_choice else []
    note = ["", f"Drafts: {event.draft_note}."] if event.draft_note else []  # e.g. where prompt lookup matched
    return "\n".join(lines + ["", f"Tokens: {tokens}"] + choice + note)


#: An inspected step with no drafts: PaSS's last step before max new tokens verifies none yet commits two tokens (the
#: note said "prefill, a gated step, or AR" and "its token", which fitted neither).
NO_DRAFT_NOTE = ("This step verified no draft: the prefill, an AR step, or a step that drafted none (too close to "
                 "max new tokens, or where drafting did not pay). Each of its tokens comes straight from the "
                 "target's p.")


def _with_prob(top: TopN, token_id: int, prob: float) -> TopN:
    """``top`` with ``token_id``'s probability set to ``prob`` (added when it is not among the top-n)."""
    if token_id in top.ids:
        at = top.ids.index(token_id)
        return TopN(top.ids, top.probs[:at] + (prob,) + top.probs[at + 1:])
    return TopN(top.ids + (token_id,), top.probs + (prob,))


def inspector_figure(event: StepEvent, token_index: int, decode=str, mark: str = "") -> go.Figure | None:
    """Bars for the distribution(s) behind one token of a step, the token marked.

    Accepted or rejected draft d_i: top-n of p_i and q_i (the draft was drawn from q_i). Resampled: top-n of p,
    q and the residual norm(max(0, p − q)) at the rejected position. Bonus: top-n of p_{k+1}. Exact / AR
    target: top-n of the p it came from. None when the event carries no inspector data for it.

    Args:
        event: the step.
        token_index: index into ``event.tokens``.
        decode: token id -> text for the axis (e.g. the tokenizer's decode; ``str`` by default).
        mark: the token's mark over its bar (default "d_i" for a draft, "drawn" otherwise; a tree node's "node 3").
    """
    by_position = {pi.position: pi for pi in event.inspection}
    token = event.tokens[token_index]
    label, token_id, tag = token.label, token.token_id, "drawn"
    if label in ("accepted", "rejected"):
        position = 1 + sum(t.label in ("accepted", "rejected") for t in event.tokens[:token_index])
        entry = by_position.get(position)
        p_name = f"p at depth {position} (computed at its parent)" if event.tree_parents else f"p_{position}"
        # a tree node's q is its own, one-hot at its token (the depth's recorded q is the accepted path's node: a
        # rejected sibling drew both at 1.0 as one "law")
        q_name, q_top = (("q (one-hot at this node)", TopN((), ())) if event.tree_parents else
                         (f"q_{position} (the draft's law)", entry.q if entry else None))
        series = [(p_name, entry.p, _P), (q_name, q_top, _Q)] if entry else []
        tag = f"d_{position}"
    elif label == "resampled":
        entry = next((pi for pi in event.inspection if pi.residual is not None), None) or by_position.get(
            1 + sum(t.label == "accepted" for t in event.tokens))  # p alone: a tree trace without p_res
        name = ("p_res (p, every rejected child taken out)" if event.tree_parents else
                "residual norm(max(0, p − q))")
        series = [("p", entry.p, _P), ("q", entry.q, _Q), (name, entry.residual, _RESIDUAL)] if entry else []
    elif label == "bonus":  # after every accepted draft (a tree: the accepted path to a leaf)
        entry = by_position.get(1 + sum(t.label == "accepted" for t in event.tokens))
        series = [("p (bonus position)", entry.p, _P)] if entry else []
    elif label == "exact" and 0 in by_position and token_index == 0:
        series = [("p (exact token)", by_position[0].p, _P)]
    else:
        entry = by_position.get(1)
        series = [("p", entry.p, _P)] if entry else []
    series = [(name, top, colour) for name, top, colour in series if top is not None]
    if not series:
        return None
    ids = list(dict.fromkeys(i for _, top, _ in series for i in top.ids))
    if label in ("accepted", "rejected"):  # the draft's own p(d) and q(d), from its DraftRecord: a draft in q's
        draft = next((d for d in event.drafts if d.position == position), None)  # top-n but not p's had no p bar
        if draft is not None:
            ids += [] if token_id in ids else [token_id]
            series = [(name, _with_prob(top, token_id, value), colour)
                      for (name, top, colour), value in zip(series, (draft.p, draft.q))]
    names = []
    for i in ids:  # two ids may decode to the same text (e.g. partial UTF-8 bytes): keep their bars apart
        text = decode(i)
        name = ("␣" * len(text) if text and not text.strip(" ") else repr(text)[1:-1]) or f"#{i}"  # a space: ␣
        names.append(name if name not in names else f"{name} #{i}")
    fig = go.Figure([go.Bar(x=names, y=[_prob(top, i) for i in ids], name=name, marker=dict(color=colour))
                     for name, top, colour in series])
    if token_id in ids:
        fig.add_annotation(x=names[ids.index(token_id)], y=max(_prob(top, token_id) for _, top, _ in series),
                           text=mark or tag, showarrow=True, arrowcolor=_DRAWN, font=dict(color=_DRAWN))
    # the y-axis fits the tallest bar (bars of 0.01-0.15 would be slivers on 0-1), with room above for the mark;
    # as the race's charts: no template, the legend under the axis (never over the bars or the plot's label)
    top = max((_prob(t, i) for _, t, _ in series for i in ids), default=1.0)
    y_top = inspector_y_top(top)
    ticks = [i / 5 for i in range(6)] if y_top > 1 else None  # a probability axis read "1.2" under the toolbar
    fig.update_layout(barmode="group", height=320, margin=dict(l=55, r=10, t=35, b=10), legend=BOTTOM_LEGEND,
                      showlegend=True,  # one series too: which distribution the bars are
                      yaxis=dict(range=[0, y_top], tickvals=ticks, title="probability", gridcolor=GRID),
                      xaxis=dict(title="token (top-n of each distribution)", dtick=1),  # every bar named (on a
                      paper_bgcolor="white", plot_bgcolor="white")  # phone 20 bars showed every other name)
    return fig


#: The inspector's text before any token is selected.
INSPECTOR_HINT = ("*Click any token in a pane to inspect its step: the drafts with q(d), p(d), min(1, p/q), the "
                  "uniform draw u and the decision, and the distribution the token was drawn from.*")


#: After a selected token whose text holds "�": a byte-level token can hold part of a character (an emoji spans
#: several tokens), and its bytes alone decode to "�" (found by a teacher-persona helper on an emoji prompt).
PARTIAL_CHARACTER = (" Its text shows � because the token holds only some of the bytes of a character that spans "
                     "several tokens (an emoji, an accented letter): on their own those bytes are no character.")


def inspect_selection(events: list[StepEvent], key: str, index: int, show_rejected: bool = True,
                      decode=str) -> tuple[str, go.Figure | None]:
    """The token inspector for the entry a visitor clicked in a method's pane.

    Args:
        events: the method's events as its pane shows them (``race.events_upto`` when stepping).
        key: the method's key in ``METHODS`` (its label; look-ahead methods name LA_i per draft).
        index: the clicked entry's index in the pane's value (``race_panes.pane_entries`` order).
        show_rejected: the pane shows rejected drafts (as it did when clicked).
        decode: token id -> text for the figure's axis.

    Returns:
        (``inspector_markdown`` headed by the clicked token, ``inspector_figure`` or None); for a step mark, the
        step it opens (its table, no figure: a distribution belongs to a token); for an index outside the pane, (a
        hint to click a token, None).
    """
    entries = pane_entries(events, show_rejected)
    if not 0 <= index < len(entries):
        return INSPECTOR_HINT, None
    base, *variants = key.split("+")  # a tree entry "pass+tree8": PaSS's label, "+tree8"
    method = METHODS.get(base)
    name = " +".join([method.label, *variants]) if method else key
    e, t = entry_source(entries, index)  # a step mark: the step it opens
    body = inspector_markdown(events[e], name, lookahead=bool(method and method.fusable))
    if entries[index][2] is None:  # the step's table, no figure: a distribution belongs to a token
        return (f"Selected: the mark before step {events[e].step}. Click one of its tokens for the distribution it "
                "was drawn from.\n\n" + body), None
    token = events[e].tokens[t]
    head = f"Selected: {_code(token.text)} (token id {token.token_id}, **{token.label}**)." + (
        PARTIAL_CHARACTER if "\ufffd" in token.text else "")
    return head + "\n\n" + body, inspector_figure(events[e], t, decode)


def token_namer(events: dict[str, list[StepEvent]], model_decode=None):
    """Token id -> text for the inspector's axes: the texts the events carry (tokens and drafts), else
    ``model_decode(id)`` (the loaded model's, when the events come from it), else "#id" (a replayed trace
    of a model the page does not have)."""
    known: dict[int, str] = {}
    for evs in events.values():
        for event in evs:
            for d in event.drafts:
                known.setdefault(d.token_id, d.text)
            for t in event.tokens:
                if t.text:
                    known[t.token_id] = t.text
    return lambda i: known[i] if i in known else (model_decode(i) if model_decode else f"#{i}")


def inspector_y_top(tallest: float) -> float:
    """The inspector's y-axis top for a tallest bar of ``tallest``: 1.25 x it (room for the drawn token's mark),
    at least 0.05 and at most 1.25."""
    return min(1.25, max(0.05, 1.25 * tallest))


def _prob(top: TopN, token_id: int) -> float:
    return dict(zip(top.ids, top.probs)).get(token_id, 0.0)


#: The most characters of a trace's prompt the run line shows (a trace may hold 100,000).
REPLAY_PROMPT_CHARS = 120


def literal(text: str, limit: int = REPLAY_PROMPT_CHARS) -> str:
    """``text`` as markdown that shows it as typed, on one line, cut to ``limit`` characters with "…": no
    markup, HTML, link or image of a shared trace reaches the page (an image would make the viewer's browser fetch
    its address)."""
    short = " ".join((text if len(text) <= limit else text[:limit] + "…").split())
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|~])", r"\\\1", html.escape(short, quote=False))


def replay_note(trace: Trace) -> str:
    """The run line's note for a replayed trace: model, prompt (``literal``) and the settings that shaped the
    race."""
    s = trace.settings
    busy = busy_line(trace.machine_load)  # the race's caveat on its timings, written here from the checked numbers
    trees = sorted({n for key in trace.events if (n := tree_entry_nodes(key))})  # the settings hold the chain's 0
    return (f"Replay of a trace: {literal(hide_paths(trace.model_name))}, prompt “{literal(trace.prompt)}”, "
            f"look-ahead tokens L = {s.num_lookahead}, max new tokens {s.max_new_tokens}, temperature "
            f"{s.temperature:g}, top-k {s.top_k}, top-p {s.top_p:g}, seed {s.seed}"
            + (f", token tree of {' and '.join(map(str, trees))} nodes" if trees else "") + "."
            + (f"  \n{busy}" if busy else ""))
