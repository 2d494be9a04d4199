"""The method registry: one record per decoding method, read by the app, the CLI, the benchmark
and the charts. Adding a method is one new entry in ``METHODS`` (and, for a new kind of drafter,
one ``Drafter`` class); no consumer names a method itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

from pass_core.decoding.autoregressive import generate_autoregressive
from pass_core.decoding.drafting import Drafter
from pass_core.decoding.events import StepEvent
from pass_core.drafters.lookahead.drafter import LookaheadDrafter
from pass_core.drafters.parallelspec.drafter import ParallelSpecDrafter
from pass_core.drafters.prompt_lookup import PromptLookupDrafter
from pass_core.drafters.draft_model.drafter import DraftModelDrafter
from pass_core.drafters.draft_model.models import resolve_draft_model
from pass_core.decoding.settings import MAX_TREE_NODES, TREE_AUTO, DecodeSettings
from pass_core.drafters.shipped import (SHIPPED_MAX_DRAFTS, SHIPPED_MAX_LOOKAHEAD, resolve_adapters, resolve_drafter,
                                        resolve_lookahead, shipped_adapters_path, shipped_drafter_path,
                                        shipped_lookahead_path, ships)
from pass_core.drafters.trees import choose_tree_size, shipped_tree
from pass_core.decoding.speculative import generate_speculative
from pass_core.runtime.pass_cost import usable_pass_cost
from pass_core.decoding.verification import verify_drafts

#: Okabe-Ito colour-blind-safe palette (Okabe & Ito 2008), for method lines and bars, and a dark grey for AR (its
#: tokens are grey). The default race's PaSS and ParallelSpec take blue and orange, colours no token label uses
#: (PaSS's line was green, the accepted drafts' colour, beside the panes).
_BLUE, _ORANGE, _PURPLE, _SKY = "#0072B2", "#E69F00", "#CC79A7", "#56B4E9"
_VERMILLION, _BLACK, _GREY = "#D55E00", "#000000", "#555555"

#: The speed-up baseline: every speed-up is measured against it in the same run.
BASELINE = "ar"


@dataclass(frozen=True)
class Method:
    """One decoding method and everything a consumer needs to offer it.

    Attributes:
        key: identifier used in events, JSON, the CLI (``--method``) and the API.
        label: the name shown to people (pane titles, checkboxes).
        short_name: the name in chart legends and metric lines.
        colour: hex colour of its lines and bars.
        description: one sentence for help texts.
        file_option: the CLI option naming its trained file or model ("lookahead", "adapters", "drafter",
            "draft_model") or None.
        fusable: the fused step (``DecodeSettings.fused``, an extension) applies to it.
        resolve: ``(loaded, num_drafts, path or None) -> (state, note)``: finds its files (an
            explicit path, the shipped file, or an untrained fallback) and says which in ``note``.
            None for a method that needs no file.
        drafter: ``(state, settings) -> Drafter`` for the speculative loop; None for plain AR.
        tree: it drafts token trees (``DecodeSettings.tree_nodes``, an extension, docs/algorithms.md
            section 4b) from the shipped shapes (``drafters.trees``).
        trained_for: ``model name -> bool``: a file trained for that model ships (where ``resolve`` looks first;
            without one it falls back to an untrained drafter that hardly drafts). None for a method that needs
            no trained file.
    """

    key: str
    label: str
    short_name: str
    colour: str
    description: str
    file_option: str | None = None
    fusable: bool = False
    resolve: Callable[[Any, int, str | None], tuple[Any, str]] | None = None
    drafter: Callable[[Any, DecodeSettings], Drafter] | None = None
    tree: bool = False
    trained_for: Callable[[str], bool] | None = None

    def find_files(self, loaded, num_drafts: int, path: str | None = None) -> tuple[Any, str]:
        """``resolve`` for this method, or (None, "") when it needs no file.

        Raises:
            ValueError: a missing or corrupt file, or one trained for another model.
        """
        return self.resolve(loaded, num_drafts, path) if self.resolve else (None, "")

    def decode(self, loaded, prompt: str, settings: DecodeSettings, state: Any = None, *,
               verify_fn=verify_drafts, inspect_fn=None) -> Iterator[StepEvent]:
        """A generator of ``StepEvent`` for one run of this method.

        Args:
            loaded: a ``LoadedModel``.
            prompt: the user's text.
            settings: validated ``DecodeSettings`` (``num_lookahead`` = drafts per step).
            state: what ``find_files`` returned; None resolves it here (shipped file or fallback).
            verify_fn / inspect_fn: test seams of ``generate_speculative`` (drafting methods only).

        Raises:
            ValueError: bad prompt, a file for another model, or a tree for a method without trees.
        """
        if self.drafter is None:
            return generate_autoregressive(loaded, prompt, settings)
        if settings.tree_nodes and not self.tree:
            raise ValueError(f"{self.label} does not draft token trees: use tree nodes 0 (a chain)")
        if settings.tree_nodes == TREE_AUTO:  # the shipped size this machine's pass cost favours
            curve = usable_pass_cost(loaded, "Tree sizes for this machine")
            settings = settings.with_(tree_nodes=choose_tree_size(self.key, curve))
        if state is None:
            state, _ = self.find_files(loaded, settings.num_lookahead)
        curve = usable_pass_cost(loaded) if settings.auto_drafts else None  # measured once per model; physical
        return generate_speculative(loaded, prompt, settings, self.drafter(state, settings), method=self.key,
                                    verify_fn=verify_fn, inspect_fn=inspect_fn, pass_cost=curve)


def _ships_lookahead(name: str) -> bool:
    return ships(shipped_lookahead_path, name, SHIPPED_MAX_LOOKAHEAD)


def _fixed_token(loaded, num_drafts: int, path: str | None = None):
    return resolve_lookahead(loaded, num_drafts, kind="fixed-token")


METHODS: dict[str, Method] = {m.key: m for m in (
    Method("ar", "Autoregressive (AR)", "AR", _GREY,
           "the target model alone, one forward pass per token"),
    Method("pass", "PaSS", "PaSS", _BLUE,
           "the target drafts for itself with L learned look-ahead embeddings (Monea et al. 2023)",
           file_option="lookahead", fusable=True, resolve=resolve_lookahead, tree=True, trained_for=_ships_lookahead,
           drafter=lambda la, s: LookaheadDrafter(la, fused=s.fused, tree=shipped_tree("pass", s.tree_nodes))),
    Method("fixed-token", "PaSS, fixed-token baseline", "fixed-token", _PURPLE,
           "PaSS with an existing, untrained token in every look-ahead slot (the paper's baseline)",
           fusable=True, resolve=_fixed_token, drafter=lambda la, s: LookaheadDrafter(la, fused=s.fused)),
    Method("pass-lora", "PaSS + look-ahead adapters", "PaSS+adapters", _SKY,
           "extension: PaSS with low-rank adapters that act only at the look-ahead positions, so every real "
           "position still computes exactly the frozen model's p (one model, lossless)",
           file_option="adapters", fusable=True, resolve=resolve_adapters, tree=True,
           trained_for=lambda name: ships(shipped_adapters_path, name, SHIPPED_MAX_LOOKAHEAD),
           drafter=lambda la, s: LookaheadDrafter(la, fused=s.fused, tree=shipped_tree("pass-lora", s.tree_nodes))),
    Method("parallelspec", "ParallelSpec (parallel drafter)", "ParallelSpec", _ORANGE,
           "a one-layer parallel drafter proposes k drafts in one pass from k − 1 [MASK] tokens (Xiao et al. 2024)",
           file_option="drafter", resolve=resolve_drafter, tree=True,
           trained_for=lambda name: ships(shipped_drafter_path, name, SHIPPED_MAX_DRAFTS),
           drafter=lambda d, s: ParallelSpecDrafter(d, tree=shipped_tree("parallelspec", s.tree_nodes))),
    Method("prompt-lookup", "Prompt lookup (copies from the context)", "prompt lookup", _VERMILLION,
           "drafts the tokens that followed the last n-gram's earlier occurrence in the prompt and the output; "
           "no file, any model (Saxena 2023; transformers' prompt_lookup_num_tokens)",
           drafter=lambda _, s: PromptLookupDrafter()),
    Method("draft-model", "Draft model (classic speculative sampling)", "draft model", _BLACK,
           "a smaller model with the target's vocabulary drafts k tokens one at a time (Leviathan et al. 2022, "
           "Chen et al. 2023); offline default: a cheaper copy of the target",
           file_option="draft_model", resolve=resolve_draft_model, drafter=lambda d, s: DraftModelDrafter(d)),
)}


def get_method(key: str) -> Method:
    """The registered method ``key``.

    Raises:
        ValueError: an unknown key, naming the registered ones.
    """
    try:
        return METHODS[key]
    except KeyError:
        raise ValueError(f"Unknown method {key!r}: choose one of {', '.join(METHODS)}.") from None


def fusable_keys() -> list[str]:
    """The registered methods the fused step applies to (``Method.fusable``), in registry order."""
    return [key for key, method in METHODS.items() if method.fusable]


def offered_methods(model_name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the methods worth racing on ``model_name``, the ones left out), each in registry order: a method that
    needs a trained file (``Method.trained_for``) is left out unless one ships for this model, since its untrained
    fallback would race a drafter that hardly drafts. Checks files only; loads nothing."""
    left_out = tuple(key for key, m in METHODS.items() if m.trained_for is not None and not m.trained_for(model_name))
    return tuple(key for key in METHODS if key not in left_out), left_out


def tree_entry(key: str, nodes: int) -> str:
    """A race's name for method ``key`` drafting a token tree of ``nodes`` nodes beside its chain (the benchmark's
    variant name): ``tree_entry("parallelspec", 8)`` is "parallelspec+tree8". ``tree_entry_nodes`` reads it back."""
    return f"{key}+tree{nodes}"


def tree_entry_nodes(name: str) -> int | None:
    """N of a token-tree entry "METHOD+treeN" (``tree_entry``): METHOD a registered tree-capable method, N from 1 to
    ``MAX_TREE_NODES`` in ASCII digits without a leading 0 (``"²".isdigit()`` is true, and int("²") raises); None
    for any other name (a method's own key, "pass+banana", "ar+tree8", "pass+tree0")."""
    base, plus, variant = name.partition("+")
    nodes = variant[4:] if variant.startswith("tree") else ""
    if plus and base in METHODS and METHODS[base].tree and nodes.isascii() and nodes.isdigit() and nodes[0] != "0":
        return int(nodes) if int(nodes) <= MAX_TREE_NODES else None
    return None
