"""What a race carries besides its events so that the page can tell the truth about it: how busy the machine
was while it ran, whether this machine's pass-cost curve is physical, a warning before a long prefill, and the
race's prompt and settings (to write its trace after Stop).

A race's guards are one dict, kept in the page's state with the race (``race_handlers.render``'s ``guards``):
``{"meter": LoadMeter while the race runs, "load": the busy line once it ended, "refused": (curve, why) or None,
"prefill": the warning or "", "source": (prompt, DecodeSettings)}``. No Gradio and no tensors here: token counts
come from ``pass_core.decoding.text``, the load from ``pass_core.runtime.machine_load``.
"""

from __future__ import annotations

import contextlib

from pass_core.decoding.settings import DecodeSettings
from pass_core.runtime.machine_load import LoadMeter, busy_line
from pass_core.runtime.pass_cost import CostCurves

#: A prompt of more tokens than this (chat template included) gets a warning before its prefill.
LONG_PREFILL_TOKENS = 2000


def new_guards(prompt: str, settings: DecodeSettings, curves: CostCurves, prefill: str = "") -> dict:
    """The guards of a race starting now: its load meter starts, the refused curve (if any) and the prefill
    warning are kept with the race's prompt and settings."""
    return {"meter": LoadMeter(), "load": "", "prefill": prefill, "source": (prompt, settings),
            "refused": (curves.refused, curves.problem) if curves.refused is not None else None}


@contextlib.contextmanager
def off_the_clock(guards: dict | None):
    """While a race waits (paused for the step-through, or slow motion's wait after a step), its load meter counts
    nothing (``LoadMeter.pause``): the race computes nothing then, so other programs cannot slow it down."""
    meter = (guards or {}).get("meter")
    if meter is not None:
        meter.pause()
    try:
        yield
    finally:
        if meter is not None:
            meter.resume()


def finish(guards: dict | None) -> None:
    """The race ended (finished or stopped): its busy line is measured once more and kept; the meter goes."""
    if guards and guards.get("meter") is not None:
        guards["machine_load"] = guards.pop("meter").load()  # recorded in the race's trace
        guards["load"] = busy_line(guards["machine_load"])


def guard_lines(guards: dict | None, finished: bool) -> str:
    """Markdown lines for the run line: the prefill warning while the race runs, then the busy line (measured
    so far while it runs, over the whole race once it ended)."""
    if not guards:
        return ""
    meter = guards.get("meter")
    load = busy_line(meter.load()) if meter is not None else guards.get("load", "")
    return "  \n".join(line for line in ((guards.get("prefill") if not finished else ""), load) if line)


def prefill_seconds(tokens: int, curve: dict | None) -> float | None:
    """Rough seconds for one prefill of ``tokens`` tokens: the per-token time of the curve's widest pass
    (``pass_cost``: "widths", "ms"). A long pass reads each weight once for many more tokens, so it usually costs
    less per token (a 2,642-token prompt's prefill took 30 s where this said 60.5 s), while attention's growth with
    the prompt is left out: an upper estimate for the prompts the models here can hold. None without a curve."""
    if not curve or not curve.get("ms"):
        return None
    return tokens * curve["ms"][-1] / curve["widths"][-1] / 1000


def prefill_warning(tokens: int, methods: int, curve: dict | None, limit: int | None = None, trees: int = 0) -> str:
    """A warning when the prompt's ``tokens`` (chat template included; the race encoded it, and refused a prompt
    its context cannot hold) are over ``limit`` (None: ``LONG_PREFILL_TOKENS``), else "": how many tokens, and
    how long the first step of each of the ``methods`` racing methods and ``trees`` token-tree entries (each
    prefills too) may take (``prefill_seconds``)."""
    if tokens <= (LONG_PREFILL_TOKENS if limit is None else limit):
        return ""
    seconds = prefill_seconds(tokens, curve)
    each = "a while" if seconds is None else (
        f"up to about {seconds:.{0 if seconds >= 10 else 1}f} s on this machine (from its widest measured pass; a long "
        "prompt's pass is usually faster per token)")
    return (f"⏳ **Long prompt: {tokens:,} tokens.** The first step of each method reads the whole prompt "
            f"(prefill): it may take {each}, for each of the {methods} methods"
            f"{f' and {trees} token trees' if trees else ''}, before the panes start to fill.")
