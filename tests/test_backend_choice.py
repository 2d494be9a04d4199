"""``--backend auto``: the backend and thread count are chosen by measurement (fake timings here), cached per
machine, model, dtype and torch version, and measured again when one of them changes."""

from __future__ import annotations

import json

import pytest
import torch

from pass_core.runtime import backend_choice
from pass_core.runtime.backend_choice import Timing, choose_backend, pick
from pass_core.runtime.backends import check_backend, default_backend, resolve_backend


def test_the_faster_backend_is_chosen_whichever_it_is():
    amd = [Timing("fp32", 1, 36.0, 37.0), Timing("onednn", 1, 33.7, 34.0)]
    intel = [Timing("fp32", 1, 81.3, 82.0), Timing("onednn", 1, 117.9, 119.0)]
    assert pick(amd)[0].backend == "onednn"
    assert pick(intel)[0].backend == "fp32"  # the slower backend is never the default


def test_a_setting_that_collapses_under_load_is_not_chosen():
    # 2 threads are a little faster quiet but 5x slower with a core taken: 1 thread wins
    timings = [Timing("fp32", 1, 40.0, 41.0), Timing("fp32", 2, 36.0, 180.0)]
    best, why = pick(timings)
    assert (best.backend, best.threads) == ("fp32", 1) and "1.5x" in why
    # every thread count collapses: the one fastest under load, and at it the fastest backend quiet
    best, why = pick([Timing("fp32", 1, 40.0, 90.0), Timing("onednn", 1, 38.0, 95.0), Timing("onednn", 2, 30.0, 150.0)])
    assert (best.backend, best.threads) == ("onednn", 1) and "under load" in why
    # threads fixed by the user (one thread count): the backend is the fastest quiet, whatever the load does
    best, _ = pick([Timing("fp32", 2, 107.0, 270.0), Timing("onednn", 2, 132.0, 200.0)])
    assert best.backend == "fp32"
    with pytest.raises(ValueError):
        pick([])


class FakeLoaded:
    def __init__(self, name="tiny", parameters=None):
        self.name, self.dtype, self.device = name, torch.float32, torch.device("cpu")
        self.dtype_name = "float32"  # as LoadedModel.dtype_name
        if parameters is not None:
            self.model = torch.nn.Linear(parameters, 1, bias=False)


def test_a_cached_choice_is_reused_and_a_new_torch_version_measures_again(tmp_path, monkeypatch):
    monkeypatch.setattr(backend_choice, "cpu_load", lambda: (0.0, 2))  # an idle machine
    calls = []

    def measure(loaded, threads):
        calls.append(threads)
        return [Timing("fp32", 1, 50.0, 51.0), Timing("onednn", 1, 40.0, 41.0)]

    first = choose_backend(FakeLoaded(), cache_dir=tmp_path, measure=measure)
    assert first["backend"] == "onednn" and not first["cached"] and len(calls) == 1
    stored = json.loads((tmp_path / backend_choice.CACHE_FILE).read_text())
    assert first["key"] in stored and f"torch {torch.__version__}" in first["key"]
    again = choose_backend(FakeLoaded(), cache_dir=tmp_path, measure=measure)
    assert again["cached"] and again["backend"] == "onednn" and len(calls) == 1  # not measured again
    choose_backend(FakeLoaded("other-model"), cache_dir=tmp_path, measure=measure)
    assert len(calls) == 2  # another model: measured
    monkeypatch.setattr(torch, "__version__", "9.9.9+test")
    choose_backend(FakeLoaded(), cache_dir=tmp_path, measure=measure)
    assert len(calls) == 3  # a changed torch version: measured again
    choose_backend(FakeLoaded(), threads=2, cache_dir=tmp_path, measure=measure)
    assert calls[-1] == 2  # fixed threads are part of the key and reach the measurement


def test_a_folder_is_keyed_by_its_path_and_its_size(tmp_path, monkeypatch):
    """The same ``--model model`` in two working folders, or a model of another size saved in the same folder, is
    another model: measured again (the choice of the first was reused for both)."""
    monkeypatch.setattr(backend_choice, "cpu_load", lambda: (0.0, 2))
    calls = []

    def measure(loaded, threads):
        calls.append(loaded)
        return [Timing("fp32", 1, 50.0, 51.0)]

    for where in ("a", "b"):
        (tmp_path / where / "model").mkdir(parents=True)
        monkeypatch.chdir(tmp_path / where)
        for parameters in (8, 8, 16):
            choice = choose_backend(FakeLoaded("model", parameters), cache_dir=tmp_path, measure=measure)
            assert str(tmp_path / where / "model") in choice["key"] and f"({parameters:,} parameters)" in choice["key"]
    assert len(calls) == 4  # a/model of 8, a/model of 16, b/model of 8, b/model of 16: each measured once


def test_a_choice_measured_on_a_busy_cpu_is_not_cached(tmp_path, monkeypatch):
    monkeypatch.setattr(backend_choice, "cpu_load", lambda: (5.0, 2))
    choice = choose_backend(FakeLoaded(), cache_dir=tmp_path, measure=lambda loaded, threads: [Timing("fp32", 1, 9.0)])
    assert "busy" in choice["why"] and not (tmp_path / backend_choice.CACHE_FILE).exists()


def test_a_choice_timed_while_other_programs_took_the_cores_is_not_cached(tiny, tmp_path, monkeypatch):
    """The load average, read before the measurement, lags by a minute: a program started just then took 0.61 of 2
    cores unseen, and a distorted choice (fp32 on 1 thread, 2.5x slower with a core taken) was cached for every
    later start. The quiet timings now count other programs' CPU time (``machine_load``), and such a choice is used
    but not cached."""
    from types import SimpleNamespace

    monkeypatch.setattr(backend_choice, "cpu_load", lambda: (0.2, 2))  # the load average: idle
    monkeypatch.setattr(backend_choice, "load_between", lambda start, end: SimpleNamespace(busy=True, other_cores=0.61))
    timings = backend_choice.measure_candidates(tiny, threads=1, repeats=1, busy=False)
    assert timings and all(t.other_cores == 0.61 for t in timings)
    choice = choose_backend(FakeLoaded(), cache_dir=tmp_path, measure=lambda loaded, threads: timings)
    assert "other programs took 0.6 of 2 cores), so not cached" in choice["why"] and not choice["cached"]
    assert not (tmp_path / backend_choice.CACHE_FILE).exists()
    monkeypatch.setattr(backend_choice, "load_between", lambda start, end: SimpleNamespace(busy=False, other_cores=0.1))
    assert all(t.other_cores is None for t in backend_choice.measure_candidates(tiny, threads=1, repeats=1, busy=False))


def test_a_damaged_cache_file_is_measured_over(tmp_path, monkeypatch):
    monkeypatch.setattr(backend_choice, "cpu_load", lambda: (0.0, 2))
    (tmp_path / backend_choice.CACHE_FILE).write_text("{not json")
    choice = choose_backend(FakeLoaded(), cache_dir=tmp_path,
                            measure=lambda loaded, threads: [Timing("fp32", 1, 10.0)])
    assert choice["backend"] == "fp32" and not choice["cached"]


def test_auto_is_the_cpu_default_and_loads_float32():
    assert default_backend("cpu") == "auto" and default_backend("cuda") == "fp32"
    assert check_backend("auto", "cpu").dtype == "float32"
    assert resolve_backend(None, "auto", torch.device("cpu")) == ("auto", "float32")


def test_measured_choice_on_a_tiny_model(tiny, tmp_path):
    """The real measurement on the tiny model: every exact backend and thread count is timed, the choice is
    one of them and is applied (the tiny model's own copy is left unchanged for the other tests)."""
    import copy

    loaded = copy.copy(tiny)
    loaded.model = copy.deepcopy(tiny.model)
    loaded.backend, loaded.backend_choice = "", None
    before = torch.get_num_threads()
    try:
        choice = backend_choice.apply_auto_backend(loaded, cache_dir=tmp_path)
        names = {(t["backend"], t["threads"]) for t in choice["timings"]}
        assert ("fp32", 1) in names and all(t["quiet_ms"] > 0 for t in choice["timings"])
        assert loaded.backend == choice["backend"] and loaded.backend_choice is choice
        assert "backend auto ->" in backend_choice.choice_line(choice)
    finally:
        torch.set_num_threads(before)


def test_the_busy_core_ignores_the_terminals_ctrl_c():
    """``bench --busy-core``: a Ctrl-C at the terminal reaches the spinning process too, which printed a traceback
    of its own beside the benchmark's "interrupted" line (helper 68). It ignores it; the benchmark stops it."""
    import os
    import signal
    import time

    with backend_choice.BusyCore() as busy:
        time.sleep(1.0)  # Python has started and set its handlers
        os.kill(busy.proc.pid, signal.SIGINT)
        time.sleep(0.5)
        assert busy.proc.poll() is None, "the spinning process ended at Ctrl-C (with a traceback)"
    assert busy.proc.poll() is not None  # stopped with the context
