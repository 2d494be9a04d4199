"""Traces: one run (or race) as a JSON file that replays without a model.

A trace holds the schema version, the model's name and embedding signature, the prompt, the
settings (seed included), every method's events (with the token inspector's data when it was
collected) and each method's summary. ``load_trace`` rebuilds the ``StepEvent`` objects, so every
consumer of events (panes, charts, metrics, the inspector) works on a replay as on a live run.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from pass_core.decoding.events import TOKEN_LABELS, DraftRecord, StepEvent, TokenRecord
from pass_core.decoding.metrics import summarize
from pass_core.decoding.inspection import PositionInspection, TopN
from pass_core.drafters.files import embedding_signature, signatures_match
from pass_core.decoding.settings import DecodeSettings
from pass_core.decoding.text import MAX_PROMPT_CHARS

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
        signature: its input-embedding signature (``model_files.embedding_signature``).
        prompt: the user's text.
        settings: the run's ``DecodeSettings``.
        events: method key -> its ``StepEvent`` list, in race order.
    """

    model_name: str
    signature: list[float]
    prompt: str
    settings: DecodeSettings
    events: dict[str, list[StepEvent]]


def make_trace(loaded, prompt: str, settings: DecodeSettings, events: dict[str, list[StepEvent]]) -> Trace:
    """A ``Trace`` of a run on ``loaded``."""
    signature = embedding_signature(loaded.model.get_input_embeddings().weight)
    return Trace(loaded.name, signature, prompt, settings, {k: list(v) for k, v in events.items()})


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
    return {"schema": SCHEMA, "model": {"name": trace.model_name, "signature": trace.signature},
            "prompt": trace.prompt, "settings": trace.settings.to_dict(),
            "methods": {key: {"events": [e.to_dict() for e in evs], "summary": summarize(evs, key).to_dict()}
                        for key, evs in trace.events.items()}}


def save_trace(trace: Trace, path: str | Path) -> Path:
    """Write ``trace`` as JSON (UTF-8); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(trace_to_dict(trace), ensure_ascii=False), encoding="utf-8")
    return path


def load_trace(source: str | Path | dict) -> Trace:
    """Read a trace from a file (or an already parsed dict).

    Raises:
        ValueError: a missing file, a file over ``MAX_TRACE_BYTES``, text that is not JSON or nests deeper than
            ``MAX_TRACE_DEPTH``, another schema version, a missing or malformed field (a number that is NaN,
            Infinity or out of its setting's range, or a prompt over ``text.MAX_PROMPT_CHARS``, included), or a
            method that is not registered; the message names the file and what is wrong.
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
        raise ValueError(f"{where} has schema {data.get('schema')!r}; this version of PaSS Playground reads {SCHEMA!r}.")
    _check_shape(data, where)
    missing = [name for name in ("model", "prompt", "settings", "methods") if name not in data]
    if missing:
        raise ValueError(f"{where} misses the field {missing[0]!r}: not a complete trace.")
    if len(data["prompt"]) > MAX_PROMPT_CHARS:
        raise ValueError(f"{where}: the field 'prompt' has {len(data['prompt']):,} characters; a race takes at most "
                         f"{MAX_PROMPT_CHARS:,}, so no trace holds more.")
    try:
        settings = DecodeSettings(**data["settings"])
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: the field 'settings' is malformed ({err}).") from err
    try:
        events = {key: [_event(e, f"methods.{key}.events[{i}]", i + 1) for i, e in enumerate(method["events"])]
                  for key, method in data["methods"].items()}
        trace = Trace(str(data["model"]["name"]), data["model"]["signature"], str(data["prompt"]), settings, events)
    except KeyError as err:
        raise ValueError(f"{where} misses the field {err.args[0]!r}: not a complete trace.") from err
    except (TypeError, ValueError, AttributeError, OverflowError) as err:
        raise ValueError(f"{where} has a malformed field ({err}).") from err
    if not isinstance(trace.signature, list) or not all(type(x) in (int, float) for x in trace.signature):
        raise ValueError(f"{where}: the field 'model.signature' must be a list of numbers.")
    return trace


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
    from pass_core.registry import METHODS  # here, not at the top: the registry imports the decoding modules

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
    for key, method in methods.items():
        if not isinstance(method, dict) or not isinstance(method.get("events"), list):
            raise ValueError(f"{where}: method {key!r} must be an object with a list 'events'.")
        if not method["events"]:
            raise ValueError(f"{where}: method {key!r} has no events, so there is nothing to replay.")


def _event(d: dict, name: str = "event", step: int | None = None) -> StepEvent:
    """A ``StepEvent`` from its ``to_dict`` form (strict: unknown or missing fields raise; ``name``: the event's
    field path, for the messages; ``step``: the 1-based step number it must carry, None: not checked).

    Raises:
        TypeError: unknown or missing fields.
        ValueError: naming the field: a bad token (``_token``), draft (``_draft``) or inspected position
            (``_position``), a step number other than ``step`` (the step-through
            and the charts number steps by position: a trace with steps -3, 7, 7 showed steps that never ran), a
            count or a time below 0, or token-tree parents that do not form a tree over the step's drafts.
    """
    known = {f.name for f in fields(StepEvent)}
    extra = set(d) - known
    if extra:
        raise TypeError(f"unknown event field(s) {sorted(extra)}")
    d = dict(d)
    d["tokens"] = tuple(_token(t, f"{name}.tokens[{j}]") for j, t in enumerate(d["tokens"]))
    d["drafts"] = tuple(_draft(x, f"{name}.drafts[{j}]") for j, x in enumerate(d.get("drafts", ())))
    d["inspection"] = tuple(_position(p, f"{name}.inspection[{j}]") for j, p in enumerate(d.get("inspection", ())))
    d["tree_parents"] = tuple(int(i) for i in d.get("tree_parents", ()))  # absent from traces before token trees
    event = StepEvent(**d)
    if step is not None and (type(event.step) is not int or event.step != step):
        raise ValueError(f"the field '{name}.step' is {event.step!r}: steps are numbered 1, 2, 3, ... in order, "
                         f"so this one is {step}")
    for field in ("forward_passes", "drafter_passes", "num_verified_drafts", "drafting_s", "verification_s", "step_s"):
        value = getattr(event, field)
        if type(value) not in (int, float) or value < 0 or (field[-2:] != "_s" and type(value) is not int):
            kind = "a time in seconds, 0 or more" if field[-2:] == "_s" else "a whole number, 0 or more"
            raise ValueError(f"the field '{name}.{field}' is {value!r}: {kind}")
    parents = event.tree_parents
    if parents and (len(parents) != len(event.drafts) or any(not -1 <= p < j for j, p in enumerate(parents))):
        raise ValueError(f"the field '{name}.tree_parents' is {list(parents)}: one parent per draft, each -1 (the "
                         "root) or an earlier draft's index")
    return event


def _token(t: dict, name: str) -> TokenRecord:
    """A ``TokenRecord`` from its dict, each field checked (a bad label or a text that is not a string used to
    fail later, in the panes, with only "'bogus'" to show).

    Raises:
        ValueError: naming the field: a token id that is not a whole number in 0..2**31-1, a text that is not a
            string, a label that is not one of ``TOKEN_LABELS``, a margin that is not a number or null.
    """
    token = TokenRecord(**t)
    if type(token.token_id) is not int or not 0 <= token.token_id < 2**31:
        raise ValueError(f"the field '{name}.token_id' is {token.token_id!r}: a token id is a whole number from 0")
    if not isinstance(token.text, str):
        raise ValueError(f"the field '{name}.text' is {token.text!r}: a token's text is a string")
    if token.label not in TOKEN_LABELS:
        raise ValueError(f"the field '{name}.label' is {token.label!r}: one of {', '.join(TOKEN_LABELS)}")
    if token.margin is not None and type(token.margin) not in (int, float):
        raise ValueError(f"the field '{name}.margin' is {token.margin!r}: a number or null")
    return token


def _probability(value, name: str, optional: bool = False) -> None:
    """Raise ValueError naming the field unless ``value`` is a probability (a number in [0, 1]; None if
    ``optional``). A replay once showed q = 5.000 and p = -2.000 in the inspector."""
    if value is None and optional:
        return
    if type(value) not in (int, float) or not 0.0 <= value <= 1.0 + 1e-6:
        raise ValueError(f"the field {name!r} is {value!r}: a probability, a number from 0 to 1"
                         + (", or null" if optional else ""))


def _whole(value, name: str, low: int, what: str) -> None:
    if type(value) is not int or not low <= value < 2**31:
        raise ValueError(f"the field {name!r} is {value!r}: {what}, a whole number from {low}")


def _draft(x: dict, name: str) -> DraftRecord:
    """A ``DraftRecord`` from its dict, each field checked.

    Raises:
        ValueError: naming the field: a position below 1, a token id that is not a whole number from 0, q or p
            outside [0, 1], u or p_res neither null nor in [0, 1], a decision that is not one of ``DECISIONS``.
    """
    draft = DraftRecord(**x)
    _whole(draft.position, f"{name}.position", 1, "a draft position")
    _whole(draft.token_id, f"{name}.token_id", 0, "a token id")
    for field, optional in (("q", False), ("p", False), ("u", True), ("p_res", True)):
        _probability(getattr(draft, field), f"{name}.{field}", optional)
    if draft.decision not in DECISIONS:
        raise ValueError(f"the field '{name}.decision' is {draft.decision!r}: one of {', '.join(DECISIONS)}")
    return draft


#: What verification did with a draft (``DraftRecord.decision``).
DECISIONS = ("accepted", "rejected", "not_verified")


def _position(d: dict, name: str = "inspection") -> PositionInspection:
    """A ``PositionInspection`` from its dict: each top-n list holds as many token ids (whole numbers from 0) as
    probabilities (each in [0, 1]); ValueError naming the field otherwise."""
    top = {}
    for k, v in d.items():
        if k not in ("p", "q", "residual"):
            continue
        if v is not None:
            ids, probs = list(v["ids"]), list(v["probs"])
            if len(ids) != len(probs):
                raise ValueError(f"the field '{name}.{k}' has {len(ids)} ids and {len(probs)} probabilities: one "
                                 "probability per id")
            for j, (i, prob) in enumerate(zip(ids, probs)):
                _whole(i, f"{name}.{k}.ids[{j}]", 0, "a token id")
                _probability(prob, f"{name}.{k}.probs[{j}]")
            v = TopN(tuple(ids), tuple(probs))
        top[k] = v
    return PositionInspection(position=int(d["position"]), **top)


def same_events(a: StepEvent, b: StepEvent) -> bool:
    """True when two events hold the same data (a replayed event equals the recorded one)."""
    return asdict(a) == asdict(b)
