"""The teacher's copy prompt in a real headless browser, on the embedded model: AR against prompt lookup, greedy.

Prompt lookup drafts the tokens that followed the last n-gram's earlier occurrence in the context; when the answer
repeats the prompt, its drafts are accepted and each verification pass adds several tokens. The page, built in this
process on the embedded SmolLM2-135M-Instruct, must then show a speed-up above 1 on the compute clock (the speed-up
box leaves the first step, the prompt's prefill, out on both sides) and the same tokens as AR. Saves
tests/artifacts/browser-copy-prompt-lookup.png (1400 px wide).
"""

from __future__ import annotations

import re

import pytest

from pass_core.registry import METHODS
from playground.race_inputs import EXAMPLES
from servers import free_port
from test_browser import snapshot, new_page, open_settings, pane_chars  # noqa: F401  (new_page: the fixture)

COPY_PROMPT = next(example for example in EXAMPLES if example.startswith("Repeat this sentence exactly:"))
MAX_NEW_TOKENS = 40  # the answer (the sentence, about 20 tokens) fits; AR then takes about 2 s on a busy 2-core CPU


@pytest.fixture
def embedded_page_url(smollm, fixed_pass_cost):
    """``page.build_demo`` on the embedded model, served in this process for one test. The cost view reads
    ``fixed_pass_cost``'s curve: measuring c(w) on the embedded model at the first race costs about 8 s of CPU,
    and nothing here is about it (tests/test_pass_cost.py and the Space app's start measure it)."""
    from playground import page

    demo, port = page.build_demo(smollm), free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                **page.launch_options())
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


def test_prompt_lookup_copies_faster_than_ar_with_the_same_tokens(smollm, embedded_page_url, new_page, tmp_path):
    from playwright.sync_api import expect

    from pass_core.teaching.trace import load_trace

    page = new_page(1400, 1000)
    page.goto(embedded_page_url)
    page.get_by_text("Ready:").first.wait_for(timeout=60_000)
    open_settings(page)
    page.get_by_text(COPY_PROMPT[:40]).first.click()  # the example under Run fills the prompt box
    expect(page.get_by_label("prompt", exact=True)).to_have_value(COPY_PROMPT, timeout=10_000)
    for key in METHODS:  # race AR against prompt lookup only
        box = page.get_by_label(METHODS[key].label, exact=True)
        box.check() if key in ("ar", "prompt-lookup") else box.uncheck()
    page.locator("#pane-prompt-lookup").wait_for(state="visible", timeout=10_000)
    page.locator("#input-temperature input").fill("0")  # greedy
    page.locator("#input-max_new_tokens input").fill(str(MAX_NEW_TOKENS))
    page.get_by_role("button", name="Run").click()
    page.get_by_text("Finished.").first.wait_for(timeout=180_000)  # seconds on a quiet CPU
    box = page.locator("label").filter(has=page.get_by_text("speed-up vs AR", exact=True)).locator("textarea")
    speedup = box.input_value()
    found = re.search(rf"{METHODS['prompt-lookup'].short_name} ([\d.]+)×", speedup)
    assert found, speedup
    assert float(found[1]) > 1.0, f"prompt lookup on the copy prompt: {speedup}"
    assert "prompt lookup output is identical to AR" in page.locator("#greedy-check").inner_text()
    # the same tokens, from the race's own trace: token ids, not only what the panes show
    with page.expect_download() as download:
        page.locator("#trace-download").click()
    download.value.save_as(tmp_path / "trace.json")
    events = load_trace(tmp_path / "trace.json").events
    ids = {key: [i for event in events[key] for i in event.new_token_ids] for key in ("ar", "prompt-lookup")}
    assert ids["ar"] and ids["prompt-lookup"] == ids["ar"]
    accepted = sum(t.label == "accepted" for event in events["prompt-lookup"] for t in event.tokens)
    assert accepted >= len(ids["ar"]) // 2, f"{accepted} accepted drafts of {len(ids['ar'])} tokens: it copied little"
    page.get_by_label("show rejected drafts").uncheck()  # the server re-renders the panes with the output only
    for _ in range(50):
        if pane_chars(page, "prompt-lookup") == pane_chars(page, "ar"):
            break
        page.wait_for_timeout(200)
    assert pane_chars(page, "prompt-lookup") == pane_chars(page, "ar") != ""
    snapshot(page, "browser-copy-prompt-lookup.png", full_page=True)
