"""Checkpoints of training runs, for ``--resume``.

Look-ahead training (``python -m pass_core.train``): the trained tensors and their Adam moments as safetensors
(no pickle), the step, arguments and progress record in the metadata. ParallelSpec training
(``python -m pass_core.train_drafter``): a ``torch.save`` dict read back with ``weights_only=True``.
A checkpoint that cannot be read, or holds NaN or inf, is refused with a message naming the file and how to
start afresh; non-finite tensors are never written (training diverged).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from pass_core.drafters.files import non_finite
from pass_core.runtime.models import cache_root


#: What the trainers' command lines say after Ctrl-C.
AFTER_CTRL_C = ("\ninterrupted (Ctrl-C): run the same command with --resume to continue from its last checkpoint "
                "(training writes the first one after --checkpoint-every steps; before that it starts afresh).")


def checkpoint_path(out: Path) -> Path:
    """Where the checkpoint of a run writing ``out`` lives: next to it, ``<stem>.ckpt.safetensors``."""
    return out.with_name(out.stem + ".ckpt.safetensors")


def check_checkpoint_slot(path: Path, option: str, ours=None) -> None:
    """Refuse, before any training, a checkpoint path that training could not write (a folder: a traceback after the
    first ``--checkpoint-every`` steps) or where it would replace a file it did not write (``ours(path)`` false: a
    file of the user's was overwritten unsaid; None: any file there is the trainer's, e.g. in its cache). A
    damaged checkpoint of an earlier run counts as the trainer's: a run without ``--resume`` replaces it.

    Raises:
        ValueError: naming ``option`` (e.g. "--out lookahead.safetensors"), the path and what to do.
    """
    if path.is_dir():
        raise ValueError(f"{option}: its training checkpoint {path} is a folder, so no checkpoint could be written. "
                         "Move that folder, or give --out another name.")
    if path.is_file() and ours is not None and not ours(path):
        raise ValueError(f"{option}: {path}, where its training checkpoint goes, exists and is not a training "
                         "checkpoint: it would be replaced. Give --out another name, or move that file.")


def is_lookahead_checkpoint(path: Path) -> bool:
    """A look-ahead ``save_checkpoint`` file, or a damaged one: a safetensors header (8 bytes of length, then
    "{") whose metadata, if it can be read at all, holds the step and arguments."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(9)
        if len(head) < 9 or head[8:9] != b"{":
            return False
        with safe_open(str(path), framework="pt") as handle:
            meta = handle.metadata() or {}
    except (SafetensorError, OSError, ValueError, RuntimeError):
        return True  # a safetensors header cut short: a checkpoint damaged mid-write
    return "step" in meta and "args" in meta


def _afresh(path: Path, problem: str, fix: str = "") -> ValueError:
    """``problem``, then ``fix`` (what continues it) or starting afresh (read as one sentence, a fix inside the
    problem did not: "... give more --steps to train on, so --resume cannot continue from it. Start afresh ...")."""
    return ValueError(f"The training checkpoint {str(path)!r} {problem}, so --resume cannot continue from it. "
                      + (f"{fix}, or start afresh" if fix else "Start afresh") + ": run the same command without "
                      "--resume (the checkpoint is then overwritten), or delete the file.")


#: The largest learning rate either trainer takes (``--lr``, ``--adapter-lr``): 1e300 overflowed in Adam in a
#: traceback, and 1e30 wrote weights of 1e29 without a word.
MAX_LR = 10.0


def _refuse_non_finite(tensors: dict[str, torch.Tensor], step: int, trained=()) -> None:
    """Raise ValueError when a tensor holds NaN or inf, naming a ``trained`` one first (before its moments)."""
    bad = non_finite({name: tensors[name] for name in trained}) or non_finite(tensors)
    if bad is not None:
        raise ValueError(f"Training diverged by step {step}: the tensor {bad!r} holds NaN or inf, so no checkpoint "
                         "was written. Train again with a lower learning rate, or lower values of the options that "
                         "scale the loss or the updates if you raised them (--position-decay, --adapter-alpha, "
                         "--feature-weight).")


def save_checkpoint(path: Path, params: dict[str, torch.Tensor], opt: torch.optim.Adam, step: int, args,
                    progress: dict | None = None) -> None:
    """Every trained tensor + its Adam moments as safetensors (no pickle); the step and arguments in metadata.

    Args:
        params: name -> trained tensor (``"param"``: the look-ahead embeddings; ``"adapter.<layer>.A"`` /
            ``".B"``: look-ahead adapters).
        progress: JSON-able training record carried across ``--resume`` (positions seen, the agreement curve).

    Raises:
        ValueError: a tensor holds NaN or inf (training diverged): nothing is written.
    """
    tensors = {}
    for name, param in params.items():
        tensors[name] = param.detach().cpu().contiguous()
        state = opt.state.get(param, {})
        if state:
            tensors[f"exp_avg/{name}"] = state["exp_avg"].cpu().contiguous()
            tensors[f"exp_avg_sq/{name}"] = state["exp_avg_sq"].cpu().contiguous()
    _refuse_non_finite(tensors, step, params)
    path.parent.mkdir(parents=True, exist_ok=True)  # --out's check made its folder and removed it again
    save_file(tensors, str(path), metadata={"step": str(step), "args": json.dumps(vars(args)),
                                            "progress": json.dumps(progress or {})})


#: The look-ahead training options a ``--resume`` must share with the run that wrote the checkpoint.
RESUME_SAME = ("model", "num_lookahead", "shared", "tokens_per_draft", "adapter_rank", "loss", "data")


def load_checkpoint(path: Path, params: dict[str, torch.Tensor], opt: torch.optim.Adam,
                    args=None) -> tuple[int, dict]:
    """Restore the trained tensors and Adam moments; returns the step to continue from and the ``progress`` record.

    Args:
        args: this run's parsed arguments: the checkpoint's ``RESUME_SAME`` options must equal them, and its step
            must be below ``args.steps`` (None: not checked).

    Raises:
        ValueError: the checkpoint is damaged (unreadable, truncated, metadata missing, NaN or inf), naming the
            file and how to start afresh; it was written by a run of other ``RESUME_SAME`` options (each named:
            another model of the same shapes continued unsaid) or has reached ``--steps`` already; or it was written
            for other trained tensors (e.g. another adapter rank).
    """
    if path.is_file() and not is_lookahead_checkpoint(path):  # was "damaged", then refused as not a checkpoint
        raise ValueError(f"{str(path)!r}, where --out's training checkpoint goes, is not a training checkpoint: "
                         "--resume cannot continue from it. Give --out another name, or move that file.")
    try:
        with safe_open(str(path), framework="pt") as handle:
            meta = handle.metadata() or {}
        step, progress = int(meta["step"]), json.loads(meta.get("progress", "{}"))
        saved = json.loads(meta.get("args", "{}"))
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError, RuntimeError, KeyError) as err:
        raise _afresh(path, f"is damaged ({type(err).__name__}: {err})") from err
    _refuse_other_options(path, saved, args, RESUME_SAME)
    if args is not None and step >= args.steps:  # a report of --steps 1 over 2 steps of training
        raise _afresh(path, f"is at step {step} already, and --steps is {args.steps}", "Give more --steps to train on")
    if non_finite(tensors) is not None:
        raise _afresh(path, f"holds NaN or inf in {non_finite(tensors)!r}")
    for name, param in params.items():
        if name not in tensors or tensors[name].shape != param.shape:
            raise ValueError(f"{path} does not match this run's trained tensors ({name}); start without --resume "
                             "or use the same --num-lookahead and --adapter-rank.")
        with torch.no_grad():
            param.copy_(tensors[name])
        if f"exp_avg/{name}" in tensors:
            opt.state[param] = {"step": torch.tensor(float(step)), "exp_avg": tensors[f"exp_avg/{name}"],
                                "exp_avg_sq": tensors[f"exp_avg_sq/{name}"]}
    return step, progress


def _option(value) -> str:
    """An option's value as typed: ``[-1, 5]`` as "-1 5"."""
    return " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _same(before, now) -> bool:
    """Two values of an option are the same: equal, or two spellings of one existing file or folder ("./m" and
    "m", a relative and an absolute path: a model or data file named otherwise was refused)."""
    if before == now:
        return True
    try:
        return isinstance(before, str) and isinstance(now, str) and os.path.samefile(before, now)
    except OSError:  # either does not exist (a hub id, a model name)
        return False


def _refuse_other_options(path: Path, saved: dict, args, keys: tuple[str, ...]) -> None:
    """Raise ``_afresh`` naming each of ``keys`` whose value in ``saved`` (the options of the run that wrote the
    checkpoint at ``path``) differs from ``args`` (this run's parsed arguments; None, or a key not saved: not
    checked; ``_same``)."""
    differ = [f"--{key.replace('_', '-')} {_option(saved[key])} (this run: {_option(getattr(args, key))})"
              for key in keys if args is not None and key in saved and not _same(saved[key], getattr(args, key))]
    if differ:
        raise _afresh(path, f"was written by a run with {', '.join(differ)}", "Give the same to continue it")


#: The ParallelSpec training options a ``--resume`` must share with the run that wrote the checkpoint: the target
#: model and the drafter's shapes (another model of the same width, or other feature layers, continued unsaid).
DRAFTER_RESUME_SAME = ("model", "num_draft", "feature_layers", "draft_vocab")


def save_drafter_checkpoint(path: Path, drafter: torch.nn.Module, opt: torch.optim.Optimizer,
                            gen: torch.Generator, step: int, history: list, train_s: float, args=None,
                            window: list | None = None) -> None:
    """A ParallelSpec training checkpoint: the drafter's and the optimizer's state, the generator, the step, the
    history and the (loss, agreement) pairs of the steps since its last entry (``window``: a resumed run's next
    entry averages them too), and the run's ``DRAFTER_RESUME_SAME`` options (``args``, the parsed arguments; None:
    none kept).

    Raises:
        ValueError: a drafter tensor holds NaN or inf (training diverged): nothing is written.
    """
    _refuse_non_finite(drafter.state_dict(), step)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"drafter": drafter.state_dict(), "optimizer": opt.state_dict(), "generator": gen.get_state(),
                "step": step, "history": json.dumps(history), "train_s": train_s, "window": json.dumps(window or []),
                "args": json.dumps({key: getattr(args, key) for key in DRAFTER_RESUME_SAME} if args else {})}, path)


def drafter_checkpoint_path(out: Path) -> Path:
    """Where ParallelSpec training writing ``out`` keeps its checkpoint: in the cache, not next to ``out`` (the
    default ``out`` is in assets/, which the Space ships; a checkpoint is about 54 MB), named by ``out``'s stem and a
    hash of its full path, so that two runs writing files of the same name elsewhere never resume each other's
    (keyed by the stem alone, a run for runB/m.safetensors continued runA/m.safetensors' run, seed and all)."""
    key = hashlib.sha256(str(Path(out).resolve()).encode()).hexdigest()[:12]
    return cache_root() / "drafter-checkpoints" / f"{Path(out).stem}-{key}.ckpt.pt"


def read_drafter_checkpoint(path: Path, args=None) -> dict:
    """A ``save_drafter_checkpoint`` file read and checked, without a drafter: a ParallelSpec run reads it before
    it makes its data (minutes to hours), then restores it with ``load_drafter_checkpoint``.

    Args:
        args: this run's parsed arguments: the checkpoint's ``DRAFTER_RESUME_SAME`` options must equal them (a
            checkpoint written before it kept them: its k - 1 [MASK] vectors are checked against ``args.num_draft``);
            None: not checked.

    Raises:
        ValueError: the file is damaged, misses a part or holds NaN or inf, naming the file and how to start afresh;
            it was written by a run of other ``DRAFTER_RESUME_SAME`` options, naming each with the value that
            continues it; or it has reached ``args.steps`` already.
    """
    try:
        ckpt = torch.load(path, weights_only=True)
        missing = [k for k in ("drafter", "optimizer", "generator", "step", "history", "train_s") if k not in ckpt]
        if missing:
            raise ValueError(f"no {', '.join(missing)}")
        if non_finite(ckpt["drafter"]) is not None:
            raise ValueError(f"NaN or inf in {non_finite(ckpt['drafter'])!r}")
        masks = ckpt["drafter"].get("masks")
    except Exception as err:  # torch.load of a damaged file raises many kinds (unpickling, zip, runtime errors)
        # the first sentence: torch's advice after it (load with weights_only=False) runs a damaged file's code
        first = (str(err).strip().splitlines() or [""])[0].split(". ")[0].rstrip(".")
        raise _afresh(path, f"cannot be used ({type(err).__name__}: {first})") from err
    try:
        saved = json.loads(ckpt.get("args", "{}"))
    except (TypeError, ValueError) as err:
        raise _afresh(path, f"cannot be used (its options: {type(err).__name__}: {err})") from err
    if args is not None and masks is not None and "num_draft" not in saved:  # an older checkpoint: its shape says k
        saved["num_draft"] = masks.shape[0] + 1
    _refuse_other_options(path, saved, args, DRAFTER_RESUME_SAME)  # else a state_dict error, or none at all
    if args is not None and int(ckpt["step"]) >= args.steps:  # it wrote a report of --steps over more steps
        raise _afresh(path, f"is at step {int(ckpt['step'])} already, and --steps is {args.steps}",
                      "Give more --steps to train on")
    return ckpt


def load_drafter_checkpoint(ckpt: dict, path: Path, drafter: torch.nn.Module, opt: torch.optim.Optimizer,
                            gen: torch.Generator) -> tuple[int, list, float, list]:
    """Restore a checkpoint ``read_drafter_checkpoint`` read from ``path``; returns (step, history, training seconds
    so far, the window of steps since the history's last entry: [] in a checkpoint written before it was kept).

    Raises:
        ValueError: the checkpoint does not fit this drafter (another k, draft vocabulary or model), naming the file
            and how to start afresh.
    """
    try:
        drafter.load_state_dict(ckpt["drafter"])
        opt.load_state_dict(ckpt["optimizer"])
        gen.set_state(ckpt["generator"])
        window = [tuple(pair) for pair in json.loads(ckpt.get("window", "[]"))]
        return int(ckpt["step"]), json.loads(ckpt["history"]), float(ckpt["train_s"]), window
    except Exception as err:  # shapes that differ, an optimizer state of other parameters
        raise _afresh(path, f"cannot be used ({type(err).__name__}: {err})") from err
