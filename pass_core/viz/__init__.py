"""Figures and display values built from step events and reports: the one part of ``pass_core``
that imports Plotly (never Gradio, never a model or a tensor).

- ``race_charts``: what the app's race shows (token colours, highlighted tokens, latency /
  cumulative / histogram / per-position figures, metric lines, the greedy check).
- ``race_view``: every displayed value of the race from its events (panes, metric lines, run line with
  a note for a method that wrote nothing, figures), the page's CSS and help text.
- ``race_inputs``: the race form's inputs as plain values (labels, what is wrong with a value given, the
  GPU time a race asks ZeroGPU for, messages without server paths); no Plotly.
- ``bench_html``: the benchmark's HTML report (``python -m pass_core.viz.bench_html``).

Method names and colours come from ``pass_core.registry.METHODS``; metrics come from
``pass_core.events``: nothing here computes one.
"""
