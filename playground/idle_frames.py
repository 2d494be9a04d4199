"""An idle page asks the browser for no frames: a fix, from outside Gradio, for a timer Gradio leaves running.

Gradio 6 shows a status tracker while the app loads and removes it once loaded, but the tracker's elapsed-time timer,
a ``requestAnimationFrame`` loop started while it was pending, never stops: every open tab then has the browser draw
60 frames a second for nothing. Measured on the Intel Xeon in headless Chromium, an idle tab of this page cost 1.1-1.2
core-seconds per 10 s (12 % of a core, forever; the same on a bare ``gr.Blocks`` page), and 0.01-0.05 with that loop
stopped. The tracker's code keeps ``requestAnimationFrame`` as it was when its module loaded, before any ``head=`` or
``js=`` script of a page runs, so ``STOP_LEAKED_TIMER_JS`` must run earlier: ``EarlyScript`` writes it into the
page's HTML in front of Gradio's own scripts (``launch_options`` adds it).

``STOP_LEAKED_TIMER_JS`` follows each chain of frame requests (a request made inside a frame's callback belongs to
that callback's chain) and marks the chains begun before the app had drawn itself (no ``gradio-app main`` yet). Once
the app is drawn, the next request of a marked chain made from the status tracker's code is not passed on, which
ends that loop; every other chain runs as before: the trackers of a race, begun after the load, keep their timers,
and Svelte's animation loop is never in a marked chain of the tracker's. If a later Gradio stops the timer itself,
nothing is left for this to do.
"""

from __future__ import annotations

from starlette.middleware import Middleware

#: Client-side, before Gradio's scripts (``EarlyScript``): ends the frame loops of the status tracker that showed while
#: the app loaded (see the module's docstring).
STOP_LEAKED_TIMER_JS = (
    "(() => { const raf = window.requestAnimationFrame.bind(window); let chain = null; "
    "const drawn = () => document.querySelector('gradio-app main') !== null; "
    "window.requestAnimationFrame = cb => { const tag = chain !== null ? chain : (drawn() ? 'page' : 'loading'); "
    "if (tag === 'loading' && drawn() && /statustracker/.test(new Error().stack)) return 0; "
    "return raf(t => { const outer = chain; chain = tag; try { cb(t); } finally { chain = outer; } }); }; })();")


class EarlyScript:
    """ASGI middleware: the page's HTML (a GET of a path ending in "/", answered with text/html) gets
    ``<script>script</script>`` right before its first ``<script type="module"`` (Gradio's scripts), so that it runs
    first. Every other response passes through untouched, streamed as it comes (the queue's event streams too).

    Args:
        app: the ASGI app it wraps (Starlette passes it).
        script: JavaScript source (no ``</script>`` in it).
    """

    MARKER = b'<script type="module"'

    def __init__(self, app, script: str):
        self.app, self.tag = app, f"<script>{script}</script>".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "GET" or not scope["path"].endswith("/"):
            return await self.app(scope, receive, send)
        start, chunks = None, []

        async def edit(message):
            nonlocal start
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", []))
                if b"text/html" not in headers.get(b"content-type", b"") or b"content-encoding" in headers:
                    start = False  # not the page: passed on as it comes
                    return await send(message)
                start = message
                return None
            if start is False or message["type"] != "http.response.body":
                return await send(message)
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return None
            body = b"".join(chunks)
            if self.MARKER in body:
                body = body.replace(self.MARKER, self.tag + self.MARKER, 1)
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            return await send({"type": "http.response.body", "body": body})

        return await self.app(scope, receive, edit)


def app_middleware() -> list[Middleware]:
    """``launch(app_kwargs=dict(middleware=...))``'s list: ``EarlyScript`` with ``STOP_LEAKED_TIMER_JS``."""
    return [Middleware(EarlyScript, script=STOP_LEAKED_TIMER_JS)]
