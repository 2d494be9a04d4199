"""Shipped token-tree shapes (an extension, docs/algorithms.md section 4b): one static tree of N nodes per
drafting method and size, grown from that drafter's measured top-i agreement per position on held-out
prompts (``python -m pass_core.bench.tree_shapes``; the file records the command that made it).

File layout (``assets/trees/shapes.json``)::

    {"command": "...", "model": "...", "num_lookahead": 3, "max_new_tokens": 48, "prompts": "...",
     "methods": {"parallelspec": {"records": ..., "agreement": [[top-1, top-2, ...] per position],
                                  "trees": {"4": [[0], [1], ...], "8": ..., "16": ...},
                                  "expected_tokens": {"4": ..., "8": ..., "16": ...}}, ...}}
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from pass_core.decoding.draft_length import CostAwareDraftLength
from pass_core.decoding.settings import TREE_AUTO
from pass_core.decoding.tree import TreeSpec
from pass_core.drafters.shipped import assets_dir


def shapes_path() -> Path:
    """Where the shipped tree shapes live (it may not exist)."""
    return assets_dir() / "trees" / "shapes.json"


@lru_cache(maxsize=4)
def _load(path: str, stamp: tuple) -> dict:
    """The parsed file; ``stamp`` (modification time, size) makes a rewritten file load again."""
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"no shipped tree shapes at {file}: make them with python -m pass_core.bench.tree_shapes")
    try:
        data = json.loads(file.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{file} is not a readable JSON file of tree shapes ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("methods"), dict):
        raise ValueError(f"{file}: expected an object with 'methods' (see pass_core/drafters/trees.py)")
    return data


def shipped_shapes(path: Path | None = None) -> dict:
    """The whole shapes file as a dict (see the module docstring).

    Raises:
        ValueError: a missing or malformed file, naming it.
    """
    file = Path(path or shapes_path())
    stat = file.stat() if file.is_file() else None
    return _load(str(file), (stat.st_mtime_ns, stat.st_size) if stat else ())


def tree_sizes(method: str, path: Path | None = None) -> list[int]:
    """The tree sizes N shipped for ``method`` (empty when none)."""
    entry = shipped_shapes(path)["methods"].get(method, {})
    return sorted(int(n) for n in entry.get("trees", {}))


def shipped_tree(method: str, num_nodes: int, path: Path | None = None) -> TreeSpec | None:
    """The shipped tree of ``num_nodes`` nodes for ``method``; None for 0 (a chain).

    Raises:
        ValueError: no shape of that size for the method (naming the sizes shipped), ``TREE_AUTO``
            (resolve it with ``choose_tree_size`` first), or a malformed file.
    """
    if num_nodes == 0:
        return None
    if num_nodes == TREE_AUTO:
        raise ValueError("the tree size chosen per machine must be resolved first (drafters.trees.choose_tree_size)")
    file = path or shapes_path()
    entry = shipped_shapes(path)["methods"].get(method, {})
    trees = entry.get("trees", {})
    if str(num_nodes) not in trees:
        sizes = ", ".join(str(n) for n in sorted(int(n) for n in trees)) or "none"
        raise ValueError(f"no shipped tree of {num_nodes} nodes for {method!r} in {file} (shipped sizes: {sizes})")
    return TreeSpec.from_json(trees[str(num_nodes)], where=f"{file}, {method} tree {num_nodes}")


def choose_tree_size(method: str, pass_cost: dict, path: Path | None = None) -> int:
    """The shipped tree size with the most expected tokens per unit of pass cost on this machine:
    argmax over N of (E(N) + x) / (c(N + 1) + c(w) + d) (docs/algorithms.md sections 4 and 4b): E(N) the
    expected tokens per verification step measured for the shape on held-out prompts, c this machine's pass-cost
    curve ("c": relative costs of passes over 1, 2, ... tokens, ``runtime.pass_cost``), for PaSS its drafting
    pass (the entry's "step_cost": x = 1 exact token, a pass over w = 1 + L tokens), and for a separate drafter
    (ParallelSpec, "step_cost" ``drafter_pass``) d = its pass in AR steps, the prior of the cost-aware draft
    lengths (``CostAwareDraftLength.DRAFTER_PRIOR``, 0.25) as nothing has run yet. d is the same for every N, yet
    it still moves the argmax of a ratio: it weighs a wider verification pass less.

    Raises:
        ValueError: no shipped tree for the method.
    """
    entry = shipped_shapes(path)["methods"].get(method, {})
    expected = {int(n): float(e) for n, e in entry.get("expected_tokens", {}).items() if n.isdigit()}
    if not expected:
        raise ValueError(f"no shipped tree for {method!r}: choose a chain (tree nodes 0)")
    extra = entry.get("step_cost", {})
    tokens, width = float(extra.get("extra_tokens", 0.0)), int(extra.get("extra_width", 0))
    drafting = pass_cost_at(pass_cost["c"], width) if width else 0.0
    drafting += CostAwareDraftLength.DRAFTER_PRIOR if extra.get("drafter_pass") else 0.0

    def rate(n: int) -> float:
        return (expected[n] + tokens) / (pass_cost_at(pass_cost["c"], n + 1) + drafting)
    return max(expected, key=lambda n: (rate(n), -n))


def pass_cost_at(curve: list[float], width: int) -> float:
    """c(width) from a curve of c(1), c(2), ...; past its end, extended along its last segment (the curve
    is about linear there: a 17-token pass for a tree of 16 nodes, measured up to 16).

    Raises:
        ValueError: a curve of fewer than 2 points asked beyond its end, or a width more than 8 past it.
    """
    curve = [float(c) for c in curve]
    if width <= len(curve):
        return curve[width - 1]
    if len(curve) < 2 or width > len(curve) + 8:
        raise ValueError(f"the pass-cost curve covers {len(curve)} tokens, too few for a {width}-token pass")
    return curve[-1] + (width - len(curve)) * (curve[-1] - curve[-2])
