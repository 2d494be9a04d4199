"""Real servers and the real browser for the tests: ``python app.py`` on a free port, and Debian's Chromium."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def find_chromium() -> Path:
    """Debian's ``chromium-headless-shell`` when installed, else Debian's ``chromium``: the same Chromium (Blink, V8,
    Skia) without the desktop browser around it, as Playwright runs headless pages itself. Measured on an Intel Xeon
    (2 cores): a page load cost 1.7 core-seconds in the shell against 4.5 in chromium, and the browser tests
    (``-m browser -n 2``) took 231 s against 278 s of pytest, all passing in both."""
    for name in ("chromium-headless-shell", "chromium"):
        found = shutil.which(name)
        if found:
            return Path(found)
    return Path("/usr/bin/chromium")


CHROMIUM = find_chromium()
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def in_ci() -> bool:
    """True under CI: ``CI`` set to anything but "", "0", "false" or "no"."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, picked by the OS (two xdist workers never get the same one)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class AppServer:
    """``python app.py`` running on a localhost port."""

    url: str
    proc: subprocess.Popen
    log_path: Path

    def log_mark(self) -> int:
        """The log's length now: ``log_since(mark)`` is what the server wrote after it."""
        return self.log_path.stat().st_size

    def log_since(self, mark: int = 0) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as log:
            log.seek(mark)
            return log.read()


@contextlib.contextmanager
def running_server(model: str, log_path: Path, *extra_args: str, timeout_s: float = 120.0):
    """``python app.py --model MODEL --backend fp32 --threads 1 [EXTRA_ARGS]`` on a free localhost port; yields an
    ``AppServer`` once the page answers. fp32 on one thread: no test here is about the backend, and the default
    (``--backend auto``) measures the machine, with a core kept busy, until a quiet CPU lets it cache the result."""
    port = free_port()
    env = dict(os.environ, GRADIO_SERVER_PORT=str(port), GRADIO_SERVER_NAME="127.0.0.1", HF_HUB_OFFLINE="1",
               GRADIO_ANALYTICS_ENABLED="False", OMP_NUM_THREADS="1")
    log = open(log_path, "w+", encoding="utf-8")
    proc = subprocess.Popen([sys.executable, str(REPO / "app.py"), "--model", model, "--backend", "fp32",
                             "--threads", "1", *extra_args], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"app.py exited with {proc.returncode}:\n{log.read()[-3000:]}")
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"app.py did not serve {url} within {timeout_s} s") from None
                time.sleep(0.25)
        yield AppServer(url, proc, log_path)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def local_client(url: str, **options):
    """``gradio_client.Client(url)`` for a server of this run on localhost (plain http), quiet, without building an
    SSL context: gradio_client opens a new httpx client, and with certificate checks each loads the CA bundle
    (22 ms of CPU), for every request, stream and download, some 750 times in a full run (py-spy: 17 s)."""
    from gradio_client import Client

    return Client(url, verbose=False, ssl_verify=False, **options)


def require_browser(chromium: Path = CHROMIUM):
    """Playwright's sync API, or skip (outside CI) / fail (in CI) saying what is missing."""
    reason = None
    if not chromium.exists():
        reason = f"Debian's chromium is missing ({chromium}): make browser installs it (as root)"
    else:
        try:
            from playwright import sync_api
        except ImportError as err:
            reason = f"playwright is missing ({err}): pip install -e '.[test]'"
    if reason is None:
        return sync_api
    if in_ci():
        pytest.fail(f"CI is set but the browser test cannot run: {reason}", pytrace=False)
    pytest.skip(reason)
