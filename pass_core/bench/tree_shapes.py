"""Measure each drafter's top-i agreement per draft position on held-out prompts, and grow the shipped
token-tree shapes from it (an extension, docs/algorithms.md section 4b; Medusa's recipe).

    python -m pass_core.bench.tree_shapes --out assets/trees/shapes.json

Each method decodes every prompt greedily with a *comb* tree (its top-R candidates at every position under
the top-1 path), which is lossless, so the output is the target's own greedy continuation. At every step that
drafted, the candidates c_d[r] of position d are recorded and compared with the committed continuation:
``match[d]`` = the rank r with c_d[r] equal to the target's token, if any. A tree's node (r_1..r_d) is
accepted on a record when match[e] = r_e for every e <= d, so the expected tokens per verification step of a
tree are 1 + (its nodes' empirical acceptance), and the shape of N nodes adds, one at a time, the node with
the largest empirical acceptance whose parent is in the tree.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import torch

from pass_core.bench.suites import load_suite
from pass_core.decoding.drafting import Drafter
from pass_core.decoding.events import output_token_ids
from pass_core.decoding.settings import DecodeSettings
from pass_core.decoding.speculative import generate_speculative
from pass_core.decoding.text import encode_prompt
from pass_core.decoding.tree import TreeSpec, best_tree
from pass_core.drafters.trees import shapes_path
from pass_core.registry import METHODS
from pass_core.runtime.models import DEFAULT_MODEL, load_model

SIZES = (4, 8, 16)


def comb(positions: int, ranks: int) -> TreeSpec:
    """The top-``ranks`` candidates of every position 1..``positions`` under the top-1 path."""
    return TreeSpec(tuple((0,) * (d - 1) + (r,) for d in range(1, positions + 1) for r in range(ranks)))


class CandidateRecorder(Drafter):
    """Wraps a tree drafter (its shape a ``comb``) and records, per drafting step, the index of the first
    draft in prompt + output and the candidates {(depth, rank): token}."""

    def __init__(self, inner: Drafter):
        self.inner, self.records = inner, []

    @property
    def reads_hidden_states(self):
        return self.inner.reads_hidden_states

    def start(self, run):
        super().start(run)
        self.inner.start(run)

    def propose(self, uncached, committed, max_drafts):
        prop = self.inner.propose(uncached, committed, max_drafts)
        if prop.tree is not None and len(prop.drafts):
            first = len(committed) + (prop.exact is not None)
            self.records.append((first, {(len(p), p[-1]): int(t) for p, t in zip(prop.tree.paths, prop.drafts)}))
        return prop

    def extension(self, n_cached, num_real, k):
        return self.inner.extension(n_cached, num_real, k)

    def accepted(self, m, out, extra_rows, num_new):
        self.inner.accepted(m, out, extra_rows, num_new)

    def step_cost(self):
        return self.inner.step_cost()


def matches(loaded, method: str, prompts: list[str], settings: DecodeSettings,
            ranks: int) -> tuple[list[list[int | None]], dict]:
    """Per drafting step with the whole window inside the output: the matching rank per position (None: none of
    the top-``ranks`` candidates was the target's token); and the drafter's numeric and yes/no ``step_cost``
    entries (PaSS: its drafting pass; ParallelSpec: ``drafter_pass``, its separate drafter's pass)."""
    state, _ = METHODS[method].find_files(loaded, settings.num_lookahead)
    drafter = METHODS[method].drafter(state, settings)
    positions = settings.num_lookahead
    drafter.shape = comb(positions, ranks)  # replaces the shape the settings gave (a chain)
    out = []
    for prompt in prompts:
        recorder = CandidateRecorder(drafter)
        events = list(generate_speculative(loaded, prompt, settings, recorder, method=method))
        full = encode_prompt(loaded.tokenizer, prompt, settings.chat_template) + output_token_ids(events)
        for first, cand in recorder.records:
            depth = max(d for d, _ in cand)
            if first + depth > len(full):
                continue  # the output ended inside the window: no truth for the last positions
            out.append([next((r for r in range(ranks) if cand.get((d, r)) == full[first + d - 1]), None)
                        for d in range(1, depth + 1)])
    cost = {k: v(positions) if callable(v) else v for k, v in drafter.step_cost().items()  # a width at L drafts;
            if callable(v) or isinstance(v, (int, float))}  # bools too: drafter_pass
    return out, cost


def shapes_for(rows: list[list[int | None]], ranks: int, sizes=SIZES) -> dict:
    """Agreement tables, trees and their expected tokens from ``matches`` rows."""
    n = len(rows)
    depth = max((len(r) for r in rows), default=0)
    agreement = [[sum(len(r) > d and r[d] == i for r in rows) / n for i in range(ranks)] for d in range(depth)]
    conditional = []
    for d in range(depth):
        reached = [r for r in rows if len(r) > d and all(x is not None for x in r[:d])]
        conditional.append([sum(r[d] == i for r in reached) / len(reached) if reached else 0.0 for i in range(ranks)])

    def value(path: tuple[int, ...]) -> float:
        return sum(len(r) >= len(path) and tuple(r[:len(path)]) == path for r in rows) / n

    trees, expected = {}, {}
    for size in sizes:
        tree = best_tree(conditional, size, value=value)
        trees[str(size)] = tree.to_json()
        expected[str(size)] = round(1 + sum(value(p) for p in tree.paths), 4)
    expected["chain"] = round(1 + sum(value((0,) * d) for d in range(1, depth + 1)), 4)
    return {"records": n, "agreement": [[round(a, 4) for a in row] for row in agreement],
            "conditional": [[round(a, 4) for a in row] for row in conditional],
            "trees": trees, "expected_tokens": expected}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pass_core.bench.tree_shapes", description=__doc__.split("\n\n")[0])
    p.add_argument("--methods", default=",".join(k for k, m in METHODS.items() if m.tree))
    p.add_argument("--prompts", default="assets/prompts/heldout_prompts.jsonl", help="a .jsonl suite (held out)")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--num-lookahead", type=int, default=3, help="draft positions (the bench's default L)")
    p.add_argument("--ranks", type=int, default=4, help="candidates per position measured (top-1..top-R)")
    p.add_argument("--stride", type=int, default=1, help="every n-th prompt (a spread over the categories)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--out", default=str(shapes_path()))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        prompts = [x.prompt for x in load_suite(args.prompts)][:: args.stride]
        loaded = load_model(args.model, device="cpu")
        settings = DecodeSettings(max_new_tokens=args.max_new_tokens, num_lookahead=args.num_lookahead)
        report = {"command": "python -m pass_core.bench.tree_shapes " + shlex.join(argv if argv is not None
                                                                                   else sys.argv[1:]),
                  "model": loaded.name, "prompts": args.prompts, "stride": args.stride, "num_prompts": len(prompts),
                  "max_new_tokens": args.max_new_tokens, "num_lookahead": args.num_lookahead, "methods": {}}
        for method in args.methods.split(","):
            if method not in METHODS or not METHODS[method].tree:
                raise ValueError(f"{method!r} does not draft token trees")
            rows, cost = matches(loaded, method, prompts, settings, args.ranks)
            report["methods"][method] = {**shapes_for(rows, args.ranks), "step_cost": cost}
            entry = report["methods"][method]
            print(f"{method}: {entry['records']} steps; top-i agreement per position {entry['agreement']}; "
                  f"expected tokens {entry['expected_tokens']}", file=sys.stderr)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
