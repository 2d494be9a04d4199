"""Teaching panels as Gradio blocks: the "Start here" lesson strip (``playground.lessons``) and the "What if…"
accordion (sliders for alpha, k and the drafter's cost, a cost-curve preset, and the chart and numbers of
``playground.whatif``). Layout and wiring only; the values come from ``lessons`` and ``whatif``.

``build_demo`` (``playground/page.py``) calls each builder where its panel goes; each returns ``wire(state,
inputs, run)``, which the page calls (``wire_panels``) once the race's ``gr.State``, input list and Run button
exist (the what-if panel reads this run's events and curve from the state; a lesson fills in the race's inputs, and
once the race, or for the lab's lesson the lab, has finished shows what to look at with its numbers:
``lessons.lesson_markdown``, ``lessons.lab_lesson_markdown``).
"""

from __future__ import annotations

import functools

import gradio as gr

from playground.lessons import (LESSON_HINT, LESSONS, find_lesson, lab_lesson_markdown, lesson_changes, lesson_markdown,
                               lesson_put_aside, lesson_put_aside_by_replay, lesson_values)
from playground.plot_boxes import shown_plot
from playground.race_checks import race_problems
from playground.race_view import INSTANT
from playground.whatif import K_MAX, MACHINE, PRESETS, TYPED_EXAMPLE, whatif_view

WHATIF_INTRO = ("Predicted tokens per step and speed-up over AR from three numbers: how often a draft is accepted "
                "(α), how many drafts a step verifies (k), and what a pass over w tokens costs, c(w), in AR steps. "
                "On a small model on a CPU a wide pass costs much more than a narrow one; on a GPU it costs about "
                "the same, which is why speculation pays there. After a race, this run's methods appear as "
                "diamonds (their own α and k).")


#: The strip's text on a model where no lesson can race (every lesson races a method that needs a trained file).
NO_LESSONS = ("*The lessons race methods whose trained files are for the embedded model; they are not offered for "
              "this one.*")


def lesson_strip(offered=None, slow_motion: gr.Slider | None = None):
    """Lay out the "Start here" strip (open) here: one radio button per lesson whose methods are all ``offered``
    (None: every lesson) and the chosen lesson's question. Returns ``wire(state, inputs, run)``: choosing a lesson
    then fills the race's ``inputs`` (``Lesson.values``'s order) and the ``slow_motion`` slider
    (``Lesson.slow_motion_s``), and shows its question and what to look at after the run."""
    titles = [lesson.title for lesson in LESSONS if offered is None or set(lesson.methods) <= set(offered)]
    # counted, not written out: it said "six short lessons" above seven
    label = f"Start here: {len(titles)} short lesson{'s' * (len(titles) != 1)}" if titles else "Start here: lessons"
    with gr.Accordion(label, open=True, elem_id="lessons"):
        choice = gr.Radio(titles, value=None, label="lessons", show_label=False, elem_id="lesson-choice",
                          visible=bool(titles))  # a label, though hidden: screen readers read gradio's "Radio" else
        text = gr.Markdown(LESSON_HINT if titles else NO_LESSONS, elem_id="lesson-text")
    raced = gr.State(None)  # the lesson the tab's race was started for (None: a race of its own)

    def choose(title):
        values = lesson_values(title)
        outputs = (lesson_markdown(title), *(values if values is not None else [gr.skip()] * len(LESSONS[0].values())))
        if slow_motion is None:
            return outputs
        lesson = find_lesson(title)
        return (*outputs, gr.skip() if lesson is None or lesson.lab else lesson.slow_motion_s)

    def after_race(title, race_state, raced_for):
        if not title or not race_state or not race_state.get("finished") or race_state.get("position") is not None:
            return gr.skip()  # no lesson chosen, or the race was stopped / is paused: keep the question
        if title != raced_for:  # a lesson chosen while another race ran: its question waits for its own race
            return gr.skip()
        return lesson_markdown(title, race_state["events"], race_state["show"].get("baseline", ""),
                               race_state["greedy"])

    def after_lab(title, table):
        answer = lab_lesson_markdown(title, table)
        return gr.skip() if answer is None else answer

    def aside_by_replay(title):
        aside = lesson_put_aside_by_replay(title)
        return (gr.skip(), gr.skip()) if aside is None else (None, aside)

    def wire(state: gr.State, inputs: list, run: gr.Button, refused=None):
        refused = refused or (lambda request, values: any(race_problems(*values)))  # the page passes its own

        def question(request: gr.Request = None, title=None, *values):  # the request first, at its place for gradio
            values, delay = (values[:-1], values[-1]) if slow_motion is not None else (values, 0.0)
            # a Run that starts nothing (refused, the prompt beyond the model's context included, or pressed while
            # the tab's race runs): the strip stays (it put the lesson aside, and left the running race unanswered)
            if refused(request, values):
                return gr.skip(), gr.skip(), gr.skip()
            if not title:  # no lesson: the strip's hint again (a put-aside note spoke of an earlier race, and of
                return gr.skip(), (LESSON_HINT if titles else gr.skip()), None  # a slow motion since set to 0)
            changed = lesson_changes(title, values)
            if changed:  # the race is not the lesson's: the lesson is put aside, not answered with its numbers
                return None, lesson_put_aside(title, changed, delay), None
            return gr.skip(), lesson_markdown(title), title

        # always_last: a press while one is pending waits for it, and only the last runs then (arrow keys held
        # down chose lesson 6 while its replies, out of order, left lesson 5's prompt and question: helper 74)
        choice.input(choose, choice, [text, *inputs, *([slow_motion] if slow_motion is not None else [])],
                     queue=False, api_visibility="private", show_progress="hidden", trigger_mode="always_last")
        # a new race: the question again (the strip showed the race before's numbers while the next one ran or was
        # paused); wired before the race's own listener, so it answers before the race starts (see ``wire_panels``)
        run.click(question, [choice, *inputs, *([slow_motion] if slow_motion is not None else [])],
                  [choice, text, raced],
                  queue=False, api_visibility="private", show_progress="hidden")

        def on_race(race, lab=None, lab_table=None, replay=None) -> None:  # what to look at, with the numbers of ...
            race.success(after_race, [choice, state, raced], text, queue=False, api_visibility="private",
                         show_progress="hidden")  # ... the race that has finished
            if lab is not None:  # ... or of the lab, for the lab's lesson
                lab.success(after_lab, [choice, lab_table], text, queue=False, api_visibility="private",
                            show_progress="hidden")
            if replay is not None:  # a replay on show is not the lesson's race: the lesson is put aside
                replay.success(aside_by_replay, choice, [choice, text], queue=False, api_visibility="private",
                               show_progress="hidden")
        return on_race

    return wire


def whatif_accordion(machine_curve=None):
    """Lay out the accordion (closed) here; returns ``wire(state, inputs, run)``, to call once the race's state
    exists, which redraws the panel on opening it and on every control's change (``inputs``, ``run`` unused), and
    returns ``then(race, lab, lab_table)``: while the panel is open, a finished race redraws it (it kept the
    numbers from before the race, the race's diamonds missing). ``machine_curve``: () -> this machine's pass-cost
    curve measured so far (dict or None), for "this machine" before a race and in a replay."""
    with gr.Accordion("What if…", open=False, elem_id="whatif") as accordion:
        gr.Markdown(WHATIF_INTRO)
        with gr.Row():
            alpha = gr.Slider(0, 1, value=0.6, step=0.01, label="draft acceptance α", elem_id="whatif-alpha",
                              min_width=220)
            k = gr.Slider(1, K_MAX, value=3, step=1, label="drafts per step k", elem_id="whatif-k", min_width=220)
            drafter_cost = gr.Slider(0, 1, value=0.05, step=0.01, label="drafter cost c_d (AR steps; chain only)",
                                     elem_id="whatif-drafter", min_width=220,
                                     info="ParallelSpec's one-layer drafter: a few hundredths")
        with gr.Row():
            preset = gr.Radio(list(PRESETS), value=MACHINE, label="cost curve c(w)", elem_id="whatif-preset",
                              min_width=220)
            typed = gr.Textbox(TYPED_EXAMPLE, label="c(w) typed in: c(1), c(2), …", elem_id="whatif-typed",
                               info="used with 'typed in'; divided by c(1)", min_width=220)
        # hidden until there is a chart: an error or a refusal left an empty plot box over its message
        plot = gr.Plot(label="predicted tokens per step and speed-up", elem_id="whatif-plot", visible=False)
        text = gr.Markdown(elem_id="whatif-text")
    opened = gr.State(False)
    accordion.expand(lambda: True, None, opened, **INSTANT)
    accordion.collapse(lambda: False, None, opened, **INSTANT)

    def wire(state: gr.State, inputs: list, run: gr.Button, refused=None):
        view = whatif_view  # read when the page is built (a test slows it down)

        def with_machine(alpha, k, preset, typed, drafter_cost, state):
            return view(alpha, k, preset, typed, drafter_cost, state, machine_curve() if machine_curve else None)

        def if_open(alpha, k, preset, typed, drafter_cost, state, is_open):  # a closed panel draws nothing
            return with_machine(alpha, k, preset, typed, drafter_cost, state) if is_open else (None, gr.skip())

        # named as the view: the page's checks find the listeners as "whatif_view" (not ``functools.wraps``: gradio
        # would read the view's signature, one parameter more, and pass an argument too many)
        with_machine.__name__ = if_open.__name__ = view.__name__

        controls = [alpha, k, preset, typed, drafter_cost, state]
        # queued, one at a time, in the order of the triggers: unqueued, opening the panel and choosing a curve at
        # once ran side by side, and the slower answer (the one for the curve no longer chosen) could land last
        options = dict(concurrency_limit=1, trigger_mode="always_last", api_visibility="private",
                       show_progress="hidden", preprocess=False)  # whatif_view names a bad value (gradio's check
        # answered "Could not preprocess")
        # the sliders' input, not release: a number typed into a slider's box (then Enter) or arrow keys on the
        # slider fire no release; a drag's many inputs are coalesced by trigger_mode="always_last"
        gr.on([accordion.expand, alpha.input, k.input, drafter_cost.input, preset.change, typed.submit,
               typed.blur],  # blur: typed text then Tab or a click elsewhere kept the old curve's numbers
              plot_shown(with_machine), controls, [plot, text], **options)

        def then(race, lab=None, lab_table=None, replay=None) -> None:  # the race on show: raced, or replayed
            for shown in filter(None, (race, replay)):
                shown.success(plot_shown(if_open), [*controls, opened], [plot, text], **options)
        return then

    return wire


def plot_shown(view):
    """``view`` (``whatif.whatif_view``: a figure or None, and its text) for the page: the plot shown with its figure,
    hidden when there is none (bad input, no curve yet), so the message does not sit under an empty plot box."""
    @functools.wraps(view)  # keeps its name: the page's checks find the listener as "whatif_view"
    def shown(*args):
        fig, text = view(*args)
        if text == gr.skip():  # nothing to redraw (the panel is closed)
            return gr.skip(), text
        return shown_plot(fig), text
    return shown


def wire_panels(state: gr.State, inputs: list, *wires, run: gr.Button, refused=None):
    """Call each panel's ``wire(state, inputs, run)`` (``lesson_strip``, ``whatif_accordion``) once the race's state,
    its input list and the Run button exist, **before** the race's own listener is added to ``run``: the browser runs
    a click's listeners one after another in the order they were added, each to its end (a streamed race included),
    so a listener added after the race's answers only once the race has finished. (The lesson strip's question,
    added after, came back over the race's numbers.) Returns ``on_race(race, lab, lab_table)``, to call with the
    race's event (and the lab's, with its table, and the replay's): it wires what follows a finished race, lab or
    replay. ``refused(request, values)``: True for a Run that starts nothing (``page``'s check)."""
    follow = [wire(state, inputs, run, refused) for wire in wires]

    def on_race(race, lab=None, lab_table=None, replay=None) -> None:
        for then in follow:
            if then is not None:
                then(race, lab, lab_table, replay)
    return on_race
