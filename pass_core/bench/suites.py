"""The benchmark's prompt suites: ``quick`` and ``full`` (``assets/bench/*.jsonl``) or a JSONL file of
``{"category": ..., "prompt": ...}`` lines."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pass_core.decoding.text import encode_prompt, spare_positions
from pass_core.drafters.shipped import assets_dir

SUITES = ("quick", "full")


@dataclass(frozen=True)
class BenchPrompt:
    """One line of a suite file: ``{"category": ..., "prompt": ...}``."""

    category: str
    prompt: str


def load_suite(suite: str) -> list[BenchPrompt]:
    """Prompts of ``quick``, ``full`` (``assets/bench/*.jsonl``) or a JSONL file.

    Raises:
        ValueError: a missing file, a folder, a file that cannot be read or is not UTF-8 text, a line that is not
            ``{"category", "prompt"}`` JSON, a category that is not text, no prompts.
    """
    path = assets_dir() / "bench" / f"{suite}.jsonl" if suite in SUITES else Path(suite).expanduser()
    if path.is_dir():  # it said "does not exist"
        raise ValueError(f"Suite {suite!r} is a folder: give the .jsonl file itself (or quick, full).")
    if not path.is_file():
        raise ValueError(f"Suite {suite!r} not found: use quick, full or a .jsonl file ({path} does not exist).")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:  # said without the file's name before
        raise ValueError(f"Suite {path} is not UTF-8 text (byte {err.object[err.start]:#04x} at offset "
                         f"{err.start}): save it as UTF-8 JSON lines.") from None
    except OSError as err:  # unreadable (permissions): a PermissionError traceback
        raise ValueError(f"Suite {path} cannot be read ({err.strerror or err}).") from None
    prompts = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}, line {n}: not JSON ({err.msg}).") from err
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str) or not row["prompt"].strip():
            raise ValueError(f'{path}, line {n}: expected {{"category": ..., "prompt": "non-empty text"}}.')
        if not isinstance(row.get("category", ""), (str, type(None))):  # {"a": 1} was a category "{'a': 1}"
            raise ValueError(f"{path}, line {n}: the category is {type(row['category']).__name__} "
                             f"{json.dumps(row['category'])[:40]}: give it as text (or leave it out).")
        prompts.append(BenchPrompt(str(row.get("category") or "uncategorised"), row["prompt"]))
    if not prompts:
        raise ValueError(f"Suite {path} holds no prompts.")
    return prompts


def fitting_prompts(loaded, prompts: list[BenchPrompt], settings, num_lookahead: int
                    ) -> tuple[list[BenchPrompt], dict[str, str]]:
    """The prompts that fit ``loaded``'s context beside ``settings.max_new_tokens`` new tokens and the spare
    positions of ``num_lookahead`` drafts (``text.encode_prompt``), and a note for each one left out ("prompt 3
    (chat)" -> why), so that every method runs on the same prompts (a suite prompt too long for a small model
    stopped the benchmark with a traceback in the middle of its runs)."""
    kept, notes = [], {}
    for n, p in enumerate(prompts, 1):
        try:
            encode_prompt(loaded.tokenizer, p.prompt, settings.chat_template, loaded.max_positions,
                          settings.max_new_tokens, "--max-new-tokens", spare_positions(num_lookahead))
            kept.append(p)
        except ValueError as err:
            notes[f"prompt {n} ({p.category})"] = f"left out: {err}"
    return kept, notes
