"""Token trees on the race page, from events alone: the current step's tree as a node-link figure
(docs/algorithms.md section 4b); its nodes to choose from and the inspector for one node are in ``tree_inspector``.

Pure: events in, markdown and Plotly figures out; no Gradio, no tensors. A tree step is a ``StepEvent`` with
``tree_parents`` (each draft node's parent, -1 = the root, the pending token) and one ``DraftRecord`` per node in
``drafts`` (``position`` = depth, q, p, p_res, u, decision)."""

from __future__ import annotations

import unicodedata

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pass_core.decoding.events import TOKEN_LABELS, StepEvent, TokenRecord
from pass_core.registry import tree_entry_nodes
from playground.race_charts import pane_colours, short_name
from playground.style import BOTTOM_LEGEND, GRID, number

#: The choice that stands for the step's last token (resampled or bonus) in ``tree_inspector.node_choices``.
NEXT = "next"
#: Node colours beside the accepted colour of ``pane_colours``: rejected (greyed), never tried (lighter; its labels
#: #9ca3af: the lighter grey on white could not be read).
REJECTED_GREY, UNTRIED_GREY, ROOT_COLOUR, EDGE_GREY = "#6b7280", "#d1d5db", "#111827", "#cbd5e1"
#: The tree figure's text before a race with a token tree.
TREE_HINT = ("*The tree of drafts of the step the page shows: the root (the pending token), each node at its depth, "
             "the accepted path in the accepted colour, rejected nodes grey and struck through, nodes not verified "
             "open. A tree is cut at the drafter's depth (L or k) and at the tokens left, so a step can hold fewer "
             "nodes than chosen. Pause, Next, Previous and a token clicked in a tree pane move it; choose a node "
             "below to inspect it.*")


def tree_step(events: list[StepEvent]) -> StepEvent | None:
    """The latest tree step of one method's events (the step-through's current state), or None."""
    return next((e for e in reversed(events) if e.tree_parents), None)


def accepted_path(event: StepEvent) -> list[int]:
    """The accepted nodes of a tree step, root's child first (they form one path: one per depth)."""
    return sorted((j for j, d in enumerate(event.drafts) if d.decision == "accepted"),
                  key=lambda j: event.drafts[j].position)


def last_token(event: StepEvent) -> TokenRecord | None:
    """The step's resampled or bonus token (None when EOS or the token budget ended the step before it)."""
    return next((t for t in reversed(event.tokens) if t.label in ("resampled", "bonus")), None)


def root_text(events: list[StepEvent], event: StepEvent) -> str:
    """What the tree hangs under: PaSS's exact token of this step, else the previous step's last output token."""
    if event.tokens and event.tokens[0].label == "exact":
        return event.tokens[0].text
    index = next((i for i, e in enumerate(events) if e is event), 0)
    earlier = [t for e in events[:index] for t in e.tokens if t.committed]
    return earlier[-1].text if earlier else "context"


def label(text: str) -> str:
    """A token's text for a figure label: its repr without quotes (newlines and tabs visible), a token of spaces only
    as "␣" marks (as the panes show it: a bare space was an empty label), with "<" and ">" shown as "‹" and "›"
    (Plotly reads "<...>" in a label as a tag and shows "&lt;" as typed)."""
    shown = repr(text)[1:-1]
    return plotly_safe((shown.replace(" ", "␣") if not text.strip() else shown) or "∅")


def plotly_safe(text: str) -> str:
    """``text`` without the characters Plotly's labels treat as markup ("<", ">")."""
    return text.replace("<", "‹").replace(">", "›")


def struck(text: str) -> str:
    """``text`` struck through with combining long strokes (Plotly's labels have no strike tag); spaces are left
    unstruck (a struck leading space read as a dash: " of" as "–of")."""
    return "".join(ch if ch.isspace() else ch + "\u0336" for ch in text)


def node_label(text: str, strike: bool = False) -> str:
    """A node's figure label: ``label``, ``struck`` with ``strike`` (a rejected draft), in quotes when the token is
    punctuation alone (a bare "," or "." at the figure's label size read as a tick or a dot; struck quotes read as
    dashes: "-,-")."""
    shown = struck(label(text)) if strike else label(text)
    return f"'{shown}'" if text.strip() and all(unicodedata.category(ch).startswith("P") for ch in text.strip()) \
        else shown


def _slots(parents: tuple[int, ...], extra_parent: int | None) -> dict[int, float]:
    """A tidy layout: each leaf gets the next row in depth-first order, a parent the mean of its children's rows.
    Keys: node index, -1 the root, ``len(parents)`` the extra last token (child of ``extra_parent``)."""
    children: dict[int, list[int]] = {}
    for j, parent in enumerate(parents):
        children.setdefault(parent, []).append(j)
    if extra_parent is not None:
        children.setdefault(extra_parent, []).append(len(parents))
    rows: dict[int, float] = {}
    next_row = [0]

    def place(node: int) -> float:
        kids = children.get(node, [])
        if not kids:
            rows[node] = next_row[0]
            next_row[0] += 1
        else:
            rows[node] = sum(place(k) for k in kids) / len(kids)
        return rows[node]
    place(-1)
    return rows


def _tree_traces(events: list[StepEvent], event: StepEvent, entry: str, first: bool) -> list[go.Scatter]:
    """The Scatter traces of one tree step: edges, then nodes by decision (legend entries once, ``first``)."""
    drafts, parents = event.drafts, event.tree_parents
    path, final = accepted_path(event), last_token(event)
    end = path[-1] if path else -1
    rows = _slots(parents, end if final is not None else None)
    depth = {j: d.position for j, d in enumerate(drafts)}
    depth.update({-1: 0, len(drafts): len(path) + 1})  # the last token follows the accepted path
    xy = {j: (depth[j], -rows[j]) for j in rows}
    colours = pane_colours(entry.split("+")[0])
    accepted_colour = colours[TOKEN_LABELS["accepted"]]

    def edges(pairs, name, colour, width, dash="solid"):
        xs, ys = [], []
        for a, b in pairs:
            xs += [xy[a][0], xy[b][0], None]
            ys += [xy[a][1], xy[b][1], None]
        return go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=colour, width=width, dash=dash), name=name,
                          hoverinfo="skip", showlegend=False)

    traces = [edges([(parents[j], j) for j in range(len(drafts)) if j not in path], "edges", EDGE_GREY, 1.5),
              edges([(parents[j], j) for j in path], "accepted path", accepted_colour, 4)]
    if final is not None:
        traces.append(edges([(end, len(drafts))], "last token", colours[TOKEN_LABELS[final.label]], 2, "dot"))
    groups = {"accepted": ([], accepted_colour, "circle"), "rejected": ([], REJECTED_GREY, "x"),
              "not_verified": ([], UNTRIED_GREY, "circle-open")}
    for j, d in enumerate(drafts):
        groups.get(d.decision, groups["not_verified"])[0].append(j)
    root = go.Scatter(x=[0], y=[xy[-1][1]], mode="markers+text", text=[node_label(root_text(events, event))],
                      textposition="top center", cliponaxis=False,
                      marker=dict(color=ROOT_COLOUR, size=11, symbol="square"),
                      name="root (the pending token)", customdata=[-1], legendgroup="root", showlegend=first,
                      hovertext=["the root: the last committed token; the tree drafts what follows it"],
                      hoverinfo="text")
    traces.append(root)
    for decision, (nodes, colour, symbol) in groups.items():
        traces.append(go.Scatter(
            x=[xy[j][0] for j in nodes], y=[xy[j][1] for j in nodes], mode="markers+text", customdata=nodes,
            text=[node_label(drafts[j].text, decision == "rejected") for j in nodes], textposition="top center",
            cliponaxis=False,  # the top row's labels were cut at the panel's edge
            textfont=dict(color={"accepted": "#111827", "not_verified": "#9ca3af"}.get(decision, colour)),
            marker=dict(color=colour, size=12, symbol=symbol, line=dict(color=colour, width=2)),
            name=decision.replace("_", " "), legendgroup=decision, showlegend=bool(nodes),  # kinds of every panel
            hovertext=[node_hover(drafts[j], j, parents[j]) for j in nodes], hoverinfo="text"))
    if final is not None:
        colour = colours[TOKEN_LABELS[final.label]]
        traces.append(go.Scatter(x=[xy[len(drafts)][0]], y=[xy[len(drafts)][1]], mode="markers+text",
                                 text=[node_label(final.text)], textposition="top center", customdata=[NEXT],
                                 cliponaxis=False, marker=dict(color=colour, size=13, symbol="diamond"),
                                 name=final.label, legendgroup=final.label, showlegend=True,
                                 hovertext=[f"{final.label} token {final.text!r} (id {final.token_id})"],
                                 hoverinfo="text"))
    return traces


def node_hover(draft, node: int, parent: int) -> str:
    """A node's hover text: index, parent, token, q, p, p_res and the decision; p "–" for a node never tried, as
    in the node table (its recorded p is the target's at a parent that was not accepted, or 0: not a judgement)."""
    p = None if draft.decision == "not_verified" else draft.p
    return (f"node {node} (parent {'root' if parent < 0 else parent}, depth {draft.position}): "
            f"{plotly_safe(repr(draft.text))}<br>"
            f"q {draft.q:.4f} · p {number(p, '.4f')} · p_res {number(draft.p_res, '.4f')}"
            f"<br>{draft.decision.replace('_', ' ')}")


def tree_figure(events: dict[str, list[StepEvent]], revision: str = "race") -> go.Figure | None:
    """One node-link panel per method with tree steps: its latest tree step (``tree_step``). x = depth (the root,
    the pending token, at 0), one row per leaf; the accepted path's nodes and edges in the method's accepted
    colour, rejected nodes grey and struck through, never-tried nodes open and light, the resampled or bonus
    token at the end of the path (dotted edge). Hover shows each node's q, p, p_res and decision. None when no
    method has a tree step yet. ``revision``: Plotly's ``uirevision`` (keeps the user's zoom)."""
    steps = {key: (evs, tree_step(evs)) for key, evs in events.items()}
    steps = {key: pair for key, pair in steps.items() if pair[1] is not None}
    if not steps:
        return None
    # two short lines: a phone's 400 px cut one long line at both ends
    titles = [f"<b>{short_name(key)}</b>, step {event.step}<br>{len(event.tree_parents)} nodes"  # "4 of 16": cut
              + (f" of {n}" if (n := tree_entry_nodes(key) or 0) > len(event.tree_parents) else "")
              + f", {len(accepted_path(event))} accepted" for key, (_, event) in steps.items()]
    # one row per leaf (and the last token), 34 px each; 60 px between two panels for the next one's title
    rows = [45 + 34 * (1 + sum(j not in set(e.tree_parents) for j in range(len(e.tree_parents))))
            for _, e in steps.values()]
    gap = 75  # room for the next panel's two-line title
    fig = make_subplots(rows=len(steps), cols=1, subplot_titles=titles, row_heights=rows,
                        vertical_spacing=gap / (sum(rows) + gap * (len(steps) - 1)))
    for row, (key, (evs, event)) in enumerate(steps.items(), start=1):
        traces = _tree_traces(evs, event, key, first=row == 1)
        for trace in traces:
            fig.add_trace(trace, row=row, col=1)
        deepest = max(x for t in traces for x in t.x if x is not None)  # half a label's room at both ends: the
        fig.update_xaxes(range=[-0.45, deepest + 0.45], row=row, col=1)  # deepest "<|im_end|>" was cut on a phone
        ys = [y for t in traces for y in t.y if y is not None]  # room above the top node for its label (it ran into
        fig.update_yaxes(range=[min(ys) - 0.4, max(ys) + 0.6], row=row, col=1)  # the panel's title on a phone)
    seen: set[str] = set()
    for trace in fig.data:  # one legend entry per kind (two panels may both end in a resampled token)
        if trace.showlegend is not False:
            trace.showlegend = trace.legendgroup not in seen
            seen.add(trace.legendgroup)
    fig.update_yaxes(visible=False)
    fig.update_xaxes(dtick=1, gridcolor=GRID, zeroline=False)
    fig.update_xaxes(title=dict(text="depth (draft position; 0 = the root)"), row=len(steps), col=1)
    # the top margin leaves the first title clear of the plot's label, two lines high on a phone
    fig.update_layout(height=sum(rows) + gap * (len(steps) - 1) + 165, margin=dict(l=15, r=15, t=95, b=10),
                      uirevision=revision, paper_bgcolor="white", plot_bgcolor="white", font=dict(size=12),
                      legend=BOTTOM_LEGEND)
    return fig
