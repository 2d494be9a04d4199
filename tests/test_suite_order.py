"""The order ``make test`` runs the suite in (``conftest.pytest_collection_modifyitems_long_tests_first``): one chunk
per xdist worker, of exactly the size pytest-xdist's worksteal scheduler sends it, each chunk's long tests first."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
from xdist.scheduler.worksteal import WorkStealingScheduling

import conftest


@dataclass
class FakeNode:
    """What the scheduler sees of a worker: the test indices it was sent."""

    name: str
    sent: list = field(default_factory=list)
    shutting_down: bool = False

    @property
    def gateway(self):
        return SimpleNamespace(id=self.name)

    def send_runtest_some(self, indices):
        self.sent.extend(indices)

    def __hash__(self):
        return hash(self.name)


@pytest.mark.parametrize("n, workers", [(549, 2), (550, 2), (7, 2), (550, 3), (100, 4)])
def test_chunk_sizes_are_what_the_worksteal_scheduler_sends(n, workers):
    config = SimpleNamespace(getvalue=lambda name: [f"{workers}*popen"] if name == "tx" else None)
    scheduler = WorkStealingScheduling(config)
    nodes = [FakeNode(f"gw{i}") for i in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
    for node in nodes:
        scheduler.add_node_collection(node, [f"t{i}" for i in range(n)])
    scheduler.schedule()
    sizes = conftest.worksteal_chunk_sizes(n, workers)
    assert [node.sent for node in nodes] == [list(range(sum(sizes[:i]), sum(sizes[:i + 1]))) for i in range(workers)]


@dataclass
class FakeItem:
    """A collected test as the ordering hook reads it: a module path and marker names."""

    path: Path
    marks: tuple = ()
    fixturenames: tuple = ()

    def iter_markers(self):
        return (SimpleNamespace(name=mark) for mark in self.marks)


def test_each_worker_chunk_starts_with_its_long_tests_and_ends_with_quick_ones():
    """Modules of uneven sizes (a greedy split by module gives chunks 6 items apart): the order still cuts exactly
    where the scheduler cuts, so no chunk ends with another chunk's long tests, and each chunk has long tests."""
    items = ([FakeItem(Path("a.py"), ("slow",))] * 3 + [FakeItem(Path("b.py"), ("browser",))] * 5
             + [FakeItem(Path("c.py"), ("slow",))] * 2 + [FakeItem(Path("d.py"))] * 40 + [FakeItem(Path("e.py"))] * 3)
    for workers in (2, 3):
        order = list(items)
        conftest.pytest_collection_modifyitems_long_tests_first(
            SimpleNamespace(workerinput={"workercount": workers}), order)
        assert sorted(map(id, order)) == sorted(map(id, items))  # the same tests, each once
        start = 0
        for size in conftest.worksteal_chunk_sizes(len(order), workers):
            costs = [conftest.cost_class(item) for item in order[start:start + size]]
            assert costs == sorted(costs, reverse=True), (workers, costs)  # long first, quick last
            assert costs[0] > 0 and costs[-1] == 0, (workers, costs)
            start += size


def test_the_app_servers_tests_of_every_module_run_on_one_worker():
    """The tests that use ``app_server`` come from several modules and cost classes; they land in one chunk (one
    worker starts the app for all of them), and each chunk still runs its long tests first."""
    server = ("app_server",)
    items = ([FakeItem(Path("a.py"), ("slow",))] * 6 + [FakeItem(Path("b.py"), ("browser", "process"), server)] * 2
             + [FakeItem(Path("g.py"), ("browser",))] * 5 + [FakeItem(Path("c.py"), ("process",), server)] * 3 + [FakeItem(Path("d.py"), ("process",))] * 4
             + [FakeItem(Path("e.py"))] * 30 + [FakeItem(Path("f.py"), (), server)] * 2)
    order = list(items)
    conftest.pytest_collection_modifyitems_long_tests_first(SimpleNamespace(workerinput={"workercount": 2}), order)
    assert sorted(map(id, order)) == sorted(map(id, items))
    first = conftest.worksteal_chunk_sizes(len(order), 2)[0]
    chunks = order[:first], order[first:]
    holding = [i for i, chunk in enumerate(chunks) if any(item.fixturenames for item in chunk)]
    assert len(holding) == 1, [[item.path.name for item in chunk if item.fixturenames] for chunk in chunks]
    for chunk in chunks:
        costs = [conftest.cost_class(item) for item in chunk]
        assert costs == sorted(costs, reverse=True), costs
