"""What the page's charts and sentences share: the axes' look, the legend's place, how a list of names and a missing
number are written. Plain values only (no Plotly figure, no tensor)."""

from __future__ import annotations

#: The grid lines of every chart.
GRID = "#e5e7eb"
#: Every chart's axes: a light grid, a slightly darker zero line, a visible axis line.
AXIS = dict(gridcolor=GRID, zerolinecolor="#d1d5db", linecolor="#9ca3af", showline=True)
#: The legend under the x-axis title, in the figure's bottom margin, so that however many rows it wraps into on a
#: phone it never covers the plot area.
BOTTOM_LEGEND = dict(orientation="h", yref="container", yanchor="bottom", y=0.0, xanchor="left", x=0.0)


def and_join(names: list[str] | tuple[str, ...], none: str = "") -> str:
    """``names`` as a sentence writes them: "A", "A and B", "A, B and C"; ``none`` when there are none."""
    names = list(names)
    if len(names) < 2:
        return names[0] if names else none
    return ", ".join(names[:-1]) + " and " + names[-1]


def number(value: float | None, spec: str = ".3f") -> str:
    """``value`` formatted with ``spec`` ("–" for a number that is missing, e.g. a draft never verified); a value
    that is not 0 but rounds to 0 under a fixed-point ``spec`` gets 3 significant digits (a rejected draft's p =
    0.000185 stood as 0.000 in the inspector's table, under a sentence giving 0.000185)."""
    if value is None:
        return "–"
    text = format(value, spec)
    if spec.endswith("f") and value != 0 and float(text) == 0:
        return format(value, ".3g")
    return text
