"""The ParallelSpec drafter (Xiao et al. 2024, arXiv 2410.05589; docs/algorithms.md section 5).

One transformer decoder layer, EAGLE style: at position t it reads the target's last
hidden state h_t (after the final norm: the vector the output head reads) fused with the
embedding of the token that followed, ``fc(concat(embed(x_{t+1}), h_t, embed(x_t))) -> D``
(the x_t part is *our choice*, see ``ParallelDrafter``). It shares the target's frozen input
embeddings and output head. ``num_draft - 1`` learned [MASK] vectors sit after the last real
position, so one drafter pass gives k drafts: d_1 from the last real position (EAGLE's own
next-token prediction) and d_2..d_k from the masks *(our choice: the real position already
predicts one token, so k drafts need k - 1 masks)*. Mask i never sees later masks, so a
drafter trained for k drafts gives any k' <= k exactly as trained.

Optional *extensions*, not in the paper: a draft vocabulary (FR-Spec / EAGLE-3 style: a
subset of the target's output rows; drafts come only from it, q is 0 elsewhere, which makes
the drafter's head several times cheaper; verification stays lossless for any q) and
intermediate target layers as extra features (EAGLE-3).

Files are safetensors (float16 weights) with metadata naming the model, checked with
``drafters.files.embedding_signature`` so that a drafter for another model is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from transformers import DynamicCache, LlamaConfig
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

from pass_core.drafters.files import (check_trained_for, embedding_signature, read_model_file, signature_fingerprint,
                                       write_model_file)
from pass_core.drafters.files import PARALLELSPEC_FORMAT as FORMAT
from pass_core.drafters.parallelspec.layout import causal_mask, final_norm, read_features

_CONFIG_FIELDS = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                  "rms_norm_eps", "rope_parameters", "hidden_act", "max_position_embeddings")


def drafter_config(target_config) -> LlamaConfig:
    """A one-layer ``LlamaConfig`` as wide as the target (D, heads, rotary settings copied)."""
    fields = {f: getattr(target_config, f) for f in _CONFIG_FIELDS if getattr(target_config, f, None) is not None}
    return _config_from_fields(fields, int(target_config.vocab_size))


def _config_from_fields(fields: dict, vocab_size: int) -> LlamaConfig:
    cfg = LlamaConfig(**fields, num_hidden_layers=1, vocab_size=vocab_size, attention_bias=False, mlp_bias=False,
                      tie_word_embeddings=False)
    cfg._attn_implementation = "sdpa"
    return cfg


@dataclass
class TargetParts:
    """The frozen pieces of the target that the drafter reuses.

    Attributes:
        embed: the input embedding module, ids -> (..., D).
        norm: the target's final norm (identity when the model has none).
        head_weight: (Vd, D) output-head rows of the draft vocabulary (all V rows without one).
        head_bias: (Vd,) or None.
        vocab_size: V of the target.
        head: the same (Vd, D) head as a packed oneDNN layer (the ``onednn`` backend), or None.
    """

    embed: nn.Module
    norm: nn.Module
    head_weight: torch.Tensor
    head_bias: torch.Tensor | None
    vocab_size: int
    head: nn.Module | None = None


class ParallelDrafter(nn.Module):
    """fc + one decoder layer + [MASK] vectors; the target's embeddings / norm / head are borrowed.

    Attributes:
        num_draft: k, drafts per drafting pass (k - 1 masks).
        model_name, signature, vocab_size: the target it was trained for.
        info: free-form training record.
        draft_vocab: (Vd,) int64 buffer of target token ids the drafter may propose, or None (all V).
        prev_token: also fuse the embedding of x_t, ``fc(concat(embed(x_{t+1}), h_t, embed(x_t)))``
            *(our choice, an extension)*: with the previous token in each position one attention
            layer can copy from earlier context (an induction head needs the previous token;
            measured: slightly better held-out agreement in a short run).
        feature_layers: which of the target's hidden states the drafter reads (indices into
            ``output_hidden_states``; -1 = the last, after the final norm). More than one is the
            EAGLE-3 *extension* (Li et al. 2025): intermediate layers, RMS-normalised, concatenated.
        final_norm: pass the output through the target's final norm before the head. Off by
            default *(measured: with it, a random init gives very peaked logits and trains slower;
            EAGLE applies the head to the layer output directly)*.
    """

    def __init__(self, config: LlamaConfig, num_draft: int, model_name: str, signature: list[float],
                 vocab_size: int, draft_vocab: torch.Tensor | None = None, info: dict | None = None,
                 prev_token: bool = True, final_norm: bool = False, feature_layers: tuple[int, ...] = (-1,)):
        super().__init__()
        if num_draft < 1:
            raise ValueError(f"A ParallelSpec drafter needs at least 1 draft per pass, got {num_draft}.")
        d = config.hidden_size
        self.config = config
        self.num_draft = int(num_draft)
        self.model_name, self.signature, self.vocab_size = model_name, list(signature), int(vocab_size)
        self.info = dict(info or {})
        self.prev_token, self.final_norm = bool(prev_token), bool(final_norm)
        self.feature_layers = tuple(int(i) for i in feature_layers)
        self.fc = nn.Linear((len(self.feature_layers) + (2 if prev_token else 1)) * d, d, bias=True)
        self.layer = LlamaDecoderLayer(config, layer_idx=0)
        self.rotary = LlamaRotaryEmbedding(config)
        self.masks = nn.Parameter(0.02 * torch.randn(num_draft - 1, d))  # (k-1, D)
        self.register_buffer("draft_vocab", None if draft_vocab is None else draft_vocab.long().clone())

    # ------------------------------------------------------------------ creation
    @classmethod
    def initialise(cls, loaded, num_draft: int, draft_vocab: torch.Tensor | None = None, seed: int = 0,
                   info: dict | None = None, **arch) -> "ParallelDrafter":
        """An untrained drafter for ``loaded`` (float32 on the CPU; ``to`` moves it).

        ``arch``: ``prev_token`` / ``final_norm`` / ``feature_layers`` (see the class docstring).
        """
        table = loaded.model.get_input_embeddings().weight
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            drafter = cls(drafter_config(loaded.model.config), num_draft, loaded.name, embedding_signature(table),
                          loaded.vocab_size, draft_vocab, {"kind": "untrained", **(info or {})}, **arch)
        return drafter

    def read_features(self, hidden_states) -> torch.Tensor:
        """The drafter's input features from the target's ``hidden_states`` tuple (``read_features``)."""
        return read_features(hidden_states, self.feature_layers)

    @property
    def num_masks(self) -> int:
        """k - 1 learned [MASK] vectors."""
        return self.num_draft - 1

    @property
    def kind(self) -> str:
        return self.info.get("kind", "trained")

    def describe(self) -> str:
        """One line for the UI / CLI."""
        vocab = f", draft vocabulary {len(self.draft_vocab)}" if self.draft_vocab is not None else ""
        return f"{self.kind} ParallelSpec drafter, k={self.num_draft}{vocab}"

    def new_cache(self) -> DynamicCache:
        """An empty one-layer KV cache for the drafter."""
        return DynamicCache(config=self.config)

    def target_parts(self, loaded) -> TargetParts:
        """The target's frozen embeddings, final norm and (draft-vocabulary rows of the) output head."""
        head = loaded.model.get_output_embeddings()
        weight, bias = head.weight, getattr(head, "bias", None)
        if self.draft_vocab is not None:
            idx = self.draft_vocab.to(weight.device)
            weight, bias = weight[idx].contiguous(), None if bias is None else bias[idx]
        return TargetParts(embed=loaded.model.get_input_embeddings(), norm=final_norm(loaded.model),
                           head_weight=weight, head_bias=bias, vocab_size=loaded.vocab_size)

    # ------------------------------------------------------------------ forward
    def forward(self, parts: TargetParts, token_ids: torch.Tensor, prev_ids: torch.Tensor, hidden: torch.Tensor,
                mask_ids: torch.Tensor, position_ids: torch.Tensor, attention_mask: torch.Tensor,
                cache: DynamicCache | None = None) -> torch.Tensor:
        """Drafter features for real positions followed by mask slots.

        Args:
            parts: from ``target_parts``.
            token_ids: (B, R) int64, x_{t+1} for each real position t.
            prev_ids: (B, R) int64, x_t (read only with ``prev_token``).
            hidden: (B, R, F * D) the target's features h_t (``read_features``).
            mask_ids: (M',) int64 in 0..k-2, the mask vector of each mask slot (same for every row).
            position_ids: (B, R + M') int64.
            attention_mask: (B, 1, R + M', KV) additive float mask (KV counts the cache).
            cache: the drafter's KV cache, extended in place when given.

        Returns:
            (B, R + M', D) outputs of the drafter layer (after the target's final norm with ``final_norm``).
        """
        pieces = [parts.embed(token_ids).to(hidden.dtype), hidden]
        if self.prev_token:
            pieces.append(parts.embed(prev_ids).to(hidden.dtype))
        x = self.fc(torch.cat(pieces, -1))  # (B, R, D)
        if mask_ids.numel():
            x = torch.cat([x, self.masks[mask_ids][None].expand(x.shape[0], -1, -1).to(x.dtype)], 1)  # (B, R+M', D)
        pos = self.rotary(x, position_ids=position_ids)
        y = self.layer(x, attention_mask=attention_mask, position_ids=position_ids, cache=cache,
                       use_cache=cache is not None, position_embeddings=pos)
        return parts.norm(y) if self.final_norm else y

    def logits(self, parts: TargetParts, features: torch.Tensor) -> torch.Tensor:
        """(..., D) features -> (..., Vd) logits over the draft vocabulary."""
        return nn.functional.linear(features, parts.head_weight.to(features.dtype), parts.head_bias)

    @staticmethod
    def _few_row_logits(parts: TargetParts, features: torch.Tensor) -> torch.Tensor:
        """(R, D) -> (R, Vd) for a handful of rows on CPU: ``W @ x^T`` runs about twice as fast as
        ``linear`` for 2-8 rows on CPU BLAS (measured; same result up to rounding). CPU only."""
        out = (parts.head_weight @ features.to(parts.head_weight.dtype).T).T
        return out if parts.head_bias is None else out + parts.head_bias

    def full_logits(self, sub_logits: torch.Tensor, vocab_size: int) -> torch.Tensor:
        """(..., Vd) draft-vocabulary logits -> (..., V) with -inf outside the draft vocabulary."""
        if self.draft_vocab is None:
            return sub_logits
        full = sub_logits.new_full((*sub_logits.shape[:-1], vocab_size), float("-inf"))
        return full.index_copy(-1, self.draft_vocab.to(sub_logits.device), sub_logits)

    def draft(self, parts: TargetParts, context: list[int], hidden: torch.Tensor, num_draft: int,
              cache: DynamicCache) -> torch.Tensor:
        """One drafting pass: new real positions + ``num_draft - 1`` masks; the masks leave the cache again.

        Args:
            context: the committed token ids x_0..x_{n-1} (prompt and output).
            hidden: (1, R, F·D) float ``read_features`` of the R >= 1 real positions t not in ``cache`` (with x_{t+1}).
            num_draft: drafts wanted (1..k).
            cache: the drafter cache; holds real positions only, before and after.

        Returns:
            (num_draft, V) logits for d_1..d_num_draft in the drafter's dtype (-inf outside the draft vocabulary).

        Raises:
            ValueError: ``num_draft`` outside 1..k, or too few context tokens for the new positions (a caller's bug).
        """
        n, r, m = int(cache.get_seq_length()), int(hidden.shape[1]), num_draft - 1
        if not 1 <= num_draft <= self.num_draft or n + r >= len(context):
            raise ValueError(f"{num_draft} drafts (the drafter gives 1..{self.num_draft}) for {r} new positions after "
                             f"{n} cached need {n + r + 1} context tokens; got {len(context)}")
        ids, prev = (torch.tensor([context[n + a:n + a + r]], device=hidden.device) for a in (1, 0))  # (1, R) each
        positions = torch.arange(n, n + r + m, device=hidden.device)[None]  # (1, R+M)
        mask = causal_mask(n, r + m, hidden.dtype, hidden.device)
        feats = self(parts, ids, prev, hidden, torch.arange(m, device=hidden.device), positions, mask, cache)
        if m:
            cache.crop(-m)  # mask entries never survive
        rows = feats[0, r - 1:]  # (k', D): the last real position, then the masks
        if parts.head is not None:
            logits = parts.head(rows)  # (k', Vd), the onednn backend's packed head
        else:
            logits = self._few_row_logits(parts, rows) if rows.device.type == "cpu" else self.logits(parts, rows)
        return self.full_logits(logits, parts.vocab_size)  # (k', V)

    # ------------------------------------------------------------------ files
    def save(self, path: str | Path) -> Path:
        """Write float16 safetensors with metadata and checksum; returns the path.

        Raises:
            ValueError: a tensor holds NaN or inf once in float16 (``files.write_model_file``): nothing is written.
        """
        tensors = {name: t.detach().to("cpu", torch.float16).contiguous() for name, t in self.state_dict().items()
                   if name != "draft_vocab"}
        if self.draft_vocab is not None:
            tensors["draft_vocab"] = self.draft_vocab.cpu().contiguous()
        fields = {f: getattr(self.config, f) for f in _CONFIG_FIELDS if getattr(self.config, f, None) is not None}
        meta = {"format": FORMAT, "model_name": self.model_name, "vocab_size": str(self.vocab_size),
                "num_draft": str(self.num_draft), "config": json.dumps(fields), "signature": json.dumps(self.signature),
                "fingerprint": signature_fingerprint(self.signature), "info": json.dumps(self.info),
                "arch": json.dumps({"prev_token": self.prev_token, "final_norm": self.final_norm,
                                    "feature_layers": list(self.feature_layers)})}
        return write_model_file(path, tensors, meta, "ParallelSpec drafter file")

    @classmethod
    def load(cls, path: str | Path, loaded=None) -> "ParallelDrafter":
        """Read a file written by ``save`` (float32 weights); check it against ``loaded`` when given.

        Raises:
            ValueError: missing, corrupt or foreign file, or a drafter trained for another
                model (the message names both models).
        """
        meta, tensors = read_model_file(path, "ParallelSpec drafter file", FORMAT)
        try:
            vocab_size = int(meta["vocab_size"])
            vocab = tensors.pop("draft_vocab", None)
            drafter = cls(_config_from_fields(json.loads(meta["config"]), vocab_size), int(meta["num_draft"]),
                          meta["model_name"], json.loads(meta["signature"]), vocab_size, vocab,
                          json.loads(meta.get("info", "{}")), **json.loads(meta.get("arch", "{}")))
            state = {k: v.float() for k, v in tensors.items()}
            if vocab is not None:
                state["draft_vocab"] = vocab
            drafter.load_state_dict(state, strict=True)
        except (KeyError, ValueError, RuntimeError) as err:
            raise ValueError(f"{str(path)!r} has damaged metadata or weights ({err}).") from err
        if loaded is not None:
            drafter.check_compatible(loaded, path)
        return drafter

    def check_compatible(self, loaded, path: str | Path = "the ParallelSpec drafter") -> None:
        """Refuse a drafter trained for another model.

        Raises:
            ValueError: naming the drafter's model and the loaded model.
        """
        check_trained_for(loaded, path, self.model_name, self.config.hidden_size, self.vocab_size, self.signature,
                          f"Train a drafter for this model with python -m pass_core.train_drafter --model {loaded.name} "
                          f"--num-draft {self.num_draft} --out FILE")

    def for_model(self, loaded) -> "ParallelDrafter":
        """Move to the target's device and dtype (in place), eval mode, gradients off; returns self."""
        self.check_compatible(loaded)
        return self.to(device=loaded.device, dtype=loaded.dtype).eval().requires_grad_(False)
