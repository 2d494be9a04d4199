"""Decoding settings: one frozen dataclass, validated once at the boundary.

The UI, the CLI and the benchmark read their ranges and defaults from
``SETTING_RANGES`` and ``DecodeSettings`` so that no layer repeats a literal.
"""

from __future__ import annotations

import math
from decimal import Decimal
from dataclasses import asdict, dataclass, replace

#: (minimum, maximum, default) for every numeric setting. The UI builds its
#: sliders from this table; ``DecodeSettings.validate`` enforces it.
SETTING_RANGES: dict[str, tuple[float, float, float]] = {
    "num_lookahead": (1, 8, 3),
    "temperature": (0.0, 2.0, 0.0),
    "top_k": (0, 200, 0),
    "top_p": (0.01, 1.0, 1.0),
    "max_new_tokens": (1, 1024, 96),
    "seed": (0, 2**31 - 1, 0),
}


#: Temperatures below this decode greedily, as 0 does: dividing the logits by a temperature near 0 overflows
#: float32 (20 / 1e-38 is inf, and softmax then gives NaN), and already at 1e-6 sampling picks the argmax
#: (docs/algorithms.md section 2.4).
GREEDY_BELOW = 1e-4


#: Largest token tree (``DecodeSettings.tree_nodes``), and the value that picks the size per machine.
MAX_TREE_NODES, TREE_AUTO = 64, -1


def _fmt(bound: float) -> str:
    """A range bound as people read it: whole numbers with thousands separators, others as %g."""
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"


def given(value) -> str:
    """A value given for a setting, for a message: as typed (``repr``), except a number with more than 15 digits,
    shown as 1.00e+300 (a seed of 1e300 reached the page as a 301-digit number; ``Decimal``: an int too large for a
    float too)."""
    if (type(value) is int or type(value) is float and math.isfinite(value)) and abs(value) >= 10**15:
        return format(Decimal(value), ".3g")
    return repr(value)


class SettingError(ValueError):
    """A ``DecodeSettings`` field the settings refuse, named as the page names it (``label``, e.g. "max new
    tokens"); ``setting`` is the field (``max_new_tokens``)."""

    def __init__(self, message: str, setting: str, label: str):
        super().__init__(message)
        self.setting, self.label = setting, label

    def for_command_line(self) -> str:
        """The message naming the command line's option (``--max-new-tokens``) where it names the page's label."""
        return str(self).replace(self.label, "--" + self.setting.replace("_", "-"), 1)


def command_line_message(err: Exception) -> str:
    """``err``'s message for a command line: a ``SettingError`` names the option (``for_command_line``)."""
    return err.for_command_line() if isinstance(err, SettingError) else str(err)


def _default(name: str) -> float:
    return SETTING_RANGES[name][2]


@dataclass(frozen=True)
class DecodeSettings:
    """Everything one decoding run needs besides the model and the prompt.

    Attributes:
        max_new_tokens: stop after this many generated tokens (>= 1).
        temperature: 0 means greedy (argmax), and so does any temperature below ``GREEDY_BELOW``
            (1e-4); from there up it divides the logits.
        top_k: keep the k most likely tokens; 0 disables the filter.
        top_p: nucleus filter, keep the smallest set with mass >= top_p; in (0, 1].
        seed: seeds the one ``torch.Generator`` of the run.
        num_lookahead: L, the number of look-ahead tokens / drafts per step (PaSS,
            Monea et al. 2023, section 2). Ignored by autoregressive decoding.
        chat_template: wrap the prompt in the tokenizer's chat template; False
            feeds the raw text.
        fused: PaSS only, an *extension* beyond the paper (docs/algorithms.md section 4):
            the next step's look-ahead blocks ride on the verification pass, so a
            step costs one forward pass instead of two.
        inspect: events carry the token inspector's data (``StepEvent.inspection``: top-n of p, q
            and the residual per verified position); a few ``topk`` calls per step.
        auto_drafts: cost-aware draft lengths, an *extension* (docs/algorithms.md section 4,
            ``draft_length.CostAwareDraftLength``): each step verifies k <= ``num_lookahead`` drafts
            (0 = no verified draft: a plain target step; PaSS's paper step keeps its drafting pass, over the
            look-ahead rows of its k drafts only, one token for k = 0, for its exact token), chosen from the
            measured pass-cost curve and this run's acceptance so far; the output stays exactly the target's.
        tree_nodes: token trees, an *extension* (docs/algorithms.md section 4b): 0 verifies a chain of
            drafts; N > 0 verifies the method's shipped tree of N nodes in one pass (deterministic top-i
            candidates per position); ``TREE_AUTO`` (-1) the shipped size with the most expected tokens per
            unit of pass cost on this machine. Not with ``fused`` or ``auto_drafts``.

    Raises (from ``validate``):
        ValueError: a setting outside its range or not a finite number, with the allowed range in the message.
    """

    max_new_tokens: int = int(_default("max_new_tokens"))
    temperature: float = float(_default("temperature"))
    top_k: int = int(_default("top_k"))
    top_p: float = float(_default("top_p"))
    seed: int = int(_default("seed"))
    num_lookahead: int = int(_default("num_lookahead"))
    chat_template: bool = True
    fused: bool = False
    inspect: bool = False
    auto_drafts: bool = False
    tree_nodes: int = 0

    def __post_init__(self) -> None:
        self.validate()

    @property
    def greedy(self) -> bool:
        """True when temperature is 0, or below ``GREEDY_BELOW`` (argmax decoding)."""
        return self.temperature < GREEDY_BELOW

    def validate(self) -> "DecodeSettings":
        """Check every field against ``SETTING_RANGES``; return self.

        Raises:
            SettingError: naming the setting, the bad value and the allowed range (a ``ValueError``); a switch
                (``chat_template``, ``fused``, ``inspect``, ``auto_drafts``) that is not True or False.
            ValueError: a token tree with the fused step or cost-aware draft lengths.
        """
        checks = {
            "num_lookahead": ("look-ahead tokens L", int),  # as the page's box is labelled
            "max_new_tokens": ("max new tokens", int),
            "top_k": ("top-k", int),
            "seed": ("seed", int),
            "temperature": ("temperature", float),
            "top_p": ("top-p", float),
        }
        for name, (label, kind) in checks.items():
            value = getattr(self, name)
            lo, hi, _ = SETTING_RANGES[name]
            if value is None:  # an empty box (a browser empties a number box holding letters or 1e999)
                problem = f"is empty or not a number: type a number between {_fmt(lo)} and {_fmt(hi)}"
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                problem = f"must be a number, got {given(value)}"
            elif isinstance(value, float) and not math.isfinite(value):  # NaN, inf (also a trace's JSON "Infinity")
                problem = f"must be a finite number between {_fmt(lo)} and {_fmt(hi)}, got {given(value)}"
            elif kind is int and int(value) != value:
                problem = f"must be a whole number, got {given(value)}"
            elif not lo <= value <= hi:
                problem = (f"must be between {_fmt(lo)} and {_fmt(hi)}, got {given(value)}"
                           + (" (use 0 for greedy decoding)" if name == "temperature" and value < 0 else "")
                           + (" (1 disables it)" if name == "top_p" else ""))
            else:
                continue
            raise SettingError(f"{label} {problem}", name, label)
        for name in ("chat_template", "fused", "inspect", "auto_drafts"):  # a trace's JSON 1 or "no" is not a switch
            if not isinstance(getattr(self, name), bool):
                raise SettingError(f"{name} must be true or false, got {given(getattr(self, name))}", name, name)
        nodes = self.tree_nodes
        if isinstance(nodes, bool) or not isinstance(nodes, int) or not TREE_AUTO <= nodes <= MAX_TREE_NODES:
            raise SettingError(f"tree nodes must be a whole number between {TREE_AUTO} and {MAX_TREE_NODES} "
                               f"(0 = a chain, {TREE_AUTO} = the size chosen for this machine), got {nodes!r}",
                               "tree_nodes", "tree nodes")
        if nodes and (self.fused or self.auto_drafts):
            raise ValueError("token trees (tree nodes != 0) cannot be combined with the fused step or with "
                             "cost-aware draft lengths yet: switch those off or use a chain (tree nodes 0)")
        return self

    def with_(self, **changes) -> "DecodeSettings":
        """A validated copy with some fields changed."""
        return replace(self, **changes)

    def to_dict(self) -> dict:
        """Plain dict, for JSON output."""
        return asdict(self)
