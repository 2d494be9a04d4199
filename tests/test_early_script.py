"""``playground.idle_frames.EarlyScript``: the page's HTML gets the script in front of Gradio's module scripts, with
a content-length that counts it for GET and HEAD alike; everything else passes through as it came."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.responses import HTMLResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from playground.idle_frames import STOP_LEAKED_TIMER_JS, app_middleware

PAGE = '<html><head><script type="module" src="/assets/index.js"></script></head><body></body></html>'


def client() -> TestClient:
    """A Starlette app with the page's middleware: ``/`` the page, ``/plain/`` HTML without module scripts,
    ``/text/`` plain text, ``/stream/`` a streamed answer in three chunks."""
    routes = [Route("/", lambda r: HTMLResponse(PAGE)), Route("/plain/", lambda r: HTMLResponse("<p>hi</p>")),
              Route("/text/", lambda r: PlainTextResponse(PAGE)),
              Route("/stream/", lambda r: StreamingResponse(iter([b"a", b"b", b"c"]), media_type="text/html"))]
    return TestClient(Starlette(routes=routes, middleware=app_middleware()))


def test_the_script_goes_in_front_of_the_module_scripts_and_head_counts_it_too():
    c = client()
    page = c.get("/")
    tag = f"<script>{STOP_LEAKED_TIMER_JS}</script>"
    assert page.text == PAGE.replace('<script type="module"', tag + '<script type="module"', 1)
    assert int(page.headers["content-length"]) == len(page.content) == len(PAGE.encode()) + len(tag.encode())
    head = c.head("/")  # a HEAD announced the page without the script (68 bytes for 605)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == page.headers["content-length"]
    for path, body in (("/plain/", "<p>hi</p>"), ("/text/", PAGE), ("/stream/", "abc")):
        for answer in (c.get(path), c.head(path)):
            assert answer.status_code == 200 and answer.content in (body.encode(), b""), path
            if "content-length" in answer.headers:
                assert int(answer.headers["content-length"]) == len(body.encode()), path
