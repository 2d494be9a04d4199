"""How busy the machine was while a race ran: other programs' CPU time beside the race's own.

Race timings are compute times on a shared clock (docs/algorithms.md section 7, "Fair timing"): they mean
something only when no other program took the CPU from the race. The 1-minute load average lags by a minute
and counts the race itself, so the verdict reads the kernel's CPU counters over the race's own wall time
instead: the CPU time of every core (``/proc/stat``) minus this process's CPU time (``os.times``) is what other
programs took. Where ``/proc/stat`` is missing (not Linux), the load average minus this process's own cores
stands in for it. Pure Python: no torch, no gradio.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from pass_core.runtime.pass_cost import cpu_load

#: Busy when other programs took at least half a core on average while the race ran...
OTHER_CORES_BUSY = 0.5
#: ...and every core was at least this busy (saturated): other programs on idle cores slow nothing down.
SATURATED = 0.9
#: No verdict over a shorter time: the kernel counts CPU time in ticks of 10 ms.
MIN_WALL_S = 0.5


@dataclass(frozen=True)
class CpuSample:
    """One reading of the CPU counters.

    Attributes:
        wall_s: ``time.monotonic()``, seconds.
        own_cpu_s: this process's user + system CPU time, seconds (all its threads).
        busy_s / total_s: CPU seconds of every core of the machine, busy (not idle or waiting for I/O) and in
            all, from ``/proc/stat``; None where it cannot be read.
        cpus: cores that ``/proc/stat`` counts (the machine's, which may exceed ``cores``).
    """

    wall_s: float
    own_cpu_s: float
    busy_s: float | None
    total_s: float | None
    cpus: int


def sample(stat_path: str = "/proc/stat") -> CpuSample:
    """The CPU counters now (``stat_path``: the kernel's counters, a parameter for tests)."""
    times = os.times()
    busy = total = None
    cpus = 0
    try:
        with open(stat_path, encoding="ascii") as f:
            lines = f.read().splitlines()
        fields = [float(x) for x in lines[0].split()[1:]]
        tick = os.sysconf("SC_CLK_TCK")
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
        total = sum(fields[:8]) / tick  # guest time is already inside user time
        busy = total - idle / tick
        cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    return CpuSample(time.monotonic(), times.user + times.system, busy, total, cpus)


@dataclass(frozen=True)
class MachineLoad:
    """How busy the machine was between two ``sample``s.

    Attributes:
        wall_s: seconds between the samples.
        own_cores: cores this process used on average (its CPU time / wall time).
        other_cores: cores other programs used on average (None: no ``/proc/stat``; the load average stands in).
        saturated: every core of the machine was at least ``SATURATED`` busy (None: unknown).
        load_average: the 1-minute load average at the end (None where the OS has none).
        cores: cores this process may use (``pass_cost.cpu_load``).
    """

    wall_s: float
    own_cores: float
    other_cores: float | None
    saturated: bool | None
    load_average: float | None
    cores: int

    @property
    def busy(self) -> bool:
        """Other programs took CPU time the race could have used: on average at least ``OTHER_CORES_BUSY`` cores
        while every core was busy; without ``/proc/stat``, a load average beyond this process's own cores by
        more than the cores left to others (+ ``OTHER_CORES_BUSY``). Never over less than ``MIN_WALL_S``."""
        if self.wall_s < MIN_WALL_S:
            return False
        if self.other_cores is not None:
            return bool(self.saturated) and self.other_cores >= OTHER_CORES_BUSY
        if self.load_average is None:
            return False
        return self.load_average - self.own_cores > max(0.0, self.cores - self.own_cores) + OTHER_CORES_BUSY


def load_between(start: CpuSample, end: CpuSample) -> MachineLoad:
    """``MachineLoad`` from ``start`` to ``end`` (``sample``s, ``end`` taken later)."""
    return load_over([(start, end)])


def load_over(spans: list[tuple[CpuSample, CpuSample]]) -> MachineLoad:
    """``MachineLoad`` over the (start, end) ``sample`` pairs of ``spans`` together: their wall, own and machine CPU
    times summed (the spans of a race that ran, without its pauses: ``LoadMeter.pause``)."""
    wall = max(sum(end.wall_s - start.wall_s for start, end in spans), 1e-9)
    own = max(0.0, sum(end.own_cpu_s - start.own_cpu_s for start, end in spans))
    load, cores = cpu_load()
    other = saturated = None
    counted = all(None not in (start.busy_s, end.busy_s, start.total_s, end.total_s) for start, end in spans)
    total = sum(end.total_s - start.total_s for start, end in spans) if counted else 0.0
    if total > 0:
        busy = sum(end.busy_s - start.busy_s for start, end in spans)
        other = max(0.0, busy - own) / wall
        cpus = max(end.cpus for _, end in spans)
        if cpus:  # at most every core /proc/stat counts (over a few 10-ms ticks rounding read 2.2 of 2 cores)
            other = min(other, float(cpus))
        saturated = busy >= SATURATED * total
    return MachineLoad(wall, own / wall, other, saturated, load, cores)


class LoadMeter:
    """Measures the machine's load from its creation on: ``LoadMeter().load()`` at any later time. Between
    ``pause()`` and ``resume()`` nothing is counted: a paused race computes nothing (the step-through, slow
    motion's waits), so what other programs do then cannot slow it down (a teacher's paused race was called busy
    for the browser's own work while it waited)."""

    def __init__(self, stat_path: str = "/proc/stat"):
        self.stat_path = stat_path
        self.start: CpuSample | None = sample(stat_path)
        self.spans: list[tuple[CpuSample, CpuSample]] = []  # the counted spans that have ended

    def pause(self) -> None:
        """Stop counting (no-op when paused already)."""
        if self.start is not None:
            self.spans.append((self.start, sample(self.stat_path)))
            self.start = None

    def resume(self) -> None:
        """Count again (no-op unless paused)."""
        if self.start is None:
            self.start = sample(self.stat_path)

    def load(self) -> MachineLoad:
        """The load over every counted span so far (the one running now included)."""
        running = [(self.start, sample(self.stat_path))] if self.start is not None else []
        return load_over(self.spans + running)


def busy_line(load: MachineLoad | None) -> str:
    """The page's warning when ``load.busy`` (else ""): the cores other programs took during the race, then the
    1-minute load average (it lags by a minute, so it may be lower: said as such, as "load 0.6" beside "1.0 cores"
    read as a contradiction), that timings are unreliable, and that the page's own browser counts when it runs on
    the same machine (a helper saw the warning on every race driven from a browser on a 2-core machine)."""
    if load is None or not load.busy:
        return ""
    average = (f"1-minute load average {load.load_average:.1f}" if load.load_average is not None else "")
    if load.other_cores is not None:
        what = f"other programs took {load.other_cores:.1f} of {load.cores} cores on average during it" + (
            f"; {average}, which lags by a minute" if average else "")
    else:
        what = f"{average or 'load unknown'} on {load.cores} cores"
    return (f"⚠ **The machine was busy during this race** ({what}): timings are unreliable. "
            "Run again when the machine is idle (a browser showing this page on the same machine counts too: on 2 "
            "cores its drawing can take one; watch from another device).")
