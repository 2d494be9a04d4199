"""Where a model's shipped files live, and which file serves a method: look-ahead embeddings
(PaSS) and ParallelSpec drafters, with an untrained fallback that says so.

``pass_core.registry`` points each method at one of these resolvers.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from pass_core.drafters.lookahead.embeddings import LookaheadEmbeddings
from pass_core.drafters.lookahead.adapters import GatedLoRA
from pass_core.drafters.parallelspec.model import ParallelDrafter
from pass_core.decoding.text import count


def assets_dir() -> Path:
    """The ``assets/`` folder ($PASS_PLAYGROUND_ASSETS overrides)."""
    env = os.environ.get("PASS_PLAYGROUND_ASSETS")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "assets"


#: Largest L among shipped look-ahead files searched by ``resolve_lookahead``.
SHIPPED_MAX_LOOKAHEAD = 8


def ships(path_for, model_name: str, largest: int) -> bool:
    """Whether a file trained for ``model_name`` ships: ``path_for(model_name, n)`` (one of the
    ``shipped_*_path`` functions below) is a file for some n = 1..``largest``, where the resolvers look."""
    return any(path_for(model_name, n).is_file() for n in range(1, largest + 1))


def shipped_lookahead_path(model_name: str, num_lookahead: int) -> Path:
    """Where the shipped look-ahead file for (model, L) lives (it may not exist)."""
    safe = model_name.replace("/", "--")
    return assets_dir() / "lookahead" / f"{safe}-L{num_lookahead}.safetensors"


def resolve_lookahead(loaded, num_lookahead: int, path: str | None = None,
                      kind: str = "trained") -> tuple[LookaheadEmbeddings, str]:
    """Pick look-ahead embeddings: an explicit file, the shipped one, or an untrained fallback.

    Args:
        loaded: the ``LoadedModel``.
        num_lookahead: L wanted (ignored when ``path`` is given: the file decides).
        path: a look-ahead file, or "fixed-token" for the paper's untrained baseline.
        kind: "trained" (default file lookup) or "fixed-token".

    Returns:
        (embeddings, a sentence saying which were used).

    Raises:
        ValueError: a missing / corrupt file or one trained for another model.
    """
    if path == "fixed-token" or kind == "fixed-token":
        la = LookaheadEmbeddings.initialise(loaded, num_lookahead, init="fixed-token")
        return la, f"fixed-token baseline (untrained, token id {la.info['token_id']}), L={num_lookahead}"
    if path:
        la = LookaheadEmbeddings.load(path, loaded)
        return la, f"{la.describe()} from {path}{_own_l(la, num_lookahead)}"
    # the shipped file with the smallest L' >= L; its first L tokens are an exact L-set
    for n in range(num_lookahead, SHIPPED_MAX_LOOKAHEAD + 1):
        shipped = shipped_lookahead_path(loaded.name, n)
        if shipped.is_file():
            la = LookaheadEmbeddings.load(shipped, loaded).truncate(num_lookahead)
            origin = shipped.name if n == num_lookahead else f"first {num_lookahead} of {shipped.name}"
            return la, f"shipped {la.describe()} ({origin})"
    la = LookaheadEmbeddings.initialise(loaded, num_lookahead, init="fixed-token")
    return la, (f"no trained look-ahead file for {loaded.name} with L={num_lookahead}: using the untrained "
                "fixed-token initialisation (expect few accepted drafts)")


def _own_l(la: LookaheadEmbeddings, num_lookahead: int) -> str:
    """A note when a file given by path holds another L than asked (its own L is used: it was said as "L=4 from
    FILE" only, under an asked L of 6)."""
    if la.num_lookahead == num_lookahead:
        return ""
    return f" (its own L = {la.num_lookahead}, not the {num_lookahead} asked)"


def shipped_adapters_path(model_name: str, num_lookahead: int) -> Path:
    """Where the shipped look-ahead adapter file (method ``pass-lora``) for (model, L) lives (it may not exist)."""
    safe = model_name.replace("/", "--")
    return assets_dir() / "lookahead" / f"{safe}-L{num_lookahead}-lora.safetensors"


def resolve_adapters(loaded, num_lookahead: int, path: str | None = None) -> tuple[LookaheadEmbeddings, str]:
    """Pick look-ahead embeddings with look-ahead adapters (method ``pass-lora``, an extension): an explicit
    file, the shipped one (smallest L' >= L, truncated: exact), or a fallback without trained adapters.

    The fallback is ``resolve_lookahead``'s embeddings with adapters whose B = 0 (an exact no-op), so it
    drafts exactly what PaSS drafts, and the note says so.

    Returns:
        (embeddings with ``adapters`` set, a sentence saying which were used).

    Raises:
        ValueError: a missing / corrupt file, an embeddings-only file, or one trained for another model.
    """
    if path:
        la = LookaheadEmbeddings.load(path, loaded, adapters=True)
        return la, f"{la.describe()} from {path}{_own_l(la, num_lookahead)}"
    for n in range(num_lookahead, SHIPPED_MAX_LOOKAHEAD + 1):
        shipped = shipped_adapters_path(loaded.name, n)
        if shipped.is_file():
            la = LookaheadEmbeddings.load(shipped, loaded, adapters=True).truncate(num_lookahead)
            origin = shipped.name if n == num_lookahead else f"first {num_lookahead} of {shipped.name}"
            return la, f"shipped {la.describe()} ({origin})"
    la, note = resolve_lookahead(loaded, num_lookahead)
    la = dataclasses.replace(la, adapters=GatedLoRA.initialise(loaded.model.get_decoder(), rank=1))
    return la, (f"no trained look-ahead adapters for {loaded.name} with L={num_lookahead}: untrained adapters "
                f"(B = 0, no effect) on the PaSS embeddings, so it drafts exactly like PaSS ({note})")


#: Largest k among shipped ParallelSpec drafters searched by ``resolve_drafter``.
SHIPPED_MAX_DRAFTS = 8


def shipped_drafter_path(model_name: str, num_draft: int) -> Path:
    """Where the shipped ParallelSpec drafter for (model, k) lives (it may not exist)."""
    safe = model_name.replace("/", "--")
    return assets_dir() / "drafter" / f"{safe}-k{num_draft}.safetensors"


def resolve_drafter(loaded, num_draft: int, path: str | None = None) -> tuple[ParallelDrafter, str]:
    """Pick a ParallelSpec drafter: an explicit file, the shipped one, or an untrained fallback.

    Without a file for exactly k = ``num_draft``, the shipped drafter with the smallest
    larger k is used (mask i never sees later masks, so it gives fewer drafts exactly as
    trained), else the one with the largest smaller k (fewer drafts per step than asked).

    Returns:
        (drafter, a sentence saying which was used).

    Raises:
        ValueError: a missing / corrupt file or one trained for another model.
    """
    if path:
        drafter = ParallelDrafter.load(path, loaded)
        return drafter, f"{drafter.describe()} from {path}"
    for k in [*range(num_draft, SHIPPED_MAX_DRAFTS + 1), *range(min(num_draft, SHIPPED_MAX_DRAFTS + 1) - 1, 0, -1)]:
        shipped = shipped_drafter_path(loaded.name, k)
        if shipped.is_file():
            drafter = ParallelDrafter.load(shipped, loaded)
            n = min(num_draft, k)
            gate = drafter.info.get("min_confidence") or 0
            gate_note = (f"; a step drafts nothing when the drafter's confidence in d_1 is below {gate:g} "
                         "(confidence gate, an extension)") if gate else ""
            fewer = f" (not {num_draft}: no shipped drafter drafts more)" if n < num_draft else ""
            return drafter, (f"shipped {drafter.describe()} ({shipped.name}), {count(n, 'draft')} "
                             f"per step{fewer}{gate_note}")
    drafter = ParallelDrafter.initialise(loaded, num_draft)
    return drafter, (f"no trained ParallelSpec drafter for {loaded.name}: using an untrained one "
                     "(expect almost no accepted drafts)")
