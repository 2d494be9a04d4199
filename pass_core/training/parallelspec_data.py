"""Training data of a ParallelSpec drafter: the target's features, cached, and group-wise batches.

Xiao et al. 2024, section 3.2; docs/algorithms.md section 5. Used by ``train_drafter`` (training)
and ``drafter_eval`` (held-out evaluation).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import torch
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm

from pass_core.drafters.files import embedding_signature, signature_fingerprint
from pass_core.runtime.models import cache_root
from pass_core.drafters.parallelspec.layout import additive, group_layout, read_features


@dataclass
class Features:
    """Flat per-position target features of S sequences (N positions in all).

    Attributes:
        hidden: (N, F*D) float16 drafter features of the target's hidden states h_t
            (``parallelspec.read_features``; F = 1: the last hidden state).
        top_ids: (N, K) int64 the target's K most likely next tokens at t.
        top_probs: (N, K) float16 their probabilities.
        offsets: (S + 1,) int64 start of each sequence in the flat arrays.
        seqs: the S token-id sequences.
        prompt_lens: prompt tokens of each sequence (the generation starts there).
    """

    hidden: torch.Tensor
    top_ids: torch.Tensor
    top_probs: torch.Tensor
    offsets: torch.Tensor
    seqs: list[list[int]]
    prompt_lens: list[int]


@torch.inference_mode()
def target_features(loaded, seqs: list[list[int]], prompt_lens: list[int], topk: int = 32, batch_size: int = 8,
                    desc: str = "target features", layers: tuple[int, ...] = (-1,)) -> Features:
    """Run the frozen target once over every sequence (right padding: causal attention ignores it), cached.

    ``layers``: the hidden states the drafter reads (``parallelspec.read_features``).
    """
    key = hashlib.sha256(json.dumps([loaded.name, signature_fingerprint(embedding_signature(
        loaded.model.get_input_embeddings().weight)), seqs, topk] + ([list(layers)] if layers != (-1,) else [])
    ).encode()).hexdigest()[:16]
    path = cache_root() / "drafter-features" / f"{loaded.name.replace('/', '--')}-{key}.safetensors"
    offsets = torch.tensor([0] + [len(s) for s in seqs]).cumsum(0)
    if path.is_file():
        t = load_file(str(path))
        return Features(t["hidden"], t["top_ids"].long(), t["top_probs"], offsets, seqs, prompt_lens)
    n, d = int(offsets[-1]), loaded.d_emb * len(layers)
    hidden, top_ids, top_probs = torch.empty((n, d), dtype=torch.float16), torch.empty((n, topk), dtype=torch.int32), \
        torch.empty((n, topk), dtype=torch.float16)
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    bar = tqdm(total=n, desc=desc, unit="tok")
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        width = max(len(seqs[i]) for i in rows)
        ids = torch.tensor([seqs[i] + [0] * (width - len(seqs[i])) for i in rows], device=loaded.device)
        out = loaded.model(input_ids=ids, output_hidden_states=True)
        probs = out.logits.float().softmax(-1)  # (B, T, V)
        feats = read_features(out.hidden_states, layers)  # (B, T, F*D)
        top = probs.topk(topk, dim=-1)
        for j, i in enumerate(rows):
            lo, length = int(offsets[i]), len(seqs[i])
            hidden[lo:lo + length] = feats[j, :length].cpu().half()
            top_ids[lo:lo + length] = top.indices[j, :length].cpu().int()
            top_probs[lo:lo + length] = top.values[j, :length].cpu().half()
        bar.update(sum(len(seqs[i]) for i in rows))
    bar.close()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({"hidden": hidden, "top_ids": top_ids, "top_probs": top_probs}, str(path.with_suffix(".tmp")))
    path.with_suffix(".tmp").rename(path)
    return Features(hidden, top_ids.long(), top_probs, offsets, seqs, prompt_lens)


def draft_vocabulary(features: Features, size: int, vocab_size: int) -> torch.Tensor | None:
    """The ``size`` tokens the target most often ranks first (then most frequent in the data), sorted; None = all V."""
    if size <= 0 or size >= vocab_size:
        return None
    counts = torch.bincount(features.top_ids[:, 0], minlength=vocab_size).float() * 4
    counts += torch.bincount(features.top_ids[:, 1:4].flatten(), minlength=vocab_size).float()
    return counts.topk(size).indices.sort().values


def make_batch(features: Features, rows: list[int], num_masks: int, anchors_per_seq: int,
               gen: torch.Generator, device, max_len: int = 320, prompt_positions: bool = False) -> dict:
    """Inputs and teacher rows for a group-wise batch of whole sequences.

    Returns a dict with token_ids (B, R) (x_{t+1}), prev_ids (B, R) (x_t), hidden (B, R, F*D)
    float32, mask_ids (G*M,), position_ids (B, Q), attention_mask (B, 1, Q, Q) additive, teacher (B, Q) int64 row of
    ``features`` each query slot must match (-1: no loss), draft (B, Q) int64 draft number
    1..k of each slot (0: no loss). Q = R + G*M; anchors and scored real positions come from the
    generated part, or from every position with ``prompt_positions`` (the prompt's text too).
    """
    real_len = min(max(len(features.seqs[i]) for i in rows) - 1, max_len)
    g, m = anchors_per_seq, num_masks
    ids, prev, hid, pos, masks, teacher, draft = [], [], [], [], [], [], []
    for i in rows:
        seq, lo = features.seqs[i], int(features.offsets[i])
        r = min(len(seq) - 1, real_len)  # real positions t = 0..r-1 use x_{t+1}, h_t
        first = 0 if prompt_positions else min(max(features.prompt_lens[i] - 1, 0), r - 1)
        candidates = torch.arange(first, r)
        pick = candidates[torch.randperm(len(candidates), generator=gen)[:g]].sort().values
        anchors = torch.cat([pick, torch.zeros(g - len(pick), dtype=torch.long)])  # dummies: no loss
        allowed, positions, mask_ids = group_layout(real_len, anchors, m, device="cpu")
        ids.append(seq[1:r + 1] + [0] * (real_len - r))
        prev.append(seq[:r] + [0] * (real_len - r))
        h = features.hidden[lo:lo + r].float()
        hid.append(torch.cat([h, h.new_zeros(real_len - r, h.shape[1])]))
        pos.append(positions)
        masks.append(allowed)
        t_real = torch.arange(real_len)
        tgt_real = torch.where((t_real >= first) & (t_real < r), lo + t_real + 1, -1)
        step = torch.arange(1, m + 1).repeat(g)
        a = anchors.repeat_interleave(m)
        ok = (a + 1 + step <= len(seq) - 1) & (torch.arange(g).repeat_interleave(m) < len(pick))
        tgt_mask = torch.where(ok, lo + a + 1 + step, -1)
        teacher.append(torch.cat([tgt_real, tgt_mask]))
        draft.append(torch.cat([torch.where(tgt_real >= 0, 1, 0), torch.where(ok, step + 1, 0)]))
    return {"token_ids": torch.tensor(ids, device=device), "prev_ids": torch.tensor(prev, device=device),
            "hidden": torch.stack(hid).to(device),
            "mask_ids": mask_ids.to(device), "position_ids": torch.stack(pos).to(device),
            "attention_mask": additive(torch.stack(masks)[:, None], torch.float32).to(device),
            "teacher": torch.stack(teacher).to(device), "draft": torch.stack(draft).to(device)}


def concat_features(parts: list[Features]) -> Features:
    """One ``Features`` holding the sequences of several."""
    if len(parts) == 1:
        return parts[0]
    offsets = [parts[0].offsets]
    for f in parts[1:]:
        offsets.append(f.offsets[1:] + offsets[-1][-1])
    return Features(torch.cat([f.hidden for f in parts]), torch.cat([f.top_ids for f in parts]),
                    torch.cat([f.top_probs for f in parts]), torch.cat(offsets),
                    [s for f in parts for s in f.seqs], [n for f in parts for n in f.prompt_lens])
