"""The teaching panels in a real headless browser: the "Start here" lessons, the "What if…" panel and theory beside
measurement, each checked against numbers the test computes itself (the downloaded trace, docs/algorithms.md
section 4's formulas), never against the page's own functions. Screenshots at 1400 px and 400 px go to
tests/artifacts/ (browser-lessons-WIDTH.png, browser-finish-WIDTH.png, browser-whatif-WIDTH.png); the theory check's
race is also the README's screenshot, docs/screenshot.png.

The lessons and the what-if panel run on the page built in this process on a tiny random model (the trained methods
fall back to untrained drafters there, which is all a lesson's wiring needs); the theory check races the embedded
model, whose trained drafters the claim is about. One Chromium serves the run (``chromium`` in conftest.py).
"""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path

import pytest

from pass_core.registry import METHODS, tree_entry
from pass_core.teaching.trace import load_trace
from playground.lessons import AFTER_LAB_PENDING, LESSONS
from playground.race_charts import short_name
from playground.tree_race import TREE_CHOICES, TREE_PANES
from servers import free_port
from test_browser import snapshot, PANES_IN_VIEW, new_page, open_settings  # noqa: F401 (new_page: a fixture, a fresh
# context of the run's Chromium)

#: The palindrome race of the theory check is cut to this many new tokens (the page's default is 96).
THEORY_TOKENS = 48
#: The lessons' races are cut to this many new tokens (lesson 4 asks 24, the others the default 96): the wiring,
#: not the text, is under test, and six races must take seconds. A lesson in slow motion (lesson 2, 0.5 s a step)
#: races ``SLOW_LESSON_TOKENS``: the server's wait is checked on every step, and a step costs half a second there.
LESSON_TOKENS, SLOW_LESSON_TOKENS = 12, 6


@contextlib.contextmanager
def served(loaded, **options):
    """``page.build_demo(loaded, **options)`` served in this process on a free port; yields its URL."""
    from playground import page

    demo, port = page.build_demo(loaded, **options), free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                **page.launch_options())
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


@pytest.fixture(scope="module")
def tiny_page_url():
    """The page on a tiny random model, every method offered (untrained drafters for the trained ones)."""
    from tiny import tiny_loaded

    with served(tiny_loaded(seed=0), untrained_drafters=True) as url:
        yield url


def open_page(new_page, url: str, width: int):  # noqa: F811
    page = new_page(width, 900)
    page.goto(url)
    page.get_by_text("Ready:").first.wait_for(timeout=60_000)
    open_settings(page)
    return page


def plain(markdown: str) -> str:
    """Markdown as the browser shows it: no ** or * marks, whitespace runs as one space."""
    return " ".join(markdown.replace("**", "").replace("*", "").split())


def shown(page, selector: str) -> str:
    return " ".join(page.locator(selector).inner_text().split())


def metric_box(page, label: str) -> str:
    """A metric box's value (its first line: the speed-up's later lines say what it compares)."""
    box = page.locator("label").filter(has=page.get_by_text(label, exact=True)).locator("textarea")
    return box.input_value().splitlines()[0]


def per_method(box: str) -> dict[str, float]:
    """"AR 16.1  ·  PaSS 12.0" (or "PaSS 0.81×", "PaSS 23.4% (…)") -> {"AR": 16.1, "PaSS": 12.0}."""
    values = {}
    for part in box.split("·"):
        match = re.match(r"\s*(.+?) (-?[\d.]+)[×%]?( \(.*\))?\s*$", part)
        assert match, f"cannot read {part!r} in the metric box {box!r}"
        values[match.group(1)] = float(match.group(2))
    return values


def trace_rates(page, tmp_path) -> dict[str, float]:
    """Tokens/s of each method from the downloaded trace: committed tokens / summed step time."""
    from pass_core.teaching.trace import load_trace

    with page.expect_download() as download:
        page.locator("#trace-download").click()
    download.value.save_as(tmp_path / "trace.json")
    trace = load_trace(tmp_path / "trace.json")
    rates = {}
    for key, events in trace.events.items():
        committed = sum(t.committed for e in events for t in e.tokens)
        rates[short_name(key)] = committed / sum(e.step_s for e in events)  # a tree entry: "ParallelSpec +tree8"
    return rates


#: Client-side: true when every numeric setting's slider (``components.numeric_input``) holds its number box's value.
SLIDERS_AS_BOXES = ("() => { const aids = [...document.querySelectorAll('#settings .range-aid input[type=range]')]; "
                    "return aids.length === 5 && aids.every(r => { "
                    "const box = r.closest('.row').querySelector('input[type=number]'); "
                    "return box && Number(r.value) === Number(box.value); }); }")


def test_each_lesson_asks_first_then_explains_with_its_race_numbers(new_page, tiny_page_url, tmp_path):  # noqa: F811
    """For each of the seven lessons: choosing it fills the prompt and the methods and shows its question, and not yet
    what to look at; after Run (cut to ``LESSON_TOKENS`` new tokens) the strip shows what to look at with this
    race's numbers, equal to the metric boxes', whose tokens/s equal the downloaded trace's (committed tokens /
    summed step time); and the finish view, in the run line and the strip, names the method with the highest
    tokens/s in the metric box. The lab's lesson sets no race and answers after Run lab, with its verdicts. Run again:
    the question comes back while the race runs, then the new numbers. At this desktop width the strip, the finish
    view (after lesson 1) and the what-if panel (at the end) fit the page (``fits_the_width``). A token tree chosen
    before is set back to a chain by the lesson (it would race tree entries the lesson does not talk about); the
    tree lesson sets 8 nodes, and its race has the tree entry beside the chain."""
    page = open_page(new_page, tiny_page_url, 1400)
    labels = {"tokens_per_s": "tokens/s", "speedup": "speed-up vs AR", "tokens_per_forward_pass":
              "tokens per forward pass", "mean_accepted_tokens": "mean accepted tokens per verification step",
              "acceptance_rate": "draft acceptance rate α"}
    open_settings(page)
    tree = page.locator("#input-tree_nodes input")
    tree.click()  # a token tree left on from an earlier race: a lesson sets it back to a chain
    page.get_by_role("option").filter(has_text="8 nodes").first.click()
    assert tree.input_value() == "8 nodes"
    for lesson in LESSONS:
        page.locator("#lesson-choice").get_by_label(lesson.title, exact=True).check()
        page.wait_for_function("q => document.querySelector('#lesson-text').innerText.replace(/\\s+/g, ' ')"
                               ".includes(q)", arg=plain(lesson.predict), timeout=10_000)
        tree_value = next(label for label, value in TREE_CHOICES if value == lesson.tree_nodes)
        page.wait_for_function("v => document.querySelector('#input-tree_nodes input').value === v",
                               arg=tree_value, timeout=5_000)  # a chain but for the tree lesson's 8 nodes
        assert plain(lesson.after) not in shown(page, "#lesson-text"), lesson.title  # not before the race
        if lesson.lab:  # it sets no race (the lab reads none of the race's settings): answered after Run lab
            assert plain(lesson.preset_line()) in shown(page, "#lesson-text"), lesson.title
            assert plain(AFTER_LAB_PENDING) in shown(page, "#lesson-text"), lesson.title
            page.get_by_role("tab", name="Losslessness lab").click()
            page.locator("#lab-runs input").fill("30")
            page.get_by_role("button", name="Run lab").click()
            page.get_by_text("✗ fail").first.wait_for(timeout=120_000)
            page.get_by_role("tab", name="Race").click()
            wait_text(page, "#lesson-text", "This lab: under the bound: ")
            text = shown(page, "#lesson-text")
            assert plain(lesson.after) in text and "outside it: broken rule: always accept" in text, text
            continue
        assert page.get_by_label("prompt", exact=True).input_value() == lesson.prompt
        for key, method in METHODS.items():
            assert page.get_by_label(method.label, exact=True).is_checked() == (key in lesson.methods), key
        # each setting's slider shows its box's value (a lesson set the boxes only: top-k 20 beside a slider at 0)
        page.wait_for_function(SLIDERS_AS_BOXES, timeout=5_000)
        # slow motion as the lesson sets it: 0.5 s per step for lesson 2, and back to full speed after it
        assert float(page.locator("#slow-motion input[type=number]").input_value()) == lesson.slow_motion_s
        tokens = SLOW_LESSON_TOKENS if lesson.slow_motion_s else LESSON_TOKENS
        page.locator("#input-max_new_tokens input").fill(str(tokens))
        started = time.monotonic()
        page.get_by_role("button", name="Run").click()
        if lesson is LESSONS[0]:  # Run brings the race's panes into view (at 1400 x 900 they start under the fold)
            page.wait_for_function(PANES_IN_VIEW, timeout=5_000)
        page.wait_for_function("() => document.querySelector('#lesson-text').innerText.includes('This run:')",
                               timeout=90_000)
        assert "Finished." in page.locator("#run-line").inner_text(), lesson.title
        if lesson is LESSONS[0]:  # a screen reader hears that the race finished and which method was fastest (a
            # live region of its own, hidden from sight; nothing said so: helper 69)
            lines = [x for x in page.locator("#run-line").inner_text().split("\n") if x.strip()][:2]
            page.wait_for_function("t => document.querySelector('#race-announcer')?.textContent === t",
                                   arg=" ".join(lines), timeout=5_000)
            live = page.locator("#race-announcer")
            assert live.get_attribute("role") == "status" and live.bounding_box()["width"] <= 1
            assert lines[1].startswith("Highest tokens/s:"), lines
        text = shown(page, "#lesson-text")
        assert plain(lesson.predict) in text and plain(lesson.after) in text, lesson.title
        for key in lesson.numbers:  # the strip quotes this race's metric boxes
            assert f"{labels[key]}: " + " ".join(metric_box(page, labels[key]).split()) in text, (lesson.title, key)
        rates = per_method(metric_box(page, "tokens/s"))
        entries = [*lesson.methods, *(tree_entry(key, lesson.tree_nodes) for key in lesson.methods
                                      if lesson.tree_nodes and key in TREE_PANES)]
        assert set(rates) == set(map(short_name, entries)), lesson.title
        raced_s = time.monotonic() - started
        for name, rate in trace_rates(page, tmp_path).items():  # the boxes are this race's
            assert rates[name] == pytest.approx(rate, abs=0.051), (lesson.title, name)
        steps = sum(map(len, load_trace(tmp_path / "trace.json").events.values()))
        assert raced_s >= lesson.slow_motion_s * steps, (lesson.title, raced_s, steps)  # the server waited too
        finish = re.search(r"Highest tokens/s: (.+?) at ([\d.]+) tokens/s", shown(page, "#run-line"))
        assert finish, (lesson.title, shown(page, "#run-line"))
        assert rates[finish.group(1)] == max(rates.values()), (lesson.title, finish.group(0), rates)
        assert float(finish.group(2)) == rates[finish.group(1)]
        assert finish.group(0) in text, lesson.title  # the strip ends with the same finish view
        if lesson is LESSONS[0]:  # the strip and the finish view fit a desktop's width
            fits_the_width(page, 1400, (("#lessons", "lessons"), ("#run-line", "finish")))
    # the arrow keys move through the lessons, round at the ends (gradio names each radio on its own, so they did
    # nothing: helper 73); each lesson reached is chosen, its question shown
    radios = page.locator("#lesson-choice input[type=radio]")
    radios.nth(len(LESSONS) - 1).focus()
    for key, lesson in (("ArrowDown", LESSONS[0]), ("ArrowUp", LESSONS[-1])):
        page.keyboard.press(key)
        page.wait_for_function("q => document.querySelector('#lesson-text').innerText.replace(/\\s+/g, ' ')"
                               ".includes(q)", arg=plain(lesson.predict), timeout=10_000)
        assert page.locator("#lesson-choice").get_by_label(lesson.title, exact=True).is_checked(), key
        assert page.get_by_label("prompt", exact=True).input_value() == lesson.prompt, key
    # the same lesson raced again: its question comes back while the race runs (the strip kept the numbers of the
    # race before until the next race had finished), then this race's numbers
    page.get_by_role("button", name="Run").click()
    page.wait_for_function("() => !document.querySelector('#lesson-text').innerText.includes('This run:')",
                           timeout=30_000)
    page.wait_for_function("() => document.querySelector('#lesson-text').innerText.includes('This run:')",
                           timeout=90_000)
    page.locator("#whatif").get_by_text("What if…").first.click()  # the what-if panel fits a desktop's width too
    page.locator("#whatif-preset").get_by_label("flat (GPU-like)", exact=True).check()
    page.locator("#whatif-plot .js-plotly-plot").wait_for(timeout=30_000)
    fits_the_width(page, 1400, (("#whatif", "whatif"),))


def wait_text(page, selector: str, part: str, timeout_ms: int = 30_000) -> None:
    """Wait until the element's text (whitespace runs as one space) holds ``part``; fail showing the text."""
    try:
        page.wait_for_function("([s, p]) => document.querySelector(s).innerText.replace(/\\s+/g, ' ').includes(p)",
                               arg=[selector, part], timeout=timeout_ms)
    except Exception as err:  # Playwright's TimeoutError: say what the page showed instead
        raise AssertionError(f"{selector} never showed {part!r}; it shows {shown(page, selector)!r}") from err


def whatif_set(page, alpha: float, k: int, drafter_cost: float, leave: bool) -> None:
    """Type into the what-if sliders' number boxes, then leave each box (``leave``) or press Enter in it: the panel
    redraws either way (it once waited for the box to be left). Each redraw is awaited before the next box is typed
    in, so that no earlier redraw can land last."""
    for name, value, mark in (("alpha", alpha, f"At α = {alpha:.2f},"), ("k", k, f", k = {k}, cost curve"),
                              ("drafter", drafter_cost, f"(drafter c_d = {drafter_cost:.2f})")):
        box = page.locator(f"#whatif-{name} input[type=number]")
        box.fill(str(value))
        box.blur() if leave else box.press("Enter")
        wait_text(page, "#whatif-text", mark)


def test_whatif_predicts_the_speedup_of_the_formula(new_page, tiny_page_url, fixed_pass_cost):  # noqa: F811
    """On the flat cost curve (c(w) = 1) the panel's chain and PaSS speed-ups equal docs/algorithms.md section 4,
    computed here: E = (1 - α^(k+1)) / (1 - α); chain E / (c(k+1) + c_d) = E / (1 + c_d); PaSS's two-pass loop
    (1 + E) / (2 c(k+1)) = (1 + E) / 2. Two settings in turn on one page. With no curve measured yet (this page was
    served a loaded model, and ``fixed_pass_cost`` forgets earlier measurements) "this machine" has none: the panel
    says so with no plot (an empty plot box stood over its message)."""
    page = open_page(new_page, tiny_page_url, 1400)
    page.locator("#whatif").get_by_text("What if…").first.click()
    wait_text(page, "#whatif-text", "No physical pass-cost curve of this machine yet")
    assert not page.locator("#whatif-plot").is_visible()
    page.locator("#whatif-preset").get_by_label("flat (GPU-like)", exact=True).check()
    wait_text(page, "#whatif-text", "cost curve flat c(w) = 1")
    for alpha, k, drafter_cost, leave in ((0.7, 4, 0.1, True), (0.35, 2, 0.25, False)):
        whatif_set(page, alpha, k, drafter_cost, leave)
        text = shown(page, "#whatif-text")
        assert f"At α = {alpha:.2f}, k = {k}, cost curve flat c(w) = 1" in text and \
            f"(drafter c_d = {drafter_cost:.2f})" in text, text
        expected = (1 - alpha ** (k + 1)) / (1 - alpha)
        chain = re.search(r"Chain: E = .*? = ([\d.]+) tokens per step .*?: ([\d.]+)x", text)
        two_pass = re.search(r"PaSS two-pass loop: 1 \+ E = ([\d.]+) tokens per step .*?: ([\d.]+)x", text)
        assert chain and two_pass, text
        assert float(chain.group(1)) == pytest.approx(expected, abs=0.006)
        assert float(chain.group(2)) == pytest.approx(expected / (1 + drafter_cost), abs=0.006)
        assert float(two_pass.group(1)) == pytest.approx(1 + expected, abs=0.006)
        assert float(two_pass.group(2)) == pytest.approx((1 + expected) / 2, abs=0.006)
    page.locator("#whatif-plot .js-plotly-plot").wait_for(timeout=30_000)
    page.locator("#whatif-alpha input[type=range]").press("ArrowRight")  # a keyboard user's step redraws too
    wait_text(page, "#whatif-text", "At α = 0.36, k = 2,")


def test_whatif_ends_on_the_curve_chosen_last_when_an_earlier_answer_is_slow(new_page, monkeypatch):  # noqa: F811
    """Opening the panel asks for this machine's curve and choosing "flat" at once asks again. Answered side by
    side (as they were), the slower answer, here the machine's (3 s), landed last and the panel showed a curve no
    longer chosen (seen in full runs as a timeout); answered in trigger order, the panel ends on flat."""
    import time

    from playground import teaching_panels
    from playground.whatif import MACHINE
    from tiny import tiny_loaded

    fast = teaching_panels.whatif_view

    def slow_for_the_machine(alpha, k, preset, *rest):
        if preset == MACHINE:
            time.sleep(3)
        return fast(alpha, k, preset, *rest)

    monkeypatch.setattr(teaching_panels, "whatif_view", slow_for_the_machine)  # read when the page is built
    with served(tiny_loaded(seed=0), untrained_drafters=True) as url:
        page = open_page(new_page, url, 1400)
        page.locator("#whatif").get_by_text("What if…").first.click()
        page.locator("#whatif-preset").get_by_label("flat (GPU-like)", exact=True).check()
        wait_text(page, "#whatif-text", "cost curve flat c(w) = 1")
        page.wait_for_timeout(4000)  # the machine's answer, had it run beside, has landed by now
        assert "cost curve flat c(w) = 1" in shown(page, "#whatif-text"), shown(page, "#whatif-text")


def fits_the_width(page, width: int, parts: tuple[tuple[str, str], ...]) -> None:
    """Each (selector, name) of ``parts`` fits the page's width (nothing runs off the right edge); saves its
    picture as browser-NAME-WIDTH.png."""
    viewport = page.evaluate("() => document.documentElement.clientWidth")
    for selector, name in parts:
        element = page.locator(selector)
        element.scroll_into_view_if_needed()
        box = element.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= viewport + 1, (selector, box, viewport)
        overflow = element.evaluate("e => [...e.querySelectorAll('*')].filter(c => c.getBoundingClientRect().right"
                                    " > document.documentElement.clientWidth + 1 && c.getClientRects().length)"
                                    ".map(c => c.tagName + '.' + c.className).slice(0, 5)")
        assert not overflow, (selector, width, overflow)
        snapshot(element, f"browser-{name}-{width}.png")


def test_screenshots_of_the_lesson_strip_finish_view_and_whatif_on_a_phone(new_page, tiny_page_url):  # noqa: F811
    """Lesson 1 raced (cut to ``LESSON_TOKENS`` tokens) and the what-if panel on the flat curve, at a phone's width:
    the strip, the run line with the finish view and the panel each fit the page's width (nothing runs off the
    right edge). Saves browser-lessons-400.png, browser-finish-400.png, browser-whatif-400.png (the lessons test
    checks and saves the same at 1400 px)."""
    width = 400
    page = open_page(new_page, tiny_page_url, width)
    page.locator("#lesson-choice").get_by_label(LESSONS[0].title, exact=True).check()
    # the lesson has filled the form (its question shows) before the length is cut: had the lesson's update come
    # after the fill, it would have put its own length back (a possible cause of a timeout seen once in a full run)
    page.wait_for_function("q => document.querySelector('#lesson-text').innerText.replace(/\\s+/g, ' ')"
                           ".includes(q)", arg=plain(LESSONS[0].predict), timeout=10_000)
    page.locator("#input-max_new_tokens input").fill(str(LESSON_TOKENS))
    page.get_by_role("button", name="Run").click()
    page.wait_for_function("() => document.querySelector('#lesson-text').innerText.includes('This run:')",
                           timeout=90_000)
    page.locator("#whatif").get_by_text("What if…").first.click()
    page.locator("#whatif-preset").get_by_label("flat (GPU-like)", exact=True).check()
    page.locator("#whatif-plot .js-plotly-plot").wait_for(timeout=30_000)
    fits_the_width(page, width, (("#lessons", "lessons"), ("#run-line", "finish"), ("#whatif", "whatif")))


#: The README's picture: taken by ``test_theory_...palindrome_example`` on every run, so that it shows the page as
#: it is today.
SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "screenshot.png"


def test_theory_predicts_the_measured_mean_on_the_palindrome_example(new_page, smollm, fixed_pass_cost):  # noqa: F811
    """The palindrome example (the page's first), AR, PaSS and ParallelSpec (the default race), greedy, on the
    embedded model, cut to ``THEORY_TOKENS`` new tokens: for each drafting method the theory view's predicted tokens
    per verification step, from alpha on the judged drafts, lies within 0.05 of the mean accepted tokens per
    verification step in its metric box. The cost view reads ``fixed_pass_cost``'s curve: measuring c(w) on the
    embedded model at the first race costs about 8 s of CPU, and nothing here is about it.

    The same finished race is the README's screenshot: each pane holds coloured tokens, the greedy check says
    identical and the charts are drawn; then, with the settings folded, the page from its title to the panes' last
    lines (prompt, lessons and the panes) is written to ``SCREENSHOT`` (one race of the embedded model for both: a
    race of its own cost about 15 s of CPU)."""
    from playground.race_inputs import EXAMPLES

    with served(smollm) as url:
        page = open_page(new_page, url, 1400)
        page.get_by_text(EXAMPLES[0][:40]).first.click()  # the example under Run fills the prompt box
        prompt = page.get_by_label("prompt", exact=True)
        for _ in range(120):  # the server fills it in: up to a minute on a busy machine
            if prompt.input_value() == EXAMPLES[0]:
                break
            page.wait_for_timeout(500)
        assert prompt.input_value() == EXAMPLES[0]
        for key in ("ar", "pass", "parallelspec"):  # the default race, and only it
            assert page.get_by_label(METHODS[key].label, exact=True).is_checked(), key
        assert page.locator("#methods input[type=checkbox]:checked").count() == 3
        assert page.locator("#input-temperature input").input_value() == "0"
        page.locator("#input-max_new_tokens input").fill(str(THEORY_TOKENS))
        page.get_by_role("button", name="Run").click()
        wait_text(page, "#run-line", "Finished.", timeout_ms=300_000)
        page.wait_for_function("() => document.querySelector('#theory-sentences').innerText.includes('ParallelSpec:')",
                               timeout=30_000)
        theory = shown(page, "#theory-sentences")
        measured = per_method(metric_box(page, "mean accepted tokens per verification step"))
        for name in ("PaSS", "ParallelSpec"):
            found = re.search(rf"{name}: α = ([\d.]+) .*? predicts ([\d.]+) tokens per verification step", theory)
            assert found, (name, theory)
            predicted = float(found.group(2))
            assert abs(predicted - measured[name]) <= 0.05, (name, f"alpha {found.group(1)}", predicted,
                                                             measured[name], theory)
        # the README's screenshot of this race
        for key in ("ar", "pass", "parallelspec"):
            assert page.locator(f"#pane-{key} .token.highlighted").count() > 0, f"pane {key} has no tokens"
        assert "identical" in page.locator("#greedy-check").inner_text().lower(), \
            page.locator("#greedy-check").inner_text()
        page.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=30_000)
        page.locator("#settings button.label-wrap").first.click()  # folded again, as the page loads
        page.locator("#input-seed").wait_for(state="hidden", timeout=10_000)
        page.wait_for_timeout(1000)  # the accordion's fold animation
        page.evaluate("window.scrollTo(0, 0)")
        panes = [page.locator(f"#pane-{key}").bounding_box() for key in ("ar", "pass", "parallelspec")]
        bottom = max(box["y"] + box["height"] for box in panes)
        page.set_viewport_size({"width": 1400, "height": round(bottom) + 16})  # title to the panes' last lines
        page.screenshot(path=str(SCREENSHOT))
        snapshot(page, "browser-readme.png", full_page=True)
    assert SCREENSHOT.stat().st_size > 20_000  # a picture of a page, not an empty frame
