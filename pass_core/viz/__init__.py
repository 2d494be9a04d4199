"""Figures and display values built from step events and reports: the one part of ``pass_core``
that imports Plotly (never Gradio, never a model or a tensor).

- ``race_charts``: what the app's race shows (token colours, highlighted tokens, latency /
  cumulative / histogram / per-position figures, metric lines, the greedy check).
- ``bench_html``: the benchmark's HTML report (``python -m pass_core.viz.bench_html``).

Method names and colours come from ``pass_core.registry.METHODS``; metrics come from
``pass_core.events``: nothing here computes one.
"""
