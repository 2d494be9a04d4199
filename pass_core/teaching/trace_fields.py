"""A trace's events read back field by field (``trace.load_trace``): each value is checked and a bad one is
refused by its field's path ("methods.pass.events[1].drafts[0].q"), so that no replay shows a value a run never
writes (a step -3, a negative time, q = 5.0)."""

from __future__ import annotations

from dataclasses import MISSING, fields

from pass_core.decoding.events import TOKEN_LABELS, DraftRecord, StepEvent, TokenRecord
from pass_core.decoding.inspection import TOP_N, PositionInspection, TopN
from pass_core.runtime.machine_load import MachineLoad

#: The longest time a trace may give one step (or its drafting or verification), in seconds: a day. A replay of a
#: step of 1e300 s printed 300-digit numbers in the run line; no run of this app takes a day per step.
MAX_STEP_S = 86_400.0


def record_fields(cls, value, name: str, what: str) -> dict:
    """``value`` checked to be the JSON form of the dataclass ``cls``: an object holding each of its fields (those
    with a default may be absent: older traces) and no other. Returns it as a dict of keyword arguments.

    Raises:
        ValueError: naming the field ``name``, ``what`` it should be and the fields it needs ("TokenRecord()
            argument after ** must be a mapping, not str" was all a crafted trace was told).
    """
    names = [f.name for f in fields(cls)]
    if not isinstance(value, dict):
        raise ValueError(f"the field {name!r} is {repr(value)[:60]}: {what}, an object with the fields "
                         f"{', '.join(names)}")
    unknown = [key for key in value if key not in names]
    needed = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
    missing = [key for key in needed if key not in value]
    if unknown or missing:
        wrong = (f"has no field {', '.join(map(repr, unknown))}" if unknown else
                 f"misses the field{'s' * (len(missing) > 1)} {', '.join(map(repr, missing))}")
        raise ValueError(f"the field {name!r} {wrong}: {what} has the fields {', '.join(names)}")
    return dict(value)


def read_event(d: dict, name: str = "event", step: int | None = None) -> StepEvent:
    """A ``StepEvent`` from its ``to_dict`` form (strict: unknown or missing fields raise; ``name``: the event's
    field path, for the messages; ``step``: the 1-based step number it must carry, None: not checked).

    Raises:
        ValueError: naming the field: not an object, unknown or missing fields (``record_fields``), a bad token
            (``_token``), draft (``_draft``) or inspected position (``_position``), a step number other than
            ``step`` (the step-through and the charts number steps by position: a trace with steps -3, 7, 7 showed
            steps that never ran), a count or a time below 0, a time
            above ``MAX_STEP_S``, token-tree parents that do not form a tree over the step's drafts, a draft
            position other than its place in the chain (1, 2, ...) or its depth in the tree, or parts of the step
            that contradict each other (``_check_consistent``).
    """
    d = record_fields(StepEvent, d, name, "a step event")  # "abc" was told of unknown fields 'a', 'b' and 'c'
    d["tokens"] = tuple(_token(t, f"{name}.tokens[{j}]") for j, t in enumerate(d["tokens"]))
    d["drafts"] = tuple(_draft(x, f"{name}.drafts[{j}]") for j, x in enumerate(d.get("drafts", ())))
    d["inspection"] = tuple(_position(p, f"{name}.inspection[{j}]") for j, p in enumerate(d.get("inspection", ())))
    parents = d.get("tree_parents", ())  # absent from traces before token trees
    if not isinstance(parents, (list, tuple)) or any(type(i) is not int for i in parents):  # "abc": int()'s error
        raise ValueError(f"the field '{name}.tree_parents' is {parents!r}: a list of whole numbers, one parent per "
                         "draft, each -1 (the root) or an earlier draft's index")
    d["tree_parents"] = tuple(parents)
    event = StepEvent(**d)
    if step is not None and (type(event.step) is not int or event.step != step):
        raise ValueError(f"the field '{name}.step' is {event.step!r}: steps are numbered 1, 2, 3, ... in order, "
                         f"so this one is {step}")
    for field in ("forward_passes", "drafter_passes", "num_verified_drafts", "drafting_s", "verification_s", "step_s"):
        value = getattr(event, field)
        time = field[-2:] == "_s"
        if type(value) not in (int, float) or value < 0 or (time and value > MAX_STEP_S) or \
                (not time and type(value) is not int):
            kind = f"a time in seconds, from 0 to {MAX_STEP_S:,.0f} (a day)" if time else "a whole number, 0 or more"
            raise ValueError(f"the field '{name}.{field}' is {value!r}: {kind}")
    parents = event.tree_parents
    if parents and (len(parents) != len(event.drafts) or any(not -1 <= p < j for j, p in enumerate(parents))):
        raise ValueError(f"the field '{name}.tree_parents' is {list(parents)}: one parent per draft, each -1 (the "
                         "root) or an earlier draft's index")
    positions = [d.position for d in event.drafts]
    for j, position in enumerate(positions):  # a chain's drafts are d_1, d_2, ... in order; a tree node's is its depth
        due = (positions[parents[j]] + 1 if parents[j] >= 0 else 1) if parents else j + 1
        if position != due:  # a position of 1000 drew 1,000 chart categories and froze the browser for minutes
            where = "its depth in the step's tree" if parents else "drafts are d_1, d_2, ... in order"
            raise ValueError(f"the field '{name}.drafts[{j}].position' is {position}: {where}, so this one is {due}")
    _check_consistent(event, name)
    return event


#: How far u may sit on the wrong side of min(1, p/q) in a trace: the rule compared them before they were rounded
#: to the trace's floats.
DECISION_SLACK = 1e-6


def _check_consistent(event: StepEvent, name: str) -> None:
    """Raise ValueError, naming the field, where an event's parts contradict each other as no run writes them: a
    step without tokens (each yields one at least), a step time below its drafting and verification times, tokens
    labelled accepted or rejected in other numbers than the drafts so decided, a draft decided against its own u and
    min(1, p/q) (``DraftRecord.acceptance_probability``), an inspected position outside 0 (PaSS's exact token) ..
    the deepest draft's + 1 (the bonus position)."""
    if not event.tokens:
        raise ValueError(f"the field '{name}.tokens' is empty: every step yields one token at least")
    parts = event.drafting_s + event.verification_s
    if event.step_s < parts * (1 - 1e-9):  # a step_s left out (0) counted the step as free: tokens/s rose (helper 71)
        raise ValueError(f"the field '{name}.step_s' is {event.step_s!r}: a step's time holds its drafting and "
                         f"verification ({event.drafting_s!r} + {event.verification_s!r} s), so it is at least their "
                         "sum")
    labels, decisions = [t.label for t in event.tokens], [d.decision for d in event.drafts]
    for kind in ("accepted", "rejected"):
        if labels.count(kind) != decisions.count(kind):
            raise ValueError(f"the field '{name}.tokens' labels {labels.count(kind)} token(s) {kind}, but "
                             f"{decisions.count(kind)} of the step's drafts were {kind}")
    for j, d in enumerate(event.drafts):
        a = d.acceptance_probability
        if d.u is not None and a is not None and (d.u >= a + DECISION_SLACK if d.decision == "accepted"
                                                  else d.decision == "rejected" and d.u < a - DECISION_SLACK):
            side = "≥" if d.decision == "accepted" else "<"
            raise ValueError(f"the field '{name}.drafts[{j}].decision' is {d.decision!r}, but its u = {d.u:.6g} "
                             f"{side} min(1, p/q) = {a:.6g}: the rule keeps a draft exactly when u < min(1, p/q)")
    deepest = max((d.position for d in event.drafts), default=0)
    for j, inspected in enumerate(event.inspection):
        if type(inspected.position) is not int or not 0 <= inspected.position <= deepest + 1:
            raise ValueError(f"the field '{name}.inspection[{j}].position' is {inspected.position!r}: this step's "
                             f"positions are 0 (PaSS's exact token) to {deepest + 1} (after its deepest draft)")


def read_machine_load(d: dict, name: str = "machine_load") -> MachineLoad:
    """The race's ``MachineLoad`` from its dict (a replay shows its busy line: the numbers are checked, and the page
    writes the line itself, so a trace brings no text of its own into the run line).

    Raises:
        ValueError: naming the field: not an object with exactly ``MachineLoad``'s fields, a time or a core count
            that is not a finite number from 0 (the cores a whole number from 1), ``saturated`` not true, false or
            null.
    """
    known = [f.name for f in fields(MachineLoad)]
    if not isinstance(d, dict) or sorted(d) != sorted(known):
        raise ValueError(f"the field {name!r} must be an object with the fields {', '.join(known)}")
    for field, optional in (("wall_s", False), ("own_cores", False), ("other_cores", True), ("load_average", True)):
        value = d[field]
        if not (value is None and optional) and (type(value) not in (int, float) or not 0 <= value < 1e9):
            raise ValueError(f"the field '{name}.{field}' is {value!r}: a number from 0" + (", or null" * optional))
    if d["saturated"] is not None and type(d["saturated"]) is not bool:  # 1 == True: not a JSON boolean
        raise ValueError(f"the field '{name}.saturated' is {d['saturated']!r}: true, false or null")
    _whole(d["cores"], f"{name}.cores", 1, "a count of cores")
    return MachineLoad(**d)


DECISIONS = ("accepted", "rejected", "not_verified")
#: The longest token text a trace may hold: no tokenizer writes more for one token (SmolLM2's longest, a run of
#: spaces, is 81 characters); one token of 5,000,000 characters in a 5-MB trace froze the browser's tab.
MAX_TOKEN_CHARS = 1_000


def _token(t: dict, name: str) -> TokenRecord:
    """A ``TokenRecord`` from its dict, each field checked (a bad label or a text that is not a string used to
    fail later, in the panes, with only "'bogus'" to show).

    Raises:
        ValueError: naming the field: a token id that is not a whole number in 0..2**31-1, a text that is not a
            string or is longer than ``MAX_TOKEN_CHARS``, a label that is not one of ``TOKEN_LABELS``, a margin
            that is not a number or null.
    """
    token = TokenRecord(**record_fields(TokenRecord, t, name, "a token"))
    _whole(token.token_id, f"{name}.token_id", 0, "a token id")
    if not isinstance(token.text, str):
        raise ValueError(f"the field '{name}.text' is {token.text!r}: a token's text is a string")
    if len(token.text) > MAX_TOKEN_CHARS:
        raise ValueError(f"the field '{name}.text' has {len(token.text):,} characters: one token's text has at most "
                         f"{MAX_TOKEN_CHARS:,}")
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
    draft = DraftRecord(**record_fields(DraftRecord, x, name, "a draft"))
    _whole(draft.position, f"{name}.position", 1, "a draft position")
    _whole(draft.token_id, f"{name}.token_id", 0, "a token id")
    for field, optional in (("q", False), ("p", False), ("u", True), ("p_res", True)):
        _probability(getattr(draft, field), f"{name}.{field}", optional)
    if draft.decision not in DECISIONS:
        raise ValueError(f"the field '{name}.decision' is {draft.decision!r}: one of {', '.join(DECISIONS)}")
    return draft


#: What verification did with a draft (``DraftRecord.decision``).
def _position(d: dict, name: str = "inspection") -> PositionInspection:
    """A ``PositionInspection`` from its dict: each top-n list holds as many token ids (whole numbers from 0) as
    probabilities (each in [0, 1]), at most ``TOP_N`` of each, as a run writes (a crafted trace of 50,000 held a
    server's CPU for minutes when its token was clicked); ValueError naming the field otherwise."""
    top = {}
    for k, v in d.items():
        if k not in ("p", "q", "residual"):
            continue
        if v is not None:
            ids, probs = list(v["ids"]), list(v["probs"])
            if len(ids) != len(probs):
                raise ValueError(f"the field '{name}.{k}' has {len(ids)} ids and {len(probs)} probabilities: one "
                                 "probability per id")
            if len(ids) > TOP_N:
                raise ValueError(f"the field '{name}.{k}' has {len(ids)} ids: a run records at most {TOP_N}")
            for j, (i, prob) in enumerate(zip(ids, probs)):
                _whole(i, f"{name}.{k}.ids[{j}]", 0, "a token id")
                _probability(prob, f"{name}.{k}.probs[{j}]")
            v = TopN(tuple(ids), tuple(probs))
        top[k] = v
    return PositionInspection(position=int(d["position"]), **top)
