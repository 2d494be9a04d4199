"""Backends: how the target's passes are computed (issue 14 item 2). Every method of a race or a benchmark
runs on the same backend, AR included, so speed-ups stay fair.

- ``fp32``: eager PyTorch, float32 weights and activations (the reference: greedy outputs of every method
  equal AR's token for token).
- ``bf16``: eager PyTorch, bfloat16 weights and activations. On a CPU with native bfloat16 matmuls
  (oneDNN, AVX512-BF16 / AMX) a wide pass costs little more than a one-token pass; measured in the README.
  Wide verification passes and one-token passes round differently in bfloat16, so a greedy output can
  differ from AR's at a near-tie (the top-two logit margin within bfloat16's rounding); the greedy check
  and the benchmark name such differences apart (``comparison.compare_outputs``).

``torch.compile`` and torchao int8 were tried (README, "Backends"); neither is offered.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Backend:
    """One backend.

    Attributes:
        name: the ``--backend`` value.
        dtype: the ``load_model`` dtype name it loads the model in.
        description: one line for help texts.
    """

    name: str
    dtype: str
    description: str


BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("fp32", "float32", "eager PyTorch, float32 (greedy outputs identical to AR token for token)"),
    Backend("bf16", "bfloat16", "eager PyTorch, bfloat16 weights (needs native bfloat16 matmuls on a CPU; "
                                "greedy outputs may differ from AR at near-ties)"),
)}


def cpu_has_native_bf16() -> bool:
    """True when oneDNN reports native bfloat16 support on this CPU (AVX512-BF16 / AMX class)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def default_backend(device: str | torch.device = "cpu") -> str:
    """The default: ``fp32``, the one whose greedy outputs equal AR's exactly on every machine (see the
    README's backend table for what ``bf16`` gains where it is offered)."""
    return "fp32"


def check_backend(name: str, device: str | torch.device) -> Backend:
    """The backend ``name`` for ``device`` ("cpu", "cuda", "mps" or a torch.device).

    Raises:
        ValueError: an unknown name (naming the offered ones), or ``bf16`` on a CPU without native
            bfloat16 matmuls (it would run slower than ``fp32`` there).
    """
    if name not in BACKENDS:
        raise ValueError(f"Unknown backend {name!r}: choose one of {', '.join(BACKENDS)}.")
    kind = torch.device(device).type if not isinstance(device, torch.device) else device.type
    if name == "bf16" and kind == "cpu" and not cpu_has_native_bf16():
        raise ValueError("The bf16 backend needs a CPU with native bfloat16 matmuls (AVX512-BF16 or AMX); this "
                         "one has none, so bf16 would run slower than fp32 here: use --backend fp32.")
    return BACKENDS[name]
