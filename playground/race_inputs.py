"""The race form's inputs as plain values: labels, what is wrong with a value given, the GPU time a race
may ask ZeroGPU for, and messages without server paths.

Pure (no Gradio, no model): the app turns each problem into a ``gr.validate`` or a ``gr.Error``.
Ranges come from ``SETTING_RANGES`` and messages from ``DecodeSettings`` validation, so a message
always names the setting, its allowed range and the value given.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from pass_core.teaching.lab import MAX_RUNS
from pass_core.registry import METHODS, offered_methods
from pass_core.decoding.settings import GREEDY_BELOW, DecodeSettings, given
from pass_core.decoding.text import check_prompt
from playground.style import and_join

#: The example prompts offered under Run: free text first, then grounded prompts (the answer copies
#: from the prompt: where prompt lookup shines and a trained drafter need not).
EXAMPLES = [
    "Write a Python function that checks whether a string is a palindrome.",
    "Tell a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain in simple words how a rainbow forms.",
    "List five tips for learning a new language.",
    "Explique en quelques phrases pourquoi le ciel est bleu.",
    # a sentence SmolLM2 repeats exactly (27 tokens); it shortened "The quick brown fox ... near the quiet river bank."
    # to the proverb, 11 tokens, leaving lesson 6 a handful of judged drafts
    "Repeat this sentence exactly: Maria packed three red apples, a blue notebook, and her grandmother's old silver "
    "watch before she left for the station at seven.",
    "Summarize this paragraph: The town library now lends tools such as drills, ladders and sewing machines, as well "
    "as board games and telescopes. The program began after a survey showed that many people owned tools they used "
    "only once a year. In its first year the library lent out over four thousand items.",
    "Rewrite this paragraph with the name Maria instead of Anna: Anna woke up early on Saturday and walked to the "
    "market. Anna bought fresh bread and a bag of apples. On the way home, Anna met her old teacher.",
    "Fix the bug in this code and show the corrected code:\n\ndef average(numbers):\n    total = 0\n    for n in "
    "numbers:\n        total += n\n    return total / len(number)",
    "Continue this list with three more items:\n1. Monday: water the plants\n2. Tuesday: take out the recycling\n"
    "3. Wednesday: clean the kitchen",
]

#: The race ticked on a model without trained drafter files (``MethodOffer``): the methods that need none.
OTHER_MODEL_RACE = ("ar", "prompt-lookup", "draft-model")
#: The model the shipped trained files (look-ahead embeddings, adapters, ParallelSpec drafter) were trained for.
SHIPPED_FOR = "SmolLM2-135M-Instruct, the embedded model"


@dataclass(frozen=True)
class MethodOffer:
    """The methods the page offers for one model.

    Attributes:
        keys: the methods offered (checkboxes and panes), in registry order.
        default: the ones ticked when the page opens.
        note: one sentence naming the methods left out and why ("" when none is).
    """

    keys: tuple[str, ...]
    default: tuple[str, ...]
    note: str = ""


#: The methods ticked when the page opens (on the embedded model).
DEFAULT_RACE = ("ar", "pass", "parallelspec")
_DEFAULTS = DecodeSettings()


@dataclass(frozen=True)
class RaceRequest:
    """One race as the page's form (or the ``/race`` API) sends it: raw values, checked by the race handler
    (``race_handlers.race_handler``), which refuses a bad one by name.

    Attributes:
        prompt: the prompt (str).
        num_lookahead, temperature, top_k, top_p, max_new_tokens, seed: ``DecodeSettings``' fields, as sent
            (whole floats such as 3.0 are accepted: ``whole``).
        show_rejected: the "show rejected drafts" toggle at Run.
        fused, chat_template, auto_drafts: ``DecodeSettings``' switches.
        methods: the keys of ``METHODS`` to race (two or more), in any order.
        tree_nodes: nodes of each added token-tree entry (``tree_race.TREE_CHOICES``; 0: no trees).
    """

    prompt: str
    num_lookahead: object = _DEFAULTS.num_lookahead
    temperature: object = _DEFAULTS.temperature
    top_k: object = _DEFAULTS.top_k
    top_p: object = _DEFAULTS.top_p
    max_new_tokens: object = _DEFAULTS.max_new_tokens
    seed: object = _DEFAULTS.seed
    show_rejected: bool = True
    fused: bool = False
    methods: tuple = DEFAULT_RACE
    chat_template: bool = True
    auto_drafts: bool = False
    tree_nodes: object = 0


def method_offer(model_name: str | None, default_race, untrained: bool = False) -> MethodOffer:
    """What the page offers for ``model_name``: every method but those needing a trained file that does not ship
    for this model (``registry.offered_methods``); ``default_race`` ticked, or ``OTHER_MODEL_RACE`` when a method
    of it is left out. ``untrained`` (or no model name: replay only) offers every registered method, the left-out
    ones with their untrained fallbacks."""
    keys, left_out = offered_methods(model_name) if model_name and not untrained else (tuple(METHODS), ())
    default = tuple(key for key in (default_race if set(default_race) <= set(keys) else OTHER_MODEL_RACE)
                    if key in keys)
    if not left_out:
        return MethodOffer(keys, default)
    names = and_join([METHODS[key].short_name for key in left_out])
    return MethodOffer(keys, default, f"{names} are not offered for this model: they need trained files, and the "
                                      f"shipped ones were trained for {SHIPPED_FOR}; to race them here, train one "
                                      "for this model (docs/training.md).")


#: The numeric inputs in the order of the race's arguments: setting -> (label, step, hint shown after the range).
NUMERIC_INPUTS: dict[str, tuple[str, float, str]] = {
    "num_lookahead": ("look-ahead tokens L", 1, "drafts per step: L learned [LA] tokens (PaSS), k drafts from "
                                                "k − 1 [MASK] tokens (ParallelSpec)"),
    "temperature": ("temperature", 0.05, f"0 = greedy, as is any value below {GREEDY_BELOW:g}"),
    "top_k": ("top-k", 1, "0 = off"),
    "top_p": ("top-p", 0.01, "1 = off"),
    "max_new_tokens": ("max new tokens", 1, ""),
    "seed": ("seed", 1, ""),
}

#: ZeroGPU: the most GPU seconds one race asks for (``spaces.GPU(duration=...)``). ZeroGPU checks the
#: requested duration against the visitor's remaining daily quota before it runs. The smallest tier,
#: an unauthenticated visitor, has 2 minutes a day, and 60 s is ZeroGPU's default duration
#: (https://huggingface.co/docs/hub/spaces-zerogpu, "Duration Management" and "Usage Tiers"): at 60 s
#: an anonymous visitor with a full quota can always race, twice a day at the longest setting.
ZEROGPU_MAX_S = 60
GPU_START_MS = 20_000  # ZeroGPU attaching a GPU, CUDA start-up, moving the model there, in ms (with margin)
#: Per new token and racing method, in ms. Measured 15.5-17 ms on an H200 (a SmolLM2-135M-sized Llama in
#: float32, untrained drafters, 266 new tokens, 2-4 methods: spaces/README.md); 50 leaves 3x for a shared
#: GPU slice and the page's updates, which run inside the same GPU call.
GPU_MS_PER_TOKEN = 50


def whole(value):
    """A float holding a whole number as ``int`` (page numbers may arrive as floats); anything else unchanged,
    so that ``DecodeSettings`` refuses 2.5 as "must be a whole number" instead of rounding it."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


#: The fewest runs the page's lab takes: at 30 the bound (0.38 for the default prompt) catches a rule half as wrong
#: as the broken one in 92 % of simulated labs, against 22 % at N = 10, whose bound of 0.66 proved little
#: (``lab_view.lab_power_line`` states the power of every lab run; tests/test_teaching_fixes.py checks these).
LAB_MIN_RUNS = 30


def lab_runs_problem(runs) -> str | None:
    """Why ``runs`` is not a valid N for the page's lab (a whole number, ``LAB_MIN_RUNS``..``MAX_RUNS``), or None."""
    runs = whole(runs)
    if runs is None or runs == "":  # an emptied box: "got None" named nothing the visitor typed
        return f"runs N is empty: type a whole number between {LAB_MIN_RUNS} and {MAX_RUNS}."
    if isinstance(runs, bool) or not isinstance(runs, int) or not LAB_MIN_RUNS <= runs <= MAX_RUNS:
        return f"runs N must be a whole number between {LAB_MIN_RUNS} and {MAX_RUNS}, got {given(runs)}."  # 1.00e+308
    return None


def setting_problem(name: str, value) -> str | None:
    """Why ``value`` is not allowed for the setting ``name`` (a ``SETTING_RANGES`` key), or None when it is.

    The message is ``DecodeSettings``' own: "max new tokens must be between 1 and 1,024, got 0".
    """
    try:
        DecodeSettings(**{name: whole(value)})
    except (TypeError, ValueError) as err:
        return str(err)
    return None


def checkbox_problem(label: str, value) -> str | None:
    """Why ``value`` is not a checkbox's value (true or false), or None: through the API "no" was taken as true
    and None silently dropped the chat template."""
    return None if isinstance(value, bool) else f"{label} must be true or false, got {value!r}."


def chosen_methods(methods) -> list:
    """The method keys given, as a list (a single string counts as one key, None as none)."""
    if methods is None:
        return []
    return [methods] if isinstance(methods, str) else list(methods)


def methods_problem(methods, offer: MethodOffer | None = None) -> str | None:
    """Why ``methods`` cannot race (unknown keys, keys the page's ``offer`` leaves out, fewer than two), or None.
    Unknown and left-out keys are named (an API caller can ask for any key, not only the page's checkboxes)."""
    chosen = chosen_methods(methods)
    unknown = [m for m in chosen if not isinstance(m, str) or m not in METHODS]  # a list in the list: a TypeError
    if unknown:
        return (f"Unknown method(s) {', '.join(repr(m) for m in unknown)} in methods to race: choose two or more "
                f"of {', '.join(METHODS)}.")
    left_out = [m for m in dict.fromkeys(chosen) if m not in offer.keys] if offer is not None else []
    if left_out:
        return (f"Not offered here: {', '.join(repr(m) for m in left_out)}. {offer.note} Choose two or more of "
                f"{', '.join(offer.keys)}.")
    if len(set(chosen)) < 2:
        names = ", ".join(m.short_name for m in METHODS.values())
        twice = f" ({chosen[0]!r} given {len(chosen)} times races once)" if len(chosen) > 1 else ""
        return f"Pick at least two methods to race (any two or more of {names}){twice}."
    return None


def prompt_problem(prompt) -> str | None:
    """Why ``prompt`` cannot be raced before tokenizing it (not text, empty, over ``text.MAX_PROMPT_CHARS``
    characters: ``text.check_prompt``), or None."""
    if isinstance(prompt, str) and not prompt.strip():
        return "The prompt is empty: type a prompt or pick an example."
    try:
        check_prompt(prompt)
    except ValueError as err:
        return str(err)
    return None


def input_problems(prompt, num_lookahead, temperature, top_k, top_p, max_new_tokens, seed, methods,
                   offer: MethodOffer | None = None) -> list:
    """What is wrong with each of the race's inputs, in this order (None where the input is fine); ``offer``: the
    methods the page offers (None: every registered one)."""
    values = dict(num_lookahead=num_lookahead, temperature=temperature, top_k=top_k, top_p=top_p,
                  max_new_tokens=max_new_tokens, seed=seed)
    return [prompt_problem(prompt), *(setting_problem(name, values[name]) for name in NUMERIC_INPUTS),
            methods_problem(methods, offer)]


def gpu_seconds(max_new_tokens: int, num_methods: int) -> int:
    """GPU seconds to ask ZeroGPU for: start-up plus ``GPU_MS_PER_TOKEN`` per new token and racing method
    (at least two methods race), rounded up. Integer milliseconds, so the cap below is exact."""
    return -(-(GPU_START_MS + GPU_MS_PER_TOKEN * max_new_tokens * max(2, num_methods)) // 1000)


def zerogpu_token_cap(num_methods: int) -> int:
    """The largest max new tokens whose ``gpu_seconds`` fits ``ZEROGPU_MAX_S`` for this many racing methods."""
    return (ZEROGPU_MAX_S * 1000 - GPU_START_MS) // (GPU_MS_PER_TOKEN * max(2, num_methods))


def zerogpu_duration(max_new_tokens, methods, extra: int = 0) -> int:
    """``gpu_seconds`` for a race's max new tokens and methods (plus ``extra`` runs: token-tree entries), never
    more than ``ZEROGPU_MAX_S`` (which is also the answer for values that fail validation: the race then stops at
    once)."""
    try:
        return min(ZEROGPU_MAX_S, gpu_seconds(int(max_new_tokens), len(set(chosen_methods(methods))) + extra))
    except (TypeError, ValueError):
        return ZEROGPU_MAX_S


def on_zerogpu(spaces) -> bool:
    """True on ZeroGPU hardware: ``spaces`` (Hugging Face's package; None where absent) has ``GPU`` and the Space
    sets ``SPACES_ZERO_GPU`` (true there only; the package reads it the same way). A CPU Space installs the package
    too, whose ``GPU`` then does nothing: its races were capped and its live step-through turned off as if on
    ZeroGPU. This repository's own ``spaces/`` folder, seen as a namespace package, has no ``GPU``."""
    return hasattr(spaces, "GPU") and os.environ.get("SPACES_ZERO_GPU", "").strip().lower() in ("1", "t", "true")


def cap_for_zerogpu(max_new_tokens, methods, extra: int = 0) -> tuple:
    """(max new tokens that fit one ZeroGPU call, the markdown note saying so; "" when nothing was capped).
    ``extra``: runs beside the methods (token-tree entries, ``tree_race.tree_count``).

    Values that fail validation come back unchanged, for the race to refuse by name.
    """
    if setting_problem("max_new_tokens", max_new_tokens) or methods_problem(methods):
        return max_new_tokens, ""
    max_new_tokens, num_methods = whole(max_new_tokens), len(set(chosen_methods(methods))) + extra
    cap = zerogpu_token_cap(num_methods)
    if max_new_tokens <= cap:
        return max_new_tokens, ""
    return cap, (f"**Max new tokens capped at {cap:,}** (asked: {max_new_tokens:,}): on ZeroGPU a race of "
                 f"{max(2, num_methods)} methods asks for {ZEROGPU_MAX_S} s of GPU at most, so that a visitor "
                 f"without an account (2 minutes a day) can run it.")


_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~-])(?:~|[A-Za-z]:)?(?:[/\\][^\s/\\'\"`:;,()<>\[\]]+)+[/\\]"
                            r"(?P<name>[^\s/\\'\"`:;,()<>\[\]]+)")


def hide_paths(text: str) -> str:
    """``text`` with every absolute file path shortened to its last component ("/srv/x/la-3.safetensors" ->
    "la-3.safetensors"), so that the page never shows the server's folders. URLs are left alone."""
    return _ABSOLUTE_PATH.sub(lambda m: m["name"], text)
