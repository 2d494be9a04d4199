"""Traces (issue 12, item 5): a run saved as JSON replays as the same events; bad files are refused by name."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from pass_core.decoding.events import output_text
from pass_core.decoding.metrics import summarize
from pass_core.registry import METHODS
from pass_core.decoding.settings import DecodeSettings
from pass_core.teaching.trace import SCHEMA, load_trace, make_trace, same_events, save_trace, trace_to_dict


def _race(tiny):
    settings = DecodeSettings(max_new_tokens=16, num_lookahead=3, temperature=1.0, top_k=4, seed=3, inspect=True)
    return settings, {key: list(METHODS[key].decode(tiny, "Grüße 😀", settings)) for key in METHODS}


def test_trace_round_trip_keeps_every_event(tiny, tmp_path):
    settings, events = _race(tiny)
    path = save_trace(make_trace(tiny, "Grüße 😀", settings, events), tmp_path / "t.json")
    back = load_trace(path)
    assert back.prompt == "Grüße 😀" and back.settings == settings and back.model_name == tiny.name
    assert list(back.events) == list(events)
    for key in events:
        assert len(back.events[key]) == len(events[key])
        assert all(same_events(a, b) for a, b in zip(back.events[key], events[key])), key
        assert output_text(back.events[key]) == output_text(events[key])
        assert summarize(back.events[key]) == summarize(events[key])
    assert any(e.inspection for e in back.events["pass"])  # the inspector's data travelled
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["schema"] == SCHEMA and data["methods"]["pass"]["summary"]["tokens"] == 16
    # what every method ran on (the speed-up's baseline) travels too; a trace written before it reads as unknown
    assert (back.backend, back.backend_auto, back.dtype) == ("float32", False, "float32")
    auto = dataclasses.replace(tiny, backend="onednn", backend_choice={"backend": "onednn"})
    back = load_trace(trace_to_dict(make_trace(auto, "hi", settings, events)))
    assert (back.backend, back.backend_auto, back.dtype) == ("onednn", True, "float32")
    for name in ("backend", "backend_chosen_by_measurement", "dtype"):
        del data["model"][name]
    assert (load_trace(data).backend, load_trace(data).backend_auto, load_trace(data).dtype) == ("", False, "")


def test_traces_whose_parts_contradict_each_other_are_refused(tiny, tmp_path):
    """Each field of these traces is in range, but the parts contradict each other as no run writes them, and a
    replay showed it: a step without tokens, a draft "accepted" whose token is labelled rejected, a draft accepted
    although its u was above min(1, p/q) = 0, an inspected position 99 in a step of 3 drafts."""
    settings = DecodeSettings(max_new_tokens=30, num_lookahead=3, temperature=1.0, inspect=True)
    events = {key: list(METHODS[key].decode(tiny, "abcab abcab", settings)) for key in ("ar", "parallelspec")}
    good = trace_to_dict(make_trace(tiny, "abcab abcab", settings, events))
    i, j = next((i, j) for i, e in enumerate(events["parallelspec"]) for j, d in enumerate(e.drafts)
                if d.decision == "accepted" and d.u is not None)
    at = rf"the field 'methods\.parallelspec\.events\[{i}\]\."

    def changed(edit) -> dict:
        bad = json.loads(json.dumps(good))
        edit(bad["methods"]["parallelspec"]["events"][i])
        return bad

    k = [t["label"] for t in good["methods"]["parallelspec"]["events"][i]["tokens"]].index("accepted")
    accepted = sum(d.decision == "accepted" for d in events["parallelspec"][i].drafts)
    cases = {"no-tokens": (lambda e: e.update(tokens=[]), "tokens' is empty: every step yields one token at least"),
             "label": (lambda e: e["tokens"][k].update(label="rejected"),
                       rf"tokens' labels {accepted - 1} token\(s\) accepted, but {accepted} of the step's drafts were "
                       "accepted"),
             "decision": (lambda e: e["drafts"][j].update(p=0.0),
                          rf"drafts\[{j}\]\.decision' is 'accepted', but its u = [\d.e-]+ ≥ min\(1, p/q\) = 0: the "
                          r"rule keeps a draft exactly when u < min\(1, p/q\)"),
             "inspection": (lambda e: e["inspection"][0].update(position=99),
                            r"inspection\[0\]\.position' is 99: this step's positions are 0 \(PaSS's exact token\) "
                            r"to \d \(after its deepest draft\)")}
    for name, (edit, message) in cases.items():
        with pytest.raises(ValueError, match=at + message):
            load_trace(changed(edit))


def test_bad_traces_are_refused_by_name(tiny, tmp_path):
    settings, events = _race(tiny)
    good = trace_to_dict(make_trace(tiny, "hi", settings, events))
    cases = {"not-json": ("{not json", "not a JSON trace"),
             "empty": ("", r"is empty \(0 bytes\): not a trace"),  # said "Expecting value: line 1 column 1"
             "schema": (json.dumps({**good, "schema": "pass-playground-trace/0"}), "this version of PaSS Playground reads"),
             "missing": (json.dumps({k: v for k, v in good.items() if k != "settings"}), "misses the field 'settings'"),
             "malformed": (json.dumps({**good, "methods": {"ar": {"events": [{"step": 1}]}}}), "malformed"),
             "bad-setting": (json.dumps({**good, "settings": {**good["settings"], "top_p": 7}}), "malformed"),
             "switch": (json.dumps({**good, "settings": {**good["settings"], "fused": 1}}),  # was taken as true
                        r"'settings' is malformed \(fused must be true or false, got 1\)"),
             "not-a-trace": (json.dumps({"method": "ar", "text": "hi"}), "is not a PaSS Playground trace .* --trace"),
             "settings-kind": (json.dumps({**good, "settings": "oops"}), "'settings' must be an object of decode"),
             "no-methods": (json.dumps({**good, "methods": []}), "'methods' must be an object"),
             "empty-methods": (json.dumps({**good, "methods": {}}), "nothing to replay"),
             "unknown-method": (json.dumps({**good, "methods": {"bogus": good["methods"]["ar"]}}),
                                "unknown method.*'bogus'.*replays the methods ar, pass"),
             "events-kind": (json.dumps({**good, "methods": {"ar": {"events": 3}}}), "'ar' must be an object with"),
             "no-events": (json.dumps({**good, "methods": {"ar": {"events": []}}}), "no method has events")}
    # a bad token used to fail later, in the panes: "'bogus'" or "expected str instance, int found" and a traceback
    at = r"malformed field \(the field 'methods\.ar\.events\[0\]\.tokens\[0\]\."
    for field, value, message in (("label", "bogus", "label' is 'bogus': one of target, exact, accepted"),
                                  ("text", 12345, "text' is 12345: a token's text is a string"),
                                  # one token of 5,000,000 characters froze the browser's tab (helper 85)
                                  ("text", "x" * 1_001, "text' has 1,001 characters: one token's text has at most 1,0"),
                                  ("token_id", -5, "token_id' is -5: a token id, a whole number from 0"),
                                  ("token_id", 3.7, "token_id' is 3.7"), ("token_id", "abc", "token_id' is 'abc'"),
                                  ("margin", "wide", "margin' is 'wide': a number or null")):
        bad = json.loads(json.dumps(good))
        bad["methods"]["ar"]["events"][0]["tokens"][0][field] = value
        cases[f"token-{field}-{str(value)[:20]}"] = (json.dumps(bad), at + message)
    # step numbers, counts, times and tree parents: a replay showed steps -3, 7, 7 and negative times as recorded
    at = r"malformed field \(the field 'methods\.pass\.events\[1\]\."
    for field, value, message in (("step", -3, "step' is -3: steps are numbered 1, 2, 3, ... in order, so this one is 2"),
                                  ("step", 1, "step' is 1: .* this one is 2"), ("step", 2.0, "step' is 2.0"),
                                  ("forward_passes", -1, "forward_passes' is -1: a whole number, 0 or more"),
                                  ("drafter_passes", 0.5, "drafter_passes' is 0.5: a whole number"),
                                  ("step_s", -0.25, r"step_s' is -0.25: a time in seconds, from 0 to 86,400 \(a day\)"),
                                  # a step of 1e300 s printed 300-digit numbers in the replay's run line
                                  ("verification_s", 1e300, r"verification_s' is 1e\+300: a time in seconds, from 0"),
                                  ("drafting_s", "fast", "drafting_s' is 'fast'"),
                                  ("tree_parents", [5], r"tree_parents' is \[5\]: one parent per draft"),
                                  # int()'s "invalid literal for int() with base 10: 'a'" named no field (helper 70)
                                  ("tree_parents", "abc", r"tree_parents' is 'abc': a list of whole numbers, one "),
                                  ("tree_parents", [0.5], r"tree_parents' is \[0\.5\]: a list of whole numbers")):
        bad = json.loads(json.dumps(good))
        bad["methods"]["pass"]["events"][1][field] = value
        cases[f"event-{field}-{value}"] = (json.dumps(bad), at + message)
    # a step time left out (0 by default) or below its parts: the step counted as free, PaSS's tokens/s rose from
    # 10.2 to 11.4 (helper 71)
    bad = json.loads(json.dumps(good))
    del bad["methods"]["pass"]["events"][1]["step_s"]
    cases["event-no-step_s"] = (json.dumps(bad), at + r"step_s' is 0\.0: a step's time holds its drafting and "
                                                    r"verification \([\d.e-]+ \+ [\d.e-]+ s\), so it is at least")
    # drafts and the inspector's top-n lists: a replay showed q = 5.000 and p = -2.000 in the inspector
    at = r"malformed field \(the field 'methods\.pass\.events\[1\]\."
    for field, value, message in (("q", 5.0, r"drafts\[0\]\.q' is 5\.0: a probability, a number from 0 to 1\)"),
                                  ("p", -2, r"drafts\[0\]\.p' is -2"), ("u", 7, r"drafts\[0\]\.u' is 7: .* or null"),
                                  ("token_id", -1, r"drafts\[0\]\.token_id' is -1: a token id, a whole number from 0"),
                                  ("position", 0, r"drafts\[0\]\.position' is 0: a draft position"),
                                  ("decision", "maybe", r"drafts\[0\]\.decision' is 'maybe': one of accepted"),
                                  # a position of 1000 drew 1,000 chart categories: the browser froze for minutes
                                  ("position", 1000, r"drafts\[0\]\.position' is 1000: drafts are d_1, d_2, \.\.\. "
                                                     r"in order, so this one is 1")):
        bad = json.loads(json.dumps(good))
        bad["methods"]["pass"]["events"][1]["drafts"][0][field] = value
        cases[f"draft-{field}-{value}"] = (json.dumps(bad), at + message)
    for field, value, message in (("probs", [3.0], r"inspection\[0\]\.p\.probs\[0\]' is 3\.0: a probability"),
                                  ("ids", [1, 2, 3], r"inspection\[0\]\.p' has 3 ids and \d+ probabilities")):
        bad = json.loads(json.dumps(good))
        top = bad["methods"]["pass"]["events"][1]["inspection"][0]["p"]
        top[field] = value if field == "ids" else value * len(top["ids"])
        cases[f"inspection-{field}"] = (json.dumps(bad), at + message)
    # records that are not objects, or miss or add a field: Python's words ("TokenRecord() argument after ** must be a
    # mapping, not str"; an event "abc" had "unknown event field(s) ['a', 'b', 'c']"), now the field's path
    tokens = "token_id, text, label, margin"
    for where, value, message in (
            (("events", 1, "tokens", 0), "abc",
             rf"\.tokens\[0\]' is 'abc': a token, an object with the fields {tokens}\)"),
            (("events", 1, "drafts", 0), 7, r"\.drafts\[0\]' is 7: a draft, an object with the fields position, "),
            (("events", 1), "abc", r"' is 'abc': a step event, an object with the fields method, step, tokens"),
            (("events", 1, "tokens", 0, "label"), None, rf"\.tokens\[0\]' misses the field 'label': a token has the "
                                                       rf"fields {tokens}\)"),
            (("events", 1, "tokens", 0, "zzz"), 1, rf"\.tokens\[0\]' has no field 'zzz': a token has the fields")):
        bad = json.loads(json.dumps(good))
        parent = bad["methods"]["pass"]
        for key in where[:-1]:
            parent = parent[key]
        parent.pop(where[-1]) if value is None else parent.__setitem__(where[-1], value)
        cases[f"record-{'-'.join(map(str, where))}"] = (json.dumps(bad), at[:-2] + message)
    cases["settings-field"] = (json.dumps({**good, "settings": {**good["settings"], "bogus": 1}}),
                               r": the field 'settings' has no field 'bogus': a settings object has the fields "
                               r"max_new_tokens, temperature")
    crafted = json.loads(json.dumps(good))  # 50,000 entries: a click on its token held the server's CPU for minutes
    crafted["methods"]["pass"]["events"][1]["inspection"][0]["p"] = {"ids": list(range(11)), "probs": [0.01] * 11}
    cases["inspection-top-n"] = (json.dumps(crafted), at + r"inspection\[0\]\.p' has 11 ids: a run records at most 10")
    mislabelled = json.loads(json.dumps(good))  # a hand-edited trace: PaSS's pane would show another method's step
    mislabelled["methods"]["pass"]["events"][1]["method"] = "ar"
    overlong = json.loads(json.dumps(good))  # more tokens than any run under these settings commits
    overlong["settings"]["max_new_tokens"] = 2
    cases["over-max-new-tokens"] = (json.dumps(overlong), r"method 'ar' commits \d+ tokens, but its settings stop a "
                                                          r"run at max_new_tokens = 2")
    cases["event-method"] = (json.dumps(mislabelled), r"'methods\.pass\.events\[1\]\.method' is 'ar', but the event "
                                                      r"is listed under method 'pass'")
    zero_times = json.loads(json.dumps(good))  # tokens/s of a method whose steps took no time: a division by zero
    for event in zero_times["methods"]["pass"]["events"]:
        event.update(step_s=0.0, drafting_s=0.0, verification_s=0.0)
    cases["zero-times"] = (json.dumps(zero_times), r"method 'pass' has steps that took 0 s in all")
    for variant in ("pass+banana", "ar+tree8", "pass+tree0", "pass+tree08", "pass+tree65", "pass+", "pass+tree²"):  # replayed
        odd = json.loads(json.dumps(good))  # as a pane named after a variant no race runs
        odd["methods"][variant] = odd["methods"].pop("pass")
        cases[f"variant-{variant}"] = (json.dumps(odd), rf"the method '{re.escape(variant)}' is not one a race runs: "
                                                        r"a trace holds methods and their token-tree entries, "
                                                        r"METHOD\+treeN with N from 1 to 64 for pass")
    model = r"'model\.backend' must be one of fp32, bf16, onednn, float64, float32, float16, bfloat16, got "
    for field, value, message in (("backend", 5, model + "5"),
                                  ("backend", "fp32 & more", model + 'string "fp32 & more"'),
                                  ("backend", "ＢＦ１６", model + 'string "ＢＦ１６"'), ("backend", None, model + "null"),
                                  ("backend_chosen_by_measurement", "true", r"must be true or false \(JSON\), got "
                                                                            r'string "true"'),
                                  ("dtype", "int8", r"'model\.dtype' must be one of float64, float32, float16, "
                                                    r'bfloat16, got string "int8"'),
                                  ("dtype", "bfloat16", r"'model\.backend' is 'float32', which runs in float32, but "
                                                        r"'model\.dtype' is 'bfloat16'")):
        cases[f"model-{field}-{value}"] = (json.dumps({**good, "model": {**good["model"], field: value}}), message)
    for backend in ("", "float32"):  # "chosen by measurement" of no backend (it was replayed as such)
        chosen = {**good["model"], "backend": backend, "backend_chosen_by_measurement": True}
        cases[f"model-auto-{backend}"] = (json.dumps({**good, "model": chosen}), r"'model\.backend_chosen_by_"
                                          rf"measurement' is true, but 'model\.backend' is string \"{backend}\": a "
                                          r"measured choice is one of fp32, bf16, onednn")
    mismatch = {**good["model"], "backend": "bf16"}  # bf16 runs in bfloat16: a trace saying float32 contradicts it
    cases["model-bf16-float32"] = (json.dumps({**good, "model": mismatch}), r"'bf16', which runs in bfloat16, but "
                                                                              r"'model\.dtype' is 'float32'")
    for name, (text, message) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=message) as err:
            load_trace(path)
        assert str(path) in str(err.value) and str(err.value).count(str(path)) == 1, name  # named once
    with pytest.raises(ValueError, match="does not exist"):
        load_trace(tmp_path / "nope.json")
    bom = tmp_path / "notepad.json"  # saved by Windows' Notepad: a UTF-8 byte-order mark first
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(good).encode())
    assert load_trace(bom).prompt == "hi"


def test_cli_writes_a_trace(tiny_folder, tmp_path, capsys, fixed_pass_cost):
    """(With cost-aware draft lengths, whose pass-cost measurement is announced: it was a silent pause of 10 s.)"""
    from pass_core import generate

    path = tmp_path / "run.json"
    assert generate.main(["--method", "parallelspec", "--prompt", "hi", "--model", str(tiny_folder),
                          "--max-new-tokens", "8", "--trace", str(path), "--backend", "fp32", "--threads", "1",
                          "--auto-drafts"]) == 0
    err = capsys.readouterr().err
    assert f"trace: {path}" in err and "cost-aware draft lengths: measuring this machine's pass cost c(w)" in err
    trace = load_trace(path)
    assert list(trace.events) == ["parallelspec"] and trace.settings.inspect
    assert sum(len(e.new_token_ids) for e in trace.events["parallelspec"]) == 8


def test_a_trace_that_cannot_be_written_changes_nothing_and_loses_no_output(tiny_folder, tmp_path, capsys,
                                                                             monkeypatch):
    """A full disk while writing ``--trace``: the file already there stays whole (it was left as 4 KB of broken
    JSON), no temporary file is left, the ``--json`` result is still printed, and the command says why and exits
    1 (it ended in a traceback and printed nothing)."""
    import errno
    import os

    from pass_core import generate
    from pass_core.runtime import outputs

    path = tmp_path / "run.json"
    path.write_text('{"schema": "pass-playground-trace/1", "an": "earlier trace"}', encoding="utf-8")
    real_write = os.fdopen

    def full_disk(fd, *args, **kw):  # the temporary file's writes fail as on a full disk
        f = real_write(fd, *args, **kw)
        f.write = lambda text: (_ for _ in ()).throw(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        return f

    monkeypatch.setattr(outputs.os, "fdopen", full_disk)
    assert generate.main(["--method", "ar", "--prompt", "hi", "--model", str(tiny_folder), "--max-new-tokens", "4",
                          "--trace", str(path), "--json", "--backend", "fp32", "--threads", "1"]) == 1
    out, err = capsys.readouterr()
    assert len(json.loads(out)["token_ids"]) == 4
    assert f"error: the trace {path} could not be written (No space left on device); nothing was changed" in err
    assert path.read_text(encoding="utf-8") == '{"schema": "pass-playground-trace/1", "an": "earlier trace"}'
    assert os.listdir(tmp_path) == ["run.json"]
    monkeypatch.undo()
    assert outputs.write_text_atomically(path, "new") == path and path.read_text(encoding="utf-8") == "new"
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_ctrl_c_keeps_the_steps_made_so_far(tiny_folder, tmp_path, capsys, monkeypatch):
    """Ctrl-C during generation: the steps made so far are still printed, counted and traced, the command says
    so and exits 130 (it ended in a traceback, and --json / --trace lost everything); before the first step it
    says that nothing was generated."""
    import dataclasses

    from pass_core import generate
    from pass_core.registry import METHODS

    ar = METHODS["ar"]

    def interrupted_after(steps):
        def decode(*args, **kwargs):
            for i, event in enumerate(ar.decode(*args, **kwargs)):
                if i == steps:
                    raise KeyboardInterrupt
                yield event
        return decode

    args = ["--method", "ar", "--prompt", "hi", "--model", str(tiny_folder), "--max-new-tokens", "8",
            "--backend", "fp32", "--threads", "1"]
    for steps, says in ((3, "interrupted (Ctrl-C) after 3 steps: what follows covers those steps."),
                        (0, "interrupted (Ctrl-C) before the first step: nothing was generated.")):
        cut = dataclasses.replace(ar)
        object.__setattr__(cut, "decode", interrupted_after(steps))
        monkeypatch.setitem(generate.METHODS, "ar", cut)
        assert generate.main([*args, "--json", "--trace", str(tmp_path / f"{steps}.json")]) == 130
        out, err = capsys.readouterr()
        assert says in err and "Traceback" not in err
        if steps:
            assert json.loads(out)["interrupted"] is True and len(json.loads(out)["token_ids"]) == 3
            assert len(load_trace(tmp_path / "3.json").events["ar"]) == 3
            assert generate.main(args) == 130 and "3 tokens in 3 steps" in capsys.readouterr().out
        else:
            assert out == "" and not (tmp_path / "0.json").exists()
