"""The "Start here" lessons: seven presets for a class, each a prompt, the methods to race and their settings, one
question to answer before pressing Run, and what to look at after it, with the metrics of the finished race that
answer it (the same strings as the metric boxes) and the finish view. Pure data and markdown; no Gradio
(``teaching_panels.lesson_strip`` builds the strip).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

from pass_core.decoding.events import StepEvent
from pass_core.decoding.metrics import summarize
from pass_core.decoding.settings import SETTING_RANGES
from pass_core.registry import METHODS
from pass_core.teaching.lab import run_lab
from playground.race_inputs import NUMERIC_INPUTS
from playground.race_text import finish_line, metric_texts
from playground.race_view import METRIC_LABELS
from playground.style import and_join

_DEFAULTS = {name: default for name, (_, _, default) in SETTING_RANGES.items()}
#: The token-tree setting's value for a chain (no tree): ``tree_race.TREE_CHOICES``'s first, its default.
CHAIN = 0


@dataclass(frozen=True)
class Lesson:
    """One preset and its questions.

    Attributes:
        title: the lesson's name in the strip.
        prompt: the race's prompt.
        methods: keys of ``pass_core.registry.METHODS`` to race.
        settings: the numeric settings that differ from ``SETTING_RANGES``'s defaults (``num_lookahead``,
            ``temperature``, ``top_k``, ``top_p``, ``max_new_tokens``, ``seed``).
        predict: the question to answer before Run.
        after: what to look at once the race has finished (markdown).
        numbers: the ``METRIC_LABELS`` keys whose values, from the finished race, are quoted under ``after``.
        fused, chat_template, auto_drafts: the race's checkboxes.
        lab: the lesson is answered by the Losslessness lab, not by a race: ``after`` appears once the lab has run,
            with its verdicts.
        slow_motion_s: the slow-motion delay per step (seconds of wall time) the lesson sets; 0 (full speed) for
            all but the lesson that asks to pause at a token (a delay left on from it made the next lessons' races
            take minutes).
        ask: the question's heading ("Predict, before Run" for a guess; a lesson answered during its race says so).
        tree_nodes: the token-tree setting (``tree_race.TREE_CHOICES``' value): ``CHAIN`` but for the lesson on
            token trees, which adds an N-node tree entry beside each ticked tree-capable method.
    """

    title: str
    prompt: str
    methods: tuple[str, ...]
    predict: str
    after: str
    settings: dict = field(default_factory=dict)
    numbers: tuple[str, ...] = ("tokens_per_s", "speedup")
    fused: bool = False
    chat_template: bool = True
    auto_drafts: bool = False
    lab: bool = False
    slow_motion_s: float = 0.0
    ask: str = "Predict, before Run"
    tree_nodes: int = CHAIN

    def values(self) -> list:
        """The race's inputs in ``build_demo``'s order: prompt, the six numeric settings, show rejected drafts,
        fused, methods, chat template, cost-aware draft lengths, token tree (``CHAIN`` but for the tree lesson: a
        tree left on from an earlier race would add tree entries the lesson does not talk about)."""
        numbers = {**_DEFAULTS, **self.settings}
        return [self.prompt, *(numbers[name] for name in ("num_lookahead", "temperature", "top_k", "top_p",
                                                            "max_new_tokens", "seed")),
                True, self.fused, list(self.methods), self.chat_template, self.auto_drafts, self.tree_nodes]

    def preset_line(self) -> str:
        """What picking the lesson set, in one italic line: the methods it races (the panes of the others are
        hidden) and every setting it changes from the page's defaults (``values`` sets the others to them), e.g.
        "*Set for you: AR and PaSS; temperature 1, top-k 20; slow motion 0.5 s per step; every other setting at its
        default.*" (the tree lesson: "...; token tree 8 nodes; ..."). A lab lesson sets no race: the line says what
        the lab runs (``run_lab``'s own settings; it said "Set for you: AR and PaSS; ... max new tokens 24", which the
        lab never reads)."""
        if self.lab:
            lab = {name: p.default for name, p in inspect.signature(run_lab).parameters.items()}
            return (f"*The lab sets itself: every method and the broken rule continue the lab's prompt by "
                    f"{lab['depth']} tokens, N times each, at temperature {lab['temperature']:g}, top-k "
                    f"{lab['top_k']}, {lab['num_lookahead']} drafts per step; the race's settings stay as they are.*")
        names = [METHODS[key].short_name for key in self.methods if key in METHODS]
        methods = and_join(names)
        settings = [f"{NUMERIC_INPUTS[name][0]} {value:g}" for name, value in self.settings.items()]
        settings += [label for flag, label in ((self.fused, "fused step on"), (not self.chat_template,
                     "chat template off"), (self.auto_drafts, "cost-aware draft lengths on"),
                     (self.tree_nodes != CHAIN, f"token tree {self.tree_nodes} nodes")) if flag]
        parts = [methods, ", ".join(settings)] + ([f"slow motion {self.slow_motion_s:g} s per step"]
                                                  if self.slow_motion_s else [])
        return f"*Set for you: {'; '.join(filter(None, parts))}; every other setting at its default.*"


LESSONS = (
    Lesson("1 · Who finishes first?", "Write a Python function that checks whether a string is a palindrome.",
           ("ar", "pass", "parallelspec"),
           "Three methods start together. **Which one finishes first, and by how much?** Write your guess down.",
           "Read **tokens/s** and **speed-up** (measured after the first step, against AR on this machine's "
           "backend). Greedy decoding: the **greedy check** says all their texts are identical, so the faster "
           "method did the same work in less time."),
    Lesson("2 · Why was this draft rejected?", "Tell a short story about a lighthouse keeper who finds a message "
           "in a bottle.", ("ar", "pass"),
           "With **slow motion** at 0.5 s per step (set for you), press Run and **Pause at the first struck-through "
           "(rejected) token. Why did verification refuse it?**",
           "Click the struck-through token: the **token inspector** says why: u ≥ min(1, p/q), the target gave it "
           "less probability than the drafter did. Then click the yellow token after it: it was drawn from the "
           "residual norm(max(0, p − q)) (the green bars).",
           # seed 5: PaSS's first rejected draft is the word "The" (seeds 0-4 and 6-11 give a space, a newline or a
           # quote mark, a few pixels wide to click; embedded model, L = 3)
           {"temperature": 1.0, "top_k": 20, "max_new_tokens": 48, "seed": 5},
           ("acceptance_rate",),
           slow_motion_s=0.5, ask="Try it, then answer"),
    Lesson("3 · Sampled vs greedy", "Explain in simple words how a rainbow forms.", ("ar", "pass", "parallelspec"),
           "At temperature 0.8 the three texts will differ. **Is the speculative output still the model's own "
           "output?**",
           "Yes, in law: a draft is kept with probability min(1, p/q), else a token is drawn from the residual, so "
           "every token follows the model's own distribution; the texts differ because the random draws do (the "
           "line above the metric boxes says so). The speed-up compares rates on different texts here: compare "
           "**tokens/s**. The **Losslessness lab** tab tests the law itself (lesson 4).", {"temperature": 0.8, "top_k": 10}, ("tokens_per_s",)),
    Lesson("4 · Which rule breaks the law?", "Once upon a time", ("ar", "pass"),
           "Open the **Losslessness lab** tab and press Run lab. **Which of the methods, if any, lands outside "
           "the bound?**",
           "Every real method stays under the total-variation bound; the broken rule (PaSS accepting every draft) "
           "does not. The table states the check's power at this N: how surely it would catch a subtler broken "
           "rule.", lab=True),
    Lesson("5 · Why is PaSS slower on this CPU?", "List five tips for learning a new language.", ("ar", "pass"),
           "PaSS accepts some drafts per step. **Will it beat AR on this machine?** Decide before Run.",
           "Read **Pass cost on this machine**: a pass over k + 1 tokens costs c(k+1) AR steps, and PaSS pays two "
           "such passes per step. Then open **What if…** and switch the cost curve to the H200: the same α wins "
           "on a GPU, where a wide pass costs about as much as a narrow one.", {},
           ("mean_accepted_tokens", "tokens_per_forward_pass", "tokens_per_s", "speedup")),
    Lesson("6 · Copy task: which drafter copies?", "Repeat this sentence exactly: Maria packed three red apples, a "
           "blue notebook, and her grandmother's old silver watch before she left for the station at seven.",
           ("ar", "pass", "parallelspec", "prompt-lookup"),
           "The answer is in the prompt. **Which drafter will have its drafts accepted most often?**",
           "Compare the **draft acceptance rate** (α on the judged drafts) and **tokens per forward pass**: prompt "
           "lookup proposes the continuation of the text it has already seen, so on a copy task its drafts are "
           "right far more often than the trained drafters'.", {}, ("acceptance_rate", "tokens_per_forward_pass")),
    Lesson("7 · Chain or tree?", "Write a Python function that adds two numbers and explain it.",
           ("ar", "parallelspec"),
           "ParallelSpec races twice: with its chain of k drafts, and with a **token tree** of 8 nodes (set for "
           "you), which tries other candidates where the first one is refused. **Will the tree accept more tokens "
           "per step? Will it finish sooner?**",
           "Compare **mean accepted tokens per verification step**: a tree tries several siblings at each depth, so "
           "it usually keeps more per step, and its bars in **acceptance by position** (the depth, for a tree) "
           "usually stand higher; its **draft acceptance rate** counts every node tried, so it is lower. Then "
           "**tokens/s**: a tree step verifies up to N + 1 tokens in one pass, wider than the chain's k + 1, and on "
           "a CPU a wider pass costs more (**Pass cost on this machine**), which can eat the gain. Click a token of "
           "the tree pane to see its step's tree under **Token tree of this step**.", {},
           ("mean_accepted_tokens", "acceptance_rate", "tokens_per_s"), tree_nodes=8),
)

#: The strip's text before a lesson is chosen.
LESSON_HINT = ("*Pick a lesson: it fills in the prompt, the methods and the settings. Answer its question before "
               "you press Run, then check.*")


#: Under the question until the race has finished.
AFTER_PENDING = "*After the race, what to look at appears here with this run's own numbers.*"
#: Under a lab lesson's question until the lab has run.
AFTER_LAB_PENDING = "*After Run lab, what to look at appears here with the lab's own verdicts.*"


def find_lesson(title: str | None) -> Lesson | None:
    """The lesson titled ``title``; None for no or an unknown title."""
    return next((one for one in LESSONS if one.title == title), None)


def lesson_markdown(title: str | None, events: dict[str, list[StepEvent]] | None = None, baseline: str = "",
                    greedy: bool = True) -> str:
    """The chosen lesson's question and, once its race has finished, what to look at with that race's numbers;
    ``LESSON_HINT`` for no (or an unknown) lesson.

    Args:
        title: the lesson's title (the strip's choice).
        events: the finished race's events (method key -> its ``StepEvent`` list, race order); None before a
            race: the question and ``AFTER_PENDING``.
        baseline / greedy: as ``race_text.metric_texts`` (the speed-up's baseline line; sampled or not).

    A lab lesson (``Lesson.lab``) shows its question whatever the race: ``lab_lesson_markdown`` answers it.
    """
    lesson = find_lesson(title)
    if lesson is None:
        return LESSON_HINT
    question = f"**{lesson.ask}:** {lesson.predict}  \n{lesson.preset_line()}"
    if lesson.lab:
        return f"{question}\n\n{AFTER_LAB_PENDING}"
    if not events:
        return f"{question}\n\n{AFTER_PENDING}"
    summaries = {key: (s if s.steps else None) for key, s in ((k, summarize(e, k)) for k, e in events.items())}
    texts = metric_texts(summaries, events, baseline, greedy)
    numbers = [f"{METRIC_LABELS[key]}: {texts[key].splitlines()[0]}" for key in lesson.numbers]
    finish = finish_line(summaries, events)
    return "\n\n".join([question, f"**After the run:** {lesson.after}",
                          "**This run:** " + "  \n".join(numbers), *([finish] if finish else [])])


def lesson_values(title: str | None) -> list | None:
    """``Lesson.values`` of the lesson titled ``title``; None for an unknown title or a lab lesson (it sets no
    race)."""
    lesson = find_lesson(title)
    return None if lesson is None or lesson.lab else lesson.values()


def lesson_changes(title: str | None, values: list) -> list[str]:
    """What a race about to run changed from the lesson titled ``title``: the names of the inputs (in
    ``Lesson.values``' order, ``values`` as the page sends them) that differ from the lesson's, e.g. ["prompt",
    "temperature"]; [] when it runs as the lesson set it, or for no or an unknown title, or a lab lesson (no race
    answers it). The rejected-drafts toggle, max new tokens and the seed are not compared: a longer or shorter race,
    or other draws, still answer the lesson's question (a class with little time shortens its races). A lesson
    quoted a later race's numbers as its answer (a race of other methods and settings, found by a teacher-persona
    helper)."""
    lesson = find_lesson(title)
    if lesson is None or lesson.lab:
        return []
    names = ["prompt", *(NUMERIC_INPUTS[name][0] for name in ("num_lookahead", "temperature", "top_k", "top_p")),
             None, None, None, "fused step", "methods", "chat template", "cost-aware draft lengths", "token tree"]
    changed = []
    for name, ours, sent in zip(names, lesson.values(), values):
        if name == "methods":
            same = isinstance(sent, (list, tuple)) and sorted(ours) == sorted(map(str, sent))
        elif isinstance(ours, (bool, str)):
            same = ours == sent
        else:  # a number box sends a float or an int (a tree choice: "8" through the API)
            try:
                same = float(ours) == float(sent)
            except (TypeError, ValueError):
                same = False
        if name and not same:
            changed.append(name)
    return changed


def lesson_put_aside(title: str, changed: list[str], slow_motion_s: float = 0.0) -> str:
    """The strip's text once a race changed ``changed`` (``lesson_changes``) from the lesson titled ``title``; a slow
    motion still on (``slow_motion_s`` > 0, e.g. lesson 2's 0.5 s) is named, for it slows this race and the next."""
    what = and_join(changed)
    slow = (f" Slow motion is still {slow_motion_s:g} s per step (set it to 0 for full speed)."
            if isinstance(slow_motion_s, (int, float)) and slow_motion_s > 0 else "")
    return (f"*This race changed the {what} from lesson “{title}”, so it is not that lesson's race and the lesson is "
            f"put aside. Pick the lesson again to set its race up.{slow}*")


def lesson_put_aside_by_replay(title: str | None) -> str | None:
    """The strip's text once a trace is replayed while the race lesson titled ``title`` is chosen: the race on
    show is the trace's, not the lesson's (the strip kept the lesson's last race's numbers beside the replay's).
    None for no lesson, or the lab's lesson (answered by the lab, whatever is on show)."""
    lesson = find_lesson(title)
    if lesson is None or lesson.lab:
        return None
    return (f"*A replayed trace is on show, not the race of lesson “{title}”, so the lesson is put aside. Pick the "
            "lesson again to set its race up.*")


def lab_lesson_markdown(title: str | None, table: str) -> str | None:
    """A lab lesson's question and what to look at, with the verdicts of the lab's table (``lab_view.lab_markdown``:
    one row "| name | TV | bound | ✓ pass |" or "... | ✗ fail |" per method and the broken rule); None when
    ``title`` is not a lab lesson or the table has no verdicts."""
    lesson = find_lesson(title)
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in (table or "").splitlines()
            if line.startswith("| ") and line.rstrip().endswith(("✓ pass |", "✗ fail |"))]
    if lesson is None or not lesson.lab or not rows:
        return None
    inside = [row[0] for row in rows if row[-1] == "✓ pass"]
    outside = [row[0] for row in rows if row[-1] == "✗ fail"]
    verdicts = (f"under the bound: {'; '.join(inside) or 'none'}  \n"  # "; ": a label may hold a comma
                f"outside it: {'; '.join(outside) or 'none'}")
    return "\n\n".join([f"**{lesson.ask}:** {lesson.predict}", f"**After the lab:** {lesson.after}",
                          f"**This lab:** {verdicts}"])
