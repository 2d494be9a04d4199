"""Token trees in the race (an extension, docs/algorithms.md section 4b): the "token tree" setting, the tree
entries it adds beside each ticked tree-capable method ("parallelspec+tree8", named as the benchmark's variants),
their panes, the tree figure and the node chooser, and what the race's updates send to them.

A tree entry races as a method of its own: its own pane, metric lines, chart lines and trace events (its events
carry ``tree_parents``). Gradio components and values, no tensors: decoding comes from ``pass_core.registry``.
"""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from pass_core.decoding.settings import TREE_AUTO, DecodeSettings
from pass_core.decoding.tree_verification import shown_nodes
from pass_core.drafters.trees import choose_tree_size
from pass_core.registry import METHODS, tree_entry, tree_entry_nodes
from pass_core.runtime.pass_cost import usable_pass_cost
from pass_core.teaching.race import events_upto
from playground.plot_boxes import shown_plot
from playground.race_charts import pane_colours, short_name
from playground.race_panes import entry_source, highlighted_tokens, pane_entries
from playground.race_inputs import chosen_methods, whole
from playground.race_view import INSTANT
from playground.teaching import INSPECTOR_HINT, inspect_selection, token_namer
from playground.tree_inspector import inspect_node, node_choices
from playground.tree_view import NEXT, TREE_HINT, accepted_path, tree_figure, tree_step

#: The token tree setting's choices: (shown, value = ``DecodeSettings.tree_nodes``); the sizes are the shipped ones.
TREE_CHOICES = [("chain (no tree)", 0), ("4 nodes", 4), ("8 nodes", 8), ("16 nodes", 16),
                ("auto: the best size for this machine", TREE_AUTO)]
#: The methods that draft token trees: each has a tree pane, shown while its tree entry races.
TREE_PANES = tuple(key for key, m in METHODS.items() if m.tree)


def tree_choice(value):
    """The token tree setting as sent: the page sends ``TREE_CHOICES``' ints, while the API's schema (gradio's, for
    a drop-down) lists them as strings ("8", "-1"): such a string is read as its number; anything else unchanged
    (``tree_problem`` refuses it by name)."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def tree_problem(value, fused=False, auto_drafts=False) -> str | None:
    """Why ``value`` is not a token tree setting (one of ``TREE_CHOICES``' values, or the string of one:
    ``tree_choice``), or cannot go with the fused step or cost-aware draft lengths (``DecodeSettings``' own
    message); None when it is fine."""
    nodes = whole(tree_choice(value))
    allowed = [v for _, v in TREE_CHOICES]
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes not in allowed:
        return (f"token tree must be one of {', '.join(map(str, allowed[1:-1]))} nodes, 0 (a chain) or "
                f"{TREE_AUTO} (auto: the best size for this machine), got {value!r}.")
    ticked = [name for name, on in (("fused step", fused), ("cost-aware draft lengths", auto_drafts)) if on]
    if nodes and ticked:  # in the page's words (the core's said "tree nodes != 0" and "tree nodes 0")
        return (f"token tree: a tree does not work with the {' or the '.join(ticked)} yet: untick "
                f"{'it' if len(ticked) == 1 else 'them'}, or choose 'chain (no tree)'.")
    try:
        DecodeSettings(tree_nodes=nodes, fused=bool(fused), auto_drafts=bool(auto_drafts))
    except ValueError as err:
        return f"token tree: {err}."
    return None


def tree_base(entry: str) -> str | None:
    """The tree-capable method of a tree entry ("parallelspec+tree8" -> "parallelspec"), else None."""
    return entry.partition("+")[0] if tree_entry_nodes(entry) is not None else None


def tree_count(methods, tree_nodes) -> int:
    """How many tree entries a race adds (one per chosen tree-capable method; 0 for a chain or a bad value)."""
    if tree_problem(tree_nodes) or not whole(tree_nodes):
        return 0
    return len(set(chosen_methods(methods)) & set(TREE_PANES))


def entry_for(events: dict, pane_key: str) -> str:
    """The events' key a pane shows: ``pane_key`` itself, or for a tree pane ("pass+tree") its racing entry."""
    if pane_key in events:
        return pane_key
    return next((key for key in events if key.startswith(pane_key)), pane_key)


def with_trees(loaded, prompt: str, settings: DecodeSettings, keys, found: dict, decoders: dict, note: str,
               tree_nodes) -> tuple[dict, str]:
    """The race's decoders with a tree entry after each ticked tree-capable method (none for a chain), and the
    drafter line with the tree sizes. "auto: the best size for this machine" takes, per method, the shipped size
    with the most expected tokens per unit of this machine's pass cost (``drafters.trees.choose_tree_size``).

    Raises:
        ValueError: a setting the tree cannot go with, no shipped tree for a method, or (auto) no physical
            pass-cost curve on this machine (``usable_pass_cost``); shown as gr.Error.

    A tree asked for with no tree-capable method ticked is said in a ``gr.Warning`` (a toast on the page) too: the
    drafter line, where alone it was said, is folded.
    """
    nodes = whole(tree_nodes)
    if not nodes:
        return decoders, note
    out, lines = {}, []
    for key, decoder in decoders.items():
        out[key] = decoder
        if key in keys and key in TREE_PANES:
            size = nodes if nodes != TREE_AUTO else choose_tree_size(
                key, usable_pass_cost(loaded, "Tree sizes for this machine"))
            tree_settings = settings.with_(tree_nodes=size)
            out[tree_entry(key, size)] = METHODS[key].decode(loaded, prompt, tree_settings, found[key])
            lines.append(f"{METHODS[key].short_name} {size} nodes")
    how = ("auto, the size with the most expected tokens per unit of this machine's pass cost (the best tree "
           "size, which may still be slower than its chain): " if nodes == TREE_AUTO else "")
    if lines:
        return out, note + f"  \n**Token tree:** {how}{', '.join(lines)}."
    gr.Warning(f"Token tree: {NO_TREE_METHOD}, so this race has no tree run: tick one.")
    return out, note + f"  \n**Token tree:** {NO_TREE_METHOD}."


#: Why a race asked for a token tree has none (said in a toast, the drafter line and the run line).
NO_TREE_METHOD = (f"no ticked method drafts trees ({', '.join(METHODS[key].short_name for key in TREE_PANES)} "
                  "do)")


def tree_outputs(events: dict, show_rejected: bool, charts_now: bool = True, revision: str = "race") -> tuple:
    """The tree parts of a race update, in ``tree_panel().outputs`` order: one pane per ``TREE_PANES`` method
    (shown, titled with its entry, while that entry races; hidden otherwise), then the tree figure and the node
    chooser (``gr.skip()`` unless ``charts_now``), both for the latest tree step of each entry in ``events``, then
    the "Token tree of this step" panel, shown once a tree entry has a tree step (else it would stand empty)."""
    panes = []
    for base in TREE_PANES:
        entry = next((key for key in events if tree_base(key) == base), None)
        panes.append(gr.update(visible=False, value=[]) if entry is None else gr.update(
            visible=True, value=highlighted_tokens(events[entry], show_rejected),
            label=f"{short_name(entry)}: token tree of {tree_entry_nodes(entry)} nodes"))  # as in the charts
    # shown with the first tree step: a race too short for one (1 new token) showed the hint over no figure and an
    # empty chooser
    panel = gr.update(visible=any(tree_step(evs) is not None for key, evs in events.items() if tree_base(key)))
    if not charts_now:
        return (*panes, gr.skip(), gr.skip(), panel)
    choices = node_choices(events)
    return (*panes, shown_plot(tree_figure(events, revision)),  # no tree step yet: no empty plot box
            gr.update(choices=choices, value=None, interactive=bool(choices)), panel)


def tree_pane_values(state, show_rejected: bool) -> tuple:
    """The tree panes re-coloured from the last run's events (``state``) for the "show rejected drafts" toggle, in
    ``TREE_PANES`` order (``tree_outputs``' panes); ``gr.skip()`` for each without a run."""
    if not state:
        return (gr.skip(),) * len(TREE_PANES)
    return tree_outputs(events_upto(state["events"], state.get("position")), show_rejected, False)[:len(TREE_PANES)]


def tree_setting() -> gr.Dropdown:
    """The "token tree" input (in the race's settings)."""
    return gr.Dropdown(TREE_CHOICES, value=0, label="token tree (extension)", elem_id="input-tree_nodes",
                       info="adds a tree run beside each ticked " + " / ".join(
                           m.short_name for m in METHODS.values() if m.tree) + " method: one verification pass over "
                            "a tree of drafts (not with the fused step or cost-aware lengths)")


def tree_panel() -> SimpleNamespace:
    """Made where called: a row of one hidden token pane per ``TREE_PANES`` method (shown with its entry's tokens
    while that entry races, ``tree_outputs``), then an accordion with the hint, the tree figure and the node
    chooser (hidden until a race with a token tree). Returns ``panes``, ``plot``, ``node``, ``panel`` and
    ``outputs``: the race updates' tree outputs, in ``tree_outputs`` order."""
    with gr.Row(equal_height=True):
        panes = [gr.HighlightedText(label=f"{METHODS[key].label} + token tree", color_map=pane_colours(key),
                                    show_legend=True, show_inline_category=False, combine_adjacent=False,
                                    elem_classes="token-pane", elem_id=f"pane-{key}-tree", visible=False,
                                    min_width=320) for key in TREE_PANES]
    with gr.Accordion("Token tree of this step", open=True, elem_id="tree-panel", visible=False) as panel:
        gr.Markdown(TREE_HINT)
        # a label of one line on a phone too (two lines covered the top of the figure there); the legend under
        # the figure and the sentences over it say what each mark is
        plot = gr.Plot(label="the step's token tree", elem_id="tree-plot", visible=False)  # until a tree step
        node = gr.Dropdown([], label="inspect a node of the step's tree (shown in the token inspector)",
                           info="open the list and pick a node: depth, token and what verification did with it",
                           elem_id="tree-node", interactive=False)  # empty until picked: the info says to pick
    return SimpleNamespace(panes=panes, plot=plot, node=node, panel=panel, outputs=[*panes, plot, node, panel])


def inspector_outputs(markdown: str, figure=None) -> tuple:
    """The token inspector's two outputs: its ``markdown`` and ``figure`` (a Plotly figure, or None), the figure's
    box hidden while there is none (an empty plot box stood 230 px tall under the hint, pushing the metrics down)."""
    return markdown, shown_plot(figure)


def wire_tree(ui: SimpleNamespace, holder) -> None:
    """The node chooser fills the token inspector (``tree_inspector.inspect_node``); a token clicked in a tree pane
    fills it with its node (``inspect_tree_pane``) and moves the tree figure and the chooser to its step, and a token
    clicked in it or in a method's pane empties the chooser (it named a node the inspector no longer shows);
    Previous and Next, which move the tree figure to another step and empty the chooser, put the inspector of a
    chosen node back to its hint (it kept a node of the step shown before). ``ui``: the page's components
    (``layout.lay_out``); ``holder``: the page's ``ModelHolder`` (decodes token ids for the inspector's axis when the
    race was run on its model)."""
    parts, state, show_rejected, inspector = ui.tree, ui.state, ui.show_rejected, [ui.inspector_md, ui.inspector_plot]
    def namer(state):
        return token_namer(state["events"], holder.token_text if state.get("own_model", True) and holder.loaded
                           else None)

    def on_node(state, choice):
        if not state or not choice:
            return inspector_outputs(INSPECTOR_HINT)
        events = events_upto(state["events"], state.get("position"))
        return inspector_outputs(*(inspect_node(events, choice, namer(state)) or (INSPECTOR_HINT,)))

    def on_pane(key: str):
        def handler(state, show_rejected, evt: gr.SelectData):
            entry = entry_for(state["events"], f"{key}+tree") if state else None
            empty = gr.update(value=None)  # the chooser named a node the inspector no longer shows
            if entry is None or entry not in state["events"] or not isinstance(evt.index, int):
                return (*inspector_outputs(INSPECTOR_HINT), gr.skip(), empty)
            shown = events_upto(state["events"], state.get("position"))
            events = shown[entry]
            inspected = inspector_outputs(*inspect_tree_pane(events, entry, evt.index, show_rejected, namer(state)))
            step, node = pane_click(events, entry, evt.index, show_rejected)
            if step is None or not events[step].tree_parents:  # a chain step: the figure stays
                return (*inspected, gr.skip(), empty)
            # the figure and the chooser move to the clicked token's tree step (the inspector named node 4 of step 2
            # under a figure of step 25: helper 70), or a step mark's (the step the inspector then shows: the
            # figure stayed, helper 73); Previous, Next and the race's next update move them on again
            shown = {**shown, entry: events[:step + 1]}
            choices = node_choices(shown)
            return (*inspected, shown_plot(tree_figure(shown, f"click-{entry}-{step}")),
                    gr.update(choices=choices, value=node if node in {v for _, v in choices} else None,  # named
                              interactive=True))
        return handler

    # preprocess=False: the chooser's value arrives as sent (its choices change with every step)
    parts.node.input(on_node, [state, parts.node], inspector, preprocess=False, **INSTANT)
    for key, pane in zip(TREE_PANES, parts.panes):
        pane.select(on_pane(key), [state, show_rejected], [*inspector, parts.plot, parts.node], **INSTANT)
    for pane in ui.panes:  # in the browser: no round trip to the server (a tree pane's own listener sets the
        # chooser: this one, run beside it, emptied the node it named, helper 74)
        pane.select(None, None, parts.node, js="() => null", **INSTANT)
    for button in (ui.previous_btn, ui.next_btn):  # the chooser's value as it was when pressed
        button.click(lambda choice: inspector_outputs(INSPECTOR_HINT) if choice else (gr.skip(), gr.skip()),
                     parts.node, inspector, preprocess=False, **INSTANT)


def pane_hit(events: list, index: int, show_rejected: bool) -> tuple[int, int] | None:
    """(index in ``events`` of the step, index in its tokens) of entry ``index`` of the pane (``pane_entries``),
    or None for a step mark or an index off the pane."""
    entries = pane_entries(events, show_rejected)
    return entries[index][2] if 0 <= index < len(entries) else None


def pane_click(events: list, entry: str, index: int, show_rejected: bool) -> tuple[int | None, str | None]:
    """Entry ``index`` clicked in tree entry ``entry``'s pane (``pane_entries``): (the index in ``events`` of the
    step it shows, a step mark's the step it opens as in the token inspector, or None off the pane; the node
    chooser's value "entry|node|step" of the clicked token's node, ``tree_inspector.node_choices``, or None for a
    step mark, PaSS's exact token or a chain step)."""
    entries = pane_entries(events, show_rejected)
    source, hit = entry_source(entries, index), entries[index][2] if 0 <= index < len(entries) else None
    node = pane_node(events[hit[0]], hit[1]) if hit is not None else None
    return (source[0] if source else None), (f"{entry}|{node}|{events[hit[0]].step}" if node is not None else None)


def inspect_tree_pane(events: list, entry: str, index: int, show_rejected: bool, decode=str) -> tuple:
    """The token inspector for entry ``index`` clicked in tree entry ``entry``'s pane (``events``: its events as the
    pane shows them): a token of a tree step as its node (``inspect_node``: the step's node table and the tree
    rule; the chain's inspector named d_1, d_2 rows that a tree has several of, and gave the chain's rule), PaSS's
    exact token and a step mark as in any pane (``teaching.inspect_selection``). Returns (markdown, figure)."""
    hit = pane_hit(events, index, show_rejected)
    choice = pane_node(events[hit[0]], hit[1]) if hit is not None else None
    node = inspect_node({entry: events[:hit[0] + 1]}, f"{entry}|{choice}", decode) if choice is not None else None
    return node if node is not None else inspect_selection(events, entry, index, show_rejected, decode)


def pane_node(event, index: int) -> str | None:
    """The node chooser's node for token ``index`` of ``event`` as a tree pane shows it (an accepted or rejected
    token is its node, in ``tree_verification.shown_nodes`` order), the resampled or bonus token "next"; None for
    PaSS's exact token (drawn before the tree) and for a step that verified no tree. A trace recorded when a pane
    showed only the first rejected child of the last accepted node is read that way."""
    if not event.tree_parents:
        return None
    label, path = event.tokens[index].label, accepted_path(event)
    shown = shown_nodes(event.tree_parents, [d.decision for d in event.drafts])
    head = 1 if event.tokens and event.tokens[0].label == "exact" else 0
    drafts = [t for t in event.tokens[head:] if t.label in ("accepted", "rejected")]
    if label in ("accepted", "rejected") and len(drafts) <= len(shown) and all(
            t.token_id == event.drafts[j].token_id for t, j in zip(drafts, shown)):
        return str(shown[index - head]) if 0 <= index - head < len(shown) else None
    if label == "accepted":  # an older trace's layout: the accepted path, one rejected child, the next token
        k = sum(t.label == "accepted" for t in event.tokens[:index])
        return str(path[k]) if k < len(path) else None
    if label == "rejected":
        last = path[-1] if path else -1
        return next((str(j) for j, parent in enumerate(event.tree_parents)
                     if parent == last and event.drafts[j].decision == "rejected"), None)
    return NEXT if label in ("resampled", "bonus") else None
