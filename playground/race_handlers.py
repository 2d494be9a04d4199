"""The race page's handlers: the race and the step-through's paused updates, and the outputs they render (the
replay: ``replay``; the lab: ``lab_handlers``). Gradio values (``gr.Error``, ``gr.skip``) but no layout: ``page``
builds the page and wires these functions to it (and re-exports them). No tensors here: decoding, metrics and
figures come from ``pass_core`` and the figure helpers next to this file (``playground``).
"""

from __future__ import annotations

import html
import time

import gradio as gr

from pass_core.runtime.models import LoadedModel
from pass_core.runtime.pass_cost import pass_cost_curves
from pass_core.teaching.race import events_upto, race, race_order
from pass_core.registry import METHODS
from pass_core.decoding.settings import DecodeSettings
from pass_core.decoding.bookkeeping import run_prompt_ids
from playground.cost_charts import cost_view
from playground.plot_boxes import shown_plot
from playground.race_panes import highlighted_tokens
from playground.race_guards import finish, guard_lines, new_guards, off_the_clock, prefill_warning
from playground.trace_files import save_race_trace
from playground.race_inputs import DEFAULT_RACE, RaceRequest, chosen_methods, hide_paths, methods_problem, \
    prompt_problem, whole, zerogpu_duration  # noqa: F401  (DEFAULT_RACE: playground.page re-exports it)
from playground.race_text import baseline_label
from playground.race_view import METRIC_LABELS, race_view
from playground.stepping import StepControl, newest_css, paused_updates, step_line
from playground.theory_view import theory_view
from playground.tree_race import (NO_TREE_METHOD, TREE_PANES, tree_count, tree_outputs, tree_pane_values,
                                  tree_problem, with_trees)

UPDATE_INTERVAL_S = 0.5  # at most 2 page updates per second of wall time at the start of a race (UI cost <= 5 %)
CHART_EVERY = 4  # charts redraw on every 4th page update (figures are the browser's heaviest work)
THEORY_EVERY = 4  # during a race the theory view redraws with every 4th chart redraw (and at the end, when paused)
SLOW_MOTION_CHART_GAP_S = 1.0  # slow motion shows every step in the panes, the charts at most once a second
SLOW_MOTION_CHART_LAG_S = 0.1  # ...in a frame of their own this long after a step's (a redraw held the step's panes
# back by up to 0.4 s of the browser's time: the steps came 0.2-0.9 s apart at 0.5 s per step)
TOKENS_PER_EXTRA_S = 400  # each 400 tokens on the page add one update interval (0.5 s) between updates
MAX_UPDATE_GAP_S = 2.5  # ...but never more: on ZeroGPU Stop (a cancel) takes effect at the next update


def user_error(message: str) -> gr.Error:
    """A ``gr.Error`` for a mistake in the request: shown until the visitor closes it (one gone after gradio's 10 s
    left nothing to act on), server paths shortened to file names, as text (gradio shows HTML: a crafted trace's
    value drew a link and images in it), never logged with a traceback (the log is for server faults)."""
    return gr.Error(html.escape(hide_paths(message), quote=False), duration=None, print_exception=False)


def make_settings(num_lookahead, temperature, top_k, top_p, max_new_tokens, seed, fused,
                  chat_template=True, inspect=False, auto_drafts=False) -> DecodeSettings:
    """Validated ``DecodeSettings`` from UI values. Raises gr.Error naming the setting, its range and the value."""
    try:
        return DecodeSettings(num_lookahead=whole(num_lookahead), temperature=temperature, top_k=whole(top_k),
                              top_p=top_p, max_new_tokens=whole(max_new_tokens), seed=whole(seed),
                              fused=bool(fused), chat_template=bool(chat_template),
                              inspect=bool(inspect), auto_drafts=bool(auto_drafts))
    except (TypeError, ValueError) as err:
        raise user_error(str(err)) from err


def race_keys(methods) -> tuple[str, ...]:
    """The chosen methods in pane (registry) order. Raises gr.Error unless two or more registered ones are chosen."""
    problem = methods_problem(methods)
    if problem:
        raise user_error(problem)
    return tuple(key for key in METHODS if key in set(chosen_methods(methods)))


def render(events: dict, show_rejected: bool, greedy: bool, fused: bool, finished: bool, drafter_note: str,
           charts_now: bool = True, *, chat_template: bool = True, run_note: str = "", dtype: str = "float32",
           revision: str = "race", trace_path: str | None = None, position: int | None = None, live: bool = False,
           own_model: bool = True, theory_now: bool = True, curve: dict | None = None, baseline: str = "",
           guards: dict | None = None, headline: str | None = None) -> tuple:
    """Every output of the race (``race_view`` of the events so far), in ``build_demo``'s output order: one pane
    per registered method (empty when not racing; the page hides it), the step-through's outline of the newest step
    (``stepping.newest_css``; "" for the whole race), 5 metrics, greedy check, 4 figures (or ``gr.skip()`` unless
    ``charts_now``: Plotly redraws are the browser's heaviest work), the theory figure and its sentences
    (``theory_view.theory_view``; skipped like the figures), the trace download (``trace_path``; skipped when None,
    emptied when ""), run line, drafter line, ``gr.State`` dict. ``revision``: the figures' ``uirevision``, one per
    race (keeps the user's zoom). ``position``: step-through, show the state after the race's first
    ``position`` steps (``race.events_upto``; None = all of ``events``), ``live``: the race still runs (paused).
    ``own_model``: the events come from the page's model (the inspector may decode token ids with it).
    ``theory_now``: redraw the theory view too (with the charts; a live race does it on every
    ``THEORY_EVERY``-th chart redraw). ``curve``: this machine's pass-cost curve (``pass_cost``): the cost chart
    and its lines are drawn with the theory (None: the chart says why it is missing). ``baseline``: what AR ran
    on (``race_text.baseline_label``), shown with the speed-up. ``guards``: the race's ``race_guards`` (a busy
    machine, a refused pass-cost curve, a long prefill: in the run line and the cost view). ``headline``: the run
    line's first line when the whole race is shown (default "Finished." or "Racing…"; a stopped race's replay)."""
    shown, title, newest = events, headline, ""
    if position is not None:
        order = race_order(events)
        shown, title = events_upto(events, position, order), step_line(events, order, position, live, finished)
        newest = newest_css(events, order, position)
    note = "  \n".join(filter(None, (run_note, guard_lines(guards, finished))))
    view = race_view(shown, show_rejected, greedy, fused, finished and position is None, with_figures=charts_now,
                     chat_template=chat_template, note=note, dtype=dtype, revision=revision, headline=title,
                     baseline=baseline)
    theory = theory_view(shown, revision) if theory_now and charts_now else (gr.skip(), gr.skip())
    refused = (guards or {}).get("refused")
    cost = cost_view(shown, curve, revision, refused) if theory_now and charts_now else (gr.skip(), gr.skip())
    return (
        *(view.panes.get(key, []) for key in METHODS),
        newest,
        *(view.metrics[key] for key in METRIC_LABELS),
        view.greedy_check,
        *map(shown_plot, view.figures or (gr.skip(),) * 4),  # each plot box shown once it has a figure
        shown_plot(theory[0]), theory[1],
        shown_plot(cost[0]), cost[1],
        *tree_outputs(shown, show_rejected, charts_now, revision),
        gr.skip() if trace_path is None else (str(trace_path) or None),  # "": none to download
        view.run_line,
        drafter_note,
        # a copy of the lists: a live race appends to ``events`` after this yield, and Stop, the inspector and
        # step-through must read what the panes show (Stop's trace once held three AR steps the pane never showed)
        {"events": {key: list(evs) for key, evs in events.items()}, "greedy": greedy, "fused": fused,
         "finished": finished, "note": drafter_note,
         "position": position, "own_model": own_model,
         "show": dict(chat_template=chat_template, run_note=run_note, dtype=dtype, revision=revision, curve=curve,
                      baseline=baseline, guards=guards, headline=headline)},
    )


def render_state(state: dict, show_rejected: bool, position: int | None, live: bool = False) -> tuple:
    """``render`` again for a race or replay held in the page's state (``render``'s last output), at ``position``
    (step-through) with every chart."""
    return render(state["events"], show_rejected, state["greedy"], state["fused"], state["finished"], state["note"],
                  position=position, live=live, own_model=state.get("own_model", True), **state["show"])


def drafters_for(loaded: LoadedModel, keys, settings: DecodeSettings) -> tuple[dict, str]:
    """Each racing method's files (``Method.find_files``) and a markdown line per method that uses any.

    Returns:
        ({method key: what find_files returned} for the racing methods, note naming files without folders).

    Raises:
        ValueError: a shipped file that is corrupt or for another model (shown as gr.Error).
    """
    found, lines = {}, []
    for key in keys:
        found[key], note = METHODS[key].find_files(loaded, settings.num_lookahead)
        if note:
            lines.append(f"**{METHODS[key].label}:** {note}")
    return found, hide_paths("  \n".join(lines)) or "No racing method drafts: no files needed."


def race_handler(loaded: LoadedModel, request: RaceRequest, *, update_interval_s: float = UPDATE_INTERVAL_S,
                 run_note: str = "", inspect: bool = False, control: StepControl | None = None):
    """Race the chosen methods (pass_core.race: fair interleaving by compute time) and stream the page.

    ``request``: the form's values (``race_inputs.RaceRequest``); its ``methods`` hold two or more keys of
    ``METHODS``; its ``tree_nodes`` (``tree_race.TREE_CHOICES``) add a token-tree entry beside each tree-capable
    one (``tree_race.with_trees``). Yields the outputs of ``render`` at most
    every ``update_interval_s`` seconds of wall time (the gap grows by ``update_interval_s`` per
    ``TOKENS_PER_EXTRA_S`` tokens already shown, to at most ``MAX_UPDATE_GAP_S``, so that the browser keeps up;
    the figures redraw on every ``CHART_EVERY``-th update), and at the step after Stop (``control.stopped``: the page
    shows Stop's frame instead; at the next update Stop took up to 2.5 s),
    and once more at the end; ``run_note`` goes into the run line. ``inspect``: events carry the token
    inspector's data (``DecodeSettings.inspect``). The last yield offers the race as a JSON trace
    (``pass_core.trace``) to download. ``control``: the step-through buttons (``playground.stepping``): while paused the
    race computes nothing and yields each Next / Previous position; in slow motion it yields every step and waits
    ``control.delay_s`` after it (wall time only: compute times are unchanged), and redraws the figures at most
    every ``SLOW_MOTION_CHART_GAP_S`` seconds (a redraw sends every figure to the browser again). Raises gr.Error
    for bad settings, fewer than two methods or a bad prompt.
    """
    r, prompt, show_rejected = request, request.prompt, request.show_rejected
    keys = race_keys(r.methods)
    settings = make_settings(r.num_lookahead, r.temperature, r.top_k, r.top_p, r.max_new_tokens, r.seed, r.fused,
                             r.chat_template, inspect, r.auto_drafts)
    problem = prompt_problem(prompt) or tree_problem(r.tree_nodes, r.fused, r.auto_drafts)
    if problem:
        raise user_error(problem)
    try:  # a prompt the context cannot hold is refused now, before any "Racing…" or long-prefill warning
        tokens = len(run_prompt_ids(loaded, prompt, settings))  # as a drafting method's run encodes it (the
        # strictest: AR keeps no positions for drafts, and every race has a drafting method)
    except ValueError as err:
        raise user_error(str(err)) from err
    show = dict(chat_template=settings.chat_template, run_note=run_note, dtype=str(loaded.dtype),
                revision=f"race-{time.time_ns()}", curve=(curves := pass_cost_curves(loaded)).used,
                baseline=baseline_label(loaded.runs_on, bool(loaded.backend_choice)))
    show["guards"] = new_guards(prompt, settings, curves, prefill_warning(
        tokens, len(keys), curves.used, trees=tree_count(r.methods, r.tree_nodes)))  # a tree entry prefills too
    try:
        found, note = drafters_for(loaded, keys, settings)
        if show["guards"]["prefill"]:  # said before the long first step, not after it
            gr.Warning(show["guards"]["prefill"].replace("**", ""))
        # empty panes, "Racing…" and no trace to download at once: the previous race's stood until the first step
        yield render({key: [] for key in keys}, show_rejected, settings.greedy, settings.fused, False, note,
                     trace_path="", **show)
        decoders = {key: METHODS[key].decode(loaded, prompt, settings, found[key]) for key in keys}
        decoders, note = with_trees(loaded, prompt, settings, keys, found, decoders, note, r.tree_nodes)
        if note.endswith(f"{NO_TREE_METHOD}."):  # the toast went and the drafter line is folded (helper 70)
            show["run_note"] = "  \n".join(filter(None, (run_note, f"Token tree: {NO_TREE_METHOD}, so this race "
                                                                    "ran chains only.")))
        events = {key: [] for key in decoders}  # a tree entry races beside its method (``tree_race``)
        last, updates, tokens = float("-inf"), 0, 0
        last_chart, chart_draws = float("-inf"), 0  # slow motion's chart redraws
        for name, event in race(decoders):
            events[name].append(event)
            tokens += len(event.tokens)
            if control is not None and control.paused:
                with off_the_clock(show["guards"]):  # a paused race computes nothing: not a busy race
                    yield from paused_updates(control, events, lambda position: render(
                        events, show_rejected, settings.greedy, settings.fused, False, note, position=position,
                        live=True, **show), gr.skip)
                continue
            if control is not None and control.delay_s:  # slow motion: every step on the page, then a wait
                now = time.monotonic()
                charts_now = now - last_chart >= SLOW_MOTION_CHART_GAP_S  # a short delay redraws no chart per step
                yield render(events, show_rejected, settings.greedy, settings.fused, False, note, False, **show)
                if charts_now:  # the figures in a frame of their own, once the browser has drawn the step's
                    last_chart, chart_draws = now, chart_draws + 1
                    with off_the_clock(show["guards"]):
                        control.sleep(min(SLOW_MOTION_CHART_LAG_S, control.delay_s / 2))
                    yield render(events, show_rejected, settings.greedy, settings.fused, False, note, True,
                                 theory_now=(chart_draws - 1) % THEORY_EVERY == 0, **show)
                with off_the_clock(show["guards"]):  # a step every delay_s, however long its frames took
                    control.sleep_until(lambda: now + control.delay_s)
                continue
            now = time.monotonic()
            stopping = control is not None and control.stopped  # Stop: a frame now, which the page turns into Stop's
            if stopping or now - last >= min(update_interval_s * (1 + tokens / TOKENS_PER_EXTRA_S), MAX_UPDATE_GAP_S):
                last = now
                charts_now = updates % CHART_EVERY == 0
                theory_now = updates % (CHART_EVERY * THEORY_EVERY) == 0
                updates += 1
                yield render(events, show_rejected, settings.greedy, settings.fused, False, note, charts_now,
                             theory_now=theory_now, **show)
    except ValueError as err:  # empty prompt, prompt too long, a drafter file for another model
        raise user_error(str(err)) from err
    finally:  # also on Stop (gradio closes the generator): the race's busy line covers the race only
        finish(show["guards"])
        if control is not None:
            control.shown()  # no step button waits for a race that has ended
    path = save_race_trace(loaded, prompt, settings, events, show["guards"].get("machine_load"))
    yield render(events, show_rejected, settings.greedy, settings.fused, True, note, trace_path=str(path), **show)


def gpu_duration(request: RaceRequest, run_note: str = "", control=None) -> int:
    """Seconds of GPU to ask ZeroGPU for a race (called with the race's own arguments): ``race_inputs.
    zerogpu_duration``, at most ``ZEROGPU_MAX_S``."""
    return zerogpu_duration(request.max_new_tokens, request.methods, tree_count(request.methods, request.tree_nodes))


def rerender_panes(state, show_rejected):
    """Re-colour the panes from the last run (the toggle needs no new run)."""
    if not state:
        return (gr.skip(),) * len(METHODS)
    events = events_upto(state["events"], state.get("position"))
    return tuple(highlighted_tokens(events[key], show_rejected) if key in events else gr.skip()
                 for key in METHODS)


#: Where ``render``'s tree panes start, counted from the end: the tree outputs (``tree_outputs``: the panes, the tree
#: figure, its node chooser and panel), then the trace, the run line, the drafter line and the state.
TREE_PANES_FROM_END = len(TREE_PANES) + 3 + 4


def with_panes_for(outputs: tuple, show_rejected: bool) -> tuple:
    """A race update (``render``'s outputs) with its panes, the tree entries' too, re-rendered for ``show_rejected``:
    the value the toggle has *now*, which the visitor may have changed since the race started (the state holds the
    events). The tree panes too: their rejected drafts, hidden by the page's CSS but still boxes on the page, put
    the step-through's outline of the newest step (counted without them) on the wrong boxes."""
    state = outputs[-1]
    # "waiting for the model", or a paused race's heartbeat (``gr.skip()``, a dict too): no panes in this update
    if not isinstance(state, dict) or "events" not in state:
        return outputs
    at = len(outputs) - TREE_PANES_FROM_END
    return (*rerender_panes(state, show_rejected), *outputs[len(METHODS):at], *tree_pane_values(state, show_rejected),
            *outputs[at + len(TREE_PANES):])


def pane_visibility(methods):
    """Show the panes of the chosen methods only (Run asks for two or more)."""
    chosen = set(methods or ())
    return tuple(gr.update(visible=key in chosen) for key in METHODS)


def preview_panes(methods, state):
    """Ticking or unticking a method: before any race the panes follow the ticks; a race's (or replay's) panes stay
    until the next Run (a hidden finished pane, or an empty one, left the metrics describing panes not shown)."""
    return pane_visibility(methods) if not state else (gr.skip(),) * len(METHODS)


def replay_panes(state):
    """The panes of a replayed race's methods (``pane_visibility`` of its events' names); nothing changes without
    one (a refused file)."""
    return pane_visibility(list(state["events"])) if state else (gr.skip(),) * len(METHODS)
