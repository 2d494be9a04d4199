"""An idle page asks the browser for no frames: a fix, from outside Gradio, for timers Gradio leaves running.

A Gradio 6 status tracker counts the seconds of a pending event with a ``requestAnimationFrame`` loop that only its
own next status change stops. A tracker removed while pending never gets one: the one shown while the page loads
(removed once loaded), or a chart's when a step-through frame hides that chart. Each such loop has the browser draw
60 frames a second for ever. Measured on the Intel Xeon in headless Chromium, an idle tab of this page cost 1.1-1.2
core-seconds per 10 s (12 % of a core; the same on a bare ``gr.Blocks`` page), and 0.01-0.11 with the loop ended;
after Next on a finished race two loops ran (133 tracker frames a second). The tracker's code keeps
``requestAnimationFrame`` as it was when its module loaded, before any ``head=`` or ``js=`` script of a page runs,
so ``STOP_LEAKED_TIMER_JS`` must run earlier: ``EarlyScript`` writes it into the page's HTML in front of Gradio's own
scripts (``launch_options`` adds it).

``STOP_LEAKED_TIMER_JS`` does not pass on a frame that a tracker's code asks for again from inside a frame it asked
for (its timer's loop) while no tracker on the page shows a timer or a bar: that ends every such loop, and a tracker
on show keeps counting (a queued race's wait, the lab's and the pass-cost measurement's bars were checked). A
tracker's first request always passes: its autoscroll asks for one frame, and held back once it never scrolled again
(a refused Run's message stayed out of view). Frames asked for through Svelte's animation loop are always passed on:
holding back one of those would stop that loop for the whole page. A tracker's spinner animates on through that loop
for some 4 s after its answer removed it (60 frames a second), so the page's instant listeners hide theirs
(``show_progress="hidden"``; only the race, replay, lab and pass-cost measurement show one). If a later Gradio stops
its timers itself, nothing is left for this to do.
"""

from __future__ import annotations

from starlette.middleware import Middleware

#: Client-side, before Gradio's scripts (``EarlyScript``): a frame that a status tracker's code asks for again from
#: inside a frame it asked for (its timer's loop) is not passed on while no tracker shows a timer or a bar; a
#: tracker's first request (its autoscroll's, or a timer's start) always is (see the module's docstring).
STOP_LEAKED_TIMER_JS = (
    "(() => { const raf = window.requestAnimationFrame.bind(window); let inTracker = false; const shown = () => "
    "[...document.querySelectorAll('.meta-text, .meta-text-center, .progress-text, .eta-bar')].some(e => e."
    "offsetParent !== null); window.requestAnimationFrame = cb => { if (!(new Error().stack || '').split('\\n')"
    ".slice(0, 3).some(line => line.includes('statustracker'))) return raf(cb); if (inTracker && !shown()) return 0;"
    " return raf(t => { inTracker = true; try { cb(t); } finally { inTracker = false; } }); }; })();")


class EarlyScript:
    """ASGI middleware: the page's HTML (a GET or HEAD of a path ending in "/", answered with text/html) gets
    ``<script>script</script>`` right before its first ``<script type="module"`` (Gradio's scripts), so that it runs
    first, and a content-length that counts it (a HEAD's too: Starlette hands the body on and the server drops it).
    Every other response passes through untouched, streamed as it comes (the queue's event streams too).

    Args:
        app: the ASGI app it wraps (Starlette passes it).
        script: JavaScript source (no ``</script>`` in it).
    """

    MARKER = b'<script type="module"'

    def __init__(self, app, script: str):
        self.app, self.tag = app, f"<script>{script}</script>".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD") or not scope["path"].endswith("/"):
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
                start = {**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]}
            await send(start)
            return await send({"type": "http.response.body", "body": body})

        return await self.app(scope, receive, edit)


def app_middleware() -> list[Middleware]:
    """``launch(app_kwargs=dict(middleware=...))``'s list: ``EarlyScript`` with ``STOP_LEAKED_TIMER_JS``."""
    return [Middleware(EarlyScript, script=STOP_LEAKED_TIMER_JS)]
