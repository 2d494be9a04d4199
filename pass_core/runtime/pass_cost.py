"""The pass-cost curve c(w): the time of a target pass over w new tokens divided by a one-token pass
(docs/algorithms.md section 4, "cost-aware draft length"). It decides whether speculation can win on a
machine: a step that yields E tokens for a pass over k+1 tokens beats AR only when E > c(k+1).
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass

import torch

from pass_core.decoding.cache import StepClock, crop_to, new_cache
from pass_core.decoding.target import plain_head, target_forward
from pass_core.decoding.text import count

#: Widths measured by default: every draft count the app offers plus the fused step's wider passes.
DEFAULT_WIDTHS = tuple(range(1, 17))


@torch.inference_mode()
def measure_pass_cost(loaded, widths=DEFAULT_WIDTHS, cache_len: int = 200, repeats: int = 5,
                      seed: int = 0, progress=None) -> dict:
    """Measure c(w) on ``loaded``'s device, as the verification pass runs it (``target.target_forward``,
    logits for all w rows).

    Protocol: fill a KV cache with ``cache_len`` random tokens once; then, ``repeats`` times, run one
    pass of every width in turn (interleaved, so slow drift hits every width alike), each timed
    with the device synchronised and cropped back to ``cache_len`` afterwards; one untimed round
    first as a warm-up. c(w) = median ms of width w / median ms of width 1.

    Args:
        loaded: a ``LoadedModel``.
        widths: pass widths w (tokens per pass), each >= 1; 1 is always measured.
        cache_len: tokens already in the cache (a typical prompt + answer so far).
        repeats: timed rounds (>= 1).
        seed: seeds the random token ids (its own generator; not the global RNG).
        progress: called as ``progress(done, total)`` after each pass (warm-up round included), or None.

    Returns:
        {"widths": [w...], "ms": [median ms...], "c": [c(w)...], "cache_len": int, "repeats": int,
        "device": str, "dtype": str, "threads": int, "load_average_1min": float or None (before the passes),
        "cores": int, "other_cores": cores other programs took during the passes, "busy": their verdict
        (``machine_load.MachineLoad.busy``; both None without ``/proc/stat`` or under 0.5 s)} (``busy_warning``).

    Raises:
        ValueError: a width < 1, ``repeats`` < 1, or a cache too long for the model's context.
    """
    widths = sorted({1, *(int(w) for w in widths)})
    if widths[0] < 1 or repeats < 1 or cache_len < 1:
        raise ValueError("widths, repeats and cache_len must be at least 1.")
    if loaded.max_positions is not None and cache_len + widths[-1] > loaded.max_positions:
        raise ValueError(f"cache_len {cache_len} + width {widths[-1]} exceeds the model's context "
                         f"({loaded.max_positions} positions).")
    from pass_core.runtime.machine_load import MIN_WALL_S, load_between, sample  # (it imports this module)

    load, cores = cpu_load()  # before our own passes add to it
    start = sample()  # other programs' CPU time over the passes themselves (``busy_warning``)
    model, dev, clock = loaded.model, loaded.device, StepClock(loaded.device)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, loaded.vocab_size, (1, cache_len + widths[-1]), generator=gen).to(dev)
    cache, plain = new_cache(model), plain_head(model)
    target_forward(model, cache, torch.tensor([cache_len - 1], device=dev), input_ids=ids[:, :cache_len], plain=plain)
    times: dict[int, list[float]] = {w: [] for w in widths}
    for round_ in range(repeats + 1):  # round 0 warms up every shape
        for i, w in enumerate(widths, 1):
            x = ids[:, cache_len:cache_len + w]
            t0 = clock.now()
            target_forward(model, cache, torch.arange(w, device=dev), input_ids=x, plain=plain)
            t1 = clock.now()
            crop_to(cache, cache_len)
            if round_:
                times[w].append((t1 - t0) * 1000)
            if progress is not None:
                progress(round_ * len(widths) + i, (repeats + 1) * len(widths))  # after the timed pass
    ms, during = [statistics.median(times[w]) for w in widths], load_between(start, sample())
    counted = during.other_cores is not None and during.wall_s >= MIN_WALL_S
    return {"widths": widths, "ms": ms, "c": [m / ms[0] for m in ms], "cache_len": cache_len, "repeats": repeats,
            "device": str(dev), "dtype": loaded.dtype_name, "threads": torch.get_num_threads(),
            "load_average_1min": load, "cores": cores,
            "other_cores": during.other_cores if counted else None, "busy": during.busy if counted else None}


def cpu_load() -> tuple[float | None, int]:
    """(1-minute load average or None where the OS has none, CPU cores this process may use: its affinity mask,
    which containers and Spaces narrow, else ``os.cpu_count()``)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return load, cores


def cpu_busy(load: float | None, cores: int) -> bool:
    """True when other jobs keep the CPU busy: a 1-minute load average above the cores + 0.5 (our own model
    loading adds at most its threads, and less on average). The bench warns at start-up, and ``busy_warning``."""
    return load is not None and load > cores + 0.5


def busy_warning(curve: dict) -> str:
    """A warning when ``curve`` was measured on a CPU that other jobs kept busy (its "busy": other programs' CPU
    time over the passes; a curve without it: ``cpu_busy``'s load average), else "". Such a
    curve overstates c(w) (a new-user run measured c(2) = 6.7 on a shared 2-core CPU with 2 threads, against
    1.1-1.3 idle), and cost-aware draft lengths and the cost chart read it."""
    load, cores = curve.get("load_average_1min"), curve.get("cores")
    if curve.get("device") != "cpu" or not cores:
        return ""
    if curve.get("busy") is not None:  # counted over the passes: the load average lags by a minute and counted
        # this app's own model loading, so the first start warned on an idle machine
        if not curve["busy"]:
            return ""
        busy = f"while other programs took {curve['other_cores']:.1f} of {cores} cores"
    elif cpu_busy(load, cores):  # a curve from before the counters (a trace, a bench JSON) or not on Linux
        busy = f"while the CPU was busy (load average {load:.1f} on {cores} cores)"
    else:
        return ""
    return (f"Measured {busy}: other jobs distort these timings. Measure again when the machine is idle (the "
            "page's *Re-measure pass cost*, or the command run again); on a shared CPU, --threads 1 avoids the worst "
            "slow-downs.")


#: Cached curves by model object: (loaded model's id, device, dtype, threads) -> curve; and the newest physical
#: curve (``curve_problem`` None) per key, which stands in for a newer curve that is not.
_CURVES: dict[tuple, dict] = {}
_GOOD: dict[tuple, dict] = {}

#: A curve is not physical when a pass over w > 1 tokens costs less than this many one-token passes...
MIN_WIDER_COST = 0.9
#: ...or falls more than this share below a narrower pass. Idle machines measured drops of up to 18 % (float32
#: GEMM shapes on a CPU: c(3) = 1.60, c(4) = 1.32 in experiments/cpu-backend-fp32-t2.json), so 25 % is noise's
#: limit; a busy CPU's spikes (c(2) = 6.7 measured on a shared 2-core CPU) fall far beyond it.
MONOTONE_SLACK = 0.25


def _key(loaded) -> tuple:
    return id(loaded.model), str(loaded.device), str(loaded.dtype), torch.get_num_threads()


def dips(curve: dict) -> list[tuple[int, int]]:
    """(w, w') for each width w whose c(w) falls more than ``MONOTONE_SLACK`` below c(w'), the highest c of the
    narrower passes."""
    found, top_w, top = [], curve["widths"][0], curve["c"][0]
    for w, cost in zip(curve["widths"], curve["c"]):
        if cost < (1 - MONOTONE_SLACK) * top:
            found.append((w, top_w))
        if cost > top:
            top_w, top = w, cost
    return found


def curve_problem(curve: dict) -> str | None:
    """Why ``curve`` (``measure_pass_cost``'s dict) is not physical, or None: a pass over more tokens cannot cost
    less than ``MIN_WIDER_COST`` one-token passes, nor (beyond ``MONOTONE_SLACK``) less than a narrower pass, unless
    that dip was measured twice (the curve's ``confirmed_dips``, set by ``_measure``)."""
    c = dict(zip(curve["widths"], curve["c"]))
    for w, cost in c.items():
        if w > 1 and cost < MIN_WIDER_COST:
            return (f"c({w}) = {cost:.2f} is below {MIN_WIDER_COST:g}: a pass over {w} tokens cannot cost less than "
                    "a one-token pass")
    for w, top_w in dips(curve):
        if w not in curve.get("confirmed_dips", ()):
            return (f"c({w}) = {c[w]:.2f} is {1 - c[w] / c[top_w]:.0%} below c({top_w}) = {c[top_w]:.2f}: a wider "
                    f"pass cannot cost that much less (noise allows {MONOTONE_SLACK:.0%}) unless a second measurement "
                    "shows it too")
    return None


def _measure(loaded, widths, repeats, progress=None) -> dict:
    """Measure, and keep the curve as the newest physical one when it is. A dip beyond ``MONOTONE_SLACK`` that the
    measurement before it showed at the same widths (no more, no fewer) is the machine's, not noise: the Intel
    Xeons (AMX) of our CI run a pass over 16 tokens some 30 % faster than one over 15, in every measurement
    (c(15) = 3.06 and 2.91, c(16) = 2.22 and 2.13, 2026-12-03), while a busy moment's spike lands on other widths
    each time."""
    previous = _CURVES.get(_key(loaded))
    cache_len = 200 if loaded.max_positions is None else max(1, min(200, loaded.max_positions // 2))
    widths = [w for w in widths if loaded.max_positions is None or cache_len + w <= loaded.max_positions]
    curve = measure_pass_cost(loaded, widths, cache_len=cache_len, repeats=repeats, progress=progress)
    found = [w for w, _ in dips(curve)]  # the same widths dip, no more and no fewer: a spike at c(2) makes every
    # wider width dip, and a curve spiked at c(5) (widths 6..16 dipping) was taken as confirmed by one spiked at c(2)
    # (3..16) when a subset sufficed; the narrower pass a dip falls below may differ (c(15) or c(14) on the Xeons)
    if found and previous is not None and previous["widths"] == curve["widths"] and \
            set(found) == {w for w, _ in dips(previous)}:
        curve["confirmed_dips"] = found
    if curve_problem(curve) is None:
        _GOOD[_key(loaded)] = curve
    return curve


def cached_pass_cost(loaded, widths=DEFAULT_WIDTHS, repeats: int = 3) -> dict:
    """``measure_pass_cost`` once per loaded model, device, dtype and thread count (a few seconds for
    SmolLM2-135M on a CPU), then from memory. The cache is the shorter of 200 tokens and half the
    model's context. Returns the curve dict of ``measure_pass_cost``, physical or not (``pass_cost_curves``
    tells which to use)."""
    key = _key(loaded)
    if key not in _CURVES:
        _CURVES[key] = _measure(loaded, widths, repeats)
    return _CURVES[key]


@dataclass(frozen=True)
class CostCurves:
    """This machine's pass-cost curves for a loaded model.

    Attributes:
        used: the curve the cost view, the what-if panel, cost-aware draft lengths and tree sizes read: the newest
            measurement when physical, else the last physical one (None: none yet).
        refused: the newest measurement when it is not physical (None: it is).
        problem: why ``refused`` was refused (``curve_problem``; "" when nothing was).
    """

    used: dict | None
    refused: dict | None = None
    problem: str = ""


def pass_cost_curves(loaded, remeasure: bool = False, progress=None) -> CostCurves:
    """``cached_pass_cost`` (``remeasure``: measured again now, replacing the cached curve; ``progress``: as in
    ``measure_pass_cost``) checked by ``curve_problem``: a curve that is not physical is refused and the last
    physical one used instead."""
    if remeasure:
        _CURVES[_key(loaded)] = _measure(loaded, DEFAULT_WIDTHS, 3, progress)
    curve = cached_pass_cost(loaded)
    problem = curve_problem(curve)
    if problem is None:
        return CostCurves(curve)
    return CostCurves(_GOOD.get(_key(loaded)), curve, problem)


def measured_pass_cost_curves(loaded) -> CostCurves | None:
    """``pass_cost_curves(loaded)`` when a curve was measured for ``loaded`` already, else None: measures nothing
    (the what-if panel reads the start-up curve before a race without holding the page up for a measurement)."""
    return pass_cost_curves(loaded) if _key(loaded) in _CURVES else None


def confirm_or_remeasure(loaded, progress=None) -> CostCurves:
    """``pass_cost_curves(loaded)``, and when its newest curve was refused, one more measurement: of the widths of
    each dip only (width 1, and each dip's narrower top width up to the dip: ``dips``) when dips were the only
    problem, else of the whole curve (``pass_cost_curves(remeasure=True)``). Dips found again at the same widths are
    the machine's: the first curve is kept with them as its ``confirmed_dips``; a dip not found again means a whole
    new measurement. Start-up calls this: on the Intel Xeons, whose c(16) is below c(15) in every measurement, the
    check takes 12 passes where a whole measurement takes 64.

    Args:
        loaded: a ``LoadedModel``.
        progress: as in ``measure_pass_cost``.
    """
    curves = pass_cost_curves(loaded)
    curve = curves.refused
    if curve is None:
        return curves
    found = dips(curve)
    widths = sorted({1, *(v for w, top_w in found for v in range(top_w, w + 1))})
    only_dips = all(c >= MIN_WIDER_COST for w, c in zip(curve["widths"], curve["c"]) if w > 1)
    if found and only_dips and len(widths) < len(curve["widths"]):
        check = measure_pass_cost(loaded, widths, cache_len=curve["cache_len"], repeats=curve["repeats"],
                                  progress=progress)
        if {w for w, _ in found} <= {w for w, _ in dips(check)}:
            curve["confirmed_dips"] = [w for w, _ in found]
            _GOOD[_key(loaded)] = curve
            return CostCurves(curve)
    return pass_cost_curves(loaded, remeasure=True, progress=progress)


#: Extra measurements ``usable_pass_cost`` makes when the curve it finds is not physical.
REMEASURE_TRIES = 3


def usable_pass_cost(loaded, what: str = "Cost-aware draft lengths") -> dict:
    """``pass_cost_curves(loaded).used``, for ``what`` (named in the error); when only refused curves were measured,
    it measures again, up to ``REMEASURE_TRIES`` times (a busy moment spoils one measurement).

    Raises:
        ValueError: no physical curve was measured for this model (only refused ones).
    """
    curves = pass_cost_curves(loaded)
    for _ in range(REMEASURE_TRIES):  # a busy moment spoils one measurement: measure again before giving up
        if curves.used is not None:
            break
        curves = pass_cost_curves(loaded, remeasure=True)
    if curves.used is None:
        raise ValueError(f"{what} need this machine's pass-cost curve, and the one measured is not physical "
                         f"({curves.problem}). Measure it again on an idle machine (on the page: the Re-measure pass "
                         "cost button; on the command line: the same command again), or choose settings that do "
                         "without it.")
    return curves.used


def pass_cost_markdown(curve: dict) -> str:
    """The curve as a markdown table (w, ms, c(w))."""
    head = (f"Pass cost on {curve['device']} ({curve['dtype']}, {count(curve['threads'], 'thread')}), cache of "
            f"{curve['cache_len']} tokens, median of {curve['repeats']} interleaved rounds:")
    rows = [f"| {w} | {m:.1f} | {c:.2f} |" for w, m, c in zip(curve["widths"], curve["ms"], curve["c"])]
    warning = [f"**{busy_warning(curve)}**", ""] if busy_warning(curve) else []
    return "\n".join([head, "", *warning, "| w (tokens per pass) | ms | c(w) |", "|---|---|---|", *rows])
