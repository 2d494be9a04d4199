"""Comparing two runs' outputs (greedy decoding must reproduce AR exactly), and telling a
near-tie that rounding can flip from a real error.

Works on ``StepEvent`` objects (``pass_core.decoding.events``) through their tokens only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OutputComparison:
    """How one run's output compares with a reference run's (greedy decoding must match AR exactly).

    Attributes:
        first_difference: 0-based index of the first differing token, or None.
        compared: tokens compared (the shorter output's length).
        reference_tokens / other_tokens: output lengths.
        reference_text / other_text: the differing tokens' text pieces ("" when equal).
        context: up to 40 characters of the reference output before the difference.
        reference_margin / other_margin: each run's top-1 minus top-2 logit where it chose the
            differing token (greedy runs), or None.
    """

    first_difference: int | None
    compared: int
    reference_tokens: int
    other_tokens: int
    reference_text: str = ""
    other_text: str = ""
    context: str = ""
    reference_margin: float | None = None
    other_margin: float | None = None

    def near_tie(self, dtype: str) -> bool | None:
        """Whether the first difference is a near-tie that ``dtype`` rounding can flip: the smaller of
        the two margins is within ``rounding_tolerance(dtype)``. None without a difference or margins."""
        margins = [m for m in (self.reference_margin, self.other_margin) if m is not None]
        if self.first_difference is None or not margins:
            return None
        return min(margins) <= rounding_tolerance(dtype)

    @property
    def identical(self) -> bool:
        """Same tokens and same length."""
        return self.first_difference is None and self.reference_tokens == self.other_tokens


def compare_outputs(reference, other) -> OutputComparison:
    """Compare the committed tokens of two runs' events (e.g. AR and a drafting method).

    Args:
        reference, other: iterables of ``StepEvent`` (possibly unfinished runs).
    """
    ref = [t for e in reference for t in e.tokens if t.committed]
    oth = [t for e in other for t in e.tokens if t.committed]
    i = next((j for j, (a, b) in enumerate(zip(ref, oth)) if a.token_id != b.token_id), None)
    if i is None:
        return OutputComparison(None, min(len(ref), len(oth)), len(ref), len(oth))
    context = "".join(t.text for t in ref[max(0, i - 8):i])[-40:]
    return OutputComparison(i, min(len(ref), len(oth)), len(ref), len(oth), ref[i].text, oth[i].text, context,
                            ref[i].margin, oth[i].margin)


#: Unit roundoff (half the machine epsilon) of each floating-point dtype, by name.
UNIT_ROUNDOFF = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


def rounding_tolerance(dtype: str) -> float:
    """The largest top-1 / top-2 logit gap (in logits) that rounding alone can flip between a
    verification pass over several tokens and a one-token pass, for weights in ``dtype``.

    *(our choice)*: 8 x unit roundoff x 20 (a typical size of a top logit): 0.625 for bfloat16,
    0.078 for float16 and 1e-5 for float32. Measured on SmolLM2-135M in bfloat16 (greedy, 6
    prompts, 32 tokens): where PaSS or ParallelSpec first differed from AR, the two logits were
    0 to 0.125 apart; in float32 none differed.

    Raises:
        ValueError: an unknown dtype name.
    """
    name = str(dtype).replace("torch.", "")
    if name not in UNIT_ROUNDOFF:
        raise ValueError(f"Unknown dtype {dtype!r}: use one of {', '.join(UNIT_ROUNDOFF)}.")
    return 8 * UNIT_ROUNDOFF[name] * 20
