"""Checkpoints of look-ahead training (``python -m pass_core.train --resume``): the trained tensors and their
Adam moments as safetensors (no pickle), the step, arguments and progress record in the metadata.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


def checkpoint_path(out: Path) -> Path:
    """Where the checkpoint of a run writing ``out`` lives: next to it, ``<stem>.ckpt.safetensors``."""
    return out.with_name(out.stem + ".ckpt.safetensors")


def save_checkpoint(path: Path, params: dict[str, torch.Tensor], opt: torch.optim.Adam, step: int, args,
                    progress: dict | None = None) -> None:
    """Every trained tensor + its Adam moments as safetensors (no pickle); the step and arguments in metadata.

    Args:
        params: name -> trained tensor (``"param"``: the look-ahead embeddings; ``"adapter.<layer>.A"`` /
            ``".B"``: look-ahead adapters).
        progress: JSON-able training record carried across ``--resume`` (positions seen, the agreement curve).
    """
    tensors = {}
    for name, param in params.items():
        tensors[name] = param.detach().cpu().contiguous()
        state = opt.state.get(param, {})
        if state:
            tensors[f"exp_avg/{name}"] = state["exp_avg"].cpu().contiguous()
            tensors[f"exp_avg_sq/{name}"] = state["exp_avg_sq"].cpu().contiguous()
    save_file(tensors, str(path), metadata={"step": str(step), "args": json.dumps(vars(args)),
                                            "progress": json.dumps(progress or {})})


def load_checkpoint(path: Path, params: dict[str, torch.Tensor], opt: torch.optim.Adam) -> tuple[int, dict]:
    """Restore the trained tensors and Adam moments; returns the step to continue from and the ``progress`` record.

    Raises:
        ValueError: the checkpoint was written for other trained tensors (e.g. another adapter rank).
    """
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        meta = handle.metadata()
    step, progress = int(meta["step"]), json.loads(meta.get("progress", "{}"))
    tensors = load_file(str(path))
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
