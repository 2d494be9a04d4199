"""The benchmark: metric formulas on hand-made events, the run order, the CLI and its JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pass_core.bench import run as bench
from pass_core.bench.run import BenchRun, RunKey, aggregate, load_suite, schedule, setting_key
from pass_core.decoding.events import DraftRecord, StepEvent, TokenRecord
from pass_core.decoding.metrics import summarize
from playground import bench_html


def pass_event(accepted: int, L: int = 3, step_s: float = 0.1, ids: list[int] | None = None,
               finish: str | None = None) -> StepEvent:
    """A PaSS step: exact token, ``accepted`` drafts, then the rejected draft (if any) and the
    resampled token, or the bonus token when all L were accepted. Committed ids = ``ids``."""
    ids = ids or list(range(accepted + 2))
    assert len(ids) == accepted + 2
    tokens = [TokenRecord(ids[0], "a", "exact")] + [TokenRecord(t, "b", "accepted") for t in ids[1:-1]]
    if accepted < L:
        tokens.append(TokenRecord(999, "x", "rejected"))
    tokens.append(TokenRecord(ids[-1], "c", "bonus" if accepted == L else "resampled"))
    drafts = tuple(DraftRecord(position=i + 1, token_id=0, text="", q=0.5, p=0.5, u=0.1,
                               decision="accepted" if i < accepted else "rejected" if i == accepted else "not_verified")
                   for i in range(L))
    return StepEvent(method="pass", step=1, tokens=tuple(tokens), drafts=drafts, forward_passes=2,
                     step_s=step_s, finish_reason=finish, num_verified_drafts=L)


def ar_events(ids: list[int], step_s: float = 0.05) -> list[StepEvent]:
    return [StepEvent(method="ar", step=i + 1, tokens=(TokenRecord(t, "t", "target"),), step_s=step_s,
                      finish_reason="max_new_tokens" if i == len(ids) - 1 else None)
            for i, t in enumerate(ids)]


def test_summarize_formulas_on_hand_made_events():
    # L = 3; steps accept 0, 1, 3, 1 drafts -> tokens 2 + 3 + 5 + 3 = 13 over 4 steps, 8 passes
    events = [pass_event(m) for m in (0, 1, 3, 1)]
    s = summarize(events)
    assert (s.tokens, s.steps, s.forward_passes, s.drafted_tokens, s.accepted_drafts) == (13, 4, 8, 12, 5)
    assert s.tokens_per_forward_pass == pytest.approx(13 / 8)
    assert s.mean_accepted_tokens == pytest.approx(13 / 4)
    assert s.accepted_drafts_per_step == pytest.approx(5 / 4)
    # alpha on the judged drafts: 1 + 2 + 3 + 2 = 8 (the accepted and the first rejected of each step)
    assert s.judged_drafts == 8 and s.acceptance_rate == pytest.approx(5 / 8)
    assert s.drafted_acceptance_rate == pytest.approx(5 / 12)
    # position 1: accepted in 3 of 4 steps, all 4 reached it; position 2: accepted once, reached by the
    # 3 steps that accepted position 1; position 3: accepted once, reached only by the 3-accept step
    assert s.per_position_unconditional == pytest.approx([3 / 4, 1 / 4, 1 / 4])
    assert s.per_position_conditional == pytest.approx([3 / 4, 1 / 3, 1 / 1])
    assert s.acceptance_histogram == pytest.approx([1 / 4, 2 / 4, 0, 1 / 4])
    assert s.tokens_per_s == pytest.approx(13 / 0.4)
    ar = summarize(ar_events([1, 2, 3]))
    assert (ar.tokens_per_forward_pass, ar.mean_accepted_tokens, ar.accepted_drafts_per_step) == (1.0, 1.0, 0.0)
    assert ar.acceptance_rate is None and ar.verification_steps == 0


def test_acceptance_metrics_count_verification_steps_only():
    """A prefill (1 token, no drafts) and a gated step (1 token, drafter ran, nothing verified) are
    steps but not verification steps: they change tokens/pass, not the acceptance metrics."""
    prefill = StepEvent(method="parallelspec", step=1, tokens=(TokenRecord(7, "p", "exact"),), step_s=0.1)
    gated = StepEvent(method="parallelspec", step=2, tokens=(TokenRecord(8, "g", "exact"),), step_s=0.1,
                      drafter_passes=1)
    verifying = [pass_event(m) for m in (2, 0)]  # 4 + 2 tokens
    s = summarize([prefill, gated, *verifying])
    assert (s.steps, s.verification_steps, s.tokens, s.drafter_passes) == (4, 2, 8, 1)
    assert s.mean_accepted_tokens == pytest.approx(6 / 2)
    assert s.accepted_drafts_per_step == pytest.approx(2 / 2)
    assert s.acceptance_histogram == pytest.approx([1 / 2, 0, 1 / 2, 0])
    assert s.per_position_unconditional == pytest.approx([1 / 2, 1 / 2, 0])
    # d_3 was reached once (the 2-accept step, rejected there); an unreached position has no value
    assert s.per_position_conditional == pytest.approx([1 / 2, 1.0, 0.0])
    never = summarize([pass_event(0), pass_event(0)])
    assert never.per_position_conditional[0] == 0.0 and never.per_position_conditional[1:] == [None, None]


def make_runs() -> list[BenchRun]:
    """Two prompts (chat, code), two repeats, AR and PaSS at L=3, T=0, with known timings."""
    runs = []
    for rep, pass_s in ((0, 0.1), (1, 0.2)):
        for i, cat in enumerate(("chat", "code")):
            ids = [10 * i + 1, 10 * i + 2, 10 * i + 3, 10 * i + 4]
            runs.append(BenchRun(RunKey("ar", None, 0.0, rep, i), cat, ar_events(ids, step_s=0.05)))
            # prompt 1 of repeat 1 differs from AR in its last token: exact match 3 / 4
            last = 99 if (rep, i) == (1, 1) else ids[3]
            runs.append(BenchRun(RunKey("pass", 3, 0.0, rep, i), cat,
                                 [pass_event(0, ids=ids[:2], step_s=pass_s),
                                  pass_event(0, ids=[ids[2], last], step_s=pass_s, finish="max_new_tokens")]))
    return runs


def test_aggregate_speedup_exact_match_and_categories():
    summary = aggregate(make_runs(), lookaheads=[3], temperatures=[0.0])
    assert set(summary) == {"ar", "pass"} and set(summary["pass"]) == {"L=3,T=0"}
    e = summary["pass"]["L=3,T=0"]
    # AR: 8 tokens in 0.4 s = 20 tok/s per repeat; PaSS: 8 tokens in 0.4 s (rep 0) / 0.8 s (rep 1)
    assert e["speedup_per_repeat"] == pytest.approx([1.0, 0.5])
    assert (e["speedup_min"], e["speedup_max"]) == pytest.approx((0.5, 1.0))
    assert e["speedup"] == pytest.approx(0.75)  # median of two
    assert e["tokens_per_s"] == pytest.approx(16 / 1.2)
    assert e["mean_accepted_tokens"] == pytest.approx(2.0)
    assert e["accepted_drafts_per_step"] == 0.0 and e["acceptance_rate"] == 0.0
    assert e["exact_match_rate"] == pytest.approx(3 / 4)
    assert e["runs"] == 4
    assert set(e["by_category"]) == {"chat", "code"}
    assert e["by_category"]["chat"]["exact_match_rate"] == 1.0
    assert e["by_category"]["code"]["exact_match_rate"] == 0.5
    assert e["by_category"]["code"]["speedup_per_repeat"] == pytest.approx([1.0, 0.5])
    ar = summary["ar"]["L=3,T=0"]
    assert ar["speedup"] == 1.0 and ar["exact_match_rate"] == 1.0 and ar["tokens_per_s"] == pytest.approx(20.0)


def test_aggregate_reuses_ar_across_L_and_skips_exact_match_when_sampling():
    runs = make_runs()
    runs += [BenchRun(RunKey("pass", 5, 0.0, r.key.repeat, r.key.prompt_index), r.category, r.events)
             for r in list(runs) if r.key.method == "pass"]
    sampled = [BenchRun(RunKey(r.key.method, r.key.num_lookahead, 0.8, r.key.repeat, r.key.prompt_index),
                        r.category, r.events) for r in runs]
    summary = aggregate(runs + sampled, lookaheads=[3, 5], temperatures=[0.0, 0.8])
    assert set(summary["ar"]) == set(summary["pass"]) == {setting_key(n, t) for n in (3, 5) for t in (0, 0.8)}
    assert summary["pass"]["L=5,T=0"]["speedup"] == pytest.approx(0.75)
    assert summary["pass"]["L=3,T=0.8"]["exact_match_rate"] is None
    assert summary["ar"]["L=5,T=0.8"]["runs"] == 4
    # a temperature below GREEDY_BELOW decodes greedily, and is checked as T = 0 is (it was not: only T == 0 was)
    tiny_t = [BenchRun(RunKey(r.key.method, r.key.num_lookahead, 5e-5, r.key.repeat, r.key.prompt_index),
                       r.category, r.events) for r in make_runs()]
    assert aggregate(tiny_t, [3], [5e-5])["pass"][setting_key(3, 5e-5)]["exact_match_rate"] == pytest.approx(3 / 4)


def test_schedule_interleaves_ar_then_every_L_and_method():
    keys = schedule(["ar", "pass", "fixed-token"], [2, 4], [0.0, 0.8], num_prompts=2, repeats=2)
    assert len(keys) == 2 * 2 * 2 * (1 + 2 * 2)
    first = [(k.method, k.num_lookahead, k.repeat, k.prompt_index) for k in keys[:10]]
    assert first == [("ar", None, 0, 0), ("pass", 2, 0, 0), ("fixed-token", 2, 0, 0), ("pass", 4, 0, 0),
                     ("fixed-token", 4, 0, 0),
                     ("ar", None, 1, 0), ("pass", 2, 1, 0), ("fixed-token", 2, 1, 0), ("pass", 4, 1, 0),
                     ("fixed-token", 4, 1, 0)]
    assert all(k.temperature == 0.0 for k in keys[:20]) and all(k.temperature == 0.8 for k in keys[20:])


def test_run_bench_calls_decoders_in_interleaved_order(monkeypatch, tiny):
    calls = []

    class FakeMethod:
        def __init__(self, key):
            self.key = key

        def find_files(self, loaded, n, path=None):
            return (None, "") if self.key == "ar" else (f"{self.key}-{n}", f"note {self.key} {n}")

        def decode(self, loaded, prompt, settings, state=None):
            calls.append((self.key, settings.num_lookahead, settings.temperature, settings.seed, prompt,
                          settings.max_new_tokens, state))
            return iter(ar_events([1]))

    monkeypatch.setattr(bench, "METHODS", {k: FakeMethod(k) for k in ("ar", "pass", "fixed-token")})
    prompts = [bench.BenchPrompt("chat", "p0"), bench.BenchPrompt("code", "p1")]
    base = bench.DecodeSettings(max_new_tokens=20, seed=7)
    runs, notes = bench.run_bench(tiny, prompts, ["ar", "pass", "fixed-token"], [3], [0.0], base, repeats=2,
                                  progress=False)
    assert notes == {"pass L=3": "note pass 3", "fixed-token L=3": "note fixed-token 3"}
    warmup, timed = calls[:3], calls[3:]
    assert [c[0] for c in warmup] == ["ar", "pass", "fixed-token"]
    assert all(c[5] == bench.WARMUP_TOKENS for c in warmup)
    assert [(c[0], c[3], c[4]) for c in timed] == [
        ("ar", 7, "p0"), ("pass", 7, "p0"), ("fixed-token", 7, "p0"),
        ("ar", 8, "p0"), ("pass", 8, "p0"), ("fixed-token", 8, "p0"),
        ("ar", 7, "p1"), ("pass", 7, "p1"), ("fixed-token", 7, "p1"),
        ("ar", 8, "p1"), ("pass", 8, "p1"), ("fixed-token", 8, "p1")]
    assert [c[6] for c in timed[:3]] == [None, "pass-3", "fixed-token-3"]
    assert all(c[5] == 20 for c in timed)
    assert [r.category for r in runs[:3]] == ["chat"] * 3 and len(runs) == 12


def test_load_suite(tmp_path, monkeypatch):
    quick = load_suite("quick")
    assert len(quick) == 16 and {p.category for p in quick} >= {"chat", "code", "math", "grounded"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"category": "chat", "prompt": "hi"}\n{"category": "chat"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="line 2"):
        load_suite(str(bad))
    bad.write_text('{"category": {"a": 1}, "prompt": "hi"}\n', encoding="utf-8")  # a category "{'a': 1}" (helper 68)
    with pytest.raises(ValueError, match=r'line 1: the category is dict {"a": 1}: give it as text'):
        load_suite(str(bad))
    bad.write_text('{"category": null, "prompt": "hi"}\n', encoding="utf-8")
    assert load_suite(str(bad))[0].category == "uncategorised"
    with pytest.raises(ValueError, match="not found"):
        load_suite(str(tmp_path / "missing.jsonl"))
    with pytest.raises(ValueError, match="is a folder: give the .jsonl file itself"):  # said "does not exist"
        load_suite(str(tmp_path))
    (tmp_path / "latin1.jsonl").write_bytes(b'{"prompt": "caf\xe9"}\n')  # the error named no file
    with pytest.raises(ValueError, match=r"latin1.jsonl is not UTF-8 text \(byte 0xe9 at offset 15\)"):
        load_suite(str(tmp_path / "latin1.jsonl"))
    from pass_core.training.data import read_prompts

    with pytest.raises(ValueError, match="is a folder: give the file itself"):
        read_prompts(tmp_path)
    unreadable, read_text = tmp_path / "unreadable.jsonl", Path.read_text  # a PermissionError traceback
    unreadable.write_text('{"prompt": "hi"}\n', encoding="utf-8")

    def refused(self, *args, **kwargs):
        if self.name == unreadable.name:
            raise PermissionError(13, "Permission denied", str(self))
        return read_text(self, *args, **kwargs)
    monkeypatch.setattr(Path, "read_text", refused)  # chmod does not stop root
    with pytest.raises(ValueError, match=r"Suite .*unreadable.jsonl cannot be read \(Permission denied\)"):
        load_suite(str(unreadable))
    with pytest.raises(ValueError, match=r"Prompt file .*unreadable.jsonl' cannot be read \(Permission denied\)"):
        read_prompts(unreadable)


@pytest.mark.parametrize("argv", [["--methods", "ar,nope"], ["--methods", ""], ["--methods", ","],  # AR alone ran
                                  ["--methods", "pass+fused+fused"], ["--num-lookahead", "3,x"],
                                  ["--methods", "pass+tree4+tree16"],  # it ran tree16 alone, unsaid
                                  ["--temperature", "-1"], ["--num-lookahead", "99"], ["--repeats", "0"]])
def test_cli_rejects_bad_arguments_before_loading(argv, monkeypatch):
    monkeypatch.setattr(bench, "load_model", lambda *a, **k: pytest.fail("must not load the model"))
    with pytest.raises(SystemExit) as err:
        bench.main(argv)
    assert err.value.code == 2


def test_fused_applies_to_the_fusable_methods_and_refuses_their_trees_before_loading(tiny, fixed_pass_cost):
    """``--fused`` with tree entries: ParallelSpec's tree (it has no fused step) was skipped after the model had loaded
    as "cannot be combined with the fused step", and so was PaSS's, with exit 0; now ParallelSpec's runs, and PaSS's
    is refused before the model loads, naming the entry."""
    from pass_core.bench.cli import check_methods
    from pass_core.bench.suites import BenchPrompt
    from pass_core.decoding.settings import DecodeSettings

    with pytest.raises(ValueError, match=r"'pass\+tree8' with --fused: a token tree cannot be combined"):
        check_methods(["ar", "parallelspec+tree8", "pass+tree8"], fused=True)
    assert check_methods(["ar", "parallelspec+tree8", "pass"], fused=True) is None
    prompts = [BenchPrompt("chat", "Hello there")]
    runs, notes = bench.run_bench(tiny, prompts, ["ar", "parallelspec+tree8", "pass"], [2], [0.0],
                                  DecodeSettings(max_new_tokens=6, fused=True), repeats=1, progress=False)
    assert not any(note.startswith("skipped") for note in notes.values()), notes
    assert {run.key.method for run in runs} == {"ar", "parallelspec+tree8", "pass"}


def test_seeds_past_the_range_name_seed_and_repeats(monkeypatch, capsys):
    """Repeat r runs seed + r: ``--seed 2147483647 --repeats 2`` said "got 2147483648", a seed nobody gave."""
    monkeypatch.setattr(bench, "load_model", lambda *a, **k: pytest.fail("must not load the model"))
    with pytest.raises(SystemExit):
        bench.main(["--seed", "2147483647", "--repeats", "2"])
    assert ("--seed 2147483647 with --repeats 2 runs seeds up to 2,147,483,648: the last must be at most "
            "2,147,483,647.") in capsys.readouterr().err


@pytest.fixture
def keep_threads():
    """main(--threads) sets torch's global thread count: restore it for the other tests."""
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_main_json_schema_on_tiny_model(tmp_path, tiny_folder, capsys, keep_threads):
    suite = tmp_path / "suite.jsonl"
    suite.write_text("\n".join(json.dumps(r) for r in [
        {"category": "chat", "prompt": "Hello there"}, {"category": "code", "prompt": "def f(x):"},
        {"category": "chat", "prompt": "How are you?"}]) + "\n", encoding="utf-8")
    out = tmp_path / "bench.json"
    rc = bench.main(["--suite", str(suite), "--model", str(tiny_folder),
                     "--methods", "pass,fixed-token,parallelspec",
                     "--num-lookahead", "2,3", "--temperature", "0,0.8", "--max-new-tokens", "8",
                     "--repeats", "2", "--json", str(out), "--no-progress",
                     "--threads", "1"])  # tiny matmuls: 1 thread avoids OpenMP spinning on a busy CPU
    assert rc == 0
    stdout = capsys.readouterr().out
    ran_on = json.loads(out.read_text(encoding="utf-8"))["settings"]["backend"]
    assert "| method | backend | L | T |" in stdout and f"| pass | {ran_on} | 2 | 0 |" in stdout
    # one line per temperature, each saying which (two lines "Fastest AR in this run: ar" left a reader guessing)
    assert "Fastest AR in this run at T = 0: ar (" in stdout and "Fastest AR in this run at T = 0.8: ar (" in stdout
    assert "top-k 10, top-p 1.0 when sampling" in stdout  # temperatures 0 and 0.8: the sampling settings count
    assert stdout.count(f"| ar | {ran_on} | - | 0 |") == 1 and stdout.count("| ar | - | 0 |") == 1  # its runs serve every L
    assert bench_html.main([str(out), str(tmp_path / "bench.html")]) == 0
    assert "Speed-up vs temperature" in (tmp_path / "bench.html").read_text(encoding="utf-8")
    report = json.loads(out.read_text(encoding="utf-8"))
    assert {"machine", "command", "settings", "summary", "method_notes", "runs"} <= set(report)
    assert {"cpu", "cores", "torch", "device", "date"} <= set(report["machine"])
    assert report["settings"]["methods"] == ["ar", "pass", "fixed-token", "parallelspec"]
    assert report["command"].startswith("python -m pass_core.bench --suite")
    assert report["machine"]["torch_threads"] == 1
    # no --backend and no --dtype: auto measured on this machine, and the backend it chose is the one recorded
    choice = report["settings"]["backend_choice"]
    assert report["settings"]["backend"] == report["machine"]["backend"] == choice["backend"] in ("fp32", "onednn")
    assert {t["backend"] for t in choice["timings"]} == {"fp32", "onednn"}
    assert len(report["runs"]) == 2 * 3 * 2 * (1 + 2 * 3)
    assert set(report["summary"]) == {"ar", "pass", "fixed-token", "parallelspec"}
    fields = {"speedup": (float,), "speedup_min": (float,), "speedup_max": (float,),
              "tokens_per_forward_pass": (float,), "mean_accepted_tokens": (float,),
              "accepted_drafts_per_step": (float,), "acceptance_rate": (float, type(None)),
              "exact_match_rate": (float, type(None)), "per_position_conditional": (list,),
              "per_position_unconditional": (list,), "acceptance_histogram": (list,), "tokens_per_s": (float,)}
    for method, by_setting in report["summary"].items():
        assert set(by_setting) == {"L=2,T=0", "L=3,T=0", "L=2,T=0.8", "L=3,T=0.8"}
        for key, entry in by_setting.items():
            for name, types in fields.items():
                assert isinstance(entry[name], types), (method, key, name, entry[name])
            assert set(entry["by_category"]) == {"chat", "code"}
            assert set(fields) <= set(entry["by_category"]["code"])
            if key.endswith("T=0"):
                assert entry["exact_match_rate"] == 1.0, (method, key)  # lossless decoders
            else:
                assert entry["exact_match_rate"] is None
        ups = by_setting["L=3,T=0"]["speedup_per_repeat"]  # one ratio per repeat, then their median
        assert len(ups) == 2 and by_setting["L=3,T=0"]["speedup"] == pytest.approx(sum(ups) / 2)
        assert (by_setting["L=3,T=0"]["speedup_min"], by_setting["L=3,T=0"]["speedup_max"]) == (min(ups), max(ups))
    assert len(report["summary"]["pass"]["L=3,T=0"]["per_position_conditional"]) == 3
    assert report["summary"]["ar"]["L=2,T=0"]["speedup"] == 1.0


def test_markdown_header_of_a_greedy_run_names_no_sampling_settings():
    from pass_core.bench.report import markdown_report

    report = {"settings": {"temperatures": [0.0], "top_k": 10, "top_p": 1.0}, "machine": {}, "summary": {}}
    header = markdown_report(report).splitlines()[0]
    assert "greedy (T = 0)" in header and "top-k" not in header
    report["settings"]["temperatures"] = [0.0, 0.7]
    assert "top-k 10, top-p 1.0 when sampling" in markdown_report(report).splitlines()[0]
    assert "busy" not in header and "(? prompts)" in header
    report["settings"]["num_prompts"] = 1
    assert "(1 prompt)," in markdown_report(report).splitlines()[0]  # "(1 prompts)"
    report["settings"]["busy_core"] = True  # a busy-core table read as a quiet run's (a CLI helper)
    assert markdown_report(report).splitlines()[0].endswith(", another process spinning on one core (--busy-core).")


def test_greedy_differences_at_near_ties_are_counted_apart():
    """A greedy run that differs from AR where the top two logits were 0.01 apart is a near-tie in
    bfloat16 but not in float32; one that differs at a margin of 5 is a real difference in both."""
    def run(method, ids, margins):
        events = [StepEvent(method=method, step=i + 1, tokens=(TokenRecord(t, "t", "target", margin=m),),
                            step_s=0.1, finish_reason="max_new_tokens" if i == len(ids) - 1 else None)
                  for i, (t, m) in enumerate(zip(ids, margins))]
        return events

    runs = [BenchRun(RunKey("ar", None, 0.0, 0, 0), "chat", run("ar", [1, 2, 3], [3.0, 0.01, 3.0])),
            BenchRun(RunKey("ar", None, 0.0, 0, 1), "chat", run("ar", [4, 5, 6], [3.0, 5.0, 3.0])),
            BenchRun(RunKey("pass", 3, 0.0, 0, 0), "chat", run("pass", [1, 9, 3], [3.0, 0.0, 3.0])),
            BenchRun(RunKey("pass", 3, 0.0, 0, 1), "chat", run("pass", [4, 8, 6], [3.0, 6.0, 3.0]))]
    bf16 = aggregate(runs, [3], [0.0], dtype="bfloat16")["pass"]["L=3,T=0"]
    fp32 = aggregate(runs, [3], [0.0], dtype="float32")["pass"]["L=3,T=0"]
    assert bf16["exact_match_rate"] == 0.0 and bf16["near_tie_differences"] == 1
    assert fp32["near_tie_differences"] == 1  # margin 0.0 on PaSS's side: a tie in any dtype
    runs[2] = BenchRun(RunKey("pass", 3, 0.0, 0, 0), "chat", run("pass", [1, 9, 3], [3.0, 0.01, 3.0]))
    assert aggregate(runs, [3], [0.0], dtype="float32")["pass"]["L=3,T=0"]["near_tie_differences"] == 0


def test_training_curves_of_the_files_used_reach_the_report(tiny, tmp_path, monkeypatch):
    """A shipped file that records its agreement-vs-data curve (here a pass-lora file) appears in the report's
    ``training`` record and as lines in the HTML report; a method whose file records nothing is left out."""
    from lossless_helpers import active_adapters
    from pass_core.bench.report import training_records
    from pass_core.drafters.lookahead.embeddings import LookaheadEmbeddings
    from pass_core.drafters.shipped import shipped_adapters_path
    from playground.bench_html import render_html, training_curves

    monkeypatch.setenv("PASS_PLAYGROUND_ASSETS", str(tmp_path))
    curve = [{"step": 0, "positions": 0, "top1_agreement": [0.2, 0.1]},
             {"step": 10, "positions": 640, "top1_agreement": [0.4, 0.15]}]
    la = LookaheadEmbeddings.initialise(tiny, 2)
    la.adapters, la.info = active_adapters(tiny), {"curve": curve, "positions_seen": 640,
                                                   "eval": {"top1_agreement": [0.41, 0.16]}}
    la.save(shipped_adapters_path(tiny.name, 2))
    records = training_records(tiny, ["ar", "pass", "pass-lora+fused"], 2)
    assert set(records) == {"pass-lora"}  # pass falls back to the untrained baseline: no training record
    assert records["pass-lora"]["curve"] == curve and records["pass-lora"]["positions"] == 640
    fig = training_curves({"training": records})
    assert [t.name for t in fig.data] == ["PaSS+adapters d_1", "PaSS+adapters d_2"]
    assert list(fig.data[0].x) == [0, 640] and list(fig.data[1].y) == [0.1, 0.15]
    page = render_html({"summary": {}, "training": records})
    assert "Held-out top-1 agreement of the drafts against training positions seen" in page


def test_a_run_where_no_prompt_fits_fails(tmp_path, tiny_folder, capsys, keep_threads):
    """A suite whose only prompt is too long for the context: that used to print "0 runs" and exit 0, as if the
    comparison had passed; now the prompt is left out with its reason, and nothing left to run exits 2."""
    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps({"category": "chat", "prompt": "a" * 600}) + "\n", encoding="utf-8")
    rc = bench.main(["--suite", str(suite), "--model", str(tiny_folder), "--methods", "pass", "--max-new-tokens", "4",
                     "--no-progress", "--threads", "1", "--backend", "fp32"])
    err = capsys.readouterr().err
    assert rc == 2 and "prompt 1 (chat): left out: The prompt is 6" in err
    assert "error: the prompt does not fit the model's context (the reason is above)" in err  # "none of the 1 prompts"


def test_ctrl_c_mid_run_writes_the_report_of_the_complete_rounds(tmp_path, tiny_folder, capsys, keep_threads,
                                                                    monkeypatch):
    """Ctrl-C during the third timed run (AR and PaSS on the first prompt done, AR on the second): the report is
    still printed and written, holding the first prompt's round only (every method on the same prompts), it says
    so, and the exit code is 130 (a long benchmark stopped by hand used to leave nothing)."""
    from pass_core.registry import METHODS

    calls = []

    class Interrupting:  # the registered PaSS, interrupted on its third call (the warm-up is the first)
        def __getattr__(self, name):
            return getattr(METHODS["pass"], name)

        def decode(self, *args, **kwargs):
            calls.append(args[1])
            if len(calls) == 3:
                raise KeyboardInterrupt
            return METHODS["pass"].decode(*args, **kwargs)

    monkeypatch.setattr(bench, "METHODS", {**METHODS, "pass": Interrupting()})
    suite = tmp_path / "suite.jsonl"
    suite.write_text('{"category": "chat", "prompt": "Hello there"}\n{"category": "code", "prompt": "def f(x):"}\n',
                     encoding="utf-8")
    out = tmp_path / "bench.json"
    try:
        rc = bench.main(["--suite", str(suite), "--model", str(tiny_folder), "--methods", "pass", "--num-lookahead",
                         "2", "--max-new-tokens", "4", "--json", str(out), "--no-progress", "--threads", "1",
                         "--backend", "fp32"])
    except KeyboardInterrupt:  # failed here, not passed on to pytest (which would stop the whole session)
        pytest.fail("Ctrl-C left main without a report")
    captured = capsys.readouterr()
    assert rc == 130 and calls[1:] == ["Hello there", "def f(x):"]
    report = json.loads(out.read_text(encoding="utf-8"))
    assert [(r["method"], r["prompt_index"]) for r in report["runs"]] == [("ar", 0), ("pass", 0)]
    assert report["method_notes"][bench.INTERRUPTED].startswith("Ctrl-C after 3 of 4 runs: this report holds the "
                                                                 "first 2")
    assert "| pass |" in captured.out and "interrupted: Ctrl-C after 3 of 4 runs" in captured.err
    # before the first complete round (PaSS's first timed run): it said "every method was skipped (the reasons are
    # above)" and wrote a report with an empty summary (a CLI helper)
    calls[:] = ["warm-up"]
    rc = bench.main(["--suite", str(suite), "--model", str(tiny_folder), "--methods", "pass", "--num-lookahead", "2",
                     "--max-new-tokens", "4", "--json", str(tmp_path / "none.json"), "--no-progress", "--threads",
                     "1", "--backend", "fp32"])
    err = capsys.readouterr().err
    assert rc == 130 and not (tmp_path / "none.json").exists() and "skipped" not in err
    assert "interrupted (Ctrl-C) before the first complete round: nothing was measured, so no report was written" \
        in err


def test_a_prompt_longer_than_the_context_is_left_out_with_a_note(tmp_path, tiny_folder, capsys, keep_threads):
    """A suite prompt that does not fit the model's context (the tiny model's 512 positions) is left out before any
    run, for every method, and named in the report's notes; the other prompts run (one such prompt of the quick
    suite stopped a benchmark on a small model with a traceback in the middle of its runs)."""
    suite = tmp_path / "suite.jsonl"
    rows = [{"category": "chat", "prompt": "Hello there"}, {"category": "code", "prompt": "x" * 600}]
    suite.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    out = tmp_path / "bench.json"
    args = ["--model", str(tiny_folder), "--methods", "pass", "--max-new-tokens", "4", "--json", str(out),
            "--no-progress", "--threads", "1", "--backend", "fp32"]
    assert bench.main(["--suite", str(suite), *args]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert {(r["method"], r["prompt_index"]) for r in report["runs"]} == {("ar", 0), ("pass", 0)}
    assert report["method_notes"]["prompt 2 (code)"].startswith("left out: The prompt is 6")
    err = capsys.readouterr().err
    assert "prompt 2 (code): left out:" in err and "; 1 prompt\n" in err  # it said "1 prompts"


def test_fused_with_no_fusable_method_is_noted(tmp_path, capsys):
    """``--fused`` applies to the fusable methods only: with none of them in ``--methods`` it changed nothing, unsaid;
    now a note says so, before the model loads (here a missing folder, so nothing runs)."""
    from pass_core.registry import METHODS

    fusable = ", ".join(key for key, method in METHODS.items() if method.fusable)
    for methods, noted in (("parallelspec,prompt-lookup", True), ("parallelspec,pass", False)):
        rc = bench.main(["--suite", "quick", "--limit", "1", "--methods", methods, "--fused", "--model",
                         str(tmp_path / "missing"), "--no-progress"])
        err = capsys.readouterr().err
        assert rc == 2 and "error:" in err, err
        assert (f"note: --fused applies to {fusable} only, and --methods names none of them: it changes nothing."
                in err) == noted, err


def test_a_category_with_a_bar_or_a_line_break_stays_one_column():
    """A suite's category is any text: "a|b" with a line break split the category table's header row and shifted
    every column."""
    import dataclasses

    from pass_core.bench.report import markdown_report

    runs = [dataclasses.replace(r, category="a|b\nc" if r.category == "chat" else r.category) for r in make_runs()]
    report = {"settings": {"temperatures": [0.0], "top_k": 0, "top_p": 1.0}, "machine": {},
              "summary": aggregate(runs, lookaheads=[3], temperatures=[0.0])}
    lines = markdown_report(report).splitlines()
    at = lines.index("Speed-up (mean accepted tokens) by category:")
    header, rule, *rows = lines[at + 2:at + 5]
    assert header == "| method | L | T | a\\|b c | code |", header
    widths = {line.replace("\\|", "").count("|") for line in (header, rule, *rows)}
    assert widths == {6}, (header, rule, rows)


def test_greedy_notes_name_each_entrys_own_dtype_and_a_real_difference_as_a_bug():
    """The closing note of a float32 run with "@bf16" entries (the Intel Xeon report of RESULTS.md, 2026-12-07):
    bfloat16 AR and ParallelSpec differ from float32 AR at near-ties within bfloat16 rounding, because their weights
    round differently (the note said "within float32 rounding" and blamed wide passes, which AR has none of). On the
    run's own dtype a near-tie is blamed on wide and one-token passes; a difference that is no near-tie is a bug."""
    from pass_core.bench.summary import greedy_notes

    report = json.loads((Path(__file__).resolve().parent.parent / "experiments" / "results-2026-12-07"
                         / "quick-t1-xeon.json").read_text(encoding="utf-8"))
    notes, bugs = greedy_notes(report["summary"], report["machine"]["dtype"])
    assert bugs == [] and len(notes) == 1, (notes, bugs)
    assert notes[0].startswith("note: greedy output differs from AR for ar@bf16 L=3,T=0, parallelspec@bf16 L=3,T=0 "
                               "only at near-ties within bfloat16 rounding (their bfloat16 weights"), notes
    assert "float32 AR they are compared with" in notes[0] and "wide" not in notes[0]
    same = {"exact_match_rate": 0.5, "runs": 4, "near_tie_differences": 2, "backend": None}
    assert greedy_notes({"pass": {"L=3,T=0": same}}, "bfloat16") == (
        ["note: greedy output differs from AR for pass L=3,T=0 only at near-ties within bfloat16 rounding (wide and "
         "one-token passes round differently; use float32)."], [])
    wrong = {**same, "near_tie_differences": 1}  # one of the two differences is no near-tie
    assert greedy_notes({"pass": {"L=3,T=0": wrong}, "ar": {"L=3,T=0": {**same, "exact_match_rate": 1.0}}},
                        "float32") == ([], ["pass L=3,T=0"])
