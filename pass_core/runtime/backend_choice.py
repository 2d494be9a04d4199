"""``--backend auto``: choose the backend and thread count on this machine by measuring, not by CPU vendor.

Why: the fastest way to compute a one-token pass differs between CPUs. oneDNN's packed kernels made AR 5-26 %
faster on the development AMD EPYC but 1.45x slower on an Intel Xeon with AMX (118 ms against 81 ms eager),
and two threads collapse when another process takes a core (3-6x slower), while one thread barely notices.

Protocol (``measure_candidates``): for every exact backend offered on the device (``fp32`` and, on a CPU with
oneDNN, ``onednn``; ``bf16`` is never chosen automatically, as its greedy outputs may differ from fp32 AR's at
near-ties) and every thread count (1 and all cores, unless the user fixed it), time one-token passes after a
64-token cache, interleaved across the candidates, median of ``repeats`` rounds; then the same with a busy
process spinning on one core. ``pick`` takes the fastest backend at each thread count, and the fastest thread
count among those that lose at most ``MAX_BUSY_SLOWDOWN`` when a core is taken (the fastest busy one when none
does). The result is cached per CPU, model, dtype, torch version and requested thread count in
``cache_root()/backend-choice.json`` for later loads; a changed torch version, CPU or model measures again (the
model keyed by its ``--model`` name, a folder or file by its absolute path, and its parameter count: a backend's
speed depends on the shapes, so a model of another size in the same folder is new).
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch

from pass_core.decoding.cache import StepClock, crop_to, new_cache
from pass_core.decoding.target import plain_head, target_forward
from pass_core.runtime.backends import BACKENDS, apply_backend, check_backend, set_cpu_threads
from pass_core.runtime.machine_load import load_between, sample
from pass_core.runtime.pass_cost import cpu_busy, cpu_load

#: The busy-core test: a candidate whose one-token pass slows down more than this with one core taken is not robust.
MAX_BUSY_SLOWDOWN = 1.5
#: Backends ``auto`` may choose: greedy outputs identical to fp32 AR's, token for token.
EXACT_BACKENDS = ("fp32", "onednn")
CACHE_FILE = "backend-choice.json"


@dataclass(frozen=True)
class Timing:
    """One candidate's measured one-token pass.

    Attributes:
        backend: a ``BACKENDS`` name.
        threads: torch CPU threads.
        quiet_ms: median milliseconds of a one-token pass, nothing else running.
        busy_ms: the same with one core taken by another process (None: not measured, e.g. one core only).
        other_cores: cores other programs took during the quiet timings, when they kept every core busy
            (``machine_load.MachineLoad.busy``: then ``quiet_ms`` is not quiet); None when not, or not counted.
    """

    backend: str
    threads: int
    quiet_ms: float
    busy_ms: float | None = None
    other_cores: float | None = None

    @property
    def busy_slowdown(self) -> float | None:
        return None if self.busy_ms is None else self.busy_ms / self.quiet_ms


def pick(timings: list[Timing], max_busy_slowdown: float = MAX_BUSY_SLOWDOWN) -> tuple[Timing, str]:
    """The candidate to use, and one sentence why.

    The backend is the fastest quiet one at its thread count (a slower backend is never chosen over a faster
    one). The thread count is the fastest quiet one among those whose chosen backend loses at most
    ``max_busy_slowdown`` (or was not measured) when another process takes a core; when none holds up, the one
    that is fastest with a core taken.

    Raises:
        ValueError: no timings.
    """
    if not timings:
        raise ValueError("No backend timings to choose from.")
    best_per_threads = [min((t for t in timings if t.threads == n), key=lambda t: t.quiet_ms)
                        for n in sorted({t.threads for t in timings})]
    robust = [t for t in best_per_threads if t.busy_slowdown is None or t.busy_slowdown <= max_busy_slowdown]
    if robust:
        best = min(robust, key=lambda t: t.quiet_ms)
        why = f"fastest one-token pass ({best.quiet_ms:.1f} ms)"
        if len(best_per_threads) > 1:
            why += f" among the thread counts that lose at most {max_busy_slowdown:g}x when another process " \
                   "takes a core"
    else:
        best = min(best_per_threads, key=lambda t: t.busy_ms)
        why = f"fastest one-token pass ({best.quiet_ms:.1f} ms)"
        if len(best_per_threads) > 1:
            why += f"; of the thread counts, the fastest with a core taken ({best.busy_ms:.1f} ms): every one " \
                   f"lost more than {max_busy_slowdown:g}x under load"
    return best, why


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else ``platform.processor()``."""
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                        platform.processor() or "unknown")
    except OSError:
        return platform.processor() or "unknown"


def usable_cores() -> int:
    """CPU cores this process may use (its affinity mask, which containers and Spaces narrow)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def choice_key(model_name: str, dtype: str, threads: int | None) -> str:
    """The cache key: CPU, cores, model, dtype, torch version and the requested threads ("any" = auto)."""
    return "|".join([cpu_name(), f"{usable_cores()} cores", model_name, dtype, f"torch {torch.__version__}",
                     f"threads {threads or 'any'}"])


def model_key(loaded) -> str:
    """``loaded``'s part of the cache key: its name, a folder or file by its absolute path ("model" named every
    folder of that name), and its parameter count (a model of another size saved under the same name)."""
    name, path = loaded.name, Path(loaded.name).expanduser()
    if name.strip() and path.exists():
        name = str(path.resolve())
    model = getattr(loaded, "model", None)
    return name if model is None else f"{name} ({sum(p.numel() for p in model.parameters()):,} parameters)"


def offered_backends(device: torch.device) -> list[str]:
    """The exact backends that run on ``device`` (``check_backend`` accepts them)."""
    offered = []
    for name in EXACT_BACKENDS:
        try:
            check_backend(name, device)
        except ValueError:
            continue
        offered.append(name)
    return offered


class BusyCore:
    """A context manager: another process spinning on one core (the last one this process may use)."""

    def __enter__(self):
        pin = ""
        if hasattr(os, "sched_getaffinity"):
            pin = f"import os; os.sched_setaffinity(0, {{{sorted(os.sched_getaffinity(0))[-1]}}})\n"
        quiet = "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\n"  # Ctrl-C: no traceback of it
        self.proc = subprocess.Popen([sys.executable, "-c", quiet + pin + "while True: pass"])
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


#: Tokens in the cache when the choice times a one-token pass (the pass-cost curve uses 200: its one-token pass is
#: slower, and both are shown on the page).
CHOICE_CACHE_TOKENS = 64


@torch.inference_mode()
def _pass_ms(loaded, copies: dict, candidates: list[tuple[str, int]], repeats: int,
             cache_len: int = CHOICE_CACHE_TOKENS) -> dict[tuple[str, int], float]:
    """Median ms of a one-token pass per (backend, threads), interleaved over the candidates."""
    caches = {}
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, loaded.vocab_size, (1, cache_len + 1), generator=gen).to(loaded.device)
    for backend, _ in candidates:
        if backend not in caches:
            model = copies[backend].model
            cache = new_cache(model)
            target_forward(model, cache, torch.tensor([cache_len - 1], device=loaded.device),
                           input_ids=ids[:, :cache_len], plain=plain_head(model))
            caches[backend] = (model, cache)
    clock = StepClock(loaded.device)
    times: dict[tuple[str, int], list[float]] = {c: [] for c in candidates}
    for round_ in range(repeats + 1):  # round 0 warms up
        for backend, threads in candidates:
            model, cache = caches[backend]
            torch.set_num_threads(threads)
            t0 = clock.now()
            target_forward(model, cache, torch.tensor([0], device=loaded.device),
                           input_ids=ids[:, cache_len:cache_len + 1], plain=plain_head(model))
            t1 = clock.now()
            crop_to(cache, cache_len)
            if round_:
                times[backend, threads].append((t1 - t0) * 1000)
    return {c: statistics.median(v) for c, v in times.items()}


def measure_candidates(loaded, threads: int | None = None, repeats: int = 15, busy: bool = True) -> list[Timing]:
    """Time every exact backend offered on ``loaded``'s device and thread count (see the module's protocol).

    ``loaded`` must hold float32 weights that no backend prepared yet; it is left unchanged (``onednn`` is
    measured on a packed copy). ``threads`` fixes the thread count; None tries 1 and all cores.
    """
    backends = offered_backends(loaded.device)
    thread_counts = [threads] if threads else sorted({1, usable_cores()})
    if loaded.device.type != "cpu":
        thread_counts = [torch.get_num_threads()]
    copies = {}
    for name in backends:
        copies[name] = loaded if not BACKENDS[name].packed else apply_backend(_copy(loaded), name)
    before = torch.get_num_threads()
    try:
        candidates = [(b, t) for b in backends for t in thread_counts]
        start = sample()  # other programs during the quiet timings (the busy ones below take a core on purpose)
        quiet = _pass_ms(loaded, copies, candidates, repeats)
        during = load_between(start, sample())
        other = during.other_cores if during.busy else None
        loaded_busy = None
        if busy and loaded.device.type == "cpu" and usable_cores() > 1:
            with BusyCore():
                loaded_busy = _pass_ms(loaded, copies, candidates, max(3, repeats // 2))
    finally:
        torch.set_num_threads(before)
    return [Timing(b, t, quiet[b, t], loaded_busy[b, t] if loaded_busy else None, other) for b, t in candidates]


def _copy(loaded):
    """A shallow copy of ``loaded`` with its own deep copy of the model (for a backend that changes layers)."""
    other = copy.copy(loaded)
    other.model = copy.deepcopy(loaded.model)
    return other


def _read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def choose_backend(loaded, threads: int | None = None, cache_dir: Path | None = None,
                   measure: Callable[..., list[Timing]] = measure_candidates, progress=None) -> dict:
    """The measured choice for ``loaded`` (float32, no backend applied yet), from the cache when this CPU, model,
    dtype, torch version and ``threads`` were measured before.

    Returns:
        {"backend": name, "threads": int, "why": sentence, "timings": [Timing as dict...], "key": cache key,
        "cached": bool, "measured_at": ISO date}.
    """
    from pass_core.runtime.sources import cache_root

    path = (cache_dir or cache_root()) / CACHE_FILE
    key = choice_key(model_key(loaded), loaded.dtype_name, threads)
    stored = _read_cache(path)
    if isinstance(stored.get(key), dict) and stored[key].get("backend") in BACKENDS:
        return {**stored[key], "cached": True}
    if progress:
        progress("measuring which backend and thread count decode fastest here (once per machine)…")
    load, cores = cpu_load()  # before our own passes add to it
    timings = measure(loaded, threads)
    best, why = pick(timings)
    choice = {"backend": best.backend, "threads": best.threads, "why": why, "key": key,
              "timings": [asdict(t) for t in timings], "load_average_1min": load, "cores": cores,
              "measured_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    others = next((t.other_cores for t in timings if t.other_cores is not None), None)
    if cpu_busy(load, cores) or others is not None:  # other jobs distort the timings: use it now, measure next time
        # (the load average, read before, lags by a minute: a job started then took 0.6 of 2 cores unseen, and its
        # distorted choice was cached for every later start)
        busy = (f"other programs took {others:.1f} of {cores} cores" if others is not None
                else f"load {load:.1f} on {cores} cores")
        choice["why"] += f"; measured while the CPU was busy ({busy}), so not cached"
        return {**choice, "cached": False}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**_read_cache(path), key: choice}, indent=1), encoding="utf-8")
    except OSError as err:  # a read-only cache folder: measure again next time
        print(f"note: could not cache the backend choice in {path}: {err}", file=sys.stderr)
    return {**choice, "cached": False}


def apply_auto_backend(loaded, threads: int | None = None, **kwargs) -> dict:
    """Choose (``choose_backend``), then prepare ``loaded`` for the chosen backend and set the thread count
    (unless ``threads`` fixed it). Records the choice on ``loaded.backend_choice``; returns it."""
    choice = choose_backend(loaded, threads, **kwargs)
    apply_backend(loaded, choice["backend"])
    if loaded.device.type == "cpu":
        set_cpu_threads(threads or choice["threads"])
    loaded.backend_choice = choice
    return choice


def choice_line(choice: dict) -> str:
    """One line for the page, the CLI and the bench: what was chosen and the times that chose it."""
    times = ", ".join(f"{t['backend']} {t['threads']}t {t['quiet_ms']:.1f} ms"
                      + (f" ({t['busy_ms']:.1f} ms busy)" if t.get("busy_ms") else "") for t in choice["timings"])
    when = choice.get("measured_at", "")[:10] or "at an earlier start"
    kept = f" (measured {when}, kept)" if choice.get("cached") else ""
    return (f"backend auto -> {choice['backend']}, {choice['threads']} thread(s): {choice['why']}{kept}. One-token "
            f"pass after {CHOICE_CACHE_TOKENS} tokens: {times}.")
