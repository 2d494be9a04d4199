"""Small teaching fixes: u hidden in greedy steps, the inspector's auto-scaled axis, step marks that cannot pass for
text, the speed-up without the prefill step and labelled with its baseline, a sampled race's note."""

from __future__ import annotations

import pytest

from pass_core.decoding.events import DraftRecord, StepEvent, TokenRecord
from pass_core.decoding.inspection import PositionInspection, TopN
from pass_core.decoding.metrics import summarize
from pass_core.teaching.race import decode_rate, decode_speedup
from playground import race_text
from playground.race_charts import STEP_MARK_CSS, STEP_MARK_CSS_SELECTOR
from playground.race_view import PAGE_CSS
from playground.teaching import RULE_GREEDY, inspector_figure, inspector_markdown


def _step(margin: float | None, probs=(0.6, 0.4)) -> StepEvent:
    """A PaSS step with one rejected draft; ``margin`` set = a greedy run's step (the loop records it only then)."""
    top = TopN((1, 2), probs)
    return StepEvent("pass", 2, (TokenRecord(1, "a", "exact", margin), TokenRecord(9, "z", "rejected"),
                                 TokenRecord(3, "c", "resampled", margin)),
                     drafts=(DraftRecord(1, 9, "z", 1.0, 0.0, 0.4242, "rejected"),
                             DraftRecord(2, 8, "y", 1.0, 0.0, 0.7373, "not_verified")),
                     num_verified_drafts=2, inspection=(PositionInspection(1, top, top, top),))


def test_inspector_hides_u_in_greedy_steps():
    greedy = inspector_markdown(_step(margin=2.5), "PaSS", lookahead=True)
    assert "| min(1, p/q) | decision |" in greedy and "0.424" not in greedy and "0.737" not in greedy
    assert RULE_GREEDY in greedy and "not used: greedy" in greedy
    sampled = inspector_markdown(_step(margin=None), "PaSS", lookahead=True)
    assert "| min(1, p/q) | u | decision |" in sampled and "0.424" in sampled and "not used" not in sampled
    assert "u |" not in inspector_markdown(_step(margin=None), "PaSS", lookahead=True, greedy=True)


def test_inspector_table_gives_a_tiny_p_as_its_sentence_does():
    """p = 0.000185 against q = 0.567: the table said p(d) 0.000 and min(1, p/q) 0.000 under the sentence's 0.000185;
    a p of exactly 0 stays 0.000."""
    rare = StepEvent("pass", 2, (TokenRecord(1, "a", "exact"), TokenRecord(9, "z", "rejected"),
                                 TokenRecord(3, "c", "resampled")),
                     drafts=(DraftRecord(1, 9, "z", 0.567, 0.000185, 0.9, "rejected"),
                             DraftRecord(2, 8, "y", 0.5, 0.0, 0.2, "rejected")), num_verified_drafts=2)
    text = inspector_markdown(rare, "PaSS", lookahead=True, greedy=False)
    assert "p = 0.000185 against the drafter's q = 0.567" in text
    assert "u = 0.900 ≥ min(1, p/q) = 0.000326: the target" in text  # it said "= 0.000" there too
    assert "| `'z'` | 0.567 | 0.000185 | 0.000326 | 0.900 | rejected |" in text, text
    assert "| `'y'` | 0.500 | 0.000 | 0.000 | 0.200 | rejected |" in text, text


def test_inspector_axis_fits_the_tallest_bar():
    small = inspector_figure(_step(None, probs=(0.12, 0.01)), 2)
    assert small.layout.yaxis.range == pytest.approx((0, 0.15))  # 1.25 x 0.12: room for the mark, no slivers
    assert inspector_figure(_step(None, probs=(0.9, 0.1)), 2).layout.yaxis.range == pytest.approx((0, 1.125))
    # room above 1 for the mark, but no tick there: a probability axis read "1.2" (under the plot's toolbar)
    assert max(inspector_figure(_step(None, probs=(0.9, 0.1)), 2).layout.yaxis.tickvals) == 1.0
    assert small.layout.yaxis.tickvals is None  # Plotly's own ticks below 1
    assert inspector_figure(_step(None, probs=(0.001, 0.0)), 2).layout.yaxis.range == pytest.approx((0, 0.05))


def test_step_marks_are_dotted_tall_and_set_apart():
    assert STEP_MARK_CSS.startswith(STEP_MARK_CSS_SELECTOR) and STEP_MARK_CSS in PAGE_CSS
    for rule in ("display: inline-block", "border-left: 2px dotted", "height: 1.6em", "margin: 0 5px",
                 "user-select: none"):
        assert rule in STEP_MARK_CSS, rule
    assert "solid" not in STEP_MARK_CSS  # a solid thin bar read like "|" in code


def _run(method: str, first_s: float, later_s: float, steps: int, tokens_per_step: int) -> list[StepEvent]:
    return [StepEvent(method, i + 1, tuple(TokenRecord(7, "t", "target" if method == "ar" else "exact")
                                           for _ in range(1 if i == 0 else tokens_per_step)),
                      step_s=first_s if i == 0 else later_s) for i in range(steps)]


def test_speedup_leaves_the_prefill_step_out_and_names_its_baseline():
    # AR: a 1 s prefill, then 10 steps of 0.1 s (10 tok/s); PaSS: a 1 s prefill, then 5 steps of 0.2 s with 4 tokens
    # each (20 tok/s). Whole runs: AR 11 tokens / 2 s, PaSS 21 / 2 s -> 1.91x; after the prefill 2.00x.
    events = {"ar": _run("ar", 1.0, 0.1, 11, 1), "pass": _run("pass", 1.0, 0.2, 6, 4)}
    assert decode_rate(events["ar"]) == pytest.approx(10.0) and decode_rate(events["ar"][:1]) is None
    assert decode_speedup(events["pass"], events["ar"]) == pytest.approx(2.0)
    summaries = {key: summarize(evs, key) for key, evs in events.items()}
    label = race_text.baseline_label("onednn", True)
    assert label == "vs AR on onednn (chosen by measurement: the fastest AR here)"
    text = race_text.metric_texts(summaries, events, label, greedy=True)["speedup"]
    first, second = text.split("\n")
    assert first == "PaSS 2.00×" and second.startswith(label) and "after the first step" in second
    assert race_text.metric_texts(summaries)["speedup"].startswith("PaSS 1.91×")  # whole runs, no events given
    assert race_text.baseline_label("fp32", False) == "vs AR on fp32"


def test_a_sampled_race_says_its_texts_differ():
    events = {"ar": _run("ar", 1.0, 0.1, 3, 1), "pass": _run("pass", 1.0, 0.2, 3, 2)}
    summaries = {key: summarize(evs, key) for key, evs in events.items()}
    sampled = race_text.metric_texts(summaries, events, "vs AR on fp32", greedy=False)["speedup"]
    assert race_text.SAMPLED_NOTE in sampled and "rates on different texts" in sampled
    assert race_text.SAMPLED_NOTE not in race_text.metric_texts(summaries, events, "vs AR on fp32")["speedup"]


#: The exact law of the lab's default prompt ("Once upon a time", 3 tokens, temperature 1, top-k 2) on the embedded
#: model, and the broken rule's shares in 24 seeded runs (every outcome outside the law: TV 1.0), both measured
#: with pass_core.teaching.lab; the inputs of the power check below.
LAW = {(57, 5248, 1535): 0.307, (57, 5248, 18948): 0.3113, (57, 6737, 325): 0.0265, (57, 6737, 2606): 0.0095,
       (6403, 1980, 253): 0.34, (6403, 1980, 260): 0.0002, (6403, 15054, 253): 0.0054, (6403, 15054, 330): 0.0001}
BROKEN_SHARES = {(57, 30, 52): 2 / 24, (57, 198, 2): 3 / 24, (6403, 198, 198): 5 / 24, (57, 198, 198): 12 / 24,
                 (6403, 30, 330): 1 / 24, (6403, 198, 2): 1 / 24}


def test_lab_minimum_n_has_the_power_to_catch_a_subtler_broken_rule():
    from pass_core.teaching.lab import detection_power, half_as_wrong, total_variation, tv_bound
    from playground.race_inputs import LAB_MIN_RUNS

    half = half_as_wrong(LAW, BROKEN_SHARES)
    assert total_variation(LAW, half) == pytest.approx(total_variation(LAW, BROKEN_SHARES) / 2)
    n = LAB_MIN_RUNS
    assert detection_power(LAW, BROKEN_SHARES, n, tv_bound(LAW, n)) == 1.0
    assert detection_power(LAW, half, n, tv_bound(LAW, n)) >= 0.9  # 0.92 measured at N = 30
    assert detection_power(LAW, half, 10, tv_bound(LAW, 10)) < 0.5  # the old minimum: 0.22, its bound 0.663
    assert detection_power(LAW, LAW, n, tv_bound(LAW, n)) <= 0.01  # an exact sampler passes


def test_lab_table_states_the_power_and_why_lookahead_methods_agree():
    from pass_core.teaching.lab import BROKEN, LabResult, total_variation, tv_bound
    from playground.lab_view import lab_markdown

    shares = {(57, 5248, 1535): 0.3, (57, 5248, 18948): 0.3, (6403, 1980, 253): 0.4}
    empirical = {"ar": {(57, 5248, 1535): 0.4, (6403, 1980, 253): 0.6}, "pass": shares, "fixed-token": dict(shares),
                 BROKEN: BROKEN_SHARES}
    result = LabResult(LAW, empirical, {k: total_variation(LAW, v) for k, v in empirical.items()}, tv_bound(LAW, 30),
                       30, 3, drafts={"ar": (0, 0), "pass": (0, 31), "fixed-token": (0, 30), BROKEN: (60, 60)})
    text = lab_markdown(result, {"ar": "AR", "pass": "PaSS", "fixed-token": "fixed-token"})
    assert "Power at N = 30: a rule as wrong as the broken one was here (TV 1.00) fails the check in 100%" in text
    assert "one half as wrong (TV 0.50) in 9" in text  # 90-99 %: a simulated share
    assert "AR's row is such a sample too: its distance is noise alone" in text  # AR 0.2 from the law here (helper 84)
    assert "PaSS and fixed-token drew the same outcome for every seed: none of their 61 judged drafts" in text
    three = LabResult(LAW, {**empirical, "pass-lora": dict(shares)}, result.tv, result.bound, 30, 3,
                      drafts={"pass": (0, 31), "fixed-token": (0, 30), "pass-lora": (0, 30)})
    labels = {"pass": "PaSS", "fixed-token": "PaSS, fixed-token baseline", "pass-lora": "PaSS + look-ahead adapters"}
    assert "PaSS, fixed-token and PaSS+adapters drew the same outcome" in lab_markdown(three, labels)
    assert "AR and" not in text
    accepted = LabResult(LAW, empirical, result.tv, result.bound, 30, 3,
                         drafts={"pass": (5, 31), "fixed-token": (0, 30)})
    assert "none of their" not in lab_markdown(accepted, {}) and "same accepted drafts" in lab_markdown(accepted, {})


def test_lab_table_says_what_parallelspecs_row_measures():
    """The table gave ParallelSpec (a separate drafter model) a TV beside PaSS's with no word on what it is compared
    with: one sentence now says every row compares with the target's exact law, not the drafter's, with the drafts
    speculative sampling kept in this lab (from ``LabResult.drafts``); with the draft model too, both are named;
    without either, no sentence."""
    from pass_core.teaching.lab import BROKEN, LabResult, total_variation, tv_bound
    from playground.lab_view import lab_markdown

    shares = {(57, 5248, 1535): 0.4, (6403, 1980, 253): 0.6}
    empirical = {"pass": shares, "parallelspec": {(57, 5248, 18948): 0.4, (6403, 1980, 253): 0.6},
                 BROKEN: BROKEN_SHARES}
    result = LabResult(LAW, empirical, {k: total_variation(LAW, v) for k, v in empirical.items()}, tv_bound(LAW, 30),
                       30, 3, drafts={"pass": (0, 30), "parallelspec": (17, 22), BROKEN: (60, 60)})
    text = " ".join(lab_markdown(result, {"pass": "PaSS", "parallelspec": "ParallelSpec"}).split())
    assert "ParallelSpec drafts with a model of its own, yet every row compares the outputs with the target's exact " \
           "law" in text and "(drafts kept here: ParallelSpec 17 of 22)." in text, text
    without = LabResult(LAW, {"pass": shares}, {"pass": result.tv["pass"]}, result.bound, 30, 3)
    assert "model of its own" not in lab_markdown(without, {"pass": "PaSS"})
    both = LabResult(LAW, {**empirical, "draft-model": shares}, {**result.tv, "draft-model": result.tv["pass"]},
                     result.bound, 30, 3, drafts={**result.drafts, "draft-model": (9, 40)})
    assert "ParallelSpec and draft model draft with a model of their own" in lab_markdown(both, {}) and \
        "(drafts kept here: ParallelSpec 17 of 22, draft model 9 of 40)." in lab_markdown(both, {})


def test_an_emptied_lab_n_box_is_called_empty_and_the_lesson_choice_has_a_name():
    """An emptied N box said "got None", which the visitor never typed; the lessons' radio group had no label, so
    screen readers read gradio's placeholder "Radio"."""
    import gradio as gr

    from playground.race_inputs import LAB_MIN_RUNS, MAX_RUNS, lab_runs_problem
    from playground.lessons import LESSONS
    from playground.teaching_panels import lesson_strip

    for empty in (None, ""):
        assert lab_runs_problem(empty) == f"runs N is empty: type a whole number between {LAB_MIN_RUNS} and {MAX_RUNS}."
    assert "got 5" in lab_runs_problem(5) and lab_runs_problem(LAB_MIN_RUNS) is None
    assert lab_runs_problem(-1e308).endswith(", got -1.00e+308.")  # a 309-digit number, once (an API-user helper)
    with gr.Blocks() as demo:
        lesson_strip()
    radios = [b for b in demo.blocks.values() if isinstance(b, gr.Radio) and b.elem_id == "lesson-choice"]
    assert [r.label for r in radios] == ["lessons"] and not radios[0].show_label
    strip = [b for b in demo.blocks.values() if isinstance(b, gr.Accordion) and b.elem_id == "lessons"]
    assert [a.label for a in strip] == [f"Start here: {len(radios[0].choices)} short lessons"]  # it said "six" for 7
    assert len(radios[0].choices) == len(LESSONS)


def test_a_token_of_part_of_a_character_says_why_it_shows_the_replacement_sign():
    """An emoji prompt's panes showed struck-through "�" drafts with no word on what they are (a teacher-persona
    helper): selecting a token whose text holds "�" says it holds part of a character's bytes; other tokens do not."""
    from playground.race_panes import pane_entries
    from playground.teaching import PARTIAL_CHARACTER, inspect_selection

    step = _step(margin=2.5)
    events = [StepEvent("pass", 1, (TokenRecord(5, "\ufffd", "exact"),)), step]
    entries = pane_entries(events)
    texts = {entry[0]: inspect_selection(events, "pass", i)[0] for i, entry in enumerate(entries) if entry[2]}
    assert PARTIAL_CHARACTER in texts["\ufffd"] and texts["\ufffd"].startswith("Selected: `'\ufffd'` (token id 5")
    assert not any(PARTIAL_CHARACTER in text for key, text in texts.items() if key != "\ufffd")
