"""PaSS look-ahead embeddings: L learned input vectors of size D (Monea et al. 2023, section 2.1).

Files are safetensors (never pickle) with metadata that names the model they were
trained for, so that loading them for another model is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from pass_core.drafters.lookahead.adapters import GatedLoRA
from pass_core.drafters.files import (ADAPTER_FORMAT, check_trained_for, embedding_signature,
                                       read_model_file, signature_fingerprint, write_model_file)
from pass_core.drafters.files import LOOKAHEAD_FORMAT as FORMAT


@dataclass
class LookaheadEmbeddings:
    """The L look-ahead vectors [LA]_1..[LA]_L for one model.

    Attributes:
        weight: (L * tokens_per_draft, D) float32 tensor; ``requires_grad`` when training.
        model_name: the model they were trained for.
        signature: ``embedding_signature`` of that model's input embeddings.
        vocab_size: V of that model.
        kind: "trained", "fixed-token" (the paper's baseline: an existing token's
            embedding, untrained), "mean" or "random" (untrained initialisations).
        tokens_per_draft: R, learned tokens per draft position (1 in the paper; R > 1 is
            the "registers" extension of docs/algorithms.md section 4). The draft for
            position i is read at block index i*R - 1.
        info: free-form training record (steps, data, loss, agreement ...).
        adapters: look-ahead adapters (``GatedLoRA``: low-rank adapters active at look-ahead positions
            only, an extension beyond the paper, method ``pass-lora``), or None (the paper's PaSS).
    """

    weight: torch.Tensor
    model_name: str
    signature: list[float]
    vocab_size: int
    kind: str = "trained"
    tokens_per_draft: int = 1
    info: dict = field(default_factory=dict)
    adapters: GatedLoRA | None = None

    @property
    def num_lookahead(self) -> int:
        """L, the number of drafts per step."""
        return int(self.weight.shape[0]) // self.tokens_per_draft

    @property
    def d_emb(self) -> int:
        """D, the embedding size."""
        return int(self.weight.shape[1])

    @property
    def block_len(self) -> int:
        """Learned tokens appended per drafting block (L * R)."""
        return int(self.weight.shape[0])

    def draft_indices(self) -> list[int]:
        """Block indices whose outputs give the drafts d_1..d_L."""
        r = self.tokens_per_draft
        return [i * r - 1 for i in range(1, self.num_lookahead + 1)]

    def describe(self) -> str:
        """One line for the UI / CLI."""
        extra = f", {self.tokens_per_draft} tokens per draft (extension)" if self.tokens_per_draft > 1 else ""
        if self.adapters is not None:
            extra += (f", with rank-{self.adapters.rank} look-ahead adapters ({self.adapters.num_parameters / 1e6:.2f} M "
                      "numbers, extension)")
        return f"{self.kind} look-ahead embeddings, L={self.num_lookahead}{extra}"

    def truncate(self, num_lookahead: int) -> "LookaheadEmbeddings":
        """The first L' look-ahead tokens as their own set.

        Exact, not an approximation: LA_i attends only to the prefix and LA_<i, so the
        first L' rows of a block behave identically in a block of length L'.

        Raises:
            ValueError: L' < 1 or more than this set holds.
        """
        if not 1 <= num_lookahead <= self.num_lookahead:
            raise ValueError(f"Cannot take {num_lookahead} look-ahead tokens from a set of {self.num_lookahead}.")
        if num_lookahead == self.num_lookahead:
            return self
        return LookaheadEmbeddings(weight=self.weight[: num_lookahead * self.tokens_per_draft].clone(),
                                   model_name=self.model_name, signature=self.signature, vocab_size=self.vocab_size,
                                   kind=self.kind, tokens_per_draft=self.tokens_per_draft,
                                   info={**self.info, "truncated_from": self.num_lookahead}, adapters=self.adapters)

    def for_model(self, loaded) -> torch.Tensor:
        """The weight on the model's device and dtype, (L*R, D)."""
        return self.weight.to(device=loaded.device, dtype=loaded.dtype)

    # ---------------------------------------------------------------- creation
    @classmethod
    def initialise(cls, loaded, num_lookahead: int, init: str = "mean", tokens_per_draft: int = 1,
                   token_id: int | None = None, generator: torch.Generator | None = None) -> "LookaheadEmbeddings":
        """Untrained look-ahead embeddings for ``loaded`` (a ``LoadedModel``).

        Args:
            num_lookahead: L >= 1.
            init: "fixed-token" (copy one vocabulary token's embedding into every slot:
                the paper's baseline), "mean" (the mean input embedding), "random"
                (normal noise with the embeddings' scale).
            token_id: the token for "fixed-token" (default: the tokenizer's pad, else
                unk, else EOS token).
            generator: the random generator for "mean" / "random" (default: one seeded with 0;
                never the global RNG).

        Raises:
            ValueError: L < 1 or an unknown init.
        """
        if num_lookahead < 1:
            raise ValueError(f"The number of look-ahead tokens L must be at least 1, got {num_lookahead}.")
        table = loaded.model.get_input_embeddings().weight.detach().float().cpu()  # (V, D)
        if generator is None:  # never the global RNG
            generator = torch.Generator().manual_seed(0)
        n = num_lookahead * tokens_per_draft
        if init == "fixed-token":
            tok = loaded.tokenizer
            if token_id is None:
                token_id = next(t for t in (tok.pad_token_id, tok.unk_token_id, tok.eos_token_id, 0) if t is not None)
            weight = table[int(token_id)].repeat(n, 1)
        elif init == "mean":
            weight = table.mean(0, keepdim=True).repeat(n, 1)
            weight = weight + 0.01 * table.std() * torch.randn(weight.shape, generator=generator)
        elif init == "random":
            weight = table.std() * torch.randn((n, table.shape[1]), generator=generator)
        else:
            raise ValueError(f"Unknown initialisation {init!r}: use fixed-token, mean or random.")
        return cls(weight=weight.contiguous(), model_name=loaded.name, signature=embedding_signature(table),
                   vocab_size=int(table.shape[0]),
                   kind="fixed-token" if init == "fixed-token" else f"untrained ({init})",
                   tokens_per_draft=tokens_per_draft,
                   info={"init": init, **({"token_id": int(token_id)} if init == "fixed-token" else {})})

    # ---------------------------------------------------------------- files
    def save(self, path: str | Path) -> Path:
        """Write a safetensors file with metadata and checksum (format ``ADAPTER_FORMAT`` when it has adapters);
        returns the path.

        Raises:
            ValueError: a tensor holds NaN or inf (``files.write_model_file``): nothing is written.
        """
        meta = {
            "format": ADAPTER_FORMAT if self.adapters is not None else FORMAT,
            "model_name": self.model_name,
            "d_emb": str(self.d_emb),
            "vocab_size": str(self.vocab_size),
            "num_lookahead": str(self.num_lookahead),
            "tokens_per_draft": str(self.tokens_per_draft),
            "kind": self.kind,
            "signature": json.dumps(self.signature),
            "fingerprint": signature_fingerprint(self.signature),
            "info": json.dumps(self.info),
        }
        tensors = {"lookahead": self.weight.detach().float().cpu().contiguous()}
        if self.adapters is not None:
            tensors.update(self.adapters.tensors())
            meta.update(adapter_rank=str(self.adapters.rank), adapter_alpha=str(self.adapters.alpha))
        what = "PaSS look-ahead adapter file" if self.adapters is not None else "PaSS look-ahead file"
        return write_model_file(path, tensors, meta, what)

    @classmethod
    def load(cls, path: str | Path, loaded=None, adapters: bool = False) -> "LookaheadEmbeddings":
        """Read a file written by ``save``; check it against ``loaded`` when given.

        Args:
            adapters: expect a file with look-ahead adapters (format ``ADAPTER_FORMAT``, method
                ``pass-lora``) instead of embeddings only (``FORMAT``, method ``pass``).

        Raises:
            ValueError: missing file, a corrupt or foreign file, a file of the other kind (embeddings
                only vs with adapters), or one trained for another model (the message names both models).
        """
        what, fmt = ("PaSS look-ahead adapter file", ADAPTER_FORMAT) if adapters else ("PaSS look-ahead file", FORMAT)
        meta, tensors = read_model_file(path, what, fmt)  # a file of the other kind: the message says its method
        if "lookahead" not in tensors:
            raise ValueError(f"{str(path)!r} holds no 'lookahead' tensor: not a PaSS look-ahead file.")
        try:
            emb = cls(weight=tensors["lookahead"].float(), model_name=meta["model_name"],
                      signature=json.loads(meta["signature"]), vocab_size=int(meta["vocab_size"]),
                      kind=meta.get("kind", "trained"), tokens_per_draft=int(meta.get("tokens_per_draft", "1")),
                      info=json.loads(meta.get("info", "{}")))
            if adapters:
                emb.adapters = GatedLoRA.from_tensors(tensors, int(meta["adapter_rank"]), float(meta["adapter_alpha"]))
        except (KeyError, ValueError) as err:
            raise ValueError(f"{str(path)!r} has damaged metadata ({err}).") from err
        if emb.weight.ndim != 2 or emb.weight.shape[0] % emb.tokens_per_draft:
            raise ValueError(f"{str(path)!r} holds a tensor of shape {tuple(emb.weight.shape)}, not (L*R, D).")
        if loaded is not None:
            emb.check_compatible(loaded, path)
        return emb

    def check_compatible(self, loaded, path: str | Path = "look-ahead embeddings") -> None:
        """Refuse embeddings trained for another model.

        Raises:
            ValueError: naming the file's model and the loaded model.
        """
        how = f"Train embeddings for this model with python -m pass_core.train --model {loaded.name}"
        check_trained_for(loaded, path, self.model_name, self.d_emb, self.vocab_size, self.signature,
                          how + (" --adapter-rank 8" if self.adapters is not None else ""))
        if self.adapters is not None:
            try:
                self.adapters.check_fits(loaded.model.get_decoder())
            except ValueError as err:
                raise ValueError(f"{str(path)} does not fit the loaded model {loaded.name!r}: {err}. {how} "
                                 "--adapter-rank 8.") from err
