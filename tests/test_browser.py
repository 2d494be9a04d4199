"""The page in a real headless browser: Debian's Chromium driven by Playwright.

One Chromium serves every test here (``chromium`` in conftest.py; a fresh context per test). The first test drives
the run's ``python app.py`` (``app_server``): it types an out-of-range value into each numeric input and checks that
the input is marked with a message naming the setting, its range and the value typed, and that no race started;
then races a prompt and checks that the default panes hold coloured token spans and that Plotly drew the charts.
The others drive the page built in this process on a tiny model (one server for the module). Screenshots go to
tests/artifacts/.

Without Chromium or Playwright the tests are skipped on a developer's machine (``make browser``
installs Chromium) but FAIL under CI (``CI`` set, as every CI service does): a CI run must never
pass with the browser tests silently left out.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path

import pytest

from pass_core.registry import METHODS
from playground import race_charts as charts
from playground import race_panes as panes
from playground.layout import HEADINGS
from playground.lessons import LESSONS
from playground.race_inputs import NUMERIC_INPUTS
from playground.replay import NO_TRACE_YET
from playground.race_view import INSPECTOR_SWIPE
from servers import free_port, require_browser

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
#: The browser tests' screenshots (for a person to look at, in tests/artifacts/) are taken with PASS_SCREENSHOTS=1
#: only: a full page took 0.5-1 core-second of the browser's on the 2-core machine, 17 of them in every run. The
#: README's screenshot (``test_browser_teaching``) and a failing wait's picture are always saved.
SCREENSHOTS = os.environ.get("PASS_SCREENSHOTS") == "1"


def snapshot(target, name: str, **options) -> None:
    """``target.screenshot`` (a page or a locator) into ``ARTIFACTS / name`` when ``SCREENSHOTS``."""
    if SCREENSHOTS:
        ARTIFACTS.mkdir(exist_ok=True)
        target.screenshot(path=str(ARTIFACTS / name), **options)
#: A value out of range for each numeric input, and what its message must say (setting, range, value typed).
OUT_OF_RANGE = {
    "num_lookahead": ("0", "look-ahead tokens L must be between 1 and 8, got 0"),
    "temperature": ("-1", "temperature must be between 0 and 2, got -1"),
    "top_k": ("-5", "top-k must be between 0 and 200, got -5"),
    "top_p": ("0", "top-p must be between 0.01 and 1, got 0"),
    "max_new_tokens": ("100000", "max new tokens must be between 1 and 1,024, got 100000"),
    "seed": ("-1", "seed must be between 0 and 2,147,483,647, got -1"),
}


@pytest.fixture
def new_page(chromium):
    """``new_page(width, height=800)``: a page in a fresh browser context of the run's one Chromium; every context
    this test opened is closed after it."""
    contexts = []

    def make(width: int, height: int = 800):
        contexts.append(chromium.new_context(viewport={"width": width, "height": height}, accept_downloads=True))
        return contexts[-1].new_page()
    yield make
    for context in contexts:
        context.close()


@pytest.fixture(scope="module")
def race_page_url():
    """``page.build_demo`` on a tiny model without EOS, served in this process for the module's tests; yields
    (URL, ``slow_down(seconds)``), which sets a pause after every step event so that a test can act mid-race."""
    from playground import page, race_handlers
    from tiny import tiny_loaded

    delay, fast = {"s": 0.0}, race_handlers.race

    def slow_race(decoders):
        for item in fast(decoders):
            if delay["s"]:
                time.sleep(delay["s"])
            yield item

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(race_handlers, "race", slow_race)
        demo, port = page.build_demo(tiny_loaded(seed=0), untrained_drafters=True), free_port()
        demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                **page.launch_options())
        try:
            yield f"http://127.0.0.1:{port}/", lambda seconds: delay.update(s=seconds)
        finally:
            demo.close()


@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception),
                                         ("false", pytest.skip.Exception)])
def test_missing_chromium_fails_in_ci_and_skips_elsewhere(monkeypatch, tmp_path, ci, outcome):
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="chromium is missing"):
        require_browser(tmp_path / "no-chromium")


def test_the_headless_shell_is_preferred_and_chromium_is_the_fallback(monkeypatch):
    import servers

    installed = {"chromium-headless-shell": "/usr/bin/chromium-headless-shell", "chromium": "/usr/bin/chromium"}
    monkeypatch.setattr(servers.shutil, "which", installed.get)
    assert servers.find_chromium().name == "chromium-headless-shell"
    del installed["chromium-headless-shell"]
    assert servers.find_chromium().name == "chromium"


#: The race's plots (``layout.lay_out``), each hidden until it has a figure.
RACE_PLOT_IDS = ("latency-plot", "cumulative-plot", "histogram-plot", "positions-plot", "theory-plot", "cost-plot")
#: How many of the page's rows have nothing in them yet still take part in the layout (each adds a gap).
EMPTY_ROWS_SHOWN = ("() => [...document.querySelectorAll('.row')].filter(r => !r.children.length && "
                    "getComputedStyle(r).display !== 'none').length")


def test_a_tree_click_names_its_node_and_a_race_is_announced_once_from_either_tab(app_server, new_page):
    """On ``python app.py``: the arrow keys held down on the lessons leave the page on the lesson chosen. Lesson 7's
    race (a token tree of 8 nodes), run while the lab's tab is open, is announced once, as its first two lines (a
    race finishing behind the lab's tab was announced as its whole run line run together, helper 74). Back on the
    Race tab, a rejected draft clicked in the tree pane is named in the node chooser. It stood empty there: the
    listener that empties the chooser for a token of a chain pane ran for the tree panes too, and its empty value
    landed after the node's (helper 74; on the in-process pages of the other browser tests it landed first)."""
    lesson = next(one for one in LESSONS if one.tree_nodes)
    page = new_page(1400, 900)
    page.goto(app_server.url)
    page.get_by_text("Ready:").first.wait_for(timeout=60_000)
    # the arrow keys held down on the lessons (five presses 15 ms apart, twice): the page ends on the lesson the
    # radio shows (it showed lesson 6 with lesson 5's prompt and question, its replies out of order: helper 74)
    page.locator("#lesson-choice").get_by_label(LESSONS[0].title, exact=True).check()
    for key, index in (("ArrowDown", 5), ("ArrowUp", 0)):
        for _ in range(5):
            page.keyboard.press(key)
            page.wait_for_timeout(15)
        assert page.locator("#lesson-choice").get_by_label(LESSONS[index].title, exact=True).is_checked(), key
        page.wait_for_timeout(1500)  # every reply has landed by now
        assert page.get_by_label("prompt", exact=True).input_value() == LESSONS[index].prompt, key
    page.locator("#lesson-choice").get_by_label(lesson.title, exact=True).check()
    page.locator("#lesson-text").get_by_text("token tree 8 nodes").wait_for(timeout=10_000)
    page.evaluate(RECORD_ANNOUNCEMENTS)
    page.get_by_role("button", name="Run").click()
    page.get_by_role("tab", name="Race").focus()
    page.keyboard.press("ArrowRight")  # the lab's tab, while the race runs and finishes
    page.wait_for_function("() => window.said.some(t => t.startsWith('Finished.'))", timeout=60_000)
    page.wait_for_timeout(500)
    said = [t for t in page.evaluate("() => window.said") if t]
    assert len(said) == 1 and re.fullmatch(r"Finished\. Highest tokens/s: [^.]+ at [\d.]+ tokens/s \(then .+?\)\."
                                           r"( Without each first step .+ was fastest: .+ tokens/s\.)?", said[0]), said
    page.keyboard.press("ArrowLeft")  # back to the Race tab
    page.locator("#pane-parallelspec-tree .token[aria-label^='rejected draft']").first.click()
    page.wait_for_function("() => / · node \\d+ \\(depth \\d+\\) .* · rejected$/.test("
                           "document.querySelector('#tree-node input').value)", timeout=10_000)
    assert page.get_by_text("Selected: node").first.is_visible()


def test_page_races_and_draws(app_server, new_page):
    page = new_page(1400, 1000)
    page.goto(app_server.url)
    page.get_by_text("PaSS Playground").first.wait_for(timeout=60_000)
    page.get_by_text("Ready:").first.wait_for(timeout=60_000)  # the load (and the warm-up) finished
    # before a race each pane says what will fill it, under gradio's empty-value icon (a new user saw the icon alone)
    hint = page.evaluate("() => [...document.querySelectorAll('.token-pane .empty')].filter(e => e.offsetParent)"
                         ".map(e => getComputedStyle(e, '::after').content)")
    assert hint and set(hint) == {'"This method\'s tokens appear here during a race."'}, hint
    open_settings(page)
    # unfolded, Settings spans the page under the prompt and the lessons, its numbers three a line: in the lessons'
    # column it stood 1,500 px tall beside an empty one, the step buttons and the panes as far down
    settings, prompt, lessons = (page.locator(f"#{name}").bounding_box() for name in ("settings", "input-prompt",
                                                                                     "lessons"))
    assert settings["y"] > max(prompt["y"] + prompt["height"], lessons["y"] + lessons["height"]), settings
    assert abs(settings["x"] - prompt["x"]) < 30 and abs(settings["x"] + settings["width"] - lessons["x"]
                                                         - lessons["width"]) < 30, (settings, prompt, lessons)
    rows = {page.locator(f"#input-{name}").bounding_box()["y"] for name in ("num_lookahead", "temperature", "top_k")}
    assert len(rows) == 1 and settings["height"] < 1000, (rows, settings)
    # a slider beside each number box but the seed's, without its own number box (which would clamp typed values)
    assert page.locator(".range-aid").count() == len(NUMERIC_INPUTS) - 1
    assert page.locator(".range-aid input[type=number]").filter(visible=True).count() == 0
    page.get_by_label("prompt", exact=True).fill("Hello there")
    assert set(OUT_OF_RANGE) == set(NUMERIC_INPUTS)
    for name, (typed, message) in OUT_OF_RANGE.items():  # each refused by name at its input; nothing races
        box = page.locator(f"#input-{name} input")
        good = box.input_value()
        box.fill(typed)
        page.get_by_role("button", name="Run").click()
        mark = page.locator(f"#input-{name} div.validation-error")  # the message, under the label
        mark.wait_for(timeout=10_000)
        assert message in mark.inner_text(), (name, mark.inner_text())
        if name == "temperature":  # readable in dark mode too (gradio's red on the indigo label read 1.7:1)
            page.evaluate("() => document.body.classList.add('dark')")
            assert page.evaluate(CONTRAST, f"#input-{name} div.validation-error") >= 4.5
            page.evaluate("() => document.body.classList.remove('dark')")
        # and said to a screen reader, in the page's alert region (each refusal's message once)
        page.wait_for_function("m => document.querySelector('#error-announcer').textContent.includes(m)",
                               arg=message, timeout=10_000)
        assert "validation-error" in box.get_attribute("class"), name  # and the box itself is marked
        assert box.input_value() == typed, name  # kept as typed: not clamped into the range
        if name == "max_new_tokens":
            snapshot(page, "browser-out-of-range.png", full_page=True)
        box.fill(good)
    assert page.locator("#error-announcer").get_attribute("role") == "alert"  # read out at once, hidden on screen
    # refused with Settings folded again: Run unfolds Settings and shows the message (it showed nothing; helper 69)
    box = page.locator("#input-temperature input")
    good = box.input_value()
    box.fill("5")
    page.locator("#settings button.label-wrap").first.click()
    box.wait_for(state="hidden", timeout=10_000)
    page.wait_for_function(EXPANDED, arg="false", timeout=5_000)  # and Settings says it is folded (it never did)
    page.get_by_role("button", name="Run").click()
    page.locator("#input-temperature div.validation-error").wait_for(state="visible", timeout=10_000)
    page.wait_for_function("m => document.querySelector('#error-announcer').textContent.includes(m)",
                           arg="temperature must be between 0 and 2, got 5", timeout=10_000)
    page.wait_for_function(MESSAGE_IN_VIEW, timeout=5_000)
    page.wait_for_function(EXPANDED, arg="true", timeout=5_000)
    box.fill(good)
    # a focused slider shows its focus (gradio's showed none); the range lines and labels are readable (WCAG AA)
    page.locator(".range-aid input[type=range]").first.focus()
    page.keyboard.press("Shift")
    assert page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle") != "none"
    # ...and so are a slider's ends, the upload's "- or -", the footer, Run, a ticked method and the chosen tab's name
    # (``race_view.page_theme``: axe-core found them at 2.5-4.46:1)
    for selector in ("#input-temperature .info-text", "#input-prompt [data-testid=block-info]",
                     ".range-aid [data-testid=max-value]", "#trace-upload .or", "footer a", "button.primary",
                     "#methods label.selected span", "[role=tab].selected"):
        assert page.evaluate(CONTRAST, selector) >= 4.5, selector
    page.wait_for_timeout(500)  # a race, had one of these Runs started one, would have written its run line by now
    assert page.locator("#run-line").inner_text().strip() == "", "a Run with a value out of range raced"
    assert page.locator(".token-pane .token").count() == 0
    for method in METHODS.values():  # the page offers every registered method
        assert page.get_by_label(method.label, exact=True).count() == 1, method.key
    # no race yet: no empty plot box stands on the page (six did, each with a placeholder icon)
    assert [p for p in RACE_PLOT_IDS if page.locator(f"#{p}").is_visible()] == []
    assert page.evaluate(EMPTY_ROWS_SHOWN) == 0  # nor the gaps of their rows
    page.get_by_role("button", name="Run").click()
    page.get_by_text("Finished.").first.wait_for(timeout=90_000)
    for plot in RACE_PLOT_IDS[:4]:  # the race's four charts, drawn (the theory and cost views are checked apart)
        page.locator(f"#{plot} .js-plotly-plot .main-svg").first.wait_for(timeout=30_000)
    assert page.locator(".validation-error:visible").count() == 0  # the last mark went with the good value
    # and the alert region went empty with it (it held the last refusal's message, of a value fixed since)
    page.wait_for_function("() => document.querySelector('#error-announcer').textContent === ''", timeout=5_000)
    for key in ("ar", "pass", "parallelspec"):  # the default race
        pane = page.locator(f"#pane-{key}")
        assert pane.is_visible(), key
        assert pane.locator(".token.highlighted").count() > 0, f"pane {key} has no tokens"
    assert not page.locator("#pane-fixed-token").is_visible()  # registered, not ticked by default
    colour = page.locator("#pane-ar .token.highlighted").first.get_attribute("style")
    assert "background-color" in colour
    # each token says its kind in a tooltip and in its name, "kind: text" (colour alone told them apart; a screen
    # reader read the text alone, and each step mark as a button without a name), as its colour says
    page.wait_for_function("() => [...document.querySelectorAll('.token-pane .token')].every(t => t.getAttribute("
                           "'aria-label'))", timeout=5_000)
    kinds = {colour: kind for kind, colour in charts.TOKEN_COLORS.items()}  # "#RRGGBB" -> kind
    for key in ("ar", "pass"):
        named = page.evaluate(TOKEN_NAMES, f"#pane-{key}")
        for kind, label, text, rgb in named:
            assert label == (f"{kind}: {text}" if kind else "end of a step"), (key, kind, label, text)
            assert (kinds["#%02X%02X%02X" % tuple(map(int, rgb.split(", ")))] if rgb else "") == kind, (key, rgb)
        shown = {kind for kind, _, _, _ in named} - {""}
        assert shown == {"AR target"} if key == "ar" else len(shown) >= 2 and "AR target" not in shown, shown
    page.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=30_000)
    assert page.locator(".js-plotly-plot").count() >= 4
    snapshot(page, "browser.png", full_page=True)
    # in dark mode (Gradio's, as a system set dark gets) every token, legend, Run and the chosen tab still read at
    # 4.5:1 (``race_view.page_theme``: black on the tints laid over the dark page read 2.7:1)
    page.evaluate("() => document.body.classList.add('dark')")
    for selector in (".token-pane .highlighted .text", ".token-pane .legend-item", "button.primary",
                     "[role=tab][aria-selected=true]", "#input-prompt [data-testid=block-info]"):
        assert 4.5 <= page.evaluate(LOWEST_CONTRAST, selector) < float("inf"), selector
    # the legend row beside AR's one chip shows the pane (a white row stood across it, a line tall), and the tokens
    # gradio dims while a legend chip is pointed at stay readable (gradio's white text on the pane's white: 1.1:1)
    assert page.evaluate(BESIDE_LAST_CHIP, "#pane-ar") == page.locator("#pane-ar").evaluate(
        "e => getComputedStyle(e).backgroundColor")
    page.locator("#pane-pass .legend-item").first.hover()
    assert 4.5 <= page.evaluate(LOWEST_CONTRAST, ".token-pane .token.dimmed .text") < float("inf")
    page.mouse.move(0, 0)
    page.evaluate("() => document.body.classList.remove('dark')")
    # untick two methods: one method left, Run is refused at the input, with the reason; the race on show keeps its
    # panes (a finished pane went away at the untick while the metrics still spoke of it)
    page.get_by_label(METHODS["pass"].label, exact=True).uncheck()
    page.get_by_label(METHODS["parallelspec"].label, exact=True).uncheck()
    page.get_by_role("button", name="Run").click()
    page.get_by_text("Pick at least two methods").first.wait_for(timeout=10_000)
    snapshot(page, "browser-validation.png", full_page=True)
    # the message stands above its group's label (it floated over "methods to race", as over the token tree's)
    # both read at once: the refused Run scrolls the message into view meanwhile
    message, label = page.evaluate("() => [document.querySelector('#methods div.validation-error'), [...document"
                                   ".querySelectorAll('#methods *')].find(e => e.childElementCount === 0 && "
                                   "e.textContent.trim() === 'methods to race')].map(e => e.getBoundingClientRect()"
                                   ".toJSON())")
    assert message["y"] + message["height"] <= label["y"] + 1, (message, label)
    for key in ("ar", "pass", "parallelspec"):  # the race on show
        assert page.locator(f"#pane-{key}").is_visible() and page.locator(f"#pane-{key} .token.highlighted").count()
    # tick the fixed-token baseline: Run races the ticked methods, in their panes
    page.get_by_label(METHODS["fixed-token"].label, exact=True).check()
    page.get_by_role("button", name="Run").click()
    page.locator("#pane-fixed-token .token.highlighted").first.wait_for(timeout=90_000)
    assert not page.locator("#pane-pass").is_visible() and not page.locator("#pane-parallelspec").is_visible()


# --- issue 12 item 6: the page as a new user tries it (the app in this process, on a tiny model) --------------

def open_settings(page) -> None:
    """Unfold the Settings accordion, folded when the page loads (its inputs are not on the page until then)."""
    seed = page.locator("#input-seed")
    if seed.count() == 0 or not seed.is_visible():
        page.locator("#settings button.label-wrap").first.click()
    seed.wait_for(state="visible", timeout=10_000)


#: Counts, in ``window.trackerFrames``, the frames that Gradio's status trackers ask the browser for, and in
#: ``window.allFrames`` every frame the page asks for (run before the page's scripts: ``idle_frames.EarlyScript``'s
#: script wraps this count in turn).
COUNT_TRACKER_FRAMES = ("(() => { const raf = window.requestAnimationFrame.bind(window); window.trackerFrames = 0; "
                        "window.allFrames = 0; window.requestAnimationFrame = cb => { window.allFrames++; if "
                        "(/statustracker/.test(new Error().stack)) window.trackerFrames++; return raf(cb); }; })()")


@contextlib.contextmanager
def in_process_page(new_page, race_page_url, width: int, step_delay_s: float = 0.0, settings_open: bool = True):
    """A page ``width`` px wide on the module's in-process server, loaded and ready, with Settings unfolded unless
    ``settings_open`` is False. ``step_delay_s`` slows the race by that much per step event while the page is in
    use."""
    url, slow_down = race_page_url
    slow_down(step_delay_s)
    try:
        page = new_page(width)
        page.add_init_script(COUNT_TRACKER_FRAMES)
        page.goto(url)
        page.get_by_text("Ready:").first.wait_for(timeout=60_000)
        if settings_open:
            open_settings(page)
        yield page
    finally:
        slow_down(0.0)


def race_on(page, prompt: str = "Hello there", max_new_tokens: int = 24) -> None:
    """Type a prompt and a length (unfolding Settings), press Run (the race goes on in the background)."""
    open_settings(page)
    page.get_by_label("prompt", exact=True).fill(prompt)
    page.locator("#input-max_new_tokens input").fill(str(max_new_tokens))
    page.get_by_role("button", name="Run").click()


def struck_beyond_the_glyph(text) -> None:
    """A rejected draft's strike line crosses its whole chip, 3 px past the glyph on each side: drawn through the
    glyph alone (``line-through``), a struck "," or "." read as ";" or ":" (helper 84)."""
    import io

    from PIL import Image

    chip, glyph = text.evaluate("t => { const r = document.createRange(); r.selectNodeContents(t); "
                                "return [t.getBoundingClientRect().width, r.getBoundingClientRect().width]; }")
    assert chip >= glyph + 5, (chip, glyph)
    image = Image.open(io.BytesIO(text.screenshot())).convert("L")
    darkest = max(sum(image.getpixel((x, y)) < 110 for x in range(image.width)) for y in range(image.height))
    assert darkest >= 0.9 * image.width, (darkest, image.width)  # one dark row from edge to edge: the line


def test_rejected_drafts_toggle_holds_until_the_end_of_the_race(new_page, race_page_url):
    """Unticking "show rejected drafts" mid-race used to be undone by the next update (the race rendered with the
    value it started with). Now every later update, and the last, leaves rejected drafts out."""
    rejected = charts.rejected_css_selector().replace(".token-pane", "#pane-pass")
    # 0.2 s a step event until the toggle (a race of a minute: at 0.03 s throughout, once, on a busy 2-core machine,
    # the page first showed a rejected draft with the race's last update), then 0.03 s (some 9 s, a dozen updates)
    _, slow_down = race_page_url
    with in_process_page(new_page, race_page_url, 1400, step_delay_s=0.2) as page:
        race_on(page, max_new_tokens=100)
        page.locator(rejected).first.wait_for(timeout=30_000)  # racing, with rejected drafts shown
        struck_beyond_the_glyph(page.locator(rejected).first)
        page.get_by_label("show rejected drafts").uncheck()
        tokens_then = page.locator("#pane-pass .token.highlighted").count()
        slow_down(0.03)
        updates_after, finished = 0, False
        while not finished:
            finished = "Finished." in page.locator("#run-line").inner_text()
            visible = page.locator(rejected).filter(visible=True).count()
            assert visible == 0, "a later update brought the rejected drafts back"
            updates_after += page.locator("#pane-pass .token.highlighted").count() > tokens_then
            page.wait_for_timeout(200)
        assert updates_after >= 2, "the race ended before it could undo the toggle: slow it down more"
        assert page.locator("#pane-pass .token.highlighted").count() > tokens_then
        page.get_by_label("show rejected drafts").check()  # after the race the toggle re-colours the panes
        page.locator(rejected).first.wait_for(timeout=10_000)


def test_blank_lines_and_step_marks_are_visible(new_page):
    """A blank line between paragraphs used to collapse (gradio draws each newline as an empty ``.line-break`` of
    no height), and nothing showed where a step ended. A pane of hand-made events with "\\n\\n" shows both."""
    import gradio as gr
    from pass_core.decoding.events import StepEvent, TokenRecord
    from playground.page import launch_options

    events = [StepEvent(method="pass", step=1, tokens=(TokenRecord(1, "First", "exact"),
                                                        TokenRecord(2, " paragraph.\n\n", "accepted"))),
              StepEvent(method="pass", step=2, tokens=(TokenRecord(3, "Second", "bonus"),
                                                        TokenRecord(4, " one", "rejected"), TokenRecord(5, ".", "resampled")))]
    with gr.Blocks() as demo:
        gr.HighlightedText(panes.highlighted_tokens(events), color_map=charts.pane_colours("pass"), show_legend=True,
                           show_inline_category=False, combine_adjacent=False, elem_classes="token-pane",
                           elem_id="pane-pass")
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                **launch_options())
    try:
        page = new_page(600, 400)
        page.goto(f"http://127.0.0.1:{port}/")
        page.locator("#pane-pass .textfield").wait_for(timeout=30_000)
        breaks = page.locator("#pane-pass .line-break")
        assert breaks.count() == 2
        assert breaks.nth(1).bounding_box()["height"] >= 10, "the blank line collapsed"
        first, second = (page.get_by_text(word, exact=True).bounding_box() for word in ("First", "Second"))
        assert second["y"] - first["y"] > 1.8 * first["height"], "no blank line between the paragraphs"
        mark = page.locator(charts.STEP_MARK_CSS_SELECTOR.replace(".token-pane", "#pane-pass"))
        assert mark.count() == 1
        assert mark.evaluate("e => getComputedStyle(e).borderLeftWidth") == "2px"
        assert mark.bounding_box()["width"] <= 4
        # a dotted line taller than the text, never a solid bar that reads like "|" in code
        assert mark.evaluate("e => getComputedStyle(e).borderLeftStyle") == "dotted"
        assert mark.bounding_box()["height"] > first["height"]
        legend = page.locator("#pane-pass [data-testid='highlighted-text:category-legend'] button")
        assert sorted(legend.all_inner_texts()) == sorted(charts.pane_colours("pass"))
        snapshot(page, "browser-pane-lines.png")
    finally:
        demo.close()


def overlaps(a: dict, b: dict) -> bool:
    """Two bounding boxes share some area."""
    return (a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"]
            and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"])


#: {label: lines of text} of each step button (the client rectangles of its text, counted by their top edge)
STEP_BUTTON_LINES = """() => Object.fromEntries([...document.querySelectorAll('#step-through button')].map(b => {
  const text = document.createRange(); text.selectNodeContents(b);
  return [b.innerText, new Set([...text.getClientRects()].map(r => Math.round(r.top))).size]; }))"""


#: The page's shown bar labels (Plotly's ``text.bartext``) with their boxes in the page.
BAR_TEXTS = """() => [...document.querySelectorAll('.js-plotly-plot text.bartext')].map(t => [t, t.getBoundingClientRect()])
    .filter(([t, b]) => b.width > 0 && getComputedStyle(t).display !== 'none' && getComputedStyle(t).opacity !== '0')
    .map(([t, b]) => ({x: b.x, y: b.y, width: b.width, height: b.height, text: t.textContent}))"""


#: The first visible race pane starts in the upper 60 % of the window (``scrolling.REPLAY_SCROLL_JS``, Run's, Stop's).
PANES_IN_VIEW = ("() => { const p = [...document.querySelectorAll('.token-pane')].find(e => e.offsetParent !== null);"
                 " const top = p.getBoundingClientRect().top; return top >= 0 && top <= 0.6 * window.innerHeight; }")
#: The step buttons' echo says the text given and is on the screen (``scrolling.STOP_ECHO_JS``).
ECHO_IN_VIEW = ("text => { const e = document.getElementById('step-echo-text'); const r = e.getBoundingClientRect(); "
                "return e.textContent === text && r.top >= 0 && r.bottom <= window.innerHeight; }")
#: Whether the Settings accordion's button says it is open (``scrolling.PAGE_JS``), as asked.
EXPANDED = ("want => document.querySelector('#settings button.label-wrap').getAttribute('aria-expanded') === want")
#: The contrast of an element's text against what is behind it (WCAG 2): its own and its ancestors' backgrounds,
#: half-transparent ones laid over those below them (a token's tint), on white.
RATIO = ("e => { const rgba = c => { const v = c.match(/[\\d.]+/g).map(Number); return [v[0], v[1], v[2], "
         "v.length > 3 ? v[3] : 1]; }; const lum = v => { const l = v.slice(0, 3).map(x => { x /= 255; return x <= "
         "0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; }); return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * "
         "l[2]; }; const layers = []; for (let b = e; b; b = b.parentElement) { const c = rgba(getComputedStyle(b)"
         ".backgroundColor); if (c[3] > 0) layers.push(c); if (c[3] >= 1) break; } let bg = [255, 255, 255]; for "
         "(const c of layers.reverse()) bg = bg.map((x, i) => c[i] * c[3] + x * (1 - c[3])); const [hi, lo] = "
         "[lum(rgba(getComputedStyle(e).color)), lum(bg)].sort((x, y) => y - x); return (hi + 0.05) / (lo + 0.05); }")
#: The background painted in a pane's legend row halfway between its last chip and the row's right end.
BESIDE_LAST_CHIP = ("s => { const row = document.querySelector(s + ' .legend'); row.scrollIntoView({block: "
                    "'center'}); const r = row.getBoundingClientRect(); const x = (row.lastElementChild"
                    ".getBoundingClientRect().right + r.right) / 2; return document.elementsFromPoint(x, (r.top + "
                    "r.bottom) / 2).map(e => getComputedStyle(e).backgroundColor).find(c => !/^(transparent|rgba\\(.*, "
                    "0\\))$/.test(c)); }")
#: The contrast of a selector's first match.
CONTRAST = f"s => ({RATIO})(document.querySelector(s))"
#: The lowest contrast of a selector's matches (Infinity when none).
LOWEST_CONTRAST = f"s => Math.min(...[...document.querySelectorAll(s)].map({RATIO}))"
#: A pane's tokens: [kind named in their tooltip, name, text, the "r, g, b" of their colour ("" for step marks)].
TOKEN_NAMES = ("s => [...document.querySelectorAll(s + ' .token')].map(t => [t.title, t.getAttribute('aria-label'), "
               "t.querySelector('.text')?.textContent ?? '', (/background-color: rgba?\\((\\d+, \\d+, \\d+)/"
               ".exec(t.getAttribute('style') || '') || [null, ''])[1]])")
#: A refusal's message under its input is on the screen (``scrolling.RUN_SCROLL_JS``).
MESSAGE_IN_VIEW = ("() => [...document.querySelectorAll('div.validation-error')].some(e => { const r = "
                   "e.getBoundingClientRect(); return e.offsetParent !== null && r.top >= 0 && r.bottom <= "
                   "window.innerHeight; })")
#: From now on ``window.said`` lists every text the race announcer (``scrolling.ANNOUNCE_JS``) is given.
RECORD_ANNOUNCEMENTS = ("() => { window.said = []; new MutationObserver(() => window.said.push(document.querySelector("
                        "'#race-announcer').textContent)).observe(document.querySelector('#race-announcer'), "
                        "{childList: true, characterData: true, subtree: true}); }")
#: The id of the focused element or of its nearest ancestor with one ("" on the page's body).
FOCUSED = "() => { const e = document.activeElement; return !e || e === document.body ? '' : e.closest('[id]')?.id; }"
#: The focused element's ring (or its label's, for a radio): [outline style, width, its contrast on white].
RING = ("() => { let e = document.activeElement; if (e.type === 'radio') e = e.closest('label'); const s = "
        "getComputedStyle(e); const probe = Object.assign(document.createElement('span'), {style: 'color: ' + "
        "s.outlineColor}); document.body.appendChild(probe); const ratio = (" + RATIO + ")(probe); probe.remove();"
        " return [s.outlineStyle, s.outlineWidth, ratio]; }")
#: The lab's table starts in the window, 100 px above its bottom or higher (``scrolling.SCROLL_TO_LAB_JS``).
LAB_TABLE_IN_VIEW = ("() => { const t = document.getElementById('lab-table').getBoundingClientRect().top; "
                     "return t >= 0 && t <= window.innerHeight - 100; }")
#: The lab's progress shows the runs counted above the bar's label, and the bar inside the table's box (on a phone
#: the count and the label were printed over each other; with the count moved up, a 4-em box cut the bar).
LAB_PROGRESS_READABLE = ("() => { const box = (s) => document.querySelector('#lab-table ' + s)"
                         "?.getBoundingClientRect(); const count = box('.progress-text'), "
                         "label = box('.progress-level-inner'), bar = box('.progress-bar-wrap'), table = box(''); "
                         "return !!(count && label && bar) && count.bottom <= label.top && "
                         "bar.bottom <= table.bottom; }")


@pytest.mark.parametrize("width", [390, 1400])
def test_layout_then_trace_download_replay_and_lab_tab(new_page, race_page_url, tmp_path, width, fixed_pass_cost):
    """The layout at a phone's and a desktop's width, then the race's trace, its replay and the lab, on one page.
    First, the page loaded and idle asks the browser for no frames (``playground.idle_frames``).

    Layout: at 400 px the header used to fill the first screen and push the prompt below it (then the examples
    pushed Run below it), the charts sat side by side and their legends covered the axes; on a desktop the unfolded
    settings pushed the panes some 1,300 px below Run, so a first Run changed nothing in view. Now the prompt and Run
    are on the first screen, Settings is folded when the page loads, the empty panes stand right under the step
    buttons, a race runs from the folded settings, the charts stack in one column on a phone (two on a
    desktop), no legend covers its chart's plot area, and each step button's label stays on one line.

    Then download that race's trace, reload the page, upload the trace and press Replay: the replayed panes equal
    the original panes and the theory sentences are back. Then on the lab tab (reached by the right arrow key on
    the Race tab) Run lab fills its table, with a pass for every method and a fail for the broken rule. Saves
    browser-layout-WIDTH.png, browser-replay-WIDTH.png and browser-lab-WIDTH.png."""
    with in_process_page(new_page, race_page_url, width, settings_open=False) as page:
        # an idle page's status trackers ask for a frame or two, not 60 a second for ever (Gradio's loading tracker
        # did: ``playground.idle_frames``; 93 in these 1.5 s)
        page.wait_for_timeout(1_500)  # the trackers of the load's own events done
        before = page.evaluate("() => window.trackerFrames")
        page.wait_for_timeout(1_500)
        assert page.evaluate("() => window.trackerFrames") - before < 10, "an idle page's tracker asks for frames"
        prompt = page.get_by_label("prompt", exact=True).bounding_box()
        assert prompt["y"] + prompt["height"] < 800, f"the prompt is below the first screen at {width} px"
        run = page.get_by_role("button", name="Run").bounding_box()  # the ten examples pushed it 1,000 px down
        assert run["y"] + run["height"] < 800, f"Run is below the first screen at {width} px"
        assert page.locator("#input-seed").count() == 0 or not page.locator("#input-seed").is_visible()
        lines = page.evaluate(STEP_BUTTON_LINES)  # at 400 px "◀ Previous step" took two lines (three in a row)
        assert lines and all(n == 1 for n in lines.values()), f"a step button's label wraps at {width} px: {lines}"
        # the step buttons and slow motion right above the panes (on a phone the lessons and Settings stood between)
        steps, pane = page.locator("#step-through").bounding_box(), page.locator("#pane-ar").bounding_box()
        slider = page.locator("#slow-motion").bounding_box()
        assert 0 <= pane["y"] - (slider["y"] + slider["height"]) < 60, (slider, pane)  # nothing in between
        assert 0 <= pane["y"] - (steps["y"] + steps["height"]) < 250, (steps, pane)
        # the sections as headings for a screen reader (there was one, the title), each right before its section
        # and taking no room (the layout above is measured with them in)
        firsts = ["#input-prompt", "#step-through", "#pane-ar", "#greedy-check", "#theory-sentences"]
        for name, before, first in zip(HEADINGS[:5], ["#page-title", *firsts], firsts):
            found = page.get_by_role("heading", name=name, level=2)  # 4: following, 2: preceding
            assert found.count() == 1 and found.evaluate("(h, [a, b]) => h.compareDocumentPosition(document."
                                                         "querySelector(a)) === 2 && h.compareDocumentPosition("
                                                         "document.querySelector(b)) === 4", [before, first]), name
        assert page.evaluate("() => [...document.querySelectorAll('h2')].map(h => h.closest('.sr-heading')"
                             ".getBoundingClientRect().height)") == [0] * 5
        if width < 600:  # Stop beside Run answers in view, under the step buttons (on a phone only the run line
            # said so, 4,600 px below it)
            page.get_by_role("button", name="Stop", exact=True).click()
            page.wait_for_function(ECHO_IN_VIEW, arg="Nothing to stop: no race is running.", timeout=10_000)
            # a refused Run shows its message (it scrolled to the panes, 1,300 px below it, on a phone)
            page.locator("#input-prompt textarea").fill("")
            page.get_by_role("button", name="Run").click()
            page.wait_for_function(MESSAGE_IN_VIEW, timeout=10_000)
        # by keyboard: of the seven lessons one radio is a Tab stop (each was), and what has the focus shows a ring
        # in indigo, 3:1 or more on white (a 2:1 border on the prompt box, a near-white ring on Run: helper 79)
        assert page.evaluate("() => [...document.querySelectorAll('#lesson-choice input')].map(r => r.tabIndex)") \
            == [0] + [-1] * (len(LESSONS) - 1)
        page.locator("#input-prompt textarea").fill("Hello there")
        page.locator("#input-prompt textarea").focus()
        for focused in ("input-prompt", "run-button"):  # the prompt, then Tab to Run (a ring fades in: waited for)
            if focused == "run-button":
                page.keyboard.press("Tab")
            page.wait_for_function(f"() => ({FOCUSED})() === {focused!r} && ({RING})()[2] >= 3", timeout=5_000)
            assert page.evaluate(RING)[:2] == ["solid", "2px"], focused
        page.keyboard.press("Enter")  # the default race, settings untouched
        page.get_by_text("Finished.").first.wait_for(timeout=60_000)
        # the focus where Run scrolled the view: on Pause (it stayed on Run, out of the window, 20 Tabs from Pause)
        page.wait_for_function(f"() => ({FOCUSED})() === 'pause-button'", timeout=10_000)
        assert page.locator("#pane-parallelspec .token.highlighted").count() > 0
        open_settings(page)
        clipped = page.evaluate("() => [...document.querySelectorAll('label')].filter(l => l.offsetParent && "
                                "l.scrollWidth > l.clientWidth + 1).map(l => l.innerText.slice(0, 40))")
        assert clipped == [], f"labels cut at {width} px: {clipped}"  # four checkboxes in a row did, on a phone
        page.locator(".js-plotly-plot .legend").nth(3).wait_for(timeout=30_000)
        # the last chart drawn: the cost view, of ``fixed_pass_cost``'s curve (a measurement on a machine busy with
        # the other worker may be refused, and then no curve is drawn)
        page.locator("#cost-plot .js-plotly-plot .legend").wait_for(timeout=30_000)
        plots = page.locator(".js-plotly-plot")
        latency, cumulative = plots.nth(0).bounding_box(), plots.nth(1).bounding_box()
        if width < 600:
            assert latency["x"] == cumulative["x"] and cumulative["y"] > latency["y"] + latency["height"] - 1
        else:
            assert latency["y"] == cumulative["y"] and cumulative["x"] > latency["x"] + latency["width"] - 1
        for i in range(plots.count()):
            if plots.nth(i).locator(".legend").count() == 0:  # e.g. the token-tree figure of a race without trees
                continue
            legend, area = plots.nth(i).locator(".legend").bounding_box(), plots.nth(i).locator(".nsewdrag").first.bounding_box()
            assert not overlaps(legend, area), f"chart {i}'s legend covers its plot area at {width} px"
            assert not overlaps(legend, plots.nth(i).locator(".g-xtitle").bounding_box()), f"chart {i}, {width} px"
        for plot in RACE_PLOT_IDS:  # no y-axis title runs under its plot's label (the pass cost's did on a phone)
            badge = page.locator(f"#{plot} [data-testid='block-label']").bounding_box()
            assert not overlaps(badge, page.locator(f"#{plot} .g-ytitle").bounding_box()), (plot, width)
            # nor under its toolbar (a phone showed the toolbar over "accepted drafts per verification step")
            assert not overlaps(badge, page.locator(f"#{plot} .modebar").first.bounding_box()), (plot, width)
            # nor past its box (the pass cost's x-axis title was cut at both ends on a phone)
            box, title = page.locator(f"#{plot}").bounding_box(), page.locator(f"#{plot} .g-xtitle").bounding_box()
            assert box["x"] <= title["x"] and title["x"] + title["width"] <= box["x"] + box["width"], (plot, width)
        # a label wrapped to two lines stays above what it names (it covered the upload's icon on a phone)
        badge = page.locator("#trace-upload [data-testid='block-label']").bounding_box()
        assert not overlaps(badge, page.locator("#trace-upload .icon-wrap svg").bounding_box()), width
        texts = page.evaluate(BAR_TEXTS)
        crowded = [(a["text"], b["text"]) for i, a in enumerate(texts) for b in texts[i + 1:] if overlaps(a, b)]
        assert not crowded, f"bar labels run together at {width} px: {crowded}"  # "80% 56% 45% 22%" on a phone
        snapshot(page, f"browser-layout-{width}.png", full_page=True)
        # a refused Run from the keyboard after the race: the focus stays on Run, and nothing is announced (the
        # race's "Finished." was said again, and the focus went to Pause: helper 80)
        page.evaluate(RECORD_ANNOUNCEMENTS)
        page.locator("#input-prompt textarea").fill("")
        page.locator("#run-button").focus()
        page.keyboard.press("Enter")
        page.wait_for_function(MESSAGE_IN_VIEW, timeout=10_000)
        page.wait_for_timeout(1_000)
        assert page.evaluate(FOCUSED) == "run-button" and page.evaluate("() => window.said.filter(t => t)") == []
        page.locator("#input-prompt textarea").fill("Hello there")
        # the trace of this race, replayed on the reloaded page
        original = {key: page.locator(f"#pane-{key} .textfield").inner_text() for key in ("ar", "pass")}
        assert "PaSS: α = " in page.locator("#theory-sentences").inner_text()
        # the buttons beside the 170-px upload box keep a button's height (they stood 170 px tall, as did Run lab)
        tall = {b: page.locator(b).bounding_box()["height"] for b in ("#trace-download", "#replay-button")}
        assert max(tall.values()) < 90, tall
        with page.expect_download() as download:
            page.locator("#trace-download").click()
        saved = tmp_path / "trace.json"
        download.value.save_as(saved)
        page.reload()
        page.get_by_text("Ready:").first.wait_for(timeout=60_000)
        page.locator("#replay-button").click()  # no file yet: refused, the upload box marked "Error" under its
        mark = page.locator("#trace-upload [data-testid='status-tracker'] .error")  # text (it covered "Drop File
        mark.wait_for(timeout=30_000)  # Here", and its clear button the box's label, a teacher helper found)
        page.wait_for_timeout(2_000)  # and in view, after every scroll the press started (the view went to the
        assert mark.evaluate("e => { const r = e.getBoundingClientRect(); return r.top >= 0 && "  # panes, 3,000 px
                             "r.bottom <= window.innerHeight; }"), width  # above on a phone: helper 80)
        boxes = page.locator("#trace-upload").evaluate(  # in one go: the page may still move between two reads
            "e => Object.fromEntries(['.upload-container', '[data-testid=block-label]', '.wrap .error', "
            "'.clear-status'].map(s => { const b = e.querySelector(s).getBoundingClientRect(); "
            "return [s, {x: b.x, y: b.y, width: b.width, height: b.height}]; }))")
        drop, label = boxes[".upload-container"], boxes["[data-testid=block-label]"]
        for part in (".wrap .error", ".clear-status"):  # under the drop area, clear of the label
            box = boxes[part]
            assert box["y"] >= drop["y"] + drop["height"] and not overlaps(box, label), (part, boxes, width)
        page.evaluate("() => document.activeElement.blur()")  # as gradio's upload leaves it: on the page's body
        page.locator("#trace-upload input[type=file]").set_input_files(str(saved))
        page.wait_for_function(f"() => ({FOCUSED})() === 'replay-button'", timeout=10_000)  # not lost on the body
        page.keyboard.press("Enter")
        page.get_by_text("Replay of a trace").first.wait_for(timeout=30_000)
        page.wait_for_function(f"() => ({FOCUSED})() === 'pane-ar' && ({RING})()[2] >= 3", timeout=10_000)
        assert page.evaluate(RING)[:2] == ["solid", "2px"]  # the replay's first token, ringed as the buttons are
        page.wait_for_function(PANES_IN_VIEW, timeout=10_000)  # on a phone Replay left them 3,000 px above
        for key, text in original.items():
            assert page.locator(f"#pane-{key} .textfield").inner_text() == text, key
        assert "PaSS: α = " in page.locator("#theory-sentences").inner_text()
        page.locator(".js-plotly-plot").nth(4).wait_for(timeout=30_000)  # 4 race charts and the theory chart
        snapshot(page, f"browser-replay-{width}.png", full_page=True)
        # to the lab's tab by keyboard: the right arrow on the Race tab (gradio's tabs took no arrow keys: helper 69)
        page.get_by_role("tab", name="Race").focus()
        page.keyboard.press("ArrowRight")
        lab_tab = page.get_by_role("tab", name="Losslessness lab")
        page.wait_for_function("t => t.getAttribute('aria-selected') === 'true'", arg=lab_tab.element_handle(),
                               timeout=5_000)
        assert lab_tab.evaluate("t => t === document.activeElement")
        assert page.get_by_role("heading", name=HEADINGS[5], level=2).count() == 1
        from playground.race_inputs import lab_runs_problem

        runs = page.locator("#lab-runs input")  # N = 10 typed: refused by name and kept (a slider made it 30)
        runs.fill("10")
        page.get_by_role("button", name="Run lab").click()
        page.get_by_text(lab_runs_problem(10)).first.wait_for(timeout=15_000)
        assert runs.input_value() == "10"
        assert not page.locator("#lab-plot").is_visible()  # no empty plot box before a lab, nor after a refusal
        runs.fill("50")
        assert page.locator("#lab-run").bounding_box()["height"] < 90
        # the button at the window's bottom, as a phone user scrolls to it: the table under it is below the fold
        page.locator("#lab-run").evaluate("b => b.scrollIntoView({block: 'end'})")
        page.get_by_role("button", name="Run lab").click()
        page.wait_for_function(LAB_TABLE_IN_VIEW, timeout=5_000)  # its progress, then its verdicts, in view (at
        # the press: scrolled after the lab, it came once the lab had ended)
        page.wait_for_function(LAB_PROGRESS_READABLE, timeout=60_000)  # its first count may take a while
        page.get_by_text("✗ fail").first.wait_for(timeout=120_000)
        table = page.locator("#lab-table").inner_text()
        assert table.count("✓ pass") == len(METHODS) and table.count("✗ fail") == 1
        # said to a screen reader: the lab's first line and its table, a row at a time (nothing was)
        page.wait_for_function("() => document.querySelector('#race-announcer').textContent.includes('✗ fail')",
                               timeout=5_000)
        said = page.locator("#race-announcer").text_content()
        assert said.startswith("50 seeded runs") and "; broken rule: always accept, " in said and said.count(
            "✓ pass") == len(METHODS), said
        # the table fits its box, verdicts on screen (on a phone the names pushed them off: a swipe hid the names)
        assert page.locator("#lab-table table").evaluate("t => t.scrollWidth <= t.clientWidth + 1"), width
        page.locator("#lab-plot .js-plotly-plot").wait_for(timeout=30_000)  # the lab's chart, shown
        snapshot(page, f"browser-lab-{width}.png", full_page=True)
        legend, area = (page.locator(f"#lab-plot {part}").first.bounding_box() for part in (".legend", ".nsewdrag"))
        box = page.locator("#lab-plot").bounding_box()  # a phone cut the draft model's long name and its TV off
        assert legend["x"] + legend["width"] <= box["x"] + box["width"] + 1, (width, legend, box)
        assert area["height"] >= 240 and not overlaps(legend, area), (width, area)  # its legend left 190 px on a phone


def pane_chars(page, key: str) -> str:
    """A pane's text as the browser has it, without whitespace (gradio draws newlines as elements) and without
    step marks: what a step's tokens add can be compared with the event's token texts."""
    text = page.locator(f"#pane-{key} .textfield").evaluate("e => e.textContent")
    return "".join(text.replace(panes.STEP_MARK, "").split())


def step_chars(event) -> str:
    """The characters a step adds to its pane (a committed newline with a mark before it, rejected drafts shown as
    ``visible_text``), whitespace dropped."""
    return "".join("".join((t.text.replace("\n", "↵\n", 1) if t.committed else panes.visible_text(t.text))
                           for t in event.tokens).split())


def outlined_chars(page, key: str) -> str:
    """The text of the pane's token boxes drawn with an outline (the step-through's newest step), whitespace dropped
    as in ``pane_chars``; an outlined step mark stays in (``panes.STEP_MARK``): it is not one of the step's tokens."""
    text = page.locator(f"#pane-{key} .token").evaluate_all(
        "els => els.filter(e => getComputedStyle(e).outlineStyle !== 'none').map(e => e.textContent).join('')")
    return "".join(text.split())


#: The step number of the run line's "Paused after step N of ...", read and checked in one go in the page (a busy
#: page may be between two renders of the run line when Python reads it): null until the line says it. textContent,
#: not innerText: while the race's event is pending gradio may hide the line, and innerText leaves hidden text out.
PAUSED_AT = """() => { const m = /after step (\\d+) of/.exec(document.querySelector('#run-line').textContent);
  return m ? Number(m[1]) : null; }"""


#: A finished race's number of steps, from the same run line ("... after step N of TOTAL ..."); -1 while the race
#: runs ("... after step N of the M computed so far").
TOTAL_STEPS = """() => {
  const m = /after step \\d+ of (the )?(\\d+)/.exec(document.querySelector('#run-line').textContent);
  return m ? (m[1] ? -1 : Number(m[2])) : null; }"""


def paused_position(page) -> int:
    """The step a race just paused at. Should the run line not say it within 20 s (seen under the full suite's
    load), Next step asks the paused race for a fresh frame and its step is read instead."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        return page.wait_for_function(PAUSED_AT, timeout=20_000).json_value()
    except PlaywrightTimeout:
        page.locator("#next-button").dispatch_event("click")
        return page.wait_for_function(PAUSED_AT, timeout=60_000).json_value()


@pytest.mark.parametrize("width", [1400, 400])
def test_step_through_and_token_inspector(new_page, race_page_url, tmp_path, width):
    """Pause a race, press Next step twice: the panes grew by exactly those two steps' tokens (checked against the
    race's trace, whose order ``race_order`` reproduces), and exactly those tokens are outlined, in the pane of the
    step's method alone; Previous step takes one back. Then click a rejected draft:
    the inspector's q, p, min(1, p/q), u and decision equal the event's. At a desktop's and a phone's width;
    saves browser-step-through-WIDTH.png, browser-inspector-WIDTH.png and browser-inspector-page-WIDTH.png."""
    import re

    from pass_core.teaching.race import race_order
    from pass_core.teaching.trace import load_trace

    with in_process_page(new_page, race_page_url, width, step_delay_s=0.03) as page:
        echo = page.locator("#step-echo-text")  # the buttons' answer, under them (the run line is far below)
        for button in ("#resume-button", "#next-button"):  # nothing raced yet: said under the button too (Resume
            page.evaluate("() => { document.getElementById('step-echo-text').textContent = ''; }")  # said nothing)
            page.locator(button).click()
            page.wait_for_function("() => document.querySelector('#step-echo-text').textContent.startsWith("
                                   "'Run a race or replay a trace first')", timeout=30_000)
        page.locator("#trace-download").click()  # nothing to download yet: a toast says so (it did nothing)
        page.get_by_text(NO_TRACE_YET).first.wait_for(timeout=30_000)
        race_on(page, max_new_tokens=60)
        page.wait_for_function("() => document.querySelector('#step-echo-text').textContent === ''",
                               timeout=30_000)  # Run clears the answer about the race before
        page.locator("#pane-pass .token.highlighted").first.wait_for(timeout=30_000)
        # dispatched, not clicked: while a race redraws the page the button may never count as "stable" (under load)
        page.locator("#pause-button").dispatch_event("click")
        page.locator("#run-line").get_by_text("Paused after step").first.wait_for(timeout=60_000)

        def position() -> int:  # read and checked in the page in one go (a busy page may be between two renders)
            return page.wait_for_function(PAUSED_AT, timeout=60_000).json_value()

        start, total = paused_position(page), page.wait_for_function(TOTAL_STEPS, timeout=30_000).json_value()
        while total != -1 and start > total - 2:  # under load the pause reached a finished race: step back
            page.locator("#previous-button").click()
            start -= 1
            page.get_by_text(f"after step {start} of").first.wait_for(timeout=30_000)
        seen = [(start, {key: pane_chars(page, key) for key in ("ar", "pass", "parallelspec")})]
        outlined = []  # after each Next: the outlined text of each pane
        for _ in range(2):
            page.locator("#next-button").click()
            before = seen[-1][0]
            try:
                page.wait_for_function(f"() => !document.querySelector('#run-line').innerText.includes("
                                       f"'after step {before} of')", timeout=30_000)
            except Exception as err:  # seen under an extra busy process (old code too): keep what the page showed
                ARTIFACTS.mkdir(exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / f"browser-next-timeout-{width}.png"), full_page=True)
                raise AssertionError(f"Next did not move the race from step {before}; the run line says "
                                     f"{page.locator('#run-line').inner_text()!r}") from err
            seen.append((position(), {key: pane_chars(page, key) for key in ("ar", "pass", "parallelspec")}))
            outlined.append({key: outlined_chars(page, key) for key in seen[-1][1]})
            page.wait_for_function(f"() => document.querySelector('#step-echo-text').textContent.startsWith("
                                   f"'Paused after step {seen[-1][0]} of')", timeout=30_000)
            assert echo.is_visible() and echo.inner_text().endswith(")."), echo.inner_text()  # the whole sentence
        snapshot(page, f"browser-step-through-{width}.png", full_page=True)
        page.locator("#previous-button").click()
        page.get_by_text(f"after step {seen[1][0]} of").first.wait_for(timeout=30_000)
        assert {key: pane_chars(page, key) for key in seen[1][1]} == seen[1][1]
        race_page_url[1](0.0)  # the steps are checked: the rest of the race at full speed
        page.locator("#resume-button").click()
        page.get_by_text("Finished.").first.wait_for(timeout=120_000)
        assert echo.inner_text() == ""  # "Paused after step ..." stayed under the buttons after Resume, once
        with page.expect_download() as download:
            page.locator("#trace-download").click()
        download.value.save_as(tmp_path / "trace.json")
        # Next on the finished race (to its first step), then idle: the page asks for no frames (the tree's listener
        # of Next put gradio's spinner on the hidden inspector chart; its springs asked for 60 frames a second for
        # some 4 s after each press, through Svelte's loop: not counted as a tracker's frames)
        page.locator("#next-button").click()
        page.wait_for_function(f"() => ({PAUSED_AT})() === 1", timeout=30_000)
        page.wait_for_timeout(1_500)
        before = page.evaluate("() => window.allFrames")
        page.wait_for_timeout(1_500)
        assert page.evaluate("() => window.allFrames") - before < 10, "a page stepped after its race asks for frames"
        page.locator("#resume-button").click()  # the whole race again, for the inspector below
        page.wait_for_function("() => document.querySelector('#run-line').innerText.startsWith('Finished.')",
                               timeout=30_000)
        trace = load_trace(tmp_path / "trace.json")
        order = race_order(trace.events)
        assert [n for n, _ in seen] == [seen[0][0], seen[0][0] + 1, seen[0][0] + 2]
        for (n, before), (_, after) in zip(seen, seen[1:]):
            name, index = order[n]  # the step Next ran: the (n + 1)-th of the race
            for key in before:
                grown = step_chars(trace.events[name][index]) if key == name else ""
                assert after[key] == before[key] + grown, (n, key)
        for (n, _), lines in zip(seen, outlined):
            name, index = order[n]
            assert lines == {key: step_chars(trace.events[name][index]) if key == name else "" for key in lines}, n
        # the inspector: click a rejected draft in the PaSS pane
        rejected = page.locator(charts.rejected_css_selector().replace(".token-pane", "#pane-pass")).first
        page.evaluate("window.scrollTo(0, 0)")  # the top of the page, as after reading the run line's start
        rejected.click()
        page.get_by_text("Selected:").first.wait_for(timeout=30_000)
        page.wait_for_function("() => { const r = document.getElementById('inspector').getBoundingClientRect(); "
                               "return r.top >= 0 && r.top < 0.67 * window.innerHeight; }", timeout=10_000)
        text = page.locator("#inspector-text").inner_text()
        step = int(re.search(r"PaSS, step (\d+)", text).group(1))
        event = next(e for e in trace.events["pass"] if e.step == step)
        draft = next(d for d in event.drafts if d.decision == "rejected")
        head = next(line for line in text.splitlines() if line.startswith("draft\t")).split("\t")
        row = next(line for line in text.splitlines() if line.startswith(f"d_{draft.position} (LA_{draft.position})"))
        cell = dict(zip((h.strip() for h in head), (c.strip() for c in row.split("\t")), strict=True))
        assert [float(cell[c]) for c in ("q(d)", "p(d)", "min(1, p/q)")] == pytest.approx(
            [draft.q, draft.p, min(1, draft.p / draft.q)], abs=5e-4), row
        assert cell["decision"] == "rejected" and "u" not in cell, row  # a greedy race: no uniform draw is used
        # on a phone the table is wider than the screen, and a line over it says that it scrolls sideways
        swipe = page.locator("#inspector-text").evaluate("e => getComputedStyle(e, '::before').content")
        assert (INSPECTOR_SWIPE in swipe) == (width < 640), swipe
        if width < 640:
            assert page.locator("#inspector-text table").evaluate("t => t.scrollWidth > t.clientWidth")
        page.locator("#inspector-plot .js-plotly-plot").wait_for(timeout=30_000)
        if width < 640:  # its label wraps to two lines on a phone: above the chart, not over its "drawn" mark
            label_bottom, chart_top = page.evaluate(  # in one go: the page may still scroll to the inspector
                """() => [document.querySelector('#inspector-plot label[data-testid="block-label"]')
                          .getBoundingClientRect().bottom,
                          document.querySelector('#inspector-plot .js-plotly-plot').getBoundingClientRect().top]""")
            assert label_bottom <= chart_top + 1, (label_bottom, chart_top)
        snapshot(page.locator("#inspector"), f"browser-inspector-{width}.png")
        snapshot(page, f"browser-inspector-page-{width}.png", full_page=True)


#: The text of each pane's outlined token boxes (the step-through's newest step), box by box: pane id -> texts.
OUTLINED_BOXES = """() => Object.fromEntries([...document.querySelectorAll('.token-pane')].map(pane => [pane.id,
  [...pane.querySelectorAll('.token')].filter(t => getComputedStyle(t).outlineStyle !== 'none')
    .map(t => t.querySelector('.text').textContent)]).filter(([, texts]) => texts.length))"""


def test_the_outline_covers_whitespace_tokens_of_a_replayed_step(new_page, race_page_url, tmp_path):
    """A replayed trace whose tokens hold newlines, spaces, a tab and a no-break space, stepped through on a phone's
    width from its last step back to its first: at every step exactly the boxes of that step are outlined, in its
    own pane alone, and at each step with a rejected draft also with the rejected drafts hidden and shown again (the
    toggle pressed while paused). The replay shows the panes of the trace's two methods only, and Run the ticked
    methods' again. The outline had counted a blank piece as no box (gradio's panes draw one:
    ``show_whitespaces``) and began a token or two late."""
    import dataclasses
    import time

    from pass_core.decoding.settings import DecodeSettings
    from pass_core.teaching.race import race, race_order
    from pass_core.teaching.trace import make_trace, save_trace
    from tiny import tiny_loaded

    loaded, settings = tiny_loaded(seed=0), DecodeSettings(num_lookahead=2, temperature=1.0, max_new_tokens=8, seed=3)
    decoders = {key: METHODS[key].decode(loaded, "Hello there", settings, METHODS[key].find_files(loaded, 2)[0])
                for key in ("ar", "pass")}
    events = {key: [] for key in decoders}
    for name, event in race(decoders):
        events[name].append(event)
    texts = iter(["a\nb", " ", "\t", "\u00a0", "x\n", "\n\n", "  y", "c d\n e"] * 40)
    drafts = iter([" ", "\n", "z"] * 40)
    events = {key: [dataclasses.replace(e, tokens=tuple(dataclasses.replace(
        t, text=next(texts) if t.committed else next(drafts)) for t in e.tokens)) for e in evs]
        for key, evs in events.items()}
    saved = save_trace(make_trace(loaded, "Hello there", settings, events), tmp_path / "blank-tokens.json")
    order = race_order(events)

    def boxes(name, index, show):  # the step's boxes as gradio draws them: a piece between newlines, if not empty
        entries = panes.pane_entries([events[name][index]], show, False)
        return {f"pane-{name}": [p for text, _, _ in entries for p in text.split("\n") if p]}

    with in_process_page(new_page, race_page_url, 400) as page:
        page.locator("#trace-upload input[type=file]").set_input_files(str(saved))
        page.wait_for_timeout(1000)
        page.locator("#replay-button").click()
        page.get_by_text("Replay of a trace").first.wait_for(timeout=30_000)
        # the trace raced AR and PaSS: ParallelSpec, ticked on the page, has no pane in the replay (it stood empty)
        page.locator("#pane-parallelspec").wait_for(state="hidden", timeout=10_000)
        assert page.locator("#pane-pass").is_visible() and page.locator("#pane-ar").is_visible()
        page.locator("#pause-button").click()
        position = paused_position(page)
        assert position == len(order)
        toggle = page.get_by_label("show rejected drafts")
        while True:
            name, index = order[position - 1]
            rejected = any(not t.committed for t in events[name][index].tokens)
            for show in (True, False, True) if rejected else (True,):  # the toggle changes what a step with drafts
                # shows (2 of the 11 steps here): pressed there, while paused, both ways
                if toggle.is_checked() != show:
                    toggle.click()
                end, seen = time.monotonic() + 15, None
                while time.monotonic() < end and seen != boxes(name, index, show):
                    seen = page.evaluate(OUTLINED_BOXES)
                    time.sleep(0.2)
                assert seen == boxes(name, index, show), (position, show, events[name][index].tokens)
            if position == 1:
                break
            page.locator("#previous-button").click()
            page.wait_for_function(f"() => ({PAUSED_AT})() === {position - 1}", timeout=30_000)
            position -= 1
        # a paused replay, stepped through: its status trackers ask for no frames either (a tracker removed while
        # pending, e.g. the theory chart's, went on asking for 60 a second: ``playground.idle_frames``)
        page.wait_for_timeout(1_500)
        before = page.evaluate("() => window.trackerFrames")
        page.wait_for_timeout(1_500)
        assert page.evaluate("() => window.trackerFrames") - before < 10, "a stepped-through page's tracker asks"
        page.locator("#resume-button").click()
        race_on(page, max_new_tokens=4)  # a race of the ticked methods: all three panes again
        page.locator("#pane-parallelspec").wait_for(state="visible", timeout=10_000)


def test_the_inspector_chart_names_every_bar_on_a_phone(new_page):
    """The token inspector's chart, 330 px wide as on a phone, with 20 bars (the top 10 of p and of q, as a sampled
    draft's chart has): every bar is named under the axis (Plotly left out every other name, so the drawn token's
    bar could go unnamed). The figure is ``inspector_figure``'s, drawn by the plotly.js of the plotly package."""
    from plotly.offline import get_plotlyjs

    from pass_core.decoding.events import DraftRecord, StepEvent, TokenRecord
    from pass_core.decoding.inspection import PositionInspection, TopN
    from playground.teaching import inspector_figure

    ranked = tuple(0.2 - 0.009 * i for i in range(10))
    p, q = TopN(tuple(range(100, 110)), ranked), TopN(tuple(range(200, 210)), ranked)
    draft = DraftRecord(position=1, token_id=200, text="t200", q=0.2, p=0.0, u=0.5, decision="rejected")
    event = StepEvent(method="pass", step=2, tokens=(TokenRecord(200, "t200", "rejected"),), drafts=(draft,),
                      num_verified_drafts=1, inspection=(PositionInspection(1, p=p, q=q),))
    figure = inspector_figure(event, 0, decode=lambda i: f"tok{i}")
    page = new_page(400)
    page.set_content(f"<div id='plot' style='width: 330px'></div><script>{get_plotlyjs()}</script>")
    named, bars = page.evaluate("f => Plotly.newPlot('plot', f.data, f.layout).then(g => "
                                "[g.querySelectorAll('.xtick').length, new Set(g.data.flatMap(t => t.x)).size])",
                                figure.to_plotly_json())
    assert bars == 20 and named == bars, (named, bars)
