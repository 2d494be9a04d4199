"""The losslessness lab's views (``pass_core.teaching.lab``): the chart of each method's outcomes beside the exact
law, and the table with the bound, the check's power at this N and, when look-ahead methods drew the very same
outcomes, why. Pure: a ``LabResult`` in, a Plotly figure and markdown out; no Gradio.
"""

from __future__ import annotations

import plotly.graph_objects as go

from pass_core.registry import METHODS
from pass_core.teaching.lab import BROKEN, LabResult, detection_power, half_as_wrong
from playground.style import BOTTOM_LEGEND, GRID, and_join


def lab_figure(result: LabResult, names: dict[str, str], decode=str) -> go.Figure:
    """Each method's empirical distribution over the outcomes beside the exact law (outlined), in the method's
    colour (the broken rule grey, hatched), with its TV distance and pass / fail in the legend."""
    outcomes = sorted(result.exact, key=lambda x: -result.exact[x])
    # outcomes the law gives no mass (only a wrong rule draws them) after those it does, so that they show
    outcomes += sorted({x for dist in result.empirical.values() for x in dist} - set(outcomes))
    labels = []
    for x in outcomes:  # two outcomes may decode to the same text (e.g. partial UTF-8 bytes): keep bars apart
        label = _visible_ends("".join(decode(t) for t in x)) or repr(x)
        labels.append(label if label not in labels else f"{label} {list(x)}")
    traces = [go.Bar(x=labels, y=[result.exact.get(x, 0.0) for x in outcomes], name="exact law",
                     marker=dict(color="white", line=dict(color="black", width=1.5)))]
    for key, dist in result.empirical.items():
        mark = "✓" if result.passed(key) else "✗"
        name = names.get(key, "broken rule: always accept" if key == BROKEN else key)
        method = METHODS.get(key)
        marker = dict(color=method.colour) if method else dict(color="#9ca3af", pattern=dict(shape="x"))
        traces.append(go.Bar(x=labels, y=[dist.get(x, 0.0) for x in outcomes], marker=marker,
                             name=f"{mark} {name}: TV {result.tv[key]:.3f}"))
    fig = go.Figure(traces)
    # no title (the table under the chart states N, the depth and the bound): a phone would cut it off
    # taller by a legend row per bar series (on a phone each entry takes a row) and by the longest outcome label
    # (drawn upright under the axis): at a fixed 420 px a phone had 111 px left for the bars
    tallest = max((y for trace in traces for y in trace.y), default=1.0)  # autorange stopped at the tallest bar
    fig.update_layout(barmode="group", height=300 + 24 * len(traces) + 7 * min(max(map(len, labels), default=0), 30),
                      yaxis=dict(title="probability", range=[0, min(1.05, 1.1 * tallest)], gridcolor=GRID),
                      xaxis=dict(title=f"outcome ({result.depth} tokens)"), margin=dict(l=55, r=10, t=35, b=10),
                      legend=BOTTOM_LEGEND,
                      paper_bgcolor="white", plot_bgcolor="white")
    return fig


def _visible_ends(text: str) -> str:
    """An outcome's text with its leading and trailing spaces shown as ␣ and newlines as ↵ ("I" and "I  " read the
    same on the chart's axis)."""
    text = text.replace("\n", "↵")
    rest = text.lstrip(" ")
    core = rest.rstrip(" ")
    return "␣" * (len(text) - len(rest)) + core + "␣" * (len(rest) - len(core))


#: The losslessness lab's defaults: a short prompt, and N runs per method (N = 50 took 203 s on a quiet 2-core
#: Intel Xeon with the embedded model, fp32 on 1 thread: 8 runs of 3 tokens per N; docs/guide.md).
LAB_PROMPT = "Once upon a time"
LAB_DEFAULT_RUNS = 50
LAB_INTRO = ("Each method continues the prompt by 3 tokens, N times with seeds 0..N-1 (temperature 1, top-k 2: at "
             "most 8 outcomes of a lossless method; the broken rule also draws tokens outside the target's top 2, shown "
             "last); the chart sets each method's shares beside the exact law computed from the model. "
             "A lossless method stays under the total-variation bound; the broken rule (PaSS that accepts every "
             "draft) does not.")
#: The lab's table before its first lab: it holds the runs' progress bar while a lab runs (empty, it was 0 px tall
#: and the bar was clipped away: the tab looked idle for minutes).
LAB_WAITING = ("*Run lab: a bar here counts the runs; then a table gives each method's TV distance, the bound and a "
               "verdict.*")


#: Simulated labs behind each stated power (``lab.detection_power``).
POWER_TRIALS = 2000


def lab_power_line(result: LabResult) -> str:
    """The check's power at this N, by simulation: against a sampler with the broken rule's measured shares, and
    against one half as wrong (``lab.half_as_wrong``: half its TV distance); "" without the broken rule."""
    broken = result.empirical.get(BROKEN)
    if not broken:
        return ""
    as_broken = detection_power(result.exact, broken, result.runs, result.bound, POWER_TRIALS)
    half = detection_power(result.exact, half_as_wrong(result.exact, broken), result.runs, result.bound, POWER_TRIALS)
    return (f"Power at N = {result.runs}: a rule as wrong as the broken one was here (TV {result.tv[BROKEN]:.2f}) "
            f"fails the check in {as_broken:.0%} of {POWER_TRIALS:,} simulated labs, one half as wrong (TV "
            f"{result.tv[BROKEN] / 2:.2f}) in {half:.0%}; more runs shrink the bound as 1 / √N.")


def same_outcomes_line(result: LabResult, names: dict[str, str]) -> str:
    """Why two or more methods drew the very same outcomes (identical bars), when they did: "" otherwise. Methods
    whose drafts were all rejected draw every token from p (the residual of a draft with p(d) = 0 is p itself),
    so the same seed gives them the same tokens."""
    groups: dict[tuple, list[str]] = {}
    for key, dist in result.empirical.items():
        if key != BROKEN:
            groups.setdefault(tuple(sorted(dist.items())), []).append(key)
    lines = []
    for keys in (k for k in groups.values() if len(k) > 1):
        # short names: a label may hold a comma ("PaSS, fixed-token baseline"), which would blur the list
        shown = [METHODS[k].short_name if k in METHODS else names.get(k, k) for k in keys]
        listed = and_join(shown)
        counts = [result.drafts.get(k) for k in keys]
        if all(c is not None and c[0] == 0 for c in counts):
            judged = sum(c[1] for c in counts)
            lines.append(f"{listed} drew the same outcome for every seed: none of their {judged} judged drafts was "
                         "accepted, so every token came from the target's p (after a rejected draft the residual "
                         "norm(max(0, p − q)) is p wherever q puts no mass on p's tokens) with the same random "
                         "draws. Identical bars here show that each is exact, not that they draft alike.")
        else:
            lines.append(f"{listed} drew the same outcome for every seed: with the same seeds, the same "
                         "accepted drafts and the same draws from p give the same tokens.")
    return "  \n".join(lines)


#: The methods whose drafts come from a model of their own (``separate_drafter_line``).
SEPARATE_DRAFTERS = ("parallelspec", "draft-model")


def separate_drafter_line(result: LabResult) -> str:
    """What the rows of the methods with a drafter model of their own (``SEPARATE_DRAFTERS``) measure, when any ran:
    like every row, the total variation to the target's exact law, not to the drafter's; with the drafts speculative
    sampling kept of each in this lab (``LabResult.drafts``). "" when none ran."""
    ran = [key for key in SEPARATE_DRAFTERS if key in result.tv]
    if not ran:
        return ""
    kept = [f"{METHODS[key].short_name} {accepted} of {judged}" for key in ran
            for accepted, judged in [result.drafts.get(key, (0, 0))] if judged]
    subject = " and ".join(METHODS[key].short_name for key in ran)
    verb = "draft with a model of their own" if len(ran) > 1 else "drafts with a model of its own"
    return (f"{subject} {verb}, yet every row compares the outputs with the target's exact law: speculative sampling "
            "keeps a draft or draws from the target's residual, so a pass tests that rule, not the drafter"
            + (f" (drafts kept here: {', '.join(kept)})." if kept else "."))


def lab_markdown(result: LabResult, names: dict[str, str]) -> str:
    """The lab's table: total-variation distance per method (and the broken rule) against the bound, with pass /
    fail; then what the rows of methods with their own drafter model measure (``separate_drafter_line``), the
    check's power at this N (``lab_power_line``) and, when methods drew identical outcomes, why
    (``same_outcomes_line``)."""
    lines = [f"{result.runs} seeded runs of {result.depth} tokens per method; TV must stay under the bound "
             f"{result.bound:.3f} (what sampling noise allows for {result.runs} runs). AR's row is such a sample "
             "too: its distance is noise alone, and a lossless method's is the same kind of noise, not more or less "
             "exact.", "",
             "| method | TV distance | bound | lossless? |", "|---|---|---|---|"]
    for key, tv in result.tv.items():
        name = names.get(key, "broken rule: always accept" if key == BROKEN else key)
        verdict = "✓ pass" if result.passed(key) else "✗ fail"
        lines.append(f"| {name} | {tv:.3f} | {result.bound:.3f} | {verdict} |")
    notes = [line for line in (separate_drafter_line(result), lab_power_line(result),
                               same_outcomes_line(result, names)) if line]
    return "\n".join(lines) + "".join(f"\n\n{note}" for note in notes)
