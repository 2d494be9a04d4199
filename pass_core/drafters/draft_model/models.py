"""Draft models for classic speculative sampling (Leviathan et al. 2022; Chen et al. 2023; docs/algorithms.md
section 2): which model drafts, built from the target or loaded by name, and the check that it speaks the
target's vocabulary.

Built from the target (``BUILT_IN``), for a target without a smaller sibling offline:

- ``bf16`` (the default, ``DEFAULT_DRAFT``): a bfloat16 copy. Its one-token passes read half the bytes of the
  float32 target's, which is what a one-token pass of a small model on a CPU waits for.
- ``first-layers``: the target's first n decoder layers, then its final norm and output head, sharing every
  weight (no memory; an early exit without training).
- ``int8`` / ``int8-all``: int8 dynamic quantisation (per-channel weights, activations quantised per pass) of the
  decoder's linear layers, or of every linear layer including the output head.

Measured on SmolLM2-135M-Instruct (experiments/draft_model_candidates.py, 1 thread, a 2-core AMD EPYC; greedy
top-1 agreement with the target, teacher-forced over its own continuations of the quick suite): bf16 0.99;
int8 0.56; int8-all 0.52; first 10 / 15 / 20 of 30 layers 0.04 / 0.11 / 0.11-0.18. Cost of a draft token, in
one-token float32 target passes: bf16 0.74-0.77 (0.72 in the recorded bf16 backend run: 28.4 vs 39.3 ms), int8
0.6-0.9, first n layers about n / 30 plus the head; the machine was heavily loaded for these, so the costs are
rough, the agreements exact. Only bf16 agrees often enough to pay for itself: with this machine's float32
pass-cost curve it predicts about 1.1x at k = 3. It is no cheaper than a target that runs in bfloat16 itself.

Any causal LM folder, hub id or GGUF file with the target's vocabulary (its tokenizer maps the same strings to
the same ids) can draft instead (``--draft-model NAME``), e.g. SmolLM2-135M-Instruct for SmolLM2-1.7B-Instruct.
"""

from __future__ import annotations

import copy
import weakref
from dataclasses import dataclass

import torch

#: The offline default draft model (measured: see the module docstring).
DEFAULT_DRAFT = "bf16"
#: ``first-layers``: the share of the target's decoder layers the draft keeps (at least 1).
FIRST_LAYERS_SHARE = 0.5
#: Names of the draft models built from the target, for ``--draft-model``.
BUILT_IN = ("bf16", "first-layers", "int8", "int8-all")


@dataclass(frozen=True)
class DraftModel:
    """A causal LM that drafts for a target with the same vocabulary.

    Attributes:
        model: the draft ``PreTrainedModel`` in eval mode (on the target's device).
        name: what it is, for notes and the page ("first 15 of 30 layers of the target", a folder name, ...).
        cost: measured or estimated cost of one draft token in one-token target passes, or None if unknown.
    """

    model: torch.nn.Module
    name: str
    cost: float | None = None


def first_layers(model: torch.nn.Module, n: int) -> torch.nn.Module:
    """A causal LM that runs the first ``n`` decoder layers of ``model``, then its final norm and output head.

    Every module is shared with ``model`` (no weight is copied; ``model`` itself is not changed): only the
    decoder's layer list and a copy of the config with ``num_hidden_layers = n`` are new.

    Raises:
        ValueError: n < 1 or n > the model's layers, or a model whose decoder has no ``layers`` list.
    """
    decoder = model.get_decoder()
    layers = getattr(decoder, "layers", None)
    if not isinstance(layers, torch.nn.ModuleList):
        raise ValueError(f"{type(model).__name__}: its decoder has no 'layers' list, so its first layers cannot draft.")
    if not 1 <= n <= len(layers):
        raise ValueError(f"first-layers draft: n must be 1..{len(layers)}, got {n}.")
    config = copy.deepcopy(decoder.config)
    config.num_hidden_layers = n
    if isinstance(getattr(config, "layer_types", None), list):
        config.layer_types = config.layer_types[:n]
    short = copy.copy(decoder)  # a new module object: its own module table and config, the same weights
    short.__dict__["_modules"] = dict(decoder._modules)
    short.layers = torch.nn.ModuleList(list(layers)[:n])
    short.config = config
    draft = copy.copy(model)
    draft.__dict__["_modules"] = dict(model._modules)
    prefix = next(name for name, module in model.named_children() if module is decoder)
    setattr(draft, prefix, short)
    draft.config = config
    draft.generation_config = copy.deepcopy(model.generation_config)  # assisted generation may change the draft's
    return draft


def plain_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of ``model`` in float32 whose linear layers are plain ``nn.Linear`` again (the onednn backend's
    ``PackedLinear`` subclass and its packed weights are dropped)."""
    opaque = {id(value): None for module in model.modules() for value in vars(module).values()
              if isinstance(value, torch.Tensor) and value.is_mkldnn}  # packed weights cannot be copied: dropped
    plain = copy.deepcopy(model, opaque).float()
    for module in list(plain.modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, torch.nn.Linear) and type(child) is not torch.nn.Linear:
                linear = torch.nn.Linear(child.in_features, child.out_features, bias=child.bias is not None,
                                         device="meta")  # no initialisation: it would draw from the global RNG
                linear.weight, linear.bias = child.weight, child.bias
                setattr(module, child_name, linear)
    return plain


def int8_copy(model: torch.nn.Module, head: bool = False) -> torch.nn.Module:
    """A copy of ``model`` whose decoder's ``Linear`` layers run int8 dynamic quantisation (per-channel int8
    weights, activations quantised per pass; PyTorch's ``quantize_dynamic``); the output head too when ``head``
    (measured: its argmax then agrees with the target's far less often). CPU only.

    Raises:
        ValueError: a model that is not on the CPU.
    """
    if next(model.parameters()).device.type != "cpu":
        raise ValueError("int8 draft: int8 dynamic quantisation runs on the CPU only.")
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    plain = plain_copy(model)
    out_head = plain.get_output_embeddings()
    names = {name for name, m in plain.named_modules()
             if isinstance(m, torch.nn.Linear) and (head or m is not out_head)}
    return quantize_dynamic(plain, {name: per_channel_dynamic_qconfig for name in names}, dtype=torch.qint8).eval()


#: Built-in draft models by target model and name: a copy is built once per target (the page resolves a
#: method's files for every race), and goes when the target does.
_BUILT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def built_in(loaded, name: str = DEFAULT_DRAFT) -> DraftModel:
    """A draft model built from the target ``loaded`` (``BUILT_IN``), once per target model and name.

    Raises:
        ValueError: an unknown name, or one that cannot be built for this model.
    """
    per_target = _BUILT.setdefault(loaded.model, {})
    if name not in per_target:
        per_target[name] = _build(loaded, name)
    return per_target[name]


def _build(loaded, name: str) -> DraftModel:
    if name == "first-layers":
        total = len(loaded.model.get_decoder().layers)
        n = max(1, round(total * FIRST_LAYERS_SHARE))
        return DraftModel(first_layers(loaded.model, n), f"the target's first {n} of {total} layers with its "
                          "output head (shared weights)", cost=None)
    if name in ("int8", "int8-all"):
        head = name == "int8-all"
        return DraftModel(int8_copy(loaded.model, head=head), "an int8 copy of the target (dynamic quantisation of "
                          + ("every linear layer)" if head else "the decoder's linear layers, the output head in "
                             "float32)"))
    if name == "bf16":
        return DraftModel(plain_copy(loaded.model).to(torch.bfloat16).eval(), "a bfloat16 copy of the target"
                          + (" (no cheaper: the target runs in bfloat16 too)" if loaded.dtype == torch.bfloat16 else ""))
    raise ValueError(f"Unknown built-in draft model {name!r}: choose from {', '.join(BUILT_IN)} or give a folder.")


def same_vocabulary(target_tokenizer, draft_tokenizer) -> bool:
    """True when both tokenizers map the same strings to the same ids (names are not compared)."""
    return target_tokenizer.get_vocab() == draft_tokenizer.get_vocab()


def load_draft_model(loaded, name: str, progress=None) -> DraftModel:
    """The draft model ``name`` for the target ``loaded``: a built-in one (``BUILT_IN``), or any causal LM
    folder, hub id or GGUF file that ``runtime.models.load_model`` reads, in the target's dtype and device.

    Raises:
        ValueError: a model that cannot be loaded (offline, missing), whose tokenizer's vocabulary differs from
            the target's, or whose output head is narrower than the target's vocabulary; the message names it.
    """
    if name in BUILT_IN:
        return built_in(loaded, name)
    from pass_core.runtime.models import load_model

    dtype = loaded.dtype_name
    try:
        other = load_model(name, device=str(loaded.device), dtype=dtype, progress=progress)
    except ValueError as err:
        raise ValueError(f"Draft model {name!r} could not be loaded: {err}") from err
    if not same_vocabulary(loaded.tokenizer, other.tokenizer):
        raise ValueError(f"Draft model {other.display_name!r} has another vocabulary than the target "
                         f"{loaded.display_name!r} ({len(other.tokenizer.get_vocab())} vs "
                         f"{len(loaded.tokenizer.get_vocab())} tokens, or the same tokens with other ids): "
                         "its drafts could not be verified. Choose a model with the target's tokenizer.")
    if other.vocab_size < loaded.vocab_size:
        raise ValueError(f"Draft model {other.display_name!r}: its output head has {other.vocab_size} rows, fewer "
                         f"than the target's {loaded.vocab_size}.")
    return DraftModel(other.model, f"{other.display_name} ({other.num_parameters / 1e6:.1f}M parameters)")


def resolve_draft_model(loaded, num_drafts: int, path: str | None = None) -> tuple[DraftModel, str]:
    """``Method.resolve`` for ``draft-model``: ``path`` (a name for ``load_draft_model``) or the default.

    Raises:
        ValueError: see ``load_draft_model``.
    """
    draft = load_draft_model(loaded, path) if path else built_in(loaded)
    return draft, f"draft model: {draft.name}" + ("" if path else " (the offline default)")
