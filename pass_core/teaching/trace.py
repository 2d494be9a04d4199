"""Traces: one run (or race) as a JSON file that replays without a model.

A trace holds the schema version, the model's name and embedding signature, the prompt, the
settings (seed included), every method's events (with the token inspector's data when it was
collected) and each method's summary. ``load_trace`` rebuilds the ``StepEvent`` objects, so every
consumer of events (panes, charts, metrics, the inspector) works on a replay as on a live run.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from pass_core.decoding.events import DraftRecord, StepEvent, TokenRecord, summarize
from pass_core.decoding.inspection import PositionInspection, TopN
from pass_core.drafters.files import embedding_signature
from pass_core.decoding.settings import DecodeSettings

SCHEMA = "pass-playground-trace/1"


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
        ValueError: a missing file, text that is not JSON, another schema version, a missing or
            malformed field, or a method that is not registered; the message names the file and what is wrong.
    """
    where = "the trace" if isinstance(source, dict) else repr(str(source))
    if isinstance(source, dict):
        data = source
    else:
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"Trace file {where} does not exist.")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(f"{where} is not a JSON trace ({err}).") from err
    if not isinstance(data, dict) or "schema" not in data:
        raise ValueError(f"{where} is not a PaSS Playground trace (it has no 'schema' field): write one with "
                         "python -m pass_core.generate --trace FILE or the page's Download trace.")
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{where} has schema {data.get('schema')!r}; this version of PaSS Playground reads {SCHEMA!r}.")
    _check_shape(data, where)
    try:
        settings = DecodeSettings(**data["settings"])
        events = {key: [_event(e) for e in method["events"]] for key, method in data["methods"].items()}
        return Trace(str(data["model"]["name"]), list(data["model"]["signature"]), str(data["prompt"]), settings,
                     events)
    except KeyError as err:
        raise ValueError(f"{where} misses the field {err.args[0]!r}: not a complete trace.") from err
    except (TypeError, ValueError, AttributeError) as err:
        raise ValueError(f"{where} has a malformed field ({err}).") from err


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
    unknown = [key for key in methods if key not in METHODS]
    if unknown:
        raise ValueError(f"{where} holds unknown method(s) {', '.join(map(repr, unknown))}: a trace replays "
                         f"the methods {', '.join(METHODS)}.")
    for key, method in methods.items():
        if not isinstance(method, dict) or not isinstance(method.get("events"), list):
            raise ValueError(f"{where}: method {key!r} must be an object with a list 'events'.")
        if not method["events"]:
            raise ValueError(f"{where}: method {key!r} has no events, so there is nothing to replay.")


def _event(d: dict) -> StepEvent:
    """A ``StepEvent`` from its ``to_dict`` form (strict: unknown or missing fields raise)."""
    known = {f.name for f in fields(StepEvent)}
    extra = set(d) - known
    if extra:
        raise TypeError(f"unknown event field(s) {sorted(extra)}")
    d = dict(d)
    d["tokens"] = tuple(TokenRecord(**t) for t in d["tokens"])
    d["drafts"] = tuple(DraftRecord(**x) for x in d.get("drafts", ()))
    d["inspection"] = tuple(_position(p) for p in d.get("inspection", ()))
    return StepEvent(**d)


def _position(d: dict) -> PositionInspection:
    top = {k: (TopN(tuple(v["ids"]), tuple(v["probs"])) if v is not None else None)
           for k, v in d.items() if k in ("p", "q", "residual")}
    return PositionInspection(position=int(d["position"]), **top)


def same_events(a: StepEvent, b: StepEvent) -> bool:
    """True when two events hold the same data (a replayed event equals the recorded one)."""
    return asdict(a) == asdict(b)
