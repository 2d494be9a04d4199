"""Replay: a recorded race (a JSON trace from the download button or ``generate --trace``) back on the race's
panes, metrics, charts and step-through, with no model (``pass_core.teaching.trace`` reads it)."""

from __future__ import annotations

import time
from pathlib import Path

import gradio as gr

from pass_core.runtime.models import LoadedModel
from pass_core.teaching.trace import MAX_TRACE_BYTES, check_token_ids, load_trace, recorded_on
from playground.race_handlers import render, user_error
from playground.race_inputs import checkbox_problem
from playground.race_text import baseline_label
from playground.teaching import replay_note

#: The run line's first line for the replay of a race stopped before its end (Stop's trace).
STOPPED_REPLAY = ("**Stopped race.** It was stopped (Stop on the page, or Ctrl-C on the command line) before every "
                  "method had finished: the outputs are compared on the tokens each had produced, and no method is "
                  "ranked.")


def replay_handler(trace_file, show_rejected=True, model: LoadedModel | None = None) -> tuple:
    """Render a recorded race (a JSON trace from the download button or ``generate --trace``) into the race's
    panes, metrics and charts, with no model: the outputs of ``render`` for the trace's events.

    ``model``: the page's model (None: none loaded). The inspector decodes the trace's token ids with it only when
    the trace's embedding signature matches it (``trace.recorded_on``; a name proves nothing), else the trace's
    own token texts name them. Raises gr.Error naming the file and what is wrong (no file, too large, not JSON,
    another schema, a missing or malformed field, a token id beyond the vocabulary of the page's model when the
    trace was recorded on it), or a ``show_rejected`` that is not true or false (an API caller's "no").
    """
    problem = checkbox_problem("show rejected drafts", show_rejected)  # through the API "no" was taken as true
    if problem:
        raise user_error(problem)
    if not trace_file:
        raise user_error(f"Choose a trace file (.json, at most {MAX_TRACE_BYTES // 2**20} MB) to replay first: a "
                         "file of another type or a larger one is refused as it uploads and leaves nothing to replay.")
    path = trace_file if isinstance(trace_file, (str, Path)) else getattr(trace_file, "name", trace_file)
    try:
        trace = load_trace(path)
        own_model = recorded_on(trace, model)
        if own_model:  # its ids are decoded with this model's tokenizer
            try:
                check_token_ids(trace, model.vocab_size)
            except ValueError as err:
                raise ValueError(f"{str(path)!r}: {err}.") from None
    except ValueError as err:
        raise user_error(str(err)) from err
    s = trace.settings
    stopped = not all(evs and evs[-1].finished for evs in trace.events.values())  # Stop's trace: compared so far
    return render(trace.events, show_rejected, s.greedy, s.fused, not stopped, "Replayed from a trace: no files "
                  "needed.", chat_template=s.chat_template, run_note=replay_note(trace),
                  revision=f"replay-{time.time_ns()}", own_model=own_model, trace_path="",  # not an older race's
                  baseline=baseline_label(trace.backend, trace.backend_auto, replayed=True),
                  dtype=trace.dtype or "float32",
                  headline=STOPPED_REPLAY if stopped else None)


#: Replay's answer while the visitor's own race runs: the race's next updates would replace the replay on the page.
RACE_IN_THIS_TAB = ("A race is running in this tab: press Stop first, then Replay (the race's next updates would "
                    "replace the replay on the page).")


def replay_listener(holder, controls: dict):
    """Replay's handler on the page: ``replay_handler`` with the page's model (``holder.loaded``), refused with
    ``RACE_IN_THIS_TAB`` while a live race of the same session runs (``controls``: session -> its step control; a
    replay pressed mid-race was shown, then replaced by the race's frames, and looked lost)."""
    def on_replay(trace_file, show_rejected=True, request: gr.Request = None) -> tuple:
        if getattr(request, "session_hash", None) in controls:
            raise user_error(RACE_IN_THIS_TAB)
        return replay_handler(trace_file, show_rejected, holder.loaded)
    return on_replay


#: The trace download's answer on a page with no race trace yet (it downloaded nothing and said nothing).
NO_TRACE_YET = ("No trace to download yet: a race's trace comes when it finishes (Stop gives the trace of what the "
                "panes show); a replay's trace is the file you uploaded.")


def download_hint(trace_file) -> None:
    """The trace download button's press: with no trace (``trace_file`` None: a fresh page, a race still running, a
    replay) a warning toast says what to do (``gr.Warning``: the button's own download then does nothing)."""
    if not trace_file:
        gr.Warning(NO_TRACE_YET)
