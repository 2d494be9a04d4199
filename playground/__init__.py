"""The app's UI package: the page's layout, its handlers, and the figures and display values it shows, built
from step events and reports. Only this package and ``app.py`` import Plotly and Gradio; ``pass_core`` imports
neither, and nothing here touches a model, a cache, a tokenizer or a tensor, or computes a metric: method names
and colours come from ``pass_core.registry.METHODS``, metrics from ``pass_core.decoding.metrics``.

Start at ``page.build_demo`` (the page: ``layout`` places the components, ``page`` wires each event to its
handler); every module's role is listed in docs/architecture.md ("playground/ and app.py").
"""

import os as _os

try:  # gradio reads GRADIO_SERVER_PORT when it is imported: "abc" ended in its traceback, before --port was parsed
    int(_os.environ.get("GRADIO_SERVER_PORT", "7860"))
except ValueError:
    raise SystemExit(f"error: GRADIO_SERVER_PORT={_os.environ['GRADIO_SERVER_PORT']!r} is not a port: set it to a "
                     "whole number from 1 to 65535, or unset it and give --port.") from None
