"""KV-cache handling shared by every decoder: one cache discipline, one timer.

Invariant after every step of every decoder: the cache holds every committed token
except the last one (the pending token, fed at the start of the next step).
"""

from __future__ import annotations

import time

import torch
from transformers import DynamicCache


def new_cache(model) -> DynamicCache:
    """An empty ``DynamicCache`` for ``model`` (batch size 1)."""
    return DynamicCache(config=model.config)


def cache_len(cache) -> int:
    """Tokens currently held by the cache."""
    return int(cache.get_seq_length())


def crop_to(cache, length: int) -> None:
    """Keep the first ``length`` positions of the cache (drops look-ahead / rejected entries).

    Raises:
        RuntimeError: when the cache holds fewer than ``length`` positions (a bug; raised, not asserted, so
            that ``python -O`` keeps the check).
    """
    held = cache_len(cache)
    if held < length:
        raise RuntimeError(f"cache holds {held} positions, cannot crop to {length}")
    if held > length:
        cache.crop(length - held)  # transformers 5: crop(-n) drops the last n entries


def keep_positions(cache, start: int, keep: list[int]) -> None:
    """Compact the cache after a tree verification: move the K/V of positions ``keep`` (absolute,
    increasing, all >= ``start``: the accepted path's nodes) to the slots ``start, start + 1, ...`` in
    every layer, and drop everything after them (docs/algorithms.md section 4b).

    Raises:
        RuntimeError: a position outside the cache or before ``start`` (a bug).
    """
    held = cache_len(cache)
    if not all(start <= i < held for i in keep):
        raise RuntimeError(f"cannot keep positions {keep} of a cache of {held} from {start}")
    if list(keep) != list(range(start, start + len(keep))):  # a chain's path is already in place
        src = torch.tensor(keep, dtype=torch.long)
        for layer in cache.layers:  # transformers 5 DynamicLayer: keys / values (1, H, T, Dh)
            index = src.to(layer.keys.device)
            layer.keys[:, :, start:start + len(keep)] = layer.keys[:, :, index]  # the gather copies first
            layer.values[:, :, start:start + len(keep)] = layer.values[:, :, index]
    crop_to(cache, start + len(keep))


def check_invariant(cache, committed_total: int) -> None:
    """Check the cache invariant after every step (docs/algorithms.md section 2.5): cache = committed tokens
    minus the pending one.

    Args:
        committed_total: prompt tokens + generated tokens so far (pending included).

    Raises:
        RuntimeError: the invariant is broken (a bug; raised, not asserted, so that ``python -O`` keeps it).
    """
    held = cache_len(cache)
    if held != committed_total - 1:
        raise RuntimeError(
            f"cache invariant broken: cache holds {held} positions but {committed_total} tokens are "
            f"committed (expected {committed_total - 1}: all but the pending token)")


class StepClock:
    """Wall-clock timer for model work, synchronising the device at each reading.

    ``torch.cuda.synchronize`` (or the MPS equivalent) runs before each reading so
    that asynchronous kernels are counted in the step that launched them
    (docs/algorithms.md section 7).
    """

    def __init__(self, device: torch.device):
        self.device = torch.device(device)

    def sync(self) -> None:
        """Wait for the device to finish queued work."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elif self.device.type == "mps":
            torch.mps.synchronize()

    def now(self) -> float:
        """Seconds, after synchronising the device."""
        self.sync()
        return time.perf_counter()
