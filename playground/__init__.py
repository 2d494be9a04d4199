"""The app's UI package: figures, display values and the page's handlers, built from step events and
reports. Only this package and ``app.py`` import Plotly and Gradio; ``pass_core`` imports neither, and
nothing here touches a model, a cache or a tensor (house style: rooms with clear doors).

- ``race_handlers``: the page's handlers (race, step-through updates, replay, lab); Gradio values, no layout.

- ``race_charts``: what the app's race shows (token colours, highlighted tokens, latency /
  cumulative / histogram / per-position figures, metric lines, the greedy check).
- ``race_view``: every displayed value of the race from its events (panes, metric lines, run line with
  a note for a method that wrote nothing, figures), the page's CSS and help text.
- ``race_inputs``: the race form's inputs as plain values (labels, what is wrong with a value given, the
  GPU time a race asks ZeroGPU for, messages without server paths); no Plotly.
- ``bench_html``: the benchmark's HTML report (``python -m playground.bench_html``).

Method names and colours come from ``pass_core.registry.METHODS``; metrics come from
``pass_core.events``: nothing here computes one.
"""
