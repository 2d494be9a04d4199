"""The page once in a real headless browser: Debian's Chromium driven by Playwright.

Runs ``python app.py`` on the tiny model, races a prompt, and checks that the three panes hold
coloured token spans and that Plotly drew the charts. Saves tests/artifacts/browser.png.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pass_core.methods import METHODS
from test_app import running_app

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is missing: make browser installs it"),
]


def test_page_races_and_draws(tiny_folder):
    sync_api = pytest.importorskip("playwright.sync_api")
    ARTIFACTS.mkdir(exist_ok=True)
    with running_app(str(tiny_folder)) as url, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            page.get_by_text("PaSS Playground").first.wait_for(timeout=60_000)
            page.get_by_text("Target model:").first.wait_for(timeout=60_000)  # the load finished
            page.get_by_label("prompt").fill("Hello there")
            page.get_by_role("button", name="Run").click()
            page.get_by_text("Finished.").first.wait_for(timeout=90_000)
            for key in ("ar", "pass", "parallelspec"):  # all three race by default
                pane = page.locator(f"#pane-{key}")
                assert pane.is_visible(), key
                assert pane.locator(".token.highlighted").count() > 0, f"pane {key} has no tokens"
            colour = page.locator("#pane-ar .token.highlighted").first.get_attribute("style")
            assert "background-color" in colour
            page.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=30_000)
            assert page.locator(".js-plotly-plot").count() >= 4
            page.screenshot(path=str(ARTIFACTS / "browser.png"), full_page=True)
            # untick a method: its pane goes away, the other two race
            page.get_by_label(METHODS["pass"], exact=True).uncheck()
            page.locator("#pane-pass").wait_for(state="hidden", timeout=10_000)
            assert page.locator("#pane-ar").is_visible() and page.locator("#pane-parallelspec").is_visible()
            # one method left: Run is refused at the input, with the reason, and the outputs keep the last race
            page.get_by_label(METHODS["parallelspec"], exact=True).uncheck()
            page.get_by_role("button", name="Run").click()
            page.get_by_text("Pick at least two methods").first.wait_for(timeout=10_000)
            page.screenshot(path=str(ARTIFACTS / "browser-validation.png"), full_page=True)
            assert page.locator("#pane-ar .token.highlighted").count() > 0
            page.get_by_label(METHODS["pass"], exact=True).check()  # fixed: the race runs again
            page.get_by_role("button", name="Run").click()
            page.locator("#pane-pass .token.highlighted").first.wait_for(timeout=90_000)
        finally:
            browser.close()
