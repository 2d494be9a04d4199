"""The command line of ``python -m pass_core.bench`` (``pass_core.bench.run.main`` runs it)."""

from __future__ import annotations

import argparse

from pass_core.bench.copies import split_backend
from pass_core.bench.peers import PEERS
from pass_core.decoding.settings import TREE_AUTO, DecodeSettings
from pass_core.registry import BASELINE, METHODS, fusable_keys
from pass_core.runtime.backends import AUTO, BACKEND_CHOICES, BACKENDS
from pass_core.runtime.models import DEFAULT_MODEL
from pass_core.runtime.outputs import file_name

#: Suffixes of a method name in ``--methods`` that change its settings for that entry only.
VARIANTS = {"fused": {"fused": True}, "auto": {"auto_drafts": True},
            # token trees (extension): the shipped shape of N nodes, or the size chosen for this machine
            **{f"tree{n}": {"tree_nodes": n} for n in (4, 8, 16)}, "tree": {"tree_nodes": TREE_AUTO}}


DESCRIPTION = "Benchmark: ``python -m pass_core.bench`` runs the decoding methods over a prompt suite."


def split_variant(name: str) -> tuple[str, dict]:
    """A ``--methods`` entry -> (registered key, settings changes): "parallelspec+auto" ->
    ("parallelspec", {"auto_drafts": True}); "pass+fused+auto" adds both (extensions, docs/algorithms.md
    section 4); a backend suffix ("@fp32") is allowed and ignored here (``split_backend``).

    Raises:
        ValueError: an unknown method, suffix or backend, a suffix or tree size given twice, a misplaced +fused.
    """
    key, *suffixes = split_backend(name)[0].split("+")
    if len(set(suffixes)) < len(suffixes) or sum(s.startswith("tree") for s in suffixes) > 1:  # "+tree4+tree16": 16
        raise ValueError(f"{name!r} names a variant twice: give each of {', '.join('+' + v for v in VARIANTS)} once.")
    if key not in METHODS:
        raise ValueError(f"Unknown method {key!r}: choose from {', '.join(METHODS)}.")
    changes = {}
    for suffix in suffixes:
        if suffix not in VARIANTS or key == BASELINE:
            raise ValueError(f"Unknown variant {name!r}: a drafting method may take "
                             f"{', '.join('+' + v for v in VARIANTS)}.")
        if suffix == "fused" and not METHODS[key].fusable:
            raise ValueError(f"{name!r}: the fused step applies to {', '.join(fusable_keys())} only.")
        if suffix.startswith("tree") and not METHODS[key].tree:
            raise ValueError(f"{name!r}: token trees apply to "
                             f"{', '.join(k for k, m in METHODS.items() if m.tree)} only.")
        changes.update(VARIANTS[suffix])
    try:  # a combination the settings refuse (+fused+tree8) fails here, before any run, naming the entry
        DecodeSettings(**changes)
    except ValueError as err:
        raise ValueError(f"--methods entry {name!r}: {err}") from None
    return key, changes


def check_methods(methods: list[str], fused: bool) -> str | None:
    """Check every ``--methods`` entry (``split_variant``); returns a note when ``--fused`` (``fused``) applies to
    none of them (it changed nothing, unsaid), else None.

    Raises:
        ValueError: an entry ``split_variant`` refuses, or a token-tree entry of a method ``--fused`` applies to.
    """
    keys = [split_variant(m)[0] for m in methods if m not in PEERS]
    fusable = fusable_keys()
    for m in methods if fused else ():  # its tree entries were skipped after the model had loaded
        key, variant = (None, {}) if m in PEERS else split_variant(m)
        if key in fusable and variant.get("tree_nodes"):
            raise ValueError(f"--methods entry {m!r} with --fused: a token tree cannot be combined with the fused "
                             "step. Run the tree entries without --fused.")
    if fused and not set(keys) & set(fusable):
        return (f"note: --fused applies to {', '.join(fusable)} only, and --methods names none of them: "
                "it changes nothing.")
    return None


def csv_values(text: str, kind, name: str) -> list:
    """The distinct values of a comma-separated option, in order, each converted by ``kind``.

    Raises:
        ValueError: a value ``kind`` refuses, or no value (naming the option ``name``).
    """
    try:
        values = [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{name} must be a comma-separated list of numbers, got {text!r}.") from None
    if not values:
        raise ValueError(f"{name} needs at least one value.")
    return list(dict.fromkeys(values))


def build_parser() -> argparse.ArgumentParser:
    """The CLI of ``python -m pass_core.bench``."""
    p = argparse.ArgumentParser(prog="python -m pass_core.bench", description=DESCRIPTION)
    p.add_argument("--suite", default="quick", type=file_name, help="quick (16 prompts), full (70), a .jsonl file of "
                   '{"category": ..., "prompt": ...} lines, or none (with --pass-cost) (default: quick)')
    p.add_argument("--methods", default="ar,pass", help=f"comma-separated, from {', '.join(METHODS)}, each with "
                   "optional variants +fused, +auto (cost-aware draft lengths), +tree4/8/16 or +tree (token trees) and a backend @fp32, @onednn or @bf16 "
                   "(one loaded copy per backend), e.g. parallelspec+auto, ar@fp32; ar on the run's backend is always "
                   "run; every speed-up is also given against the fastest AR of the run (default: ar,pass)")
    p.add_argument("--baselines", default="", help="real peers run on the same model, prompts and settings: "
                   f"{', '.join(PEERS)} (transformers' generate() and its prompt lookup; default: none)")
    p.add_argument("--num-lookahead", default="3", help="look-ahead counts L, comma-separated (default: 3)")
    p.add_argument("--temperature", default="0", help="temperatures, comma-separated; 0 = greedy (default: 0)")
    p.add_argument("--top-k", type=int, default=10, help="top-k when sampling, 0 = off (default: 10, the paper's)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus top-p when sampling (default: 1.0 = off)")
    p.add_argument("--max-new-tokens", type=int, default=48, help="tokens per run (default: 48)")
    p.add_argument("--repeats", type=int, default=1, help="runs per prompt and method (default: 1)")
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"model name, folder or .gguf (default: {DEFAULT_MODEL})")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or mps (default: auto)")
    p.add_argument("--dtype", default="auto",
                   help="auto (float32 on the default backend), float32, bfloat16 or float16 (plain eager PyTorch; "
                        "default: auto)")
    p.add_argument("--backend", choices=list(BACKEND_CHOICES), help="how the passes of every entry without "
                   "@backend are computed (AR too): "
                   + "; ".join(f"{b.name}: {b.description}" for b in (AUTO, *BACKENDS.values()))
                   + " (sets --dtype; default: auto on a CPU, else fp32, unless --dtype is given)")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: with --backend auto the count it "
                                               "measured fastest, 1 or all cores, else torch's choice)")
    p.add_argument("--seed", type=int, default=0, help="seed of repeat 0; repeat r uses seed + r (default: 0)")
    p.add_argument("--fused", action="store_true", help="PaSS methods use the fused step (an extension)")
    p.add_argument("--limit", type=int, help="only the first N prompts (smoke runs)")
    p.add_argument("--json", metavar="OUT", type=file_name, help="write the full report as JSON")
    # moved to the UI package: a clear error, with or without a file name ("expected one argument" said nothing)
    p.add_argument("--html", metavar="OUT", nargs="?", const="(no file)", help=argparse.SUPPRESS)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--busy-core", action="store_true",
                   help="run the suite while another process spins on one core (how a setting holds up when the "
                        "app's server, a browser or a second visitor takes a core); after the model is loaded")
    p.add_argument("--pass-cost", action="store_true",
                   help="also measure the pass-cost curve c(w), w = 1..16 (time of a w-token pass / a 1-token "
                        "pass, cache of 200 tokens); with --suite none only the curve is measured")
    return p
