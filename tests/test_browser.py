"""The page once in a real headless browser: Debian's Chromium driven by Playwright.

Runs ``python app.py`` on the tiny model. First types an out-of-range value into each numeric input and
checks that the input is marked with a message naming the setting, its range and the value typed, and that
no race started; then races a prompt and checks that the default panes hold coloured token spans and that
Plotly drew the charts. Saves tests/artifacts/browser.png and browser-out-of-range.png.

Without Chromium or Playwright the test is skipped on a developer's machine (``make browser``
installs Chromium) but FAILS under CI (``CI`` set, as every CI service does): a CI run must never
pass with the browser test silently left out.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pass_core.registry import METHODS
from pass_core.viz.race_inputs import NUMERIC_INPUTS
from test_app import running_app

CHROMIUM = Path(shutil.which("chromium") or "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
#: A value out of range for each numeric input, and what its message must say (setting, range, value typed).
OUT_OF_RANGE = {
    "num_lookahead": ("0", "look-ahead tokens L must be between 1 and 8, got 0"),
    "temperature": ("-1", "temperature must be between 0 and 2, got -1"),
    "top_k": ("-5", "top-k must be between 0 and 200, got -5"),
    "top_p": ("0", "top-p must be between 0.01 and 1, got 0"),
    "max_new_tokens": ("100000", "max new tokens must be between 1 and 1,024, got 100000"),
    "seed": ("-1", "seed must be between 0 and 2,147,483,647, got -1"),
}
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def in_ci() -> bool:
    """True under CI: ``CI`` set to anything but "", "0", "false" or "no"."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_browser(chromium: Path = CHROMIUM):
    """Playwright's sync API, or skip (outside CI) / fail (in CI) saying what is missing."""
    reason = None
    if not chromium.exists():
        reason = f"Debian's chromium is missing ({chromium}): make browser installs it"
    else:
        try:
            from playwright import sync_api
        except ImportError as err:
            reason = f"playwright is missing ({err}): pip install -e '.[test]'"
    if reason is None:
        return sync_api
    if in_ci():
        pytest.fail(f"CI is set but the browser test cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception),
                                         ("false", pytest.skip.Exception)])
def test_missing_chromium_fails_in_ci_and_skips_elsewhere(monkeypatch, tmp_path, ci, outcome):
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="chromium is missing"):
        require_browser(tmp_path / "no-chromium")


@pytest.mark.browser
def test_page_races_and_draws(tiny_folder):
    sync_api = require_browser()
    ARTIFACTS.mkdir(exist_ok=True)
    with running_app(str(tiny_folder)) as url, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            page.get_by_text("PaSS Playground").first.wait_for(timeout=60_000)
            page.get_by_text("Target model:").first.wait_for(timeout=60_000)  # the load finished
            page.get_by_label("prompt").fill("Hello there")
            assert set(OUT_OF_RANGE) == set(NUMERIC_INPUTS)
            for name, (typed, message) in OUT_OF_RANGE.items():  # each refused by name at its input; nothing races
                box = page.locator(f"#input-{name} input")
                good = box.input_value()
                box.fill(typed)
                page.get_by_role("button", name="Run").click()
                mark = page.locator(f"#input-{name} div.validation-error")  # the message, under the label
                mark.wait_for(timeout=10_000)
                assert message in mark.inner_text(), (name, mark.inner_text())
                assert "validation-error" in box.get_attribute("class"), name  # and the box itself is marked
                assert box.input_value() == typed, name  # kept as typed: not clamped into the range
                if name == "max_new_tokens":
                    page.screenshot(path=str(ARTIFACTS / "browser-out-of-range.png"), full_page=True)
                page.wait_for_timeout(500)  # a race, had one started, would have written its run line by now
                assert page.locator("#run-line").inner_text().strip() == "", name
                assert page.locator(".token-pane .token").count() == 0, name
                box.fill(good)
            for method in METHODS.values():  # the page offers every registered method
                assert page.get_by_label(method.label, exact=True).count() == 1, method.key
            page.get_by_role("button", name="Run").click()
            page.get_by_text("Finished.").first.wait_for(timeout=90_000)
            assert page.locator(".validation-error:visible").count() == 0  # the last mark went with the good value
            for key in ("ar", "pass", "parallelspec"):  # the default race
                pane = page.locator(f"#pane-{key}")
                assert pane.is_visible(), key
                assert pane.locator(".token.highlighted").count() > 0, f"pane {key} has no tokens"
            assert not page.locator("#pane-fixed-token").is_visible()  # registered, not ticked by default
            colour = page.locator("#pane-ar .token.highlighted").first.get_attribute("style")
            assert "background-color" in colour
            page.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=30_000)
            assert page.locator(".js-plotly-plot").count() >= 4
            page.screenshot(path=str(ARTIFACTS / "browser.png"), full_page=True)
            # untick a method: its pane goes away, the other two race
            page.get_by_label(METHODS["pass"].label, exact=True).uncheck()
            page.locator("#pane-pass").wait_for(state="hidden", timeout=10_000)
            assert page.locator("#pane-ar").is_visible() and page.locator("#pane-parallelspec").is_visible()
            # one method left: Run is refused at the input, with the reason, and the outputs keep the last race
            page.get_by_label(METHODS["parallelspec"].label, exact=True).uncheck()
            page.get_by_role("button", name="Run").click()
            page.get_by_text("Pick at least two methods").first.wait_for(timeout=10_000)
            page.screenshot(path=str(ARTIFACTS / "browser-validation.png"), full_page=True)
            assert page.locator("#pane-ar .token.highlighted").count() > 0
            # tick the fixed-token baseline: its pane appears and the race runs again
            page.get_by_label(METHODS["fixed-token"].label, exact=True).check()
            page.locator("#pane-fixed-token").wait_for(state="visible", timeout=10_000)
            page.get_by_role("button", name="Run").click()
            page.locator("#pane-fixed-token .token.highlighted").first.wait_for(timeout=90_000)
        finally:
            browser.close()
