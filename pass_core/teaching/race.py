"""Fair side-by-side race of several decoders on one device (docs/algorithms.md section 7).

Decoders never run at the same time: one process alternates their steps and always
advances the decoder whose own accumulated compute time is smallest, so that every
pane shows what its method had produced after the same compute time.
"""

from __future__ import annotations

import statistics
from typing import Iterable, Iterator

from pass_core.decoding.events import StepEvent

#: The first step holds the prompt prefill (and, without a warm-up, one-time set-up costs): per-step figures
#: start after it (the page's latency chart, ``cost_points``) and the page states its time apart.
FIRST_PER_STEP = 2


def race(decoders: dict[str, Iterable[StepEvent]]) -> Iterator[tuple[str, StepEvent]]:
    """Interleave decoders by accumulated compute time.

    Args:
        decoders: name -> generator of ``StepEvent`` (e.g. from ``methods.make_decoder``).
            Each generator does its model work inside ``next()``, timed in ``step_s``.

    Yields:
        (name, event) in the order the steps ran. Ties go to the earlier name in
        ``decoders``. A finished decoder drops out; the race ends when all have.

    Raises:
        Whatever a decoder raises (e.g. ``ValueError`` for a bad prompt), unchanged.
    """
    clocks = {name: 0.0 for name in decoders}
    live = {name: iter(gen) for name, gen in decoders.items()}
    while live:
        name = min(live, key=lambda n: clocks[n])
        try:
            event = next(live[name])
        except StopIteration:
            del live[name]
            continue
        clocks[name] += event.step_s
        yield name, event
        if event.finished:
            live.pop(name, None)


def race_order(events: dict[str, list[StepEvent]]) -> list[tuple[str, int]]:
    """The order in which ``race`` ran recorded events: (name, index into ``events[name]``) per step.

    ``race`` picks the next decoder from the compute times of the events before it alone, so feeding it
    the recorded lists again reproduces the order of the live race (a trace's replay, the step-through).

    Args:
        events: name -> that decoder's ``StepEvent`` list, in the order the race was given them.

    Returns:
        One (name, index) pair per event, ``sum(len(v) for v in events.values())`` pairs.
    """
    seen = {name: 0 for name in events}
    order = []
    for name, _ in race({name: iter(evs) for name, evs in events.items()}):
        order.append((name, seen[name]))
        seen[name] += 1
    return order


def events_upto(events: dict[str, list[StepEvent]], position: int | None,
                order: list[tuple[str, int]] | None = None) -> dict[str, list[StepEvent]]:
    """The race's state after its first ``position`` steps (on the shared compute clock).

    Args:
        events: name -> the decoder's ``StepEvent`` list.
        position: how many steps of ``race_order(events)`` to keep, clipped to 0..all; None keeps all.
        order: ``race_order(events)`` when the caller has it already.

    Returns:
        name -> the prefix of its events that ran within the first ``position`` steps (every name kept).
    """
    if position is None:
        return {name: list(evs) for name, evs in events.items()}
    order = race_order(events) if order is None else order
    counts = {name: 0 for name in events}
    for name, _ in order[:max(0, position)]:
        counts[name] += 1
    return {name: list(evs[:counts[name]]) for name, evs in events.items()}


def decode_rate(events) -> float | None:
    """Tokens/s after the first step: (tokens - the first step's) / (compute - the first step's ``step_s``).

    The first step holds the prompt prefill, whose cost grows with the prompt and says nothing about a decoding
    method (it was 26 % of AR's compute in a short race); the page shows it apart (``race_text.prefill_line``).

    Returns:
        The rate, or None before a second step or without compute time after the first.
    """
    events = list(events)
    later = events[1:]
    compute = sum(e.step_s for e in later)
    return sum(len(e.new_token_ids) for e in later) / compute if later and compute > 0 else None


def decode_speedup(events, baseline_events) -> float | None:
    """The speed-up of docs/algorithms.md section 6 with the first step (prefill) left out on both sides:
    ``decode_rate(events) / decode_rate(baseline_events)``; None while either has no rate yet."""
    rate, base = decode_rate(events), decode_rate(baseline_events)
    return rate / base if rate and base else None


def cost_points(events: dict[str, list[StepEvent]], one_pass_s: float | None = None
                ) -> dict[str, tuple[float, float, float]]:
    """Per method: (mean verification width k + 1, mean tokens per step, mean cost per step in AR steps), the
    three numbers that set a step's speed-up E / C (docs/algorithms.md section 6: tokens per step over cost per
    step, on this machine's pass-cost curve c(w)).

    Steps from ``FIRST_PER_STEP`` on (the first holds the prompt prefill). The unit of cost is AR's mean step time
    (``step_s``, seconds) when AR is in ``events``, else ``one_pass_s`` (the curve's one-token pass, seconds).

    Returns:
        {method key: (width, tokens per step, AR steps per step)} for the methods with steps past the first;
        {} when there is no unit of cost.
    """
    later = {key: [e for e in evs if e.step >= FIRST_PER_STEP] for key, evs in events.items()}
    unit = statistics.fmean(e.step_s for e in later["ar"]) if later.get("ar") else one_pass_s
    if not unit:
        return {}
    return {key: (statistics.fmean(e.num_verified_drafts + 1 for e in evs),
                  statistics.fmean(len(e.new_token_ids) for e in evs),
                  statistics.fmean(e.step_s for e in evs) / unit)
            for key, evs in later.items() if evs}
