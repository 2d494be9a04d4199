"""The "Start here" lessons: each preset is a valid race (its values in the page's input order pass the race's own
checks), asks a question before Run and says what to look at after."""

from __future__ import annotations

import pytest

from pass_core.registry import METHODS
from playground.lessons import LESSON_HINT, LESSONS, lesson_markdown, lesson_values
from playground.race_handlers import validate_inputs


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.title)
def test_each_lesson_is_a_valid_race_with_a_question(lesson):
    values = lesson.values()
    assert len(values) == 12  # build_demo's race inputs
    prompt, num_lookahead, temperature, top_k, top_p, max_new_tokens, seed, show, fused, methods, chat, auto = values
    assert prompt == lesson.prompt and methods == list(lesson.methods) and show is True
    assert all(key in METHODS for key in methods) and len(methods) >= 2
    assert all(check.get("__type__") == "validate" and check.get("is_valid", True) for check in validate_inputs(*values))
    assert temperature == lesson.settings.get("temperature", 0.0)
    text = lesson_markdown(lesson.title)
    assert text.startswith("**Predict, before Run:** ") and lesson.predict in text and lesson.after in text
    assert lesson_values(lesson.title) == values


def test_five_or_six_lessons_and_an_unknown_one():
    assert 5 <= len(LESSONS) <= 6 and len({lesson.title for lesson in LESSONS}) == len(LESSONS)
    assert lesson_markdown(None) == LESSON_HINT and lesson_values("no such lesson") is None
    # the sampled lessons sample, the others are greedy (their texts can be compared token for token)
    sampled = {lesson.title for lesson in LESSONS if lesson.values()[2] > 0}
    assert sampled == {lesson.title for lesson in LESSONS if "temperature" in lesson.settings}
