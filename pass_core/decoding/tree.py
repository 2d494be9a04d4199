"""Token trees: the shape of a tree of drafts, its attention mask and position ids, and the
best static shape for a drafter (docs/algorithms.md section 4b; Medusa, Cai et al. 2024, section 2.3.3;
SpecInfer, Miao et al. 2024; EAGLE-2, arXiv 2406.16858).

A tree of N draft nodes hangs under the root, the last committed token (the pending one). Node j
is named by its *path of candidate ranks*: ``(0,)`` is the drafter's top-1 candidate for the first
position, ``(1,)`` its top-2, ``(0, 2)`` the top-3 candidate for the second position under the
top-1 of the first, and so on. A parallel drafter (ParallelSpec, PaSS's look-ahead positions)
proposes the same candidates for a position whichever sibling was chosen above, so the rank path
is all a node needs. A chain of k drafts is the tree ``(0,), (0, 0), ...``: one child per node.

Node order: by depth, then by rank path, so every parent comes before its children, the siblings
of a node follow in rank order, and the nodes up to a depth are a prefix of the order.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import torch


@dataclass(frozen=True)
class TreeSpec:
    """The shape of a token tree.

    Attributes:
        paths: one tuple of candidate ranks (ints >= 0) per node, root excluded; canonicalised to
            the node order of the module docstring.

    Raises:
        ValueError: an empty path, a negative rank, a repeated node, or a node whose parent
            (its path without the last rank) is missing.
    """

    paths: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        paths = tuple(tuple(int(r) for r in p) for p in self.paths)
        if any(len(p) == 0 or min(p) < 0 for p in paths):
            raise ValueError(f"tree paths must be non-empty tuples of ranks >= 0, got {self.paths!r}")
        if len(set(paths)) != len(paths):
            raise ValueError(f"tree paths must not repeat a node, got {self.paths!r}")
        known = set(paths)
        for p in paths:
            if len(p) > 1 and p[:-1] not in known:
                raise ValueError(f"tree node {p} has no parent {p[:-1]} in the tree")
        object.__setattr__(self, "paths", tuple(sorted(paths, key=lambda p: (len(p), p))))

    # ------------------------------------------------------------------ structure
    @property
    def num_nodes(self) -> int:
        """N, the draft nodes (the root excluded)."""
        return len(self.paths)

    @cached_property
    def parents(self) -> tuple[int, ...]:
        """Parent index of each node; -1 = the root."""
        index = {p: i for i, p in enumerate(self.paths)}
        return tuple(index[p[:-1]] if len(p) > 1 else -1 for p in self.paths)

    @property
    def depths(self) -> tuple[int, ...]:
        """Depth of each node: 1 for a child of the root (the first draft position)."""
        return tuple(len(p) for p in self.paths)

    @property
    def ranks(self) -> tuple[int, ...]:
        """Candidate rank of each node at its own depth (0 = the drafter's top-1)."""
        return tuple(p[-1] for p in self.paths)

    @property
    def max_depth(self) -> int:
        """The deepest node's depth (0 for an empty tree): the draft positions the tree needs."""
        return max(self.depths, default=0)

    @property
    def max_rank(self) -> int:
        """The largest candidate rank used (-1 for an empty tree): top-(max_rank + 1) per position."""
        return max(self.ranks, default=-1)

    @property
    def is_chain(self) -> bool:
        """True when every node has at most one child and it is the top-1 candidate (a chain of drafts)."""
        return self.paths == chain(self.num_nodes).paths

    @cached_property
    def _children(self) -> dict[int, tuple[int, ...]]:
        kids: dict[int, list[int]] = {}
        for i, parent in enumerate(self.parents):
            kids.setdefault(parent, []).append(i)
        return {parent: tuple(c) for parent, c in kids.items()}

    def children(self, node: int) -> tuple[int, ...]:
        """Indices of ``node``'s children in rank order (``node`` = -1: the root's)."""
        return self._children.get(node, ())

    def path_to(self, node: int) -> list[int]:
        """Node indices from the root's child down to ``node`` (included)."""
        out = []
        while node >= 0:
            out.append(node)
            node = self.parents[node]
        return out[::-1]

    def leaf_paths(self) -> list[list[int]]:
        """Every root-to-leaf path as node indices, in node order of the leaves."""
        return [self.path_to(i) for i in range(self.num_nodes) if not self.children(i)]

    def count_within(self, max_depth: int) -> int:
        """Nodes of depth <= ``max_depth``: they are the first ones of the node order."""
        return sum(d <= max_depth for d in self.depths)

    def within(self, max_depth: int) -> "TreeSpec":
        """The tree cut below ``max_depth`` (same node order, the first ``count_within`` nodes)."""
        return TreeSpec(self.paths[: self.count_within(max_depth)])

    # ------------------------------------------------------------------ the verification pass
    def ancestors(self, device=None) -> torch.Tensor:
        """(N, N) bool: ``[j, a]`` is True when node a is node j or one of its ancestors."""
        n = self.num_nodes
        seen = torch.eye(n, dtype=torch.bool)
        for j, parent in enumerate(self.parents):
            if parent >= 0:
                seen[j] |= seen[parent]  # parents come first, so their rows are complete
        return seen.to(device)

    def attention_mask(self, n_cached: int, num_real: int, dtype: torch.dtype, device=None) -> torch.Tensor:
        """The additive 4-D mask of a verification pass over ``num_real`` real tokens (the uncached
        committed tokens, the root last) followed by the N nodes.

        Real tokens attend causally; each node attends to the cached prefix, every real token, its
        ancestors and itself.

        Returns:
            (1, 1, R + N, n_cached + R + N) float ``dtype`` mask: 0 = attend, dtype min = blocked.
        """
        r, n = num_real, self.num_nodes
        q_len = r + n
        allowed = torch.zeros((q_len, n_cached + q_len), dtype=torch.bool)
        allowed[:, :n_cached] = True
        real = torch.arange(r)
        allowed[:r, n_cached:n_cached + r] = real[:, None] >= real[None, :]
        allowed[r:, n_cached:n_cached + r] = True
        allowed[r:, n_cached + r:] = self.ancestors()
        mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
        return mask[None, None].to(device)

    def position_ids(self, n_cached: int, num_real: int, device=None) -> torch.Tensor:
        """(1, R + N) int64 positions: real token i at ``n_cached + i``; a node at the root's position
        plus its depth (siblings share a position)."""
        real = torch.arange(n_cached, n_cached + num_real)
        root = n_cached + num_real - 1
        nodes = torch.tensor([root + d for d in self.depths], dtype=torch.long)
        return torch.cat([real, nodes])[None].to(device)

    def candidates(self, logits: torch.Tensor) -> torch.Tensor:
        """The node tokens a parallel drafter proposes: node j is the rank-``ranks[j]`` candidate of the
        logits for its depth (deterministic top-i candidates; siblings are distinct tokens).

        Args:
            logits: (P, V) float drafter logits of draft positions 1..P, P >= ``max_depth``.

        Returns:
            (N,) int64 token ids in node order.
        """
        if self.num_nodes == 0:
            return torch.zeros(0, dtype=torch.long, device=logits.device)
        top = logits[: self.max_depth].topk(self.max_rank + 1, dim=-1).indices  # (depth, ranks)
        depth = torch.tensor(self.depths, device=logits.device) - 1
        return top[depth, torch.tensor(self.ranks, device=logits.device)]

    # ------------------------------------------------------------------ shapes
    def expected_tokens(self, acceptance: list[list[float]]) -> float:
        """E = 1 + sum over nodes of P(the node's path is accepted) under Medusa's independence model,
        P = product over the path of ``acceptance[depth - 1][rank]`` (0 beyond the table)."""
        return 1.0 + sum(_path_value(p, acceptance) for p in self.paths)

    def to_json(self) -> list[list[int]]:
        """The rank paths as plain lists (JSON)."""
        return [list(p) for p in self.paths]

    @classmethod
    def from_json(cls, data, where: str = "tree") -> "TreeSpec":
        """A tree from a list of rank lists (``to_json``), or a JSON string of one.

        Raises:
            ValueError: not a list of lists of ints, naming ``where``, or a bad shape.
        """
        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, list) or not all(isinstance(p, list) and all(isinstance(r, int) for r in p)
                                                 for p in data):
            raise ValueError(f"{where}: a tree is a list of lists of candidate ranks, got {data!r}")
        try:
            return cls(tuple(tuple(p) for p in data))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None


def chain(k: int) -> TreeSpec:
    """The chain of k drafts as a tree: one top-1 child per node."""
    if k < 0:
        raise ValueError(f"a chain needs k >= 0 drafts, got {k}")
    return TreeSpec(tuple((0,) * d for d in range(1, k + 1)))


def _path_value(path: tuple[int, ...], acceptance: list[list[float]]) -> float:
    value = 1.0
    for depth, rank in enumerate(path):
        row = acceptance[depth] if depth < len(acceptance) else []
        value *= row[rank] if rank < len(row) else 0.0
    return value


def best_tree(acceptance: list[list[float]], num_nodes: int,
              value: Callable[[tuple[int, ...]], float] | None = None) -> TreeSpec:
    """The static tree of ``num_nodes`` nodes with the largest expected tokens per step, grown greedily
    (Medusa's recipe, Cai et al. 2024, section 2.3.3): add, one at a time, the node whose path has the
    largest expected acceptance among the children of the nodes already in the tree.

    Args:
        acceptance: ``acceptance[d][i]`` = measured probability that the drafter's rank-i candidate
            for draft position d + 1 is the target's token, given that the path above it was accepted;
            one row per position the drafter gives, each a list of ranks.
        num_nodes: N >= 0.
        value: optional measured acceptance of a node's whole rank path (e.g. the share of held-out steps on
            which that path was right, no independence assumed); it must not grow along a path. The table
            then only says which ranks each position offers.

    Returns:
        A ``TreeSpec`` with min(N, available nodes) nodes (ties go to the smaller rank path).

    Raises:
        ValueError: a negative ``num_nodes`` or an acceptance value outside [0, 1].
    """
    if num_nodes < 0:
        raise ValueError(f"a tree needs num_nodes >= 0, got {num_nodes}")
    if any(not 0.0 <= float(a) <= 1.0 for row in acceptance for a in row):
        raise ValueError("acceptance rates must lie in [0, 1]")
    frontier: list[tuple[float, tuple[int, ...]]] = []

    def offer(parent: tuple[int, ...], parent_value: float) -> None:
        depth = len(parent)
        if depth < len(acceptance):
            for rank, a in enumerate(acceptance[depth]):
                path = parent + (rank,)
                heapq.heappush(frontier, (-(parent_value * float(a) if value is None else value(path)), path))

    offer((), 1.0)
    chosen: list[tuple[int, ...]] = []
    while frontier and len(chosen) < num_nodes:
        neg, path = heapq.heappop(frontier)
        chosen.append(path)
        offer(path, -neg)
    return TreeSpec(tuple(chosen))
