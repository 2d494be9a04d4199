"""The README's screenshot, ``docs/screenshot.png``: a finished greedy race of AR, PaSS and ParallelSpec on the
embedded model at 1400 px, taken by this test on every run, so that the picture shows the page as it is today.

The page is built in this process on the embedded model (``smollm``) and driven by the run's one Chromium. The
picture stops above the cost view, which reads ``fixed_pass_cost``'s curve (measuring c(w) at the first race would
cost about 8 s of CPU).
"""

from __future__ import annotations

from pathlib import Path

from test_browser import ARTIFACTS, new_page  # noqa: F401 (a fixture: a fresh context of the run's Chromium)
from test_browser_teaching import open_page, served

SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "screenshot.png"
PROMPT = "Write a short poem about the sea."


def test_readme_screenshot_is_a_finished_race_on_the_embedded_model(new_page, smollm, fixed_pass_cost):  # noqa: F811
    """Race the default three methods for 32 tokens; each pane holds coloured tokens and the greedy check passes;
    then, with the settings folded, the first 1,300 px of the page (title, prompt, lessons and the panes) is written to docs/screenshot.png."""
    with served(smollm) as url:
        page = open_page(new_page, url, 1400)
        page.get_by_label("prompt", exact=True).fill(PROMPT)
        page.locator("#input-max_new_tokens input").fill("32")
        page.get_by_role("button", name="Run").click()
        page.get_by_text("Finished.").first.wait_for(timeout=180_000)
        for key in ("ar", "pass", "parallelspec"):
            assert page.locator(f"#pane-{key} .token.highlighted").count() > 0, f"pane {key} has no tokens"
        assert "identical" in page.locator("#greedy-check").inner_text().lower(), \
            page.locator("#greedy-check").inner_text()
        page.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=30_000)
        page.locator("#settings button.label-wrap").first.click()  # folded again, as the page loads
        page.locator("#input-seed").wait_for(state="hidden", timeout=10_000)
        page.wait_for_timeout(1000)  # the accordion's fold animation
        page.set_viewport_size({"width": 1400, "height": 1300})  # title to the panes' last lines
        page.evaluate("window.scrollTo(0, 0)")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SCREENSHOT))
        page.screenshot(path=str(ARTIFACTS / "browser-readme.png"), full_page=True)
    assert SCREENSHOT.stat().st_size > 20_000  # a picture of a page, not an empty frame
