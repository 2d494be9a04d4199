"""Look-ahead adapters (an extension beyond the PaSS paper, docs/algorithms.md section 4): low-rank
adapters (LoRA, Hu et al. 2021) inside the frozen target that act **only at look-ahead positions**.

Every linear layer of every decoder layer gets ``y = W x + (alpha / r) * B (A x)`` at the query
rows of the look-ahead tokens and plain ``y = W x`` at every other row. Real positions never attend
to look-ahead positions (causal and fused masks), and a look-ahead token's changed keys and values
are cropped from the cache, so every real position still computes exactly the frozen model's p:
the output stays lossless and there is still one model. The idea follows mask-position-gated LoRA
in later single-model multi-token work; PaSS itself trains the look-ahead embeddings only.

The gate is a set of forward hooks that exist only for the duration of one pass and act only on
the thread that opened it (``GatedLoRA.gated``), so the shared model is never modified: AR and the
other methods running on the same ``LoadedModel``, in any thread, see the frozen model.
"""

from __future__ import annotations

import math
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Iterator

import torch

#: Module names that get adapters (every linear layer of a Llama-style decoder layer).
TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def adapter_targets(decoder: torch.nn.Module, targets: tuple[str, ...] = TARGET_MODULES) -> dict[str, torch.nn.Linear]:
    """The linear layers that carry adapters, by name relative to the decoder (``layers.0.self_attn.q_proj``).

    Args:
        decoder: the base model (``model.get_decoder()``).
        targets: last name parts of the layers that get adapters.

    Raises:
        ValueError: the decoder has none of them (an architecture these adapters do not know).
    """
    found = {name: mod for name, mod in decoder.named_modules()
             if isinstance(mod, torch.nn.Linear) and name.rsplit(".", 1)[-1] in targets}
    if not found:
        raise ValueError(f"The model has no linear layers named {', '.join(targets)}: look-ahead adapters "
                         "support Llama-style decoders only.")
    return found


def _gated_hook(module, args, output, *, a: torch.Tensor, b: torch.Tensor, scale: float,
                rows: torch.Tensor | slice | None, owner: int):
    """Forward hook: add ``scale * B A x`` to ``output`` at query ``rows`` (all rows when None), for passes
    of the thread ``owner`` only (another thread's pass on the shared model sees the frozen model).

    ``rows`` as a slice (contiguous look-ahead rows, the case of every decoding pass) adds in place on a view of
    ``output`` (batch 1) when no gradient flows through it: two kernels per layer (``mm``, ``addmm_``) instead of
    six (no gather, no copy of the whole output); the sum is the same up to float rounding."""
    if threading.get_ident() != owner:
        return None
    x = args[0]  # (1, Q, in)
    if rows is None:
        return output + scale * ((x @ a.T) @ b.T)
    if isinstance(rows, slice) and not output.requires_grad and output.shape[0] == 1:
        if rows.stop > output.shape[1]:
            raise IndexError(f"look-ahead rows {rows.start}..{rows.stop - 1} lie beyond this pass's "
                             f"{output.shape[1]} query rows")
        # (G, out) view of the output rows += scale * (x_rows A^T) B^T, in one kernel and without a temporary
        output[0, rows].addmm_(x[0, rows] @ a.T, b.T, alpha=scale)
        return output
    rows = torch.arange(rows.start, rows.stop, device=output.device) if isinstance(rows, slice) else rows
    delta = scale * ((x[:, rows] @ a.T) @ b.T)  # (1, G, out)
    return output.index_add(1, rows, delta.to(output.dtype))


def as_slice(rows: torch.Tensor | None) -> torch.Tensor | slice | None:
    """(G,) int64 query rows -> ``slice(first, last + 1)`` when they are consecutive and not negative, else
    unchanged (negative rows count from the end, which a slice would not do the same way)."""
    if rows is None or rows.numel() == 0:
        return rows
    first, last = int(rows[0]), int(rows[-1])
    if first >= 0 and last - first + 1 == rows.numel() and (rows.numel() == 1 or bool((rows.diff() == 1).all())):
        return slice(first, last + 1)
    return rows


@dataclass
class GatedLoRA:
    """Low-rank adapters for the look-ahead positions of one model.

    Attributes:
        weights: layer name (relative to the decoder) -> (A, B): A (r, in) and B (out, r) float32
            tensors (``requires_grad`` when training). B = 0 is an exact no-op.
        rank: r.
        alpha: the LoRA scale numerator; the update is ``alpha / r * B A x``.
    """

    weights: dict[str, tuple[torch.Tensor, torch.Tensor]]
    rank: int
    alpha: float
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _modules: tuple = field(default=(None, None), init=False, repr=False, compare=False)

    @property
    def scale(self) -> float:
        """alpha / r."""
        return self.alpha / self.rank

    @property
    def num_parameters(self) -> int:
        """Trained numbers in the adapters."""
        return sum(a.numel() + b.numel() for a, b in self.weights.values())

    @classmethod
    def initialise(cls, decoder: torch.nn.Module, rank: int, alpha: float | None = None,
                   generator: torch.Generator | None = None, b_std: float = 0.0) -> "GatedLoRA":
        """Fresh adapters for every target layer of ``decoder``: A ~ Kaiming-uniform, B = 0 (LoRA's
        initialisation: the adapters start as an exact no-op). ``b_std`` > 0 draws B ~ N(0, b_std)
        instead (tests: adapters that visibly act).

        Raises:
            ValueError: rank < 1, or a decoder without Llama-style linear layers.
        """
        if rank < 1:
            raise ValueError(f"The adapter rank must be at least 1, got {rank}.")
        generator = generator if generator is not None else torch.Generator().manual_seed(0)
        weights = {}
        for name, lin in adapter_targets(decoder).items():
            bound = 1 / math.sqrt(lin.in_features)
            a = (torch.rand((rank, lin.in_features), generator=generator) * 2 - 1) * bound
            b = (torch.randn((lin.out_features, rank), generator=generator) * b_std if b_std
                 else torch.zeros((lin.out_features, rank)))
            weights[name] = (a, b)
        return cls(weights, rank, float(alpha if alpha is not None else 2 * rank))

    def tensors(self) -> dict[str, torch.Tensor]:
        """Flat ``{"adapter.<name>.A": ..., "adapter.<name>.B": ...}`` float32 CPU tensors (for files)."""
        out = {}
        for name, (a, b) in self.weights.items():
            out[f"adapter.{name}.A"] = a.detach().float().cpu().contiguous()
            out[f"adapter.{name}.B"] = b.detach().float().cpu().contiguous()
        return out

    @classmethod
    def from_tensors(cls, tensors: dict[str, torch.Tensor], rank: int, alpha: float) -> "GatedLoRA":
        """Inverse of ``tensors``.

        Raises:
            ValueError: no adapter tensors, an A without its B, or shapes that disagree with ``rank``.
        """
        names = sorted({key[len("adapter."):-2] for key in tensors if key.startswith("adapter.")})
        if not names:
            raise ValueError("the file holds no adapter tensors")
        weights = {}
        for name in names:
            a, b = tensors.get(f"adapter.{name}.A"), tensors.get(f"adapter.{name}.B")
            if a is None or b is None or a.ndim != 2 or b.ndim != 2 or a.shape[0] != rank or b.shape[1] != rank:
                raise ValueError(f"adapter {name!r} is incomplete or not of rank {rank}")
            weights[name] = (a.float(), b.float())
        return cls(weights, rank, alpha)

    def check_fits(self, decoder: torch.nn.Module) -> None:
        """Raise ValueError unless every adapter names a linear layer of ``decoder`` with matching sizes."""
        layers = adapter_targets(decoder)
        for name, (a, b) in self.weights.items():
            lin = layers.get(name)
            if lin is None or a.shape[1] != lin.in_features or b.shape[0] != lin.out_features:
                raise ValueError(f"adapter {name!r} does not fit this model's layers")

    def _on(self, like: torch.Tensor) -> tuple[dict[str, tuple[torch.Tensor, torch.Tensor]], float]:
        """(weights, scale to apply): trainable tensors as they are with ``scale``; frozen ones on ``like``'s device
        and dtype with B pre-multiplied by the scale (converted once and kept) and 1.0."""
        if any(a.requires_grad or b.requires_grad for a, b in self.weights.values()):
            return self.weights, self.scale
        key = (like.device, like.dtype, self.scale)
        if key not in self._cache:
            self._cache.clear()
            self._cache[key] = {n: (a.to(like.device, like.dtype), (b * self.scale).to(like.device, like.dtype))
                                for n, (a, b) in self.weights.items()}
        return self._cache[key], 1.0

    def _modules_of(self, decoder: torch.nn.Module) -> dict[str, torch.nn.Module]:
        """The adapted layers of ``decoder`` by name, looked up once per decoder (every pass needs them)."""
        ref, modules = self._modules
        if ref is None or ref() is not decoder:
            layers = dict(decoder.named_modules())
            modules = {name: layers[name] for name in self.weights}
            self._modules = (weakref.ref(decoder), modules)
        return modules

    @contextmanager
    def gated(self, decoder: torch.nn.Module, rows: torch.Tensor | None) -> Iterator[None]:
        """Within this block, the decoder's passes apply the adapters at query ``rows`` only.

        Args:
            decoder: the base model (``model.get_decoder()``) the adapters were trained for.
            rows: (G,) int64 query indices of the look-ahead tokens in the coming pass, or None for
                every row (training, where a pass holds look-ahead tokens only).

        The hooks are removed on exit, also after an error. They act on this thread's passes only: the app
        shares one model between runs, and a pass that another thread runs meanwhile (a cancelled race still
        finishing its step while the next race starts) sees the frozen model.
        """
        modules, owner = self._modules_of(decoder), threading.get_ident()
        weights, scale = self._on(next(decoder.parameters()))
        rows = as_slice(rows)
        handles = []
        try:
            for name, (a, b) in weights.items():
                handles.append(modules[name].register_forward_hook(
                    partial(_gated_hook, a=a, b=b, scale=scale, rows=rows, owner=owner)))
            yield
        finally:
            for handle in handles:
                handle.remove()
