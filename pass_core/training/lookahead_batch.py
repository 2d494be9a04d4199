"""Many look-ahead blocks in one forward pass over a cached prefix (training and evaluation).

For a sequence x_0..x_{T-1} whose KV cache is already computed (frozen, no gradient),
P prefix positions t_1..t_P each get their own block LA_1..LA_{L*R} at positions
t+1..t+L*R. A 4-D attention mask lets each block see x_0..x_t and its own earlier
look-ahead tokens only (the group-wise layout of PARD / ParallelSpec), so one pass
scores P drafting passes and the gradient graph covers only the look-ahead tokens.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch


def block_mask(prefix_len: int, starts: torch.Tensor, block: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention mask and position ids for P look-ahead blocks after a cached prefix.

    Args:
        prefix_len: T, tokens in the cache.
        starts: (P,) int64 prefix positions t (block p sees x_0..x_{t_p}).
        block: tokens per block (L * R).
        dtype: the model's float dtype (for the additive mask).

    Returns:
        mask: (1, 1, P*block, T + P*block) additive float mask (0 = attend, min = blocked).
        position_ids: (1, P*block) int64, t_p + 1 + j for block token j.
    """
    device = starts.device
    num = starts.shape[0]
    q = num * block
    keys = torch.arange(prefix_len, device=device)
    see_prefix = keys[None, :] <= starts.repeat_interleave(block)[:, None]  # (Q, T)
    group = torch.arange(q, device=device) // block
    idx = torch.arange(q, device=device)
    see_block = (group[:, None] == group[None, :]) & (idx[None, :] <= idx[:, None])  # (Q, Q)
    allowed = torch.cat([see_prefix, see_block], 1)
    mask = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)
    positions = starts.repeat_interleave(block) + 1 + torch.arange(block, device=device).repeat(num)
    return mask[None, None], positions[None]


def lookahead_logits(model, cache, prefix_len: int, starts: torch.Tensor, weight: torch.Tensor,
                     draft_indices: list[int], adapters=None) -> torch.Tensor:
    """Draft logits of P look-ahead blocks in one pass; the cache is cropped back afterwards.

    Args:
        model: the frozen causal LM.
        cache: ``DynamicCache`` holding exactly the T prefix tokens.
        prefix_len: T.
        starts: (P,) int64 prefix positions.
        weight: (L*R, D) look-ahead embeddings (may require grad), model dtype.
        draft_indices: block indices read as drafts d_1..d_L.
        adapters: a ``GatedLoRA`` (look-ahead adapters, extension) applied to every query row (the
            pass holds look-ahead tokens only), or None.

    Returns:
        (P, L, V) float logits; q_i for block p predicts x_{t_p + i + 1}.
    """
    block = weight.shape[0]
    num = starts.shape[0]
    mask, positions = block_mask(prefix_len, starts, block, weight.dtype)
    embeds = weight[None].expand(num, -1, -1).reshape(1, num * block, -1)  # (1, P*L*R, D)
    decoder = model.get_decoder()
    with adapters.gated(decoder, None) if adapters is not None else nullcontext():
        hidden = decoder(inputs_embeds=embeds, cache=cache, use_cache=True, attention_mask=mask,
                         position_ids=positions).last_hidden_state  # (1, P*L*R, D)
    cache.crop(-num * block)
    rows = hidden[0].view(num, block, -1)[:, draft_indices]  # (P, L, D)
    return model.get_output_embeddings()(rows)
