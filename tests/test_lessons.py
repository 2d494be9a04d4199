"""The "Start here" lessons: each preset is a valid race (its values in the page's input order pass the race's own
checks), asks a question before Run and, once its race has finished, says what to look at with that race's numbers
and the finish view (the method with the highest tokens/s)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pass_core.decoding.events import StepEvent, TokenRecord
from pass_core.decoding.metrics import summarize
from pass_core.registry import METHODS
from playground.race_inputs import NUMERIC_INPUTS
from playground.tree_race import TREE_CHOICES
from playground.lessons import AFTER_LAB_PENDING, AFTER_PENDING, LESSON_HINT, LESSONS, lab_lesson_markdown, \
    lesson_markdown, lesson_values
from playground.race_checks import validate_inputs
from playground.race_text import finish_line, metric_texts
from playground.race_view import race_view


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.title)
def test_each_lesson_is_a_valid_race_with_a_question(lesson):
    values = lesson.values()
    assert len(values) == 13  # build_demo's race inputs and the token tree
    prompt, num_lookahead, temperature, top_k, top_p, max_new_tokens, seed, show, fused, methods, chat, auto, tree \
        = values
    # a chain (a tree left on from an earlier race is set off), but for the lesson on token trees
    assert tree == lesson.tree_nodes in [value for _, value in TREE_CHOICES]
    assert (tree != TREE_CHOICES[0][1] == 0) == ("**token tree**" in lesson.predict), lesson.title
    assert not tree or any(METHODS[key].tree for key in lesson.methods), lesson.title  # a tree entry races
    # slow motion waits after every step of every method: at most about a minute of a class's time in waits alone
    # (lesson 2 at 96 tokens took about 100 s on the embedded model)
    assert lesson.slow_motion_s * max_new_tokens * len(lesson.methods) <= 60, lesson.title
    assert prompt == lesson.prompt and methods == list(lesson.methods) and show is True
    assert all(key in METHODS for key in methods) and len(methods) >= 2
    assert all(check.get("__type__") == "validate" and check.get("is_valid", True) for check in validate_inputs(*values))
    assert temperature == lesson.settings.get("temperature", 0.0)
    text = lesson_markdown(lesson.title)  # before the race: the question only, the answer's pointers after it
    assert text.startswith(f"**{lesson.ask}:** ") and lesson.predict in text and lesson.after not in text
    # a question answered during the race is not headed "before Run" (lesson 2 asks to pause the race at a token)
    assert not ("Pause" in lesson.predict and "before Run" in lesson.ask), lesson.title
    assert text.endswith(AFTER_LAB_PENDING if lesson.lab else AFTER_PENDING)
    preset = text.split("\n")[1]
    if lesson.lab:  # it sets no race (it set the race's methods and settings, which the lab never reads): it says
        assert lesson_values(lesson.title) is None and not lesson.settings  # what the lab runs, from run_lab itself
        assert preset == lesson.preset_line() and "temperature 1, top-k 2, 2 drafts per step" in preset, preset
        return
    assert lesson_values(lesson.title) == values
    # the question says what the lesson set: its methods and every setting it changes (lesson 2 raced AR and PaSS
    # with the other panes hidden, and nothing said so)
    assert preset.startswith("*Set for you: ") and preset == lesson.preset_line(), preset
    for key in METHODS:
        assert (METHODS[key].short_name in preset) == (key in lesson.methods), (key, preset)
    for name, value in lesson.settings.items():
        assert f"{NUMERIC_INPUTS[name][0]} {value:g}" in preset, (name, preset)
    assert ("slow motion" in preset) == (lesson.slow_motion_s > 0), preset
    assert ("token tree" in preset) == bool(tree) and (not tree or f"token tree {tree} nodes" in preset), preset


def test_five_to_seven_lessons_one_on_trees_and_an_unknown_one():
    assert 5 <= len(LESSONS) <= 7 and len({lesson.title for lesson in LESSONS}) == len(LESSONS)
    assert sum(lesson.tree_nodes != 0 for lesson in LESSONS) == 1  # the tree lesson (helper 70 found none)
    assert lesson_markdown(None) == LESSON_HINT and lesson_values("no such lesson") is None
    # the sampled lessons sample, the others are greedy (their texts can be compared token for token)
    sampled = {lesson.title for lesson in LESSONS if lesson.values()[2] > 0}
    assert sampled == {lesson.title for lesson in LESSONS if "temperature" in lesson.settings}


def _run(method: str, tokens: int, seconds: float) -> list[StepEvent]:
    """``tokens`` one-token steps of ``seconds / tokens`` each (the last one finished); a drafting method's steps
    after the first (the prefill) each verified one draft."""
    return [StepEvent(method, i + 1, (TokenRecord(i, "x", "target"),), step_s=seconds / tokens,
                      num_verified_drafts=int(method != "ar" and i > 0),
                      finish_reason="max_new_tokens" if i == tokens - 1 else None) for i in range(tokens)]


def test_after_the_race_the_lesson_quotes_its_numbers_and_names_the_fastest():
    """A finished race of hand-made events (AR 8 tokens in 1 s, PaSS 8 in 0.5 s, ParallelSpec 8 in 0.8 s): each
    lesson's text then holds its "After the run" pointers, the metric box strings of the metrics it names, and the
    finish view naming PaSS at 16.0 tokens/s, then ParallelSpec 10.0 and AR 8.0."""
    events = {"ar": _run("ar", 8, 1.0), "pass": _run("pass", 8, 0.5), "parallelspec": _run("parallelspec", 8, 0.8)}
    view = race_view(events, True, True, False, True, with_figures=False)
    finish = "**Highest tokens/s: PaSS** at 16.0 tokens/s (then ParallelSpec 10.0, AR 8.0)."
    assert finish_line({key: summarize(evs) for key, evs in events.items()}) == finish
    assert view.run_line.splitlines()[1].strip() == finish  # the run line: "Finished.", then the finish view
    for lesson in LESSONS:
        text = lesson_markdown(lesson.title, events)
        if lesson.lab:  # answered by the lab, not by a race
            assert text == lesson_markdown(lesson.title) and lesson.after not in text
            continue
        assert lesson.predict in text and lesson.after in text and AFTER_PENDING not in text
        for key in lesson.numbers:
            assert view.metrics[key].splitlines()[0] in text, (lesson.title, key)
        assert text.endswith(finish)


def test_the_finish_view_says_when_another_method_is_fastest_without_the_prefill():
    """PaSS's prefill 0.01 s against AR's 0.1 s, then 7 steps of 0.105 s against AR's 0.1 s: PaSS has the highest
    tokens/s of the whole run (8 / 0.745 s = 10.7 against 10.0), but its speed-up, which leaves each first step out,
    is 0.95x: the finish view (run line and lesson strip) says that AR was fastest without the prefill (a helper
    read "Highest tokens/s: PaSS +tree8" beside its speed-up of 0.86x). Equal prefills add nothing."""
    ar = [replace(e, step_s=0.1) for e in _run("ar", 8, 0.8)]
    fast_start = [replace(e, step_s=0.01 if e.step == 1 else 0.105) for e in _run("pass", 8, 0.8)]
    events = {"ar": ar, "pass": fast_start}
    said = ("**Highest tokens/s: PaSS** at 10.7 tokens/s (then AR 10.0). Without each first step (the prompt "
            "prefill, which the speed-up leaves out) **AR** was fastest: AR 10.0, PaSS 9.5 tokens/s.")
    assert finish_line({key: summarize(evs) for key, evs in events.items()}, events) == said
    view = race_view(events, True, True, False, True, with_figures=False)
    assert view.run_line.splitlines()[1].strip() == said and view.metrics["speedup"].startswith("PaSS 0.95")
    assert lesson_markdown(LESSONS[0].title, events).endswith(said)
    same = {"ar": ar, "pass": [replace(e, step_s=0.1 if e.step == 1 else 0.095) for e in fast_start]}
    assert "Without" not in finish_line({key: summarize(evs) for key, evs in same.items()}, same)


def test_the_tree_lesson_quotes_the_tree_entry_beside_its_chain():
    """The tree lesson after a race of AR, ParallelSpec and its tree entry (as the page races it): the numbers it
    quotes name the chain and the tree entry, and the mean accepted tokens per step of each."""
    lesson = next(one for one in LESSONS if one.tree_nodes)
    entry = f"parallelspec+tree{lesson.tree_nodes}"
    events = {"ar": _run("ar", 8, 1.0), "parallelspec": _run("parallelspec", 8, 0.8), entry: _run(entry, 8, 0.9)}
    text = lesson_markdown(lesson.title, events)
    numbers = text.split("**This run:** ")[1]
    assert lesson.after in text and "mean_accepted_tokens" in lesson.numbers
    assert f"ParallelSpec +tree{lesson.tree_nodes} " in numbers and "ParallelSpec " in numbers, numbers
    mean = race_view(events, True, True, False, True, with_figures=False).metrics["mean_accepted_tokens"]
    assert mean.splitlines()[0] in numbers, (mean, numbers)


def test_the_finish_view_waits_for_the_end_and_two_methods():
    events = {"ar": _run("ar", 4, 1.0), "pass": _run("pass", 4, 0.5)}
    running = race_view(events, True, True, False, False, with_figures=False)
    assert "Highest tokens/s" not in running.run_line
    # a race not over (running, paused, or stepped back) says its boxes are so far: a paused race's read as final
    finished = race_view(events, True, True, False, True, with_figures=False).metrics
    assert running.metrics == {key: "\n".join([lines[0] + " (so far)", *lines[1:]]) for key, lines in
                               ((key, value.split("\n")) for key, value in finished.items())}, running.metrics
    assert "so far" not in "".join(finished.values())
    assert finish_line({"ar": None, "pass": None}) == ""
    slow = {"ar": _run("ar", 2, 25.0), "pass": _run("pass", 2, 40.0)}  # two tokens after a long prefill
    assert finish_line({k: summarize(v) for k, v in slow.items()}) == \
        "**Highest tokens/s: AR** at 0.08 tokens/s (then PaSS 0.05)."
    one = {"ar": _run("ar", 1, 0.2), "pass": _run("pass", 1, 0.1)}  # one token: the prefill wrote it, no draft
    assert finish_line({k: summarize(v) for k, v in one.items()}) == (
        "**No method verified a draft in this race**: each ran as AR does, so the tokens/s differ by timing alone "
        "(PaSS 10.0, AR 5.0). Raise max new tokens to see drafting.")
    # no speed-up without a step after the prefill: "not yet" while running, "–" once a side ended on its prefill
    running = {key: [replace(evs[0], finish_reason=None)] for key, evs in one.items()}
    for evs, shown in ((running, "not yet"), (one, "– (ended at its prefill)"), ({**running, "ar": one["ar"]},
                                                                                "– (ended at its prefill)")):
        texts = metric_texts({key: summarize(e) for key, e in evs.items()}, evs)
        assert texts["speedup"].splitlines()[0] == f"PaSS {shown}", evs
    assert "Highest tokens/s: AR" in race_view({"ar": _run("ar", 4, 0.25), "pass": events["pass"]}, True, True,
                                               False, True, with_figures=False).run_line


def test_the_lab_lesson_answers_with_the_lab_verdicts():
    """The lab's lesson never answered (the strip answered after races only): after Run lab it shows what to look at
    and which rows of the lab's own table (``lab_view.lab_markdown``) stayed under the bound."""
    from pass_core.teaching.lab import BROKEN, LabResult
    from playground.lab_view import lab_markdown

    [lesson] = [one for one in LESSONS if one.lab]
    exact = {(1,): 0.5, (2,): 0.5}
    result = LabResult(exact, {k: exact for k in ("ar", "pass", BROKEN)}, {"ar": 0.02, "pass": 0.04, BROKEN: 0.4},
                       0.1, 50, 1, {"ar": (0, 0), "pass": (10, 20), BROKEN: (20, 20)})
    table = lab_markdown(result, {"ar": "AR", "pass": "PaSS, fixed-token"})  # a label with a comma
    text = lab_lesson_markdown(lesson.title, table)
    assert text.startswith(f"**{lesson.ask}:** {lesson.predict}") and lesson.after in text
    assert text.endswith("under the bound: AR; PaSS, fixed-token  \noutside it: broken rule: always accept"), text
    assert lab_lesson_markdown(lesson.title, "") is None  # no table (a refused N): the question stays
    assert lab_lesson_markdown(LESSONS[0].title, table) is None  # another lesson: not answered by the lab
