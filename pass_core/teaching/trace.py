"""Traces: one run (or race) as a JSON file that replays without a model.

A trace holds the schema version, the model's name and embedding signature, the prompt, the
settings (seed included), every method's events (with the token inspector's data when it was
collected) and each method's summary. ``load_trace`` rebuilds the ``StepEvent`` objects, so every
consumer of events (panes, charts, metrics, the inspector) works on a replay as on a live run.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from pass_core.decoding.comparison import UNIT_ROUNDOFF
from pass_core.decoding.events import StepEvent, output_token_ids
from pass_core.decoding.metrics import summarize
from pass_core.drafters.files import embedding_signature, signatures_match
from pass_core.decoding.settings import MAX_TREE_NODES, DecodeSettings
from pass_core.decoding.text import MAX_PROMPT_CHARS
from pass_core.runtime.outputs import write_text_atomically
from pass_core.runtime.machine_load import MachineLoad
from pass_core.teaching.trace_fields import read_event, read_machine_load, record_fields

SCHEMA = "pass-playground-trace/1"
#: The largest trace file read (bytes), about 4x the largest the page writes: 8.4 MB for every registered method
#: (7) racing 1,024 new tokens at L = 8 and temperature 2 with the inspector's data, on the tiny test model (most
#: steps: little is accepted). The page refuses larger uploads too (app.py, ``max_file_size``).
MAX_TRACE_BYTES = 32 * 2**20
#: The deepest nesting of JSON arrays / objects read; a trace nests 7 deep.
MAX_TRACE_DEPTH = 32


@dataclass(frozen=True)
class Trace:
    """A recorded run.

    Attributes:
        model_name: the target model's name.
        signature: its input-embedding signature (``drafters.files.embedding_signature``).
        prompt: the user's text.
        settings: the run's ``DecodeSettings``.
        events: method key -> its ``StepEvent`` list, in race order.
        machine_load: how busy the machine was while the race ran (``machine_load.MachineLoad``), so that a replay
            keeps the race's caveat on its timings; None: not recorded (a command-line run).
        backend: what every method (AR, the speed-up's baseline, included) ran on (``LoadedModel.runs_on``:
            "onednn", "float32", ...); "" in a trace written before it was recorded.
        backend_auto: ``--backend auto`` chose that backend by measuring the recording machine.
        dtype: the model's weights' dtype ("float32", "bfloat16"; the greedy check's near-ties), "" when not
            recorded.
    """

    model_name: str
    signature: list[float]
    prompt: str
    settings: DecodeSettings
    events: dict[str, list[StepEvent]]
    machine_load: MachineLoad | None = None
    backend: str = ""
    backend_auto: bool = False
    dtype: str = ""


def make_trace(loaded, prompt: str, settings: DecodeSettings, events: dict[str, list[StepEvent]],
               machine_load: MachineLoad | None = None) -> Trace:
    """A ``Trace`` of a run on ``loaded`` (``machine_load``: the race's load, as measured while it ran)."""
    signature = embedding_signature(loaded.model.get_input_embeddings().weight)
    return Trace(loaded.name, signature, prompt, settings, {k: list(v) for k, v in events.items()}, machine_load,
                 loaded.runs_on, bool(loaded.backend_choice), loaded.dtype_name)


def recorded_on(trace: Trace, loaded) -> bool:
    """True when ``trace`` was recorded on the model ``loaded`` (a ``LoadedModel``, or None): the embedding
    signatures match (``files.signatures_match``), whatever the names say. Only then may the trace's token ids
    be decoded with ``loaded``'s tokenizer; otherwise the trace's own token texts name them."""
    if loaded is None:
        return False
    return signatures_match(list(trace.signature), embedding_signature(loaded.model.get_input_embeddings().weight))


def check_token_ids(trace: Trace, vocab_size: int) -> None:
    """Raise ValueError naming the first token or draft id at or beyond ``vocab_size`` (V of the model the trace
    was recorded on, ``recorded_on``: its ids are decoded with that model's tokenizer)."""
    for key, events in trace.events.items():
        for i, event in enumerate(events):
            ids = [(f"tokens[{j}]", t.token_id) for j, t in enumerate(event.tokens)]
            for where, token_id in ids + [(f"drafts[{j}]", d.token_id) for j, d in enumerate(event.drafts)]:
                if token_id >= vocab_size:
                    raise ValueError(f"the field 'methods.{key}.events[{i}].{where}.token_id' is {token_id}: the "
                                     f"trace's model has {vocab_size:,} tokens, ids 0 to {vocab_size - 1:,}")


def trace_to_dict(trace: Trace) -> dict:
    """The JSON-ready dict: schema, model, prompt, settings, events and summaries per method."""
    backend = {"backend": trace.backend, "backend_chosen_by_measurement": trace.backend_auto,
               "dtype": trace.dtype} if trace.backend else {}
    return {"schema": SCHEMA, "model": {"name": trace.model_name, "signature": trace.signature, **backend},
            "prompt": trace.prompt, "settings": trace.settings.to_dict(),
            "methods": {key: {"events": [e.to_dict() for e in evs], "summary": summarize(evs, key).to_dict()}
                        for key, evs in trace.events.items()},
            **({"machine_load": asdict(trace.machine_load)} if trace.machine_load is not None else {})}


def save_trace(trace: Trace, path: str | Path) -> Path:
    """Write ``trace`` as JSON (UTF-8), whole or not at all (``outputs.write_text_atomically``); returns the path.

    Raises:
        OSError: the file could not be written (a file already there is left as it was)."""
    return write_text_atomically(path, json.dumps(trace_to_dict(trace), ensure_ascii=False))


def load_trace(source: str | Path | dict) -> Trace:
    """Read a trace from a file (or an already parsed dict).

    Raises:
        ValueError: a missing file, a file over ``MAX_TRACE_BYTES``, text that is not JSON or nests deeper than
            ``MAX_TRACE_DEPTH``, another schema version, a missing or malformed field (a number that is NaN,
            Infinity or out of its setting's range, or a prompt over ``text.MAX_PROMPT_CHARS``, included), a
            method that is not registered or a variant other than a token-tree entry ("parallelspec+tree8"), an
            event whose 'method' is not the one it is listed under, a method whose steps took 0 s in all, a
            method that commits more than ``max_new_tokens`` tokens, or token-tree entries that contradict each
            other or their steps (``_check_tree_entries``); the message names the file and what is wrong.
    """
    where = "the trace" if isinstance(source, dict) else repr(str(source))
    if isinstance(source, dict):
        data = source
    else:
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"Trace file {where} does not exist.")
        size = path.stat().st_size
        if size > MAX_TRACE_BYTES:
            raise ValueError(f"{where} is {size / 2**20:,.1f} MB: a trace may be at most {MAX_TRACE_BYTES // 2**20} MB "
                             "(the largest this app writes are about a quarter of that).")
        if size == 0:
            raise ValueError(f"{where} is empty (0 bytes): not a trace; download the trace again.")
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"))  # -sig: also as Windows' Notepad saves it
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(f"{where} is not a JSON trace ({err}).") from err
        except RecursionError as err:
            raise ValueError(f"{where} is not a trace: its JSON nests deeper than a trace ever does "
                             f"({MAX_TRACE_DEPTH} levels at most).") from err
    _check_values(data, where)
    if not isinstance(data, dict) or "schema" not in data:
        raise ValueError(f"{where} is not a PaSS Playground trace (it has no 'schema' field): write one with "
                         "python -m pass_core.generate --trace FILE or the page's Download trace.")
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{where} has schema {str(data.get('schema'))[:60]!r}; this version of PaSS Playground reads "
                         f"{SCHEMA!r}.")
    _check_shape(data, where)
    missing = [name for name in ("model", "prompt", "settings", "methods") if name not in data]
    if missing:
        raise ValueError(f"{where} misses the field {missing[0]!r}: not a complete trace.")
    if len(data["prompt"]) > MAX_PROMPT_CHARS:
        raise ValueError(f"{where}: the field 'prompt' has {len(data['prompt']):,} characters; a race takes at most "
                         f"{MAX_PROMPT_CHARS:,}, so no trace holds more.")
    try:
        given = record_fields(DecodeSettings, data["settings"], "settings", "a settings object")
    except ValueError as err:
        raise ValueError(f"{where}: {err}.") from None
    try:
        settings = DecodeSettings(**given)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: the field 'settings' is malformed ({err}).") from err
    recorded = _backend(data["model"], where)  # what every method ran on
    try:
        events = {key: [read_event(e, f"methods.{key}.events[{i}]", i + 1) for i, e in enumerate(method["events"])]
                  for key, method in data["methods"].items()}
        load = read_machine_load(data["machine_load"]) if data.get("machine_load") is not None else None
        trace = Trace(str(data["model"]["name"]), data["model"]["signature"], str(data["prompt"]), settings, events,
                      load, *recorded)
    except KeyError as err:
        raise ValueError(f"{where} misses the field {err.args[0]!r}: not a complete trace.") from err
    except (TypeError, ValueError, AttributeError, OverflowError) as err:
        raise ValueError(f"{where} has a malformed field ({err}).") from err
    if not isinstance(trace.signature, list) or not all(type(x) in (int, float) for x in trace.signature):
        raise ValueError(f"{where}: the field 'model.signature' must be a list of numbers.")
    for key, evs in events.items():  # "parallelspec+tree8": a tree entry's events are its method's
        wrong = next((i for i, e in enumerate(evs) if e.method != key.split("+")[0]), None)
        if wrong is not None:
            raise ValueError(f"{where}: the field 'methods.{key}.events[{wrong}].method' is "
                             f"{evs[wrong].method!r}, but the event is listed under method {key!r}.")
        if evs and sum(e.step_s for e in evs) == 0:  # tokens/s would divide by zero; a recorded step takes time
            raise ValueError(f"{where}: method {key!r} has steps that took 0 s in all: a recorded step takes time.")
        made = len(output_token_ids(evs))  # 65,423 tokens under max_new_tokens 1,024 froze the browser for minutes
        if made > settings.max_new_tokens:
            raise ValueError(f"{where}: method {key!r} commits {made:,} tokens, but its settings stop a run at "
                             f"max_new_tokens = {settings.max_new_tokens:,}.")
    _check_tree_entries(events, where)
    return trace


def _check_tree_entries(events: dict, where: str) -> None:
    """Raise ValueError where the token-tree entries contradict each other or their own steps as no race writes
    them: a step with more drafts than its entry's N nodes, or two entries of one method (the page has one tree pane
    per method: 18 entries of PaSS replayed in one pane and 18 metric lines, helper 71). (A race's trace keeps its
    settings' ``tree_nodes`` at 0: the page races its tree entries beside the chain methods.)"""
    from pass_core.registry import tree_entry_nodes  # here: the registry imports the decoding modules

    seen: dict[str, str] = {}
    for key, evs in events.items():
        nodes = tree_entry_nodes(key)
        if nodes is None:
            continue
        base = key.partition("+")[0]
        if base in seen:
            raise ValueError(f"{where}: method {base!r} has two token-tree entries, {seen[base]!r} and {key!r}: a "
                             "race runs one per method.")
        seen[base] = key
        big = next((i for i, e in enumerate(evs) if len(e.drafts) > nodes), None)
        if big is not None:
            raise ValueError(f"{where}: the field 'methods.{key}.events[{big}].drafts' holds {len(evs[big].drafts)} "
                             f"drafts, but the entry {key!r} is a tree of {nodes} nodes.")


def _backend(model: dict, where: str) -> tuple[str, bool, str]:
    """The optional fields ``model.backend`` (a ``BACKENDS`` name, or a dtype's for a model run without one),
    ``model.backend_chosen_by_measurement`` (true / false) and ``model.dtype``, checked against each other; ("",
    False, "") when the trace does not record them."""
    from pass_core.runtime.backends import BACKENDS

    backend, auto = model.get("backend", ""), model.get("backend_chosen_by_measurement", False)
    dtype = model.get("dtype", "")
    dtypes = tuple(UNIT_ROUNDOFF)  # the dtypes whose rounding the replay's greedy check can judge
    if backend not in ("", *BACKENDS, *dtypes):
        raise ValueError(f"{where}: the field 'model.backend' must be one of {', '.join((*BACKENDS, *dtypes))}, "
                         f"got {_as_json(backend)}.")
    if not isinstance(auto, bool):
        raise ValueError(f"{where}: the field 'model.backend_chosen_by_measurement' must be true or false (JSON), got "
                         f"{_as_json(auto)}.")
    if auto and backend not in BACKENDS:  # accepted: the page then said "chosen by measurement" of no backend
        raise ValueError(f"{where}: the field 'model.backend_chosen_by_measurement' is true, but 'model.backend' is "
                         f"{_as_json(backend)}: a measured choice is one of {', '.join(BACKENDS)}.")
    if dtype not in ("", *dtypes):
        raise ValueError(f"{where}: the field 'model.dtype' must be one of {', '.join(dtypes)}, got {_as_json(dtype)}.")
    ran_in = BACKENDS[backend].dtype if backend in BACKENDS else backend
    if dtype and ran_in and ran_in != dtype:
        raise ValueError(f"{where}: the field 'model.backend' is {backend!r}, which runs in {ran_in}, but "
                         f"'model.dtype' is {dtype!r}.")
    return backend, auto, dtype


def _as_json(value) -> str:
    """A value as its JSON text, a string's marked as one (``string "true"``), at most 40 characters."""
    return ("string " if isinstance(value, str) else "") + json.dumps(value, ensure_ascii=False)[:40]


def _check_values(data, where: str) -> None:
    """Raise ValueError, naming the field, for a number that is NaN or +-Infinity (JSON as Python writes it
    allows them; a trace never holds one) or for nesting deeper than ``MAX_TRACE_DEPTH``. Iterative: a deep file
    cannot exhaust the stack."""
    stack = [(data, "", 0)]
    while stack:
        value, name, depth = stack.pop()
        if depth > MAX_TRACE_DEPTH:
            raise ValueError(f"{where} is not a trace: its JSON nests deeper than a trace ever does "
                             f"({MAX_TRACE_DEPTH} levels at most, at {name or 'the top'}).")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{where}: the field {name!r} is {value}, not a finite number.")
        if isinstance(value, dict):
            stack.extend((v, f"{name}.{k}" if name else str(k), depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{name}[{i}]", depth + 1) for i, v in enumerate(value))


def _check_shape(data: dict, where: str) -> None:
    """Raise ValueError, naming the field and what it should hold, when the trace's top-level fields have the
    wrong kind of value or its methods are not registered ones (a replay would show empty panes)."""
    from pass_core.registry import METHODS, tree_entry_nodes  # here: the registry imports the decoding modules

    kinds = {"settings": (dict, "an object of decode settings"), "model": (dict, "an object with name and signature"),
             "methods": (dict, "an object of method key -> {events: [...]}"), "prompt": (str, "a string")}
    for name, (kind, what) in kinds.items():
        if name in data and not isinstance(data[name], kind):
            raise ValueError(f"{where}: the field {name!r} must be {what}, got {type(data[name]).__name__}.")
    methods = data.get("methods", {})
    if "methods" in data and not methods:
        raise ValueError(f"{where}: the field 'methods' is empty, so there is nothing to replay.")
    unknown = [key for key in methods if key.split("+")[0] not in METHODS]  # "parallelspec+tree8": a variant
    if unknown:
        raise ValueError(f"{where} holds unknown method(s) {', '.join(map(repr, unknown))}: a trace replays "
                         f"the methods {', '.join(METHODS)}.")
    for key in methods:  # a race's only variant is a token-tree entry: "parallelspec+tree8" (pass+banana replayed)
        if "+" in key and tree_entry_nodes(key) is None:
            trees = ", ".join(k for k, m in METHODS.items() if m.tree)
            raise ValueError(f"{where}: the method {key!r} is not one a race runs: a trace holds methods and their "
                             f"token-tree entries, METHOD+treeN with N from 1 to {MAX_TREE_NODES} for {trees}.")
    for key, method in methods.items():
        if not isinstance(method, dict) or not isinstance(method.get("events"), list):
            raise ValueError(f"{where}: method {key!r} must be an object with a list 'events'.")
    if methods and not any(method["events"] for method in methods.values()):  # Stop during the first step: some
        raise ValueError(f"{where}: no method has events, so there is nothing to replay.")  # methods have none


def same_events(a: StepEvent, b: StepEvent) -> bool:
    """True when two events hold the same data (a replayed event equals the recorded one)."""
    return asdict(a) == asdict(b)
