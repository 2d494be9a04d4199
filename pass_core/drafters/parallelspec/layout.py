"""Attention layouts and input features of the ParallelSpec drafter (Xiao et al. 2024, arXiv
2410.05589, section 3.2): the incremental causal mask, the group-wise training layout, and the
drafter's features read from the target's hidden states. Pure tensor functions, no model.
"""

from __future__ import annotations

import torch
from torch import nn


def causal_mask(n_cached: int, q_len: int, dtype: torch.dtype, device) -> torch.Tensor:
    """(1, 1, Q, n_cached + Q) additive causal mask for a pass after ``n_cached`` cached positions."""
    allowed = torch.ones((q_len, n_cached + q_len), dtype=torch.bool, device=device).tril(n_cached)
    return additive(allowed, dtype)[None, None]


def group_layout(seq_len: int, anchors: torch.Tensor, num_masks: int,
                 device=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The group-wise training layout of ParallelSpec (paper section 3.2) for one sequence.

    Query = T real positions, then one group of M masks per anchor a. Real position j sees
    real positions <= j; mask i of group a sits at position a + i and sees real positions
    <= a and masks 1..i of its own group (nothing of other groups).

    Args:
        seq_len: T real positions.
        anchors: (G,) int64 anchor positions a (each < T).
        num_masks: M = k - 1.

    Returns:
        allowed: (Q, Q) bool, True = may attend; Q = T + G * M.
        position_ids: (Q,) int64.
        mask_ids: (G * M,) int64, which mask vector (0..M-1) fills each mask slot.
    """
    device = device if device is not None else anchors.device
    anchors = anchors.to(device)
    g, q = int(anchors.numel()), seq_len + int(anchors.numel()) * num_masks
    allowed = torch.zeros((q, q), dtype=torch.bool, device=device)
    allowed[:seq_len, :seq_len] = torch.ones((seq_len, seq_len), dtype=torch.bool, device=device).tril()
    steps = torch.arange(num_masks, device=device)
    if g and num_masks:
        real = torch.arange(seq_len, device=device)
        rows = slice(seq_len, q)
        allowed[rows, :seq_len] = (real[None, :] <= anchors[:, None]).repeat_interleave(num_masks, 0)
        group = torch.arange(g, device=device).repeat_interleave(num_masks)  # (G*M,)
        step = steps.repeat(g)  # (G*M,)
        same = (group[:, None] == group[None, :]) & (step[None, :] <= step[:, None])
        allowed[rows, rows] = same
    position_ids = torch.cat([torch.arange(seq_len, device=device),
                              (anchors[:, None] + 1 + steps[None, :]).flatten()])
    return allowed, position_ids, steps.repeat(g)


def additive(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Bool "may attend" (..., Q, KV) -> additive float mask (0 = attend, dtype min = blocked)."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, torch.finfo(dtype).min)


def read_features(hidden_states, layers: tuple[int, ...]) -> torch.Tensor:
    """A drafter's input features from the target's hidden states.

    Args:
        hidden_states: the target's ``output_hidden_states`` (each (B, T, D); the last one
            after the final norm).
        layers: indices into it; -1 = the last.

    Returns:
        (B, T, F * D), F = len(layers); intermediate layers RMS-normalised (their scale grows
        with depth and differs from the last layer's).
    """
    out = []
    for i in layers:
        h = hidden_states[i]
        if i % len(hidden_states) != len(hidden_states) - 1:
            h = h * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(h.dtype)
        out.append(h)
    return torch.cat(out, -1)


def final_norm(model) -> nn.Module:
    """The target's final norm module (Llama family: ``model.model.norm``)."""
    base = getattr(model, "base_model", model)
    for name in ("norm", "final_layernorm", "ln_f"):
        if isinstance(getattr(base, name, None), nn.Module):
            return getattr(base, name)
    return nn.Identity()
