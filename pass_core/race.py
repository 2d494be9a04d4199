"""Fair side-by-side race of several decoders on one device (algorithms.md section 7).

Decoders never run at the same time: one process alternates their steps and always
advances the decoder whose own accumulated compute time is smallest, so that every
pane shows what its method had produced after the same compute time.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from .events import StepEvent


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
