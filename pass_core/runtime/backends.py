"""Backends: how the target's passes are computed. Every method of a race or a benchmark
runs on the same backend, AR included, so speed-ups stay fair.

- ``fp32``: eager PyTorch, float32 weights and activations (the reference: greedy outputs of every method
  equal AR's token for token).
- ``bf16``: eager PyTorch, bfloat16 weights and activations. On a CPU with native bfloat16 matmuls
  (oneDNN, AVX512-BF16 / AMX) a wide pass costs little more than a one-token pass; measured in the README.
  Wide verification passes and one-token passes round differently in bfloat16, so a greedy output can
  differ from AR's at a near-tie (the top-two logit margin within bfloat16's rounding); the greedy check
  and the benchmark name such differences apart (``comparison.compare_outputs``).
- ``onednn``: float32 like ``fp32``, but every decoder linear layer (and the output head for 1 token or 8 and
  more rows) runs through oneDNN with a weight packed once at load time
  (``torch.utils.mkldnn`` tensors, ``torch._C._nn.mkldnn_linear``: PyTorch's own oneDNN route, the one
  ``torch.utils.mkldnn.to_mkldnn`` uses). On CPU BLAS a float32 GEMM over 2-8 rows costs nearly twice a
  one-row GEMV, while oneDNN's packed kernel reads the weights once for all rows: a wide pass then costs
  little more than a one-token pass (measured in the README). One-token passes use it too: 5-16 % faster than
  the plain GEMV on this project's CPU (README, Results, "Latest runs on the default backend"). Results differ
  from ``fp32`` only by float32 rounding (about 3e-5 on the logits), so greedy outputs equal AR's on the same backend (``tests/test_backends.py``). CPU only.
  ParallelSpec's drafter is packed the same way on this backend (``parallelspec_drafter.packed_for_onednn``).

``torch.compile`` and torchao int8 were tried (README, "Backends"); neither is offered.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F


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
    packed: bool = False  # linear layers run through oneDNN with pre-packed weights (``pack_linears``)


BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("fp32", "float32", "eager PyTorch, float32 (greedy outputs identical to AR token for token)"),
    Backend("bf16", "bfloat16", "eager PyTorch, bfloat16 weights (needs native bfloat16 matmuls on a CPU; "
                                "greedy outputs may differ from AR at near-ties)"),
    Backend("onednn", "float32", "eager PyTorch, float32, linear layers through oneDNN with weights packed at "
                                 "load time (cheap wide passes on CPU; greedy outputs identical to AR)",
            packed=True),
)}


#: ``--backend auto`` (the default on a CPU): measured once per machine (``backend_choice``), never assumed.
AUTO = Backend("auto", "float32", "measure fp32 and onednn with 1 and all threads once on this machine and use the "
                                  "fastest (greedy outputs identical to AR)")
#: The ``--backend`` values of the command lines.
BACKEND_CHOICES = (AUTO.name, *BACKENDS)


def cpu_has_native_bf16() -> bool:
    """True when oneDNN reports native bfloat16 support on this CPU (AVX512-BF16 / AMX class)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def default_backend(device: str | torch.device = "cpu") -> str:
    """The default: ``auto`` on a CPU (the backend and thread count are chosen by measuring on this machine,
    ``backend_choice``: oneDNN's packed kernels are faster on some CPUs and 1.45x slower on others), else ``fp32``.

    ``device`` may be "auto" (resolved as ``models.pick_device`` does: cuda, then mps, then cpu).
    """
    kind = device.type if isinstance(device, torch.device) else str(device).split(":")[0]
    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else (
            "mps" if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available() else "cpu")
    return AUTO.name if kind == "cpu" else "fp32"


def check_backend(name: str, device: str | torch.device) -> Backend:
    """The backend ``name`` for ``device`` ("cpu", "cuda", "mps" or a torch.device).

    Raises:
        ValueError: an unknown name (naming the offered ones), ``bf16`` on a CPU without native
            bfloat16 matmuls (it would run slower than ``fp32`` there), or ``onednn`` off the CPU or
            without oneDNN.
    """
    if name == AUTO.name:
        return AUTO
    if name not in BACKENDS:
        raise ValueError(f"Unknown backend {name!r}: choose one of {', '.join(BACKEND_CHOICES)}.")
    kind = torch.device(device).type if not isinstance(device, torch.device) else device.type
    if name == "onednn" and (kind != "cpu" or not torch.backends.mkldnn.is_available()):
        raise ValueError("The onednn backend runs on a CPU with PyTorch's oneDNN (mkldnn) support only; "
                         f"on {kind} use --backend fp32 or bf16.")
    if name == "bf16" and kind == "cpu" and not cpu_has_native_bf16():
        raise ValueError("The bf16 backend needs a CPU with native bfloat16 matmuls (AVX512-BF16 or AMX); this "
                         "one has none, so bf16 would run slower than fp32 here: use --backend fp32.")
    return BACKENDS[name]



def resolve_backend(backend: str | None, dtype: str, device: torch.device) -> tuple[str | None, str]:
    """The CLIs' ``--backend`` / ``--dtype`` pair -> (backend to apply or None for plain eager PyTorch, dtype to load).

    No ``--backend`` and ``--dtype auto``: the default backend (``default_backend``).

    Raises:
        ValueError: both given (a backend sets the dtype), or as ``check_backend``.
    """
    if backend and dtype != "auto":
        sets = BACKENDS[backend].dtype if backend in BACKENDS else "with the backend it chooses"  # "auto": a KeyError
        raise ValueError(f"--backend {backend} sets the dtype ({sets}): drop --dtype {dtype}, "
                         f"or drop --backend for plain eager PyTorch in {dtype}.")
    backend = backend or (default_backend(device) if dtype == "auto" else None)
    return backend, (check_backend(backend, device).dtype if backend else dtype)

class PackedLinear(torch.nn.Linear):
    """A frozen ``nn.Linear`` whose inference forward runs through oneDNN with a weight packed once
    (the ``onednn`` backend), for the row counts where that is faster; the plain float32 ``linear``
    otherwise, and always while autograd records (training never uses the packed copy).

    Made in place from an ``nn.Linear`` by ``pack_linears`` (it stays an ``nn.Linear``: its weight,
    bias, hooks and state dict are unchanged; the packed copy is an extra attribute, not a parameter).

    Attributes:
        min_rows: rows (tokens) from which the packed kernel is used.
        also_rows: smaller row counts that use it too (the output head: 1 row).
    """

    min_rows: int = 2
    also_rows: frozenset = frozenset()

    def uses_packed(self, rows: int) -> bool:
        """True when a forward over ``rows`` rows runs the packed oneDNN kernel."""
        return rows >= self.min_rows or rows in self.also_rows

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., in_features) float32 -> (..., out_features) float32."""
        rows = x.numel() // x.shape[-1] if x.dim() else 0
        if (not self.uses_packed(rows) or x.dtype != torch.float32 or x.device.type != "cpu"
                or (torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad))):
            return F.linear(x, self.weight, self.bias)
        y = torch._C._nn.mkldnn_linear(x.reshape(rows, x.shape[-1]).contiguous().to_mkldnn(),
                                       self.packed_weight, self.packed_bias).to_dense()
        return y.reshape(*x.shape[:-1], self.out_features)


def pack_linear(module: torch.nn.Linear, min_rows: int = 2, also_rows: frozenset = frozenset()) -> PackedLinear:
    """Turn one frozen float32 CPU ``nn.Linear`` into a ``PackedLinear`` in place (a packed float32 copy of its
    weight and bias is added; the plain weight stays) and return it. ``min_rows`` / ``also_rows``: see
    ``PackedLinear``; on a layer already packed only they are set again (no second copy).

    Raises:
        ValueError: a weight that is not float32 on the CPU.
    """
    if module.weight.dtype != torch.float32 or module.weight.device.type != "cpu":
        raise ValueError(f"The onednn backend packs float32 CPU weights; this layer is {module.weight.dtype} on "
                         f"{module.weight.device.type}.")
    if not isinstance(module, PackedLinear):
        with torch.no_grad():
            module.packed_weight = module.weight.detach().to_mkldnn()
            bias = module.bias if module.bias is not None else torch.zeros(module.out_features)
            module.packed_bias = bias.detach().float().to_mkldnn()
        module.__class__ = PackedLinear
    module.min_rows, module.also_rows = int(min_rows), frozenset(also_rows)
    return module


def packed_linear(weight: torch.Tensor, bias: torch.Tensor | None = None, min_rows: int = 1) -> PackedLinear:
    """A frozen ``PackedLinear`` computing ``x @ weight.T + bias`` that shares ``weight`` (out, in) and ``bias``
    (out,) or None (float32 CPU tensors; nothing is initialised or copied besides the packed copy), with the packed
    kernel from ``min_rows`` rows on: the ParallelSpec drafter's draft-vocabulary head (8192 x 576 for the shipped
    drafter: 0.70 ms for 3 rows packed against 0.98 ms for ``W @ h^T``, 1 thread, measured while other jobs ran).

    Raises:
        ValueError: as ``pack_linear``.
    """
    layer = torch.nn.utils.skip_init(torch.nn.Linear, weight.shape[1], weight.shape[0], bias=bias is not None,
                                     device="meta")
    layer.weight = torch.nn.Parameter(weight.detach(), requires_grad=False)
    if bias is not None:
        layer.bias = torch.nn.Parameter(bias.detach(), requires_grad=False)
    return pack_linear(layer, min_rows=min_rows)


def pack_linears(model, head_rows: tuple[int, int] = (1, 8), decoder_rows: int = 1) -> int:
    """Turn the frozen float32 CPU model's linear layers into ``PackedLinear`` in place (the ``onednn`` backend).

    Decoder layers use the packed kernel for every pass (from ``decoder_rows`` rows on: 1 by default); the
    output head (a large memory-bound matrix) for 1 row and for ``head_rows[1]`` rows and more
    (``target.target_forward`` keeps its ``W @ h^T`` path for 2-7 rows, faster there). A module without an
    output head (the ParallelSpec drafter) has all its linear layers packed like decoder layers. Costs one
    extra float32 copy of every linear weight. Idempotent.

    Returns:
        How many layers were packed now.

    Raises:
        ValueError: a model that is not float32 on the CPU.
    """
    weight = next(model.parameters())
    if weight.dtype != torch.float32 or weight.device.type != "cpu":
        raise ValueError(f"The onednn backend packs float32 CPU weights; this model is {weight.dtype} on "
                         f"{weight.device.type}.")
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    count = 0
    for module in list(model.modules()):
        if type(module) is not torch.nn.Linear:  # noqa: E721 - PackedLinear (a subclass) is already packed
            continue
        if module is head:
            pack_linear(module, head_rows[1], frozenset({head_rows[0]}))
        else:
            pack_linear(module, decoder_rows)
        count += 1
    return count


def apply_backend(loaded, name: str):
    """Prepare a freshly loaded model for backend ``name`` (``pack_linears`` for ``onednn``) and record the
    backend on it (``loaded.backend``, shown by ``describe``). Returns ``loaded``.

    Raises:
        ValueError: as ``check_backend``, or a model whose dtype is not the backend's.
    """
    backend = check_backend(name, loaded.device)
    if loaded.dtype_name != backend.dtype:
        raise ValueError(f"Backend {name} runs {backend.dtype} weights; this model was loaded in {loaded.dtype}.")
    if backend.packed:
        pack_linears(loaded.model)
    loaded.backend = name
    return loaded


def prepare_backend(loaded, name: str, threads: int | None = None, progress=None):
    """``apply_backend``, or for ``auto`` the measured choice (``backend_choice.apply_auto_backend``: it also sets
    the thread count unless ``threads`` fixed it, and records ``loaded.backend_choice``). Returns ``loaded``.

    Raises:
        ValueError: as ``apply_backend``.
    """
    if name == AUTO.name:
        from pass_core.runtime.backend_choice import apply_auto_backend  # it builds on this module

        apply_auto_backend(loaded, threads, progress=progress)
        return loaded
    return apply_backend(loaded, name)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, e.g. a container's share; else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def set_cpu_threads(threads: int | None) -> int:
    """Set torch's CPU threads for every pass of this process (None: leave torch's choice); returns the count.

    Raises:
        ValueError: fewer than 1 thread, or more than this process may run on at once (``usable_cpus``): 5,000
            threads hung the backend measurement for minutes and 100,000 crashed the process.
    """
    if threads is not None:
        if threads < 1:
            raise ValueError("--threads must be at least 1.")
        if threads > (cpus := usable_cpus()):
            raise ValueError(f"--threads {threads}: this machine gives this process {cpus} CPU(s), and more threads "
                             f"than CPUs only wait for each other; use at most {cpus}.")
        torch.set_num_threads(threads)
    return torch.get_num_threads()
