"""Token trees on the page (docs/algorithms.md section 4b): the tree figure of a step (nodes, accepted path,
labels, colours), the node chooser and the node inspector on a hand-made tree step, the token tree setting's
refusals, and a race with a tree on the tiny model (its tree entries, trace, replay and step-through)."""

from __future__ import annotations

from dataclasses import replace

import gradio as gr
import pytest

from playground.race_inputs import RaceRequest

from pass_core.decoding.events import TOKEN_LABELS, DraftRecord, StepEvent, TokenRecord
from pass_core.decoding.inspection import PositionInspection, TopN
from pass_core.teaching.trace import load_trace
from playground import page
from playground.race_charts import pane_colours
from playground.tree_race import TREE_CHOICES, TREE_PANES, inspect_tree_pane, pane_node, tree_base, tree_problem
from playground.tree_inspector import TREE_RULE, inspect_node, node_choices, untried_reason
from playground.tree_view import NEXT, REJECTED_GREY, accepted_path, label, node_label, struck, tree_figure
from test_app import OUTPUT_NAMES, run

#: A 6-node tree: the root's children A (accepted) and B (not tried: A came first); under A, C (rejected) then D
#: (accepted); E under B (not tried); F under D (rejected); then G resampled at D's children.
PARENTS = (-1, -1, 0, 0, 1, 3)
NODES = [("A", 1, 0.61, 0.61, "accepted"), ("B", 1, 0.2, None, "not_verified"), ("C", 2, 0.12, 0.12, "rejected"),
         ("D", 2, 0.5, 0.57, "accepted"), ("E", 2, 0.3, None, "not_verified"), ("F", 3, 0.05, 0.05, "rejected")]


def tree_event(step: int = 2) -> StepEvent:
    drafts = tuple(DraftRecord(position=depth, token_id=65 + j, text=text, q=1.0, p=p, u=0.3 if p_res else None,
                               decision=decision, p_res=p_res)
                   for j, (text, depth, p, p_res, decision) in enumerate(NODES))
    tokens = (TokenRecord(65, "A", "accepted"), TokenRecord(68, "D", "accepted"), TokenRecord(70, "F", "rejected"),
              TokenRecord(71, "G", "resampled"))
    inspection = tuple(PositionInspection(i, TopN((65 + i, 90), (0.6, 0.1))) for i in (1, 2, 3))
    return StepEvent(method="parallelspec", step=step, tokens=tokens, drafts=drafts, num_verified_drafts=6,
                     inspection=inspection, tree_parents=PARENTS)


def chain_event(step: int = 1) -> StepEvent:
    return StepEvent(method="parallelspec", step=step, tokens=(TokenRecord(80, "P", "target"),))


def traces_named(fig, name):
    return [t for t in fig.data if t.name == name]


def test_tree_figure_draws_every_node_the_accepted_path_and_the_last_token():
    events = {"parallelspec+tree8": [chain_event(), tree_event()]}
    fig = tree_figure(events)
    nodes = [t for t in fig.data if t.mode == "markers+text"]
    assert sum(len(t.x) for t in nodes) == len(PARENTS) + 2  # every node, the root and the resampled token
    accepted = traces_named(fig, "accepted")[0]
    assert list(accepted.customdata) == accepted_path(tree_event()) == [0, 3]
    colour = pane_colours("parallelspec")[TOKEN_LABELS["accepted"]]
    assert accepted.marker.color == colour and traces_named(fig, "accepted path")[0].line.color == colour
    # the accepted path's edges: root -> A -> D (x = depth), the resampled token after D at depth 3
    path = traces_named(fig, "accepted path")[0]
    assert [x for x in path.x if x is not None] == [0, 1, 1, 2]
    # half a label's room beyond the root and the deepest node (the resampled token at depth 3): a label centred on
    # the plot's edge was cut there on a phone
    assert list(fig.layout.xaxis.range) == [-0.45, 3.45]
    # and room above the top node for its label, drawn over the marker (it ran into the panel's title on a phone)
    ys = [y for t in nodes for y in t.y]
    assert fig.layout.yaxis.range[1] - max(ys) >= 0.5 and min(ys) - fig.layout.yaxis.range[0] > 0
    # a tree cut below the size chosen (the drafter's depth, the tokens left) says so: "4 nodes" of a 16-node
    # setting read as a fault
    assert "step 2<br>6 nodes of 8, 2 accepted" in fig.layout.annotations[0].text
    full = tree_figure({"parallelspec+tree6": [tree_event()]}).layout.annotations[0].text
    untried = traces_named(fig, "not verified")[0]

    def luminance(colour: str) -> float:  # WCAG relative luminance of "#rrggbb"
        c = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        c = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]
    assert 1.05 / (luminance(untried.textfont.color) + 0.05) >= 2.5  # readable on white (#d1d5db was 1.5:1)
    assert "<br>6 nodes, 2 accepted" in full, full
    last = traces_named(fig, "resampled")[0]
    assert list(last.text) == [label("G")] and list(last.x) == [3]
    rejected = traces_named(fig, "rejected")[0]
    assert list(rejected.customdata) == [2, 5] and list(rejected.text) == ["C\u0336", "F\u0336"]  # struck through
    assert rejected.marker.color == REJECTED_GREY
    assert list(traces_named(fig, "not verified")[0].customdata) == [1, 4]
    # an untried node's hover says p "–", as the node table does ("p 0.2000" read as the target's judgement)
    assert [h.split("<br>")[1] for h in traces_named(fig, "not verified")[0].hovertext] == [
        "q 1.0000 · p – · p_res –"] * 2
    assert rejected.hovertext[0].split("<br>")[1] == "q 1.0000 · p 0.1200 · p_res 0.1200"
    assert list(traces_named(fig, "root (the pending token)")[0].text) == ["P"]  # the previous step's last token
    assert "step 2" in fig.layout.annotations[0].text and "2 accepted" in fig.layout.annotations[0].text
    # two panels that both end in a resampled token: one legend entry per kind, each title in two short lines
    both = tree_figure({"parallelspec+tree8": [chain_event(), tree_event()], "pass+tree8": [chain_event(), tree_event()]})
    legend = [t.name for t in both.data if t.showlegend is not False]
    assert len(legend) == len(set(legend)) and "resampled" in legend, legend
    # every kind of node drawn has its legend entry on a trace with points (Plotly leaves an empty trace out of the
    # legend), also when the first panel has none of that kind
    none_accepted = replace(tree_event(), drafts=tuple(replace(d, decision="rejected") if d.decision == "accepted"
                                                       else d for d in tree_event().drafts))
    mixed = tree_figure({"pass+tree8": [chain_event(), none_accepted], "parallelspec+tree8": [chain_event(),
                                                                                            tree_event()]})
    legend = [t.name for t in mixed.data if t.showlegend is not False]
    assert {"root (the pending token)", "accepted", "rejected", "not verified"} <= set(legend), legend
    assert len(legend) == len(set(legend)), legend
    assert all(len(t.x) for t in mixed.data if t.showlegend is not False), legend
    assert all(max(len(line) for line in a.text.replace("<b>", "").replace("</b>", "").split("<br>")) <= 32
               for a in both.layout.annotations if "step" in a.text)


def test_the_node_inspector_of_a_greedy_step_has_no_u_and_says_why():
    """Greedy (temperature 0) tree steps: no uniform draw decides, so the node table has no u column and the rule
    line says so, as the chain inspector does; a sampled step keeps both."""
    sampled = tree_event()
    greedy = replace(sampled, tokens=tuple(replace(t, margin=0.5) for t in sampled.tokens))  # the greedy loop's mark
    text, _ = inspect_node({"parallelspec+tree8": [sampled]}, "parallelspec+tree8|3")
    assert "| min(1, p_res/q) | u | decision |" in text and "not used: greedy" not in text
    text, _ = inspect_node({"parallelspec+tree8": [greedy]}, "parallelspec+tree8|3")
    assert "| min(1, p_res/q) | decision |" in text and "| u |" not in text
    assert "not used: greedy" in text and "q(x) = 1 for every node" in text
    assert "| **3** | 0 | 2 | `'D'` | 1.0000 | 0.5000 | 0.5700 | 0.5700 | accepted |" in text


def test_tree_figure_follows_the_events_shown_and_escapes_labels():
    assert tree_figure({"parallelspec": [chain_event()]}) is None  # no tree step yet: nothing to draw
    later = tree_event(step=3)
    later = replace(later, drafts=(replace(later.drafts[0], text="<|im_end|>"), *later.drafts[1:]))
    fig = tree_figure({"pass+tree8": [tree_event(step=2), later]})
    assert "step 3" in fig.layout.annotations[0].text  # the latest tree step
    assert list(traces_named(fig, "accepted")[0].text)[0] == "‹|im_end|›"  # no "<...>": Plotly reads it as a tag
    # a token of spaces only was an empty label; a word keeps its leading space, newlines stay visible
    assert (label(" "), label("  "), label(" the"), label("\n"), label("")) == ("␣", "␣␣", " the", "\\n", "∅")
    # in the figure: a struck leading space stays a space (it read as a dash, " of" as "–of"), and punctuation
    # alone is quoted (a bare "," read as a tick)
    assert struck(" of") == " o\u0336f\u0336" and [node_label(t) for t in (",", " .", " of", "…")] == [
        "','", "' .'", " of", "'…'"]
    # a rejected one is struck inside its quotes (struck quotes read as dashes: "-,-")
    assert node_label(",", strike=True) == "',\u0336'" and node_label(" of", strike=True) == " o\u0336f\u0336"


def test_node_choices_and_the_node_inspector_show_the_nodes_numbers():
    events = {"ar": [chain_event()], "parallelspec+tree8": [chain_event(), tree_event()]}
    choices = node_choices(events)
    step = tree_event().step  # each value names its step: a live race moves on before a node is chosen
    assert [value for _, value in choices] == [f"parallelspec+tree8|{j}|{step}" for j in range(6)] + [
        f"parallelspec+tree8|{NEXT}|{step}"]
    # chosen while the race went on: the node of the step the chooser listed, not of the newest tree step
    later = replace(tree_event(), step=step + 1, drafts=tuple(replace(d, text="Z") for d in tree_event().drafts))
    moved_on = {**events, "parallelspec+tree8": [*events["parallelspec+tree8"], later]}
    assert f"step {step}**" in inspect_node(moved_on, choices[2][1])[0]
    assert f"step {step + 1}**" in inspect_node(moved_on, "parallelspec+tree8|2")[0]  # no step: the newest
    assert inspect_node(moved_on, f"parallelspec+tree8|2|{step + 5}") is None  # a step that is not there
    assert "node 2 (depth 2) 'C' · rejected" in choices[2][0]
    spaced = tree_event()  # spaces shown as the figure shows them: a browser's list collapsed "\n   " to "\n "
    spaced = replace(spaced, drafts=(replace(spaced.drafts[0], text="\n   "), *spaced.drafts[1:]))
    assert "node 0 (depth 1) '\\n␣␣␣' · accepted" in node_choices({"parallelspec+tree8": [spaced]})[0][0]
    text, fig = inspect_node(events, "parallelspec+tree8|3")
    d = tree_event().drafts[3]
    assert f"node 3, `'D'` (token id {d.token_id}, **accepted**)" in text
    assert f"q(x) = {d.q:.4f}, p(x) = {d.p:.4f}, p_res(x) = {d.p_res:.4f}" in text
    assert "| **3** | 0 | 2 | `'D'` | 1.0000 | 0.5000 | 0.5700 |" in text
    # the p of D's parent A, at depth 2, named so ("p_2" did not say the subscript is the node's depth)
    # ("p at depth 1 (the parent's)" of a depth-1 node read as the depth of its parent, the root: helper 70)
    assert fig is not None and [b.name for b in fig.data][0] == "p at depth 2 (computed at its parent)"
    # the node marked by its name (the chain's "d_2" named a draft a tree has several of), the one series in a legend
    assert [a.text for a in fig.layout.annotations] == ["node 3"] and fig.layout.showlegend
    # a rejected node beside the accepted path: its q alone, one bar at its token (the depth's recorded q is the
    # path node's, D's; both stood at 1.0 as one "q_2 (the draft's law)", a new-user helper found)
    with_q = replace(tree_event(), inspection=tuple(PositionInspection(i, TopN((65 + i, 90), (0.6, 0.1)),
                                                                       TopN((t,), (1.0,)))
                                                    for i, t in ((1, 65), (2, 68), (3, 70))))
    _, fig = inspect_node({"parallelspec+tree8": [with_q]}, "parallelspec+tree8|2")
    q_bars = {x: y for bars in fig.data if bars.name.startswith("q") for x, y in zip(bars.x, bars.y) if y}
    assert [b.name for b in fig.data][1] == "q (one-hot at this node)" and q_bars == {"67": 1.0}, q_bars  # C: id 67
    text, fig = inspect_node(events, "parallelspec+tree8|4")
    assert "**not verified**" in text and "(never tried: its parent, node 1, was not accepted)" in text and fig is None
    assert [untried_reason(tree_event(), j) for j in (1, 4)] == ["an earlier sibling, node 0, was accepted",
                                                                  "its parent, node 1, was not accepted"]
    ended = replace(tree_event(), drafts=tuple(replace(d, decision="not_verified") for d in tree_event().drafts))
    assert untried_reason(ended, 0) == "the step ended before it"
    # its p(x) reads "–", as an untried draft's in the chain's inspector (p(x) = 1.0000 beside "not verified")
    assert "p(x) = –, p_res(x) = –" in text and "| **4** | 1 | 2 | `'E'` | 1.0000 | – | – | – |" in text
    text, fig = inspect_node(events, f"parallelspec+tree8|{NEXT}")
    assert "**resampled**" in text and fig is not None and list(fig.data[0].y)[:1] == [0.6]  # p at position 3
    for bad in ("parallelspec+tree8|6", "ar|0", "nothing", None):
        assert inspect_node(events, bad) is None



def test_a_token_clicked_in_a_tree_pane_is_inspected_as_its_node():
    """A token of a tree step clicked in its pane: its node (accepted A and D are nodes 0 and 3, the rejected F node
    5, the resampled G "next"), inspected as the node chooser would, with the step's node table and the tree rule.
    The chain's inspector answered instead: rows d_1, d_2 that a tree has several of, the chain's rule, and the
    entry's key "parallelspec+tree8" as its name. A chain step's token in the same pane keeps the chain's."""
    entry, events = "parallelspec+tree8", [chain_event(), tree_event()]
    assert [pane_node(tree_event(), t) for t in range(4)] == ["0", "3", "5", NEXT]
    assert pane_node(chain_event(), 0) is None
    for index, node in ((2, "0"), (3, "3"), (4, "5"), (5, NEXT)):  # pane entries: P, a step mark, A, D, F, G
        text, _ = inspect_tree_pane(events, entry, index, True)
        assert text == inspect_node({entry: events}, f"{entry}|{node}")[0], (index, text)
        assert "ParallelSpec +tree8, step 2" in text and "parallelspec+tree8" not in text
    text, _ = inspect_tree_pane(events, entry, 0, True)  # P: the chain step before the tree
    assert "Selected: `'P'`" in text and "ParallelSpec (parallel drafter) +tree8, step 1" in text
    assert TREE_RULE[:60] not in text and TREE_RULE[:60] in inspect_tree_pane(events, entry, 2, True)[0]


@pytest.mark.parametrize("value, fused, auto, fine", [
    (0, False, False, True), (4, False, False, True), (8.0, False, False, True), (16, False, False, True),
    (-1, False, False, True), (5, False, False, False), ("8", False, False, True), ("-1", False, False, True),
    ("eight", False, False, False), ("8.5", False, False, False), ("5", False, False, False),
    (True, False, False, False), (None, False, False, False), (8, True, False, False), (-1, False, True, False),
    (0, True, True, True)])
def test_tree_setting_is_refused_by_name(value, fused, auto, fine):
    problem = tree_problem(value, fused, auto)
    assert (problem is None) == fine, problem
    if not fine:
        assert problem.startswith("token tree"), problem
    if value and (fused or auto) and not fine:  # the page's words: its checkboxes' and the dropdown's labels
        ticked = "fused step" if fused else "cost-aware draft lengths"
        assert f"does not work with the {ticked} yet: untick it, or choose 'chain (no tree)'." in problem, problem
        assert "!=" not in problem and "tree nodes" not in problem, problem
    checks = page.validate_inputs("Hi", 2, 0.0, 0, 1.0, 8, 0, True, fused, ["ar", "pass"], True, auto, value)
    assert (checks[-1]["is_valid"]) == fine and checks[-1]["message"] == (problem or "")


def test_every_tree_value_the_api_schema_lists_is_accepted(tiny):
    """gradio's schema for the race lists the drop-down's values as strings (Literal['0', '4', ...]): an API
    client that sent one, even the listed default '0', was refused."""
    demo = page.build_demo(tiny)
    parameter = next(p for p in demo.get_api_info()["named_endpoints"]["/race"]["parameters"]
                     if p["parameter_name"] == "tree_nodes")
    listed = parameter["python_type"]["type"].removeprefix("Literal[").removesuffix("]").replace("'", "").split(", ")
    assert sorted(listed) == sorted(str(v) for _, v in TREE_CHOICES)
    assert [tree_problem(value) for value in listed] == [None] * len(listed)


def test_a_race_with_trees_has_tree_entries_panes_trace_and_replay(tiny):
    outs = run(tiny, temperature=1.0, max_new_tokens=6, methods=["ar", "parallelspec"], tree_nodes=4,
               update_interval_s=0.0, inspect=True)
    final = outs[-1]
    events = final["state"]["events"]
    assert list(events) == ["ar", "parallelspec", "parallelspec+tree4"]
    assert all(len(e.tree_parents) == len(e.drafts) for e in events["parallelspec+tree4"] if e.drafts)
    assert any(e.tree_parents for e in events["parallelspec+tree4"]) and not any(
        e.tree_parents for e in events["parallelspec"])
    pane = final[f"{TREE_PANES[TREE_PANES.index('parallelspec')]}_tree_tokens"]
    assert pane["visible"] and pane["value"] and "4 nodes" in pane["label"]
    assert all(not final[f"{key}_tree_tokens"]["visible"] for key in TREE_PANES if key != "parallelspec")
    assert final["tree_figure"]["visible"] and final["tree_figure"]["value"].data and final["tree_node"]["choices"]
    assert final["tree_panel"] == {"__type__": "update", "visible": True}  # the panel shows with a tree entry
    assert "Token tree:** ParallelSpec 4 nodes" in final["lookahead"]
    import re  # alpha: the chain's on its judged drafts, the tree's on every node tried (the chain's words misled)
    rates = final["acceptance_rate"]
    assert re.search(r"ParallelSpec [\d.]+% \(\d+ of \d+ judged drafts;", rates), rates
    assert re.search(r"ParallelSpec \+tree4 [\d.]+% \(\d+ of \d+ tree nodes tried;", rates), rates
    trace = load_trace(final["trace"])
    assert list(trace.events) == list(events) and tree_base("parallelspec+tree4") == "parallelspec"
    assert [e.tree_parents for e in trace.events["parallelspec+tree4"]] == [
        e.tree_parents for e in events["parallelspec+tree4"]]
    replayed = dict(zip(OUTPUT_NAMES, page.replay_handler(final["trace"], True), strict=True))
    assert replayed["parallelspec_tree_tokens"]["value"] == pane["value"]
    assert replayed["tree_node"]["choices"] == final["tree_node"]["choices"] and replayed["tree_panel"]["visible"]
    assert "seed 0, token tree of 4 nodes." in replayed["run_info"], replayed["run_info"]  # said only k, seed, ...
    chain = run(tiny, max_new_tokens=4, methods=["ar", "parallelspec"], update_interval_s=0.0)  # no tree entry:
    assert all(out["tree_panel"] == {"__type__": "update", "visible": False} for out in chain)  # no empty panel
    short = run(tiny, max_new_tokens=1, methods=["ar", "parallelspec"], tree_nodes=4, update_interval_s=0.0)
    assert "parallelspec+tree4" in short[-1]["state"]["events"]  # a tree entry that never drafted a tree: no panel
    assert all(out["tree_panel"] == {"__type__": "update", "visible": False} for out in short)
    # step-through: at each position the figure and the chooser show the latest tree step shown by then
    total = sum(map(len, events.values()))
    for position in range(1, total + 1):
        shown = dict(zip(OUTPUT_NAMES, page.render_state(final["state"], True, position), strict=True))
        upto = page.events_upto(events, position)["parallelspec+tree4"]
        steps = [e.step for e in upto if e.tree_parents]
        if not steps:
            # no tree step yet: no figure, and no empty plot box (``plot_boxes.shown_plot``)
            assert shown["tree_figure"] == gr.update(value=None, visible=False) and shown["tree_node"]["choices"] == []
        else:
            assert shown["tree_figure"]["visible"] is True
            assert f"step {steps[-1]}<br>" in shown["tree_figure"]["value"].layout.annotations[0].text
            assert all(f"step {steps[-1]} ·" in name for name, _ in shown["tree_node"]["choices"])


def test_the_rejected_drafts_toggle_recolours_the_tree_panes_too(tiny):
    """After a race with a tree run, ticking "show rejected drafts" re-renders the tree pane as it does the other
    panes (it used to keep the value the race ended with), and unticking it leaves them out again."""
    from pass_core.registry import METHODS

    demo = page.build_demo(tiny, untrained_drafters=True)
    on_run = next(fn.fn for fn in demo.fns.values() if fn.api_name == "race")
    on_toggle = next(fn.fn for fn in demo.fns.values() if getattr(fn.fn, "__name__", "") == "on_toggle")
    final = dict(zip(OUTPUT_NAMES, list(on_run("Hello there", 2, 1.0, 0, 1.0, 8, 0, False, False,
                                                ["ar", "parallelspec"], True, False, 4))[-1], strict=True))
    rejected = TOKEN_LABELS["rejected"]
    assert rejected not in {label for _, label in final["parallelspec_tree_tokens"]["value"]}
    at = len(METHODS) + TREE_PANES.index("parallelspec")  # on_toggle's outputs: the panes, then the tree panes
    shown, hidden = on_toggle(final["state"], True), on_toggle(final["state"], False)
    assert len(shown) == len(METHODS) + len(TREE_PANES)
    assert rejected in {label for _, label in shown[at]["value"]}  # untrained: drafts rejected
    assert rejected not in {label for _, label in hidden[at]["value"]}
    assert not any(pane["visible"] for i, pane in enumerate(shown[len(METHODS):]) if i != at - len(METHODS))
    assert on_toggle(None, True) == (page.gr.skip(),) * (len(METHODS) + len(TREE_PANES))  # nothing raced yet


def test_a_race_refuses_a_bad_tree_and_a_tree_with_the_fused_step(tiny):
    with pytest.raises(page.gr.Error, match="token tree must be one of"):
        run(tiny, methods=["ar", "parallelspec"], tree_nodes=3)
    with pytest.raises(page.gr.Error, match="fused"):
        run(tiny, fused=True, methods=["ar", "pass"], tree_nodes=8)


@pytest.mark.parametrize("curve, size", [([1.0] * 17, 16), ([float(w) for w in range(1, 18)], 4)])
def test_auto_tree_size_follows_this_machines_pass_cost(tiny, monkeypatch, curve, size):
    """Auto: a flat pass cost (a wide pass as cheap as one token) favours the biggest shipped tree, a cost growing
    with the width the smallest; the entry and the drafter line name the size chosen."""
    from pass_core.decoding.settings import DecodeSettings
    from playground import tree_race

    monkeypatch.setattr(tree_race, "usable_pass_cost", lambda loaded, what="": {"c": curve})
    decoders, note = tree_race.with_trees(tiny, "Hi", DecodeSettings(max_new_tokens=2), ["ar", "parallelspec"],
                                          {"ar": None, "parallelspec": None}, {"ar": None, "parallelspec": None},
                                          "", -1)
    assert list(decoders) == ["ar", "parallelspec", f"parallelspec+tree{size}"]
    assert ("auto, the size with the most expected tokens per unit of this machine's pass cost (the best tree size, "
            f"which may still be slower than its chain): ParallelSpec {size} nodes") in note


def test_a_tree_with_no_tree_method_ticked_is_said_in_a_toast(tiny):
    """A tree asked for beside AR and prompt lookup only was said in the folded drafter line alone: a toast says it
    (``gr.Warning``, a Python warning outside a page's request), naming the methods that draft trees."""
    from pass_core.decoding.settings import DecodeSettings
    from playground import tree_race

    keys = ["ar", "prompt-lookup"]
    with pytest.warns(UserWarning, match=r"^Token tree: no ticked method drafts trees \(PaSS, PaSS\+adapters, "
                                         r"ParallelSpec do\), so this race has no tree run: tick one\.$"):
        decoders, note = tree_race.with_trees(tiny, "Hi", DecodeSettings(max_new_tokens=2), keys,
                                              dict.fromkeys(keys), dict.fromkeys(keys), "", 8)
    assert list(decoders) == keys and note.endswith("no ticked method drafts trees (PaSS, PaSS+adapters, "
                                                    "ParallelSpec do).")


def test_zerogpu_counts_the_tree_entries():
    """On ZeroGPU a tree race asks for GPU time for its tree entries too, and caps its tokens to fit."""
    from playground import race_inputs
    from playground.tree_race import tree_count

    methods = ["ar", "pass", "parallelspec"]
    assert [tree_count(methods, n) for n in (0, 8, -1, 5)] == [0, 2, 2, 0]
    assert tree_count(["ar", "prompt-lookup"], 8) == 0
    chain = page.gpu_duration(RaceRequest("Hi", 3, 0.0, 0, 1.0, 100, 0, True, False, methods, True, False, 0))
    tree = page.gpu_duration(RaceRequest("Hi", 3, 0.0, 0, 1.0, 100, 0, True, False, methods, True, False, 8))
    assert (chain, tree) == (race_inputs.gpu_seconds(100, 3), race_inputs.gpu_seconds(100, 5)) == (35, 45)
    capped, note = race_inputs.cap_for_zerogpu(1024, methods, tree_count(methods, 8))
    assert capped == race_inputs.zerogpu_token_cap(5) < race_inputs.zerogpu_token_cap(3) and "5 methods" in note
