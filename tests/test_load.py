"""Load: many visitors at once on ``python app.py`` (tiny model), through ``gradio_client``.

The server is the run's one ``app_server`` (conftest.py: a tiny model with a 2,048-token context, so that a long
race lasts seconds). Eight sessions race at the same moment: each gets the output of a solo run of its prompt, the waiting
ones are told their place in the queue, and the server's memory stays bounded. A visitor who leaves
(``job.cancel()``, what closing the tab does) frees the place in the queue, or the running slot.
"""

from __future__ import annotations

import threading
import time
import urllib.request
import json

import psutil
from gradio_client.utils import Status

from playground import page
from servers import local_client
from test_app import API_OUTPUT_NAMES, pane_text

PROMPTS = [
    "Hello there", "Tell me a story", "What is a rainbow?", "List three fruits",
    "Write a haiku", "Why is the sky blue?", "Count to five", "Say something kind",
]
RACE = list(page.DEFAULT_RACE)
PANES = [f"{key}_tokens" for key in page.METHODS]
#: Peak RSS the server may reach during the burst, over its RSS before it (measured: about 60 MB; see below).
RSS_GROWTH_LIMIT = 300 * 2**20


def race_args(prompt: str, max_new_tokens: int = 24, methods=RACE) -> tuple:
    """Positional inputs of /race: greedy, L = 2, the chat template on."""
    return prompt, 2, 0.0, 0, 1.0, max_new_tokens, 0, True, False, list(methods), True


def outputs_of(result) -> dict[str, str]:
    """Pane key -> the pane's text, for the panes that hold any."""
    named = dict(zip(API_OUTPUT_NAMES, result, strict=True))
    return {pane: pane_text(named[pane]) for pane in PANES if pane_text(named[pane])}


def queue_size(url: str) -> int:
    """Events waiting in the server's queue (not the running one)."""
    with urllib.request.urlopen(url + "gradio_api/queue/status", timeout=5) as response:
        return json.load(response)["queue_size"]


def wait_for(condition, timeout_s: float = 10.0, every_s: float = 0.01) -> bool:
    """Poll ``condition()`` until it holds (True) or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every_s)
    return condition()


class PeakRSS(threading.Thread):
    """Samples a process's resident memory every 20 ms; ``peak`` is the largest sample, in bytes."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.process, self.peak, self.done = psutil.Process(pid), 0, threading.Event()

    def run(self):
        while not self.done.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.02)


def test_eight_sessions_race_at_once(app_server):
    url, proc, mark = app_server.url, app_server.proc, app_server.log_mark()
    solo = {prompt: outputs_of(local_client(url).predict(*race_args(prompt), api_name="/race"))
            for prompt in PROMPTS}
    assert all(len(panes) == len(RACE) for panes in solo.values())
    clients = [local_client(url) for _ in PROMPTS]  # one session each, like eight browser tabs
    sampler = PeakRSS(proc.pid)
    before = sampler.process.memory_info().rss
    sampler.start()
    started = time.monotonic()
    jobs = [client.submit(*race_args(prompt), api_name="/race") for client, prompt in zip(clients, PROMPTS)]
    ranks = {i: set() for i in range(len(jobs))}  # the queue positions each session was told
    while not all(job.done() for job in jobs):
        for i, job in enumerate(jobs):
            status = job.status()
            if status.code == Status.IN_QUEUE and status.rank is not None:
                ranks[i].add(status.rank)
        time.sleep(0.005)
    results = [job.result(timeout=60) for job in jobs]
    wall_s = time.monotonic() - started
    sampler.done.set()
    sampler.join()
    for prompt, result in zip(PROMPTS, results):
        assert outputs_of(result) == solo[prompt], prompt  # greedy: the same text as alone, pane by pane
    told = [i for i, seen in ranks.items() if any(rank >= 1 for rank in seen)]
    assert len(told) >= len(jobs) // 2, ranks  # waiting sessions were told their place (at most one runs)
    assert max(max(seen, default=0) for seen in ranks.values()) >= 3, ranks
    growth = sampler.peak - before
    print(f"\n8 sessions: {wall_s:.1f} s wall; server RSS {before / 2**20:.0f} MiB before, peak "
          f"{sampler.peak / 2**20:.0f} MiB (+{growth / 2**20:.0f} MiB); queue ranks seen: "
          f"{ {i: sorted(s) for i, s in ranks.items()} }")
    assert growth < RSS_GROWTH_LIMIT
    assert "Traceback" not in app_server.log_since(mark)


def test_a_visitor_who_leaves_frees_the_queue(app_server):
    """Cancelling a waiting job takes it out of the queue; cancelling the running race lets the next one start."""
    url, mark = app_server.url, app_server.log_mark()
    running = local_client(url).submit(*race_args("A long story", 1024, list(page.METHODS)),
                                                api_name="/race")
    assert wait_for(lambda: running.status().code == Status.PROCESSING or len(running.outputs()) > 0)
    leaver, stayer = (local_client(url).submit(*race_args(p, 8), api_name="/race") for p in ("Hi", "Yo"))
    assert wait_for(lambda: queue_size(url) == 2), queue_size(url)
    leaver.cancel()
    assert wait_for(lambda: queue_size(url) == 1, timeout_s=5), "the cancelled job kept its place in the queue"
    assert not running.done()  # the long race still runs: the place was freed by the cancel, not by the race
    assert not stayer.done()  # the one left waiting
    cancelled_at = time.monotonic()
    running.cancel()  # the racing visitor closes the tab: the next in line starts at once
    result = stayer.result(timeout=30)
    waited_s = time.monotonic() - cancelled_at
    assert "Finished" in dict(zip(API_OUTPUT_NAMES, result, strict=True))["run_info"]
    print(f"\nafter the running race was cancelled, the next one finished in {waited_s:.2f} s")
    assert waited_s < 3, waited_s  # the cancelled race alone takes about 5 s more
    assert leaver.status().code == Status.CANCELLED and running.status().code == Status.CANCELLED
    assert queue_size(url) == 0
    assert "Traceback" not in app_server.log_since(mark)
