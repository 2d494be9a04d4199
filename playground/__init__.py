"""The app's UI package: the page's layout, its handlers, and the figures and display values it shows, built
from step events and reports. Only this package and ``app.py`` import Plotly and Gradio; ``pass_core`` imports
neither, and nothing here touches a model, a cache, a tokenizer or a tensor, or computes a metric: method names
and colours come from ``pass_core.registry.METHODS``, metrics from ``pass_core.decoding.metrics``.

Start at ``page.build_demo`` (the page: ``layout`` places the components, ``page`` wires each event to its
handler); every module's role is listed in docs/architecture.md ("playground/ and app.py").
"""
