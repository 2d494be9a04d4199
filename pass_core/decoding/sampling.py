"""Logits to probabilities, and drawing tokens: the only temperature / top-k / top-p code.

Every decoder calls ``logits_to_probs`` for the target distribution p *and* for the
draft distribution q, so both go through the same processing. That shared path is
what keeps speculative sampling lossless (Leviathan et al. 2022, section 2.3;
Chen et al. 2023, algorithm 2): the acceptance rule compares processed p and q.
"""

from __future__ import annotations

import torch

from pass_core.decoding.settings import DecodeSettings


def logits_to_probs(logits: torch.Tensor, settings: DecodeSettings) -> torch.Tensor:
    """Turn the model's logits into the processed distribution used for sampling.

    Args:
        logits: (..., V) float logits from the model's output head.
        settings: temperature (0 = greedy), top_k (0 = off) and top_p (1 = off).

    Returns:
        (..., V) float32 probabilities summing to 1 over V. Greedy gives a one-hot
        vector at the argmax (ties go to the lowest token id, like ``torch.argmax``).
    """
    logits = logits.float()
    if settings.greedy:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).to(torch.float32)
    logits = logits / settings.temperature
    vocab_size = logits.shape[-1]
    if 0 < settings.top_k < vocab_size:
        kth = torch.topk(logits, settings.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if settings.top_p < 1.0:
        sorted_logits, sorted_idx = torch.sort(logits, dim=-1, descending=True)
        sorted_probs = sorted_logits.softmax(-1)
        # drop a token when the mass *before* it already reaches top_p (keeps >= 1 token)
        mass_before = sorted_probs.cumsum(-1) - sorted_probs
        drop_sorted = mass_before >= settings.top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, sorted_idx, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits.softmax(-1)


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Draw one token per row.

    Args:
        probs: (N, V) float probabilities (rows sum to 1).
        generator: the run's ``torch.Generator`` on ``probs.device``; never the global RNG.

    Returns:
        (N,) int64 token ids. One-hot rows (greedy: every other entry exactly 0) return their argmax without
        consuming randomness, so greedy runs do not depend on the seed. A sampled row whose top probability
        rounds to 1.0 is still drawn (its other tokens keep their mass: a draw is exact).

    Raises:
        ValueError: a row holds NaN, inf or a negative number (a drafter with non-finite weights),
            instead of torch's bare ``RuntimeError``.
    """
    if bool(((probs > 0).sum(-1) == 1).all()):
        return probs.argmax(-1)
    try:
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    except RuntimeError as err:  # only a broken distribution gets here: keep the happy path free of checks
        raise ValueError(f"Cannot draw a token: a distribution holds NaN, inf or a negative number ({err}); "
                         "a look-ahead or drafter file with non-finite weights does this.") from err


def logit_margins(logits: torch.Tensor) -> list[float]:
    """Top-1 minus top-2 raw logit of each row: how far each greedy choice was from a tie.

    Args:
        logits: (R, V) float logits (V >= 2).

    Returns:
        R floats, >= 0.
    """
    top2 = logits.float().topk(2, dim=-1).values  # (R, 2)
    return (top2[:, 0] - top2[:, 1]).tolist()


def make_generator(seed: int, device: torch.device | str) -> torch.Generator:
    """The one explicit random generator of a run, seeded from the user's seed."""
    generator = torch.Generator(device=device)
    generator.manual_seed(int(seed))
    return generator
