"""Token trees on the page in a real browser (the page served in this process on a tiny random model, as in
tests/test_browser.py): race ParallelSpec and PaSS with an 8-node tree, pause, check the tree figure's nodes
against the downloaded trace, pick a node in the chooser and check the inspector's q, p and p_res against the
trace's values for that node. Screenshots go to tests/artifacts/ at a desktop's and a phone's width."""

from __future__ import annotations

import re

import pytest

from pass_core.teaching.race import events_upto
from playground.tree_view import last_token, tree_step
from test_browser import snapshot, in_process_page, new_page, race_on, race_page_url  # noqa: F401 (fixtures)

#: The columns of the node inspector's table (``tree_inspector.node_table``).
COLUMNS = ["node", "parent", "depth", "token", "q(x)", "p(x)", "p_res(x)", "min(1, p_res/q)", "u", "decision"]


def choose(page, dropdown: str, option: str) -> None:
    """Open a gradio dropdown and click the option whose text holds ``option``."""
    page.locator(f"{dropdown} input").click()
    page.get_by_role("option").filter(has_text=option).first.click()


@pytest.mark.parametrize("width", [1400, 400])
def test_tree_figure_and_node_inspector(new_page, race_page_url, tmp_path, width):  # noqa: F811 (fixtures)
    from pass_core.teaching.trace import load_trace

    with in_process_page(new_page, race_page_url, width, step_delay_s=0.2) as page:
        from playwright.sync_api import TimeoutError as PageTimeout

        # sampled: the nodes' p are not all 0 or 1. The page took it once its slider follows the box: on fresh
        # clones' runs the race ran greedy once, and once the slider never followed (a value typed while the
        # unfolded Settings still mount is lost: no person types that fast), so it is typed again until taken
        for attempt in range(3):
            page.locator("#input-temperature input").fill("1")
            try:
                page.wait_for_function("() => document.querySelector('#input-temperature').parentElement"
                                       ".parentElement.querySelector('.range-aid input[type=range]')?.value === '1'",
                                       timeout=5_000)
                break
            except PageTimeout:
                assert attempt < 2, "the temperature box never took 1 (its slider stayed where it was)"
        choose(page, "#input-tree_nodes", "8 nodes")
        race_on(page, max_new_tokens=24)
        page.locator("#pane-parallelspec-tree .token.highlighted").first.wait_for(timeout=60_000)
        # and AR's first token, clicked below (paused before AR's first step, its pane had none: a fresh clone's run)
        page.locator("#pane-ar .token.highlighted").first.wait_for(timeout=60_000)
        page.locator("#pause-button").dispatch_event("click")
        page.locator("#run-line").get_by_text("Paused after step").wait_for(timeout=60_000)
        position = int(re.search(r"after step (\d+) of", page.locator("#run-line").inner_text()).group(1))
        page.locator("#tree-plot .js-plotly-plot").wait_for(timeout=30_000)
        points = page.locator("#tree-plot .js-plotly-plot").evaluate(
            "g => g.data.filter(t => t.mode === 'markers+text').map(t => [t.name, t.x.length])")
        choose(page, "#tree-node", "rejected")  # a node the rule tried (sampled: its p is not 0)
        page.get_by_text("Selected: node").first.wait_for(timeout=30_000)
        text = page.locator("#inspector-text").inner_text()
        page.locator("#inspector-plot .js-plotly-plot").wait_for(timeout=30_000)
        if width == 1400:  # a token clicked in a pane is inspected: the chooser no longer names a node (it did)
            assert page.locator("#tree-node input").input_value() != ""
            page.locator("#pane-ar .token").first.click()
            page.wait_for_function("() => document.querySelector('#tree-node input').value === ''", timeout=10_000)
            choose(page, "#tree-node", "rejected")  # the node again, for the checks below
            page.get_by_text("Selected: node").first.wait_for(timeout=30_000)
            text = page.locator("#inspector-text").inner_text()
        snapshot(page.locator("#tree-panel"), f"browser-tree-{width}.png")
        snapshot(page.locator("#inspector"), f"browser-tree-inspector-{width}.png")
        snapshot(page, f"browser-tree-page-{width}.png", full_page=True)
        # the plot's label badge holds one line (two lines at 400 px covered the top of the figure)
        badge = page.locator("#tree-plot [data-testid='block-label']").bounding_box()
        line = page.locator("#tree-plot [data-testid='block-label']").evaluate(
            "e => parseFloat(getComputedStyle(e).lineHeight) || 1.5 * parseFloat(getComputedStyle(e).fontSize)")
        assert badge["height"] < 2 * line, (badge, line)
        # its toolbar keeps four buttons (ten, selection and lasso included, ran under the badge on a phone)
        toolbar = page.locator("#tree-plot .modebar-btn").evaluate_all(
            "bs => bs.filter(b => getComputedStyle(b).display !== 'none').map(b => b.dataset.title)")
        assert toolbar == ["Download plot as a PNG", "Zoom", "Pan", "Reset axes"], toolbar
        for part in ("#tree-plot", "#tree-node", "#inspector-text", "#pane-parallelspec-tree"):  # nothing clipped
            box = page.locator(part).bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, (part, box)
        if width == 1400:  # Next moves the figure on: the chosen node's inspector goes back to its hint (it kept
            page.locator("#next-button").click()  # a node of the step shown before)
            page.locator("#inspector-text").get_by_text("Click any token in a pane to inspect").wait_for(timeout=30_000)
            assert "Selected: node" not in page.locator("#inspector-text").inner_text()
        race_page_url[1](0.0)  # the paused step is checked: the rest of the race at full speed
        page.locator("#resume-button").dispatch_event("click")
        page.get_by_text("Finished.").first.wait_for(timeout=120_000)
        with page.expect_download() as download:
            page.locator("#trace-download").click()
        download.value.save_as(tmp_path / "trace.json")
    trace = load_trace(tmp_path / "trace.json")
    assert {"parallelspec+tree8", "pass+tree8"} <= set(trace.events)
    # the figure drew, per tree entry, the paused step's nodes, its root and its last token
    shown = events_upto(trace.events, position)
    steps = {key: tree_step(evs) for key, evs in shown.items() if "+tree" in key}
    expected = sum(len(e.drafts) + 1 + (last_token(e) is not None) for e in steps.values() if e is not None)
    assert sum(n for _, n in points) == expected, points
    # the inspector's row of the chosen node holds the trace's q, p and p_res of that node
    entry_label, step = re.search(r"\*?\*?(\S+) \+tree8, step (\d+)\*?\*? \(", text).groups()
    entry = {"ParallelSpec": "parallelspec+tree8", "PaSS": "pass+tree8"}[entry_label]
    node = int(re.search(r"Selected: node (\d+)", text).group(1))
    event = next(e for e in trace.events[entry] if e.step == int(step))
    assert event is steps[entry] or event == steps[entry]  # the step the page was paused at
    draft = event.drafts[node]
    row = next(line for line in text.splitlines() if line.split("\t")[0].strip() == str(node))
    cells = [c.strip() for c in row.split("\t")]
    assert len(cells) == len(COLUMNS), (row, text)  # once fewer cells, under an extra busy process: keep the text
    cell = dict(zip(COLUMNS, cells, strict=True))
    assert [float(cell[c]) for c in ("q(x)", "p(x)", "p_res(x)")] == pytest.approx(
        [draft.q, draft.p, draft.p_res], abs=5e-5), row
    assert cell["decision"] == "rejected" == draft.decision and int(cell["depth"]) == draft.position
    assert draft.p > 0 and cell["parent"] == ("root" if event.tree_parents[node] < 0 else
                                               str(event.tree_parents[node]))
