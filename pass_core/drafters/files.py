"""Files bound to one target model: look-ahead embeddings and ParallelSpec drafters.

Both are safetensors (never pickle) whose metadata names the model they were trained for
and holds a small signature of its input embeddings, so that loading one for another
model is refused with a message that names both models.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import weakref
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

#: The metadata "format" of this project's files: look-ahead embeddings (method ``pass``), look-ahead embeddings with
#: adapters (``pass-lora``, an extension) and ParallelSpec drafters.
LOOKAHEAD_FORMAT, ADAPTER_FORMAT, PARALLELSPEC_FORMAT = "pass-lookahead/1", "pass-lora/1", "pass-parallelspec/1"
#: Each format -> what a file of it is for, said when one is given where another is read.
_FORMAT_USES = {LOOKAHEAD_FORMAT: "look-ahead embeddings: use it with method 'pass' (--lookahead)",
                ADAPTER_FORMAT: "look-ahead embeddings with adapters: use it with method 'pass-lora' (--adapters)",
                PARALLELSPEC_FORMAT: "a ParallelSpec drafter: use it with method 'parallelspec' (--drafter)"}
#: Rows / leading dims of the input embedding matrix sampled for the model signature.
_SIGNATURE_ROWS = 16
_SIGNATURE_DIMS = 8


def embedding_signature(input_embeddings: torch.Tensor) -> list[float]:
    """A small, dtype-robust signature of a model's input embeddings.

    Args:
        input_embeddings: (V, D) float embedding matrix.

    Returns:
        ``_SIGNATURE_ROWS * _SIGNATURE_DIMS`` floats: the first dims of evenly spaced
        rows. Quantised and full-precision copies of one model correlate > 0.9;
        different models do not.
    """
    weight = input_embeddings.detach()
    rows = torch.linspace(0, weight.shape[0] - 1, _SIGNATURE_ROWS).long().to(weight.device)
    # the sampled entries only are converted (not a float copy of the whole (V, D) matrix, 113 MB in bf16)
    return [round(float(x), 5) for x in weight[rows, :_SIGNATURE_DIMS].float().cpu().flatten()]


#: id of a loaded model's embedding matrix -> (a weak reference to it, its in-place version counter, its signature):
#: every run start checks its drafter file against the model (``check_trained_for``), and the signature was computed
#: again each time. (Keyed by id: a tensor compares elementwise, so it cannot key a WeakKeyDictionary.)
_LOADED_SIGNATURES: dict[int, tuple[weakref.ref, int, list[float]]] = {}


def loaded_signature(input_embeddings: torch.Tensor) -> list[float]:
    """``embedding_signature`` of a model's input embeddings, computed again only after they change in place
    (torch's version counter) or for another tensor."""
    known = _LOADED_SIGNATURES.get(id(input_embeddings))
    if known is None or known[0]() is not input_embeddings or known[1] != input_embeddings._version:
        known = (weakref.ref(input_embeddings), input_embeddings._version, embedding_signature(input_embeddings))
        _LOADED_SIGNATURES[id(input_embeddings)] = known
    return known[2]


def signature_fingerprint(signature: list[float]) -> str:
    """Short hex fingerprint of a signature (for display and cache keys)."""
    return hashlib.sha256(json.dumps([round(x, 2) for x in signature]).encode()).hexdigest()[:12]


def signatures_match(a: list[float], b: list[float]) -> bool:
    """True when two embedding signatures come from the same model (correlation > 0.9)."""
    if len(a) != len(b) or not a:
        return False
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)  # plain Python: 128 numbers, checked at every run start
    da, db = [x - mean_a for x in a], [y - mean_b for y in b]
    denom = math.sqrt(sum(x * x for x in da) * sum(y * y for y in db))
    return denom > 0 and sum(x * y for x, y in zip(da, db)) / denom > 0.9


def tensors_checksum(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 over every tensor's name, dtype, shape and bytes (in name order): written into a
    file's metadata by ``save`` and checked by ``read_model_file``, so that an altered file is caught."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def non_finite(tensors: dict[str, torch.Tensor]) -> str | None:
    """The name of the first floating tensor (in name order) holding NaN or inf, or None when all are finite."""
    for name in sorted(tensors):
        t = tensors[name]
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            return name
    return None


def write_model_file(path: str | Path, tensors: dict[str, torch.Tensor], meta: dict[str, str], what: str) -> Path:
    """Write a model-bound safetensors file with its checksum (``sha256`` in the metadata); returns the path.

    Args:
        tensors: name -> tensor, as it will be stored (after any dtype conversion: float16 overflows to inf).
        meta: the metadata, all strings (``format``, the model's name and signature, ...).
        what: what the file is, for the message ("look-ahead file", "drafter file").

    Raises:
        ValueError: a tensor holds NaN or inf (training diverged): nothing is written.
    """
    bad = non_finite(tensors)
    if bad is not None:
        raise ValueError(f"Refusing to write the {what} {str(path)!r}: its tensor {bad!r} holds NaN or inf "
                         "(training diverged, or a weight overflows float16); nothing was written. Train again "
                         "with a lower learning rate.")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata={**meta, "sha256": tensors_checksum(tensors)})
    os.chmod(path, 0o644)  # safetensors writes 0600: a trained file is shared like the shipped ones
    return path


def read_model_file(path: str | Path, what: str, fmt: str) -> tuple[dict[str, str], dict[str, torch.Tensor]]:
    """Read a model-bound safetensors file: its metadata and its tensors (on CPU, stored dtype).

    Args:
        path: the file.
        what: what the file should be, for messages ("look-ahead file", "drafter file").
        fmt: the expected ``format`` metadata value.

    Raises:
        ValueError: the file is missing, unreadable / corrupt (truncated, a damaged header, tensors
            that no longer match the checksum in its metadata), not of format ``fmt``, without a
            checksum (``write_model_file`` always writes one: such a file cannot be verified), or
            holding NaN or inf in a tensor.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{str(path)!r} is a folder; give the {what} itself (a .safetensors file).")
    if not path.is_file():
        raise ValueError(f"{what[0].upper()}{what[1:]} {str(path)!r} does not exist.")
    try:
        with safe_open(str(path), framework="pt") as handle:
            meta = handle.metadata() or {}
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError, RuntimeError) as err:
        raise ValueError(f"{str(path)!r} is not a readable safetensors {what} ({err}).") from err
    if meta.get("format") is None and {"step", "args", "progress"} <= set(meta):  # ``training.checkpoint``
        raise ValueError(f"{str(path)!r} is a training checkpoint (step {meta['step']} of python -m "
                         f"pass_core.train), not a {what}: training writes the {what} to --out when it ends; "
                         "continue this one with --resume.")
    if meta.get("format") != fmt:
        use = _FORMAT_USES.get(meta.get("format"))
        found = f"format {meta['format']!r}" if meta.get("format") is not None else "no 'format' in its metadata"
        raise ValueError(f"{str(path)!r} is a safetensors file but not a {what} of format {fmt!r} "
                         f"({found})" + (f"; it holds {use}." if use else "."))
    if "sha256" not in meta:
        raise ValueError(f"{str(path)!r} carries no checksum ('sha256' in its metadata), so it cannot be checked for "
                         f"alteration: every {what} this project writes carries one. Use an intact copy of the "
                         f"{what}, or train it again.")
    if tensors_checksum(tensors) != meta["sha256"]:
        raise ValueError(f"{str(path)!r} was altered or damaged after it was written: its tensors do not match "
                         f"the checksum in its metadata. Use an intact copy of the {what}.")
    bad = non_finite(tensors)
    if bad is not None:
        raise ValueError(f"{str(path)!r} holds NaN or inf in its tensor {bad!r}: it cannot draft (its numbers would "
                         f"corrupt the verification pass). Use an intact copy of the {what}, or train it again.")
    return meta, tensors


def check_trained_for(loaded, path: str | Path, model_name: str, width: int, vocab_size: int,
                      signature: list[float], how_to_train: str) -> None:
    """Refuse a file trained for another model than ``loaded``.

    Args:
        loaded: the ``LoadedModel``.
        path: the file (or a description), for the message.
        model_name / width / vocab_size / signature: what the file was trained for
            (width = d_emb = the target's hidden size).
        how_to_train: the command that trains one for ``loaded`` (ends the message).

    Raises:
        ValueError: naming the file's model, the loaded model and what differs.
    """
    problems = []
    if width != loaded.d_emb:
        problems.append(f"d_emb {width} vs {loaded.d_emb}")
    if vocab_size != loaded.vocab_size:
        problems.append(f"vocabulary {vocab_size} vs {loaded.vocab_size}")
    if not problems and not signatures_match(signature, loaded_signature(loaded.model.get_input_embeddings().weight)):
        problems.append("input embeddings differ")
    if problems and model_name == loaded.name:  # it said "trained for 'X', not for the loaded model 'X'"
        raise ValueError(f"{str(path)} was trained for another version of {model_name!r}: the same name, other "
                         f"weights ({', '.join(problems)}). {how_to_train}.")
    if problems:
        raise ValueError(f"{str(path)} was trained for model {model_name!r}, not for the loaded model {loaded.name!r} "
                         f"({', '.join(problems)}). {how_to_train}, or load {model_name!r}.")
