"""Target-model forward passes: the one function every decoding loop calls to run the target.

It extends the KV cache with the new positions and returns logits for the rows asked for only
(the output head is the largest matrix of a small model), plus the hidden states when a
drafter reads them (ParallelSpec).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


#: Config fields that make logits differ from ``lm_head(last hidden state)``.
_LOGIT_TRANSFORMS = ("logit_scale", "final_logit_softcapping", "logits_scaling", "output_multiplier_scale")
#: On CPU BLAS, ``W @ h^T`` runs about twice as fast as ``linear`` for 2-8 rows of SmolLM2-135M's
#: head (measured: 4 rows 6 vs 13 ms; 1 row 12 vs 10 ms), so it is used for that range only.
_MATMUL_ROWS = range(2, 9)


def plain_head(model) -> bool:
    """True when the logits are exactly ``output_head(base_model(x).last_hidden_state)``:
    a ``Linear`` head, no logit scaling or soft-capping, a separate base model."""
    head, config = model.get_output_embeddings(), model.config
    scaled = any(getattr(config, name, None) not in (None, 1.0) for name in _LOGIT_TRANSFORMS)
    return isinstance(head, torch.nn.Linear) and not scaled and getattr(model, "base_model", model) is not model


def check_finite(logits: torch.Tensor) -> torch.Tensor:
    """The invariant of every target pass: its logits are finite; returns ``logits`` (R, V).

    One float32 sum (NaN or inf anywhere makes it non-finite), so the check costs one reduction per pass.
    NaN logits would make greedy decoding emit token 0 and label it accepted or exact while the text is
    no longer the model's: a clear error instead.

    Raises:
        ValueError: some logit is NaN or inf, naming the likely causes.
    """
    if not math.isfinite(float(logits.sum(dtype=torch.float32))):
        bad = int((~torch.isfinite(logits)).any(-1).sum())
        raise ValueError(f"The target's logits hold NaN or inf in {bad} of {logits.shape[0]} row(s) of this pass, so "
                         "its output would no longer be the model's: stopped. A look-ahead or drafter file with "
                         "non-finite weights does this, or a model that overflows in its dtype (try float32).")
    return logits


@dataclass(frozen=True)
class TargetOutput:
    """What one target pass returns.

    Attributes:
        logits: (R, V) raw logits of the rows asked for, in that order.
        hidden_states: the model's ``hidden_states`` tuple (each (1, T, D)) when asked for, else None.
    """

    logits: torch.Tensor
    hidden_states: tuple | None = None


def target_forward(model, cache, rows: torch.Tensor, *, input_ids: torch.Tensor | None = None,
                   inputs_embeds: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                   position_ids: torch.Tensor | None = None, hidden_states: bool = False,
                   plain: bool | None = None) -> TargetOutput:
    """Run the target over new positions after ``cache`` (extended in place).

    Args:
        model: a causal LM (transformers 5).
        cache: its ``DynamicCache``.
        rows: (R,) int64 indices of the query positions whose logits are wanted.
        input_ids: (1, T) int64, or ``inputs_embeds``: (1, T, D).
        attention_mask: optional (1, 1, T, cached + T) additive float mask (tree / block masks).
        position_ids: optional (1, T) int64.
        hidden_states: also return every layer's hidden states.
        plain: ``plain_head(model)``, checked once per run by the caller (None: check here).

    Returns:
        A ``TargetOutput``. For a plain head the logits are computed from the last hidden state
        with the same weights (``W @ h^T`` on CPU for 2-8 rows: the same numbers up to rounding),
        and ``hidden_states[-1]`` is always that final (normed) hidden state, even for a model whose
        config unties it (``tie_last_hidden_states=False`` makes transformers return the state
        before the final norm there).

    Raises:
        ValueError: hidden states asked of a model without a plain head whose config unties the
            last hidden state (its final hidden state cannot be read); logits that are not finite
            (``check_finite``).
    """
    kwargs = dict(input_ids=input_ids, inputs_embeds=inputs_embeds, attention_mask=attention_mask,
                  position_ids=position_ids, cache=cache, use_cache=True, output_hidden_states=hidden_states)
    if not (plain_head(model) if plain is None else plain):
        if hidden_states and getattr(model.config, "tie_last_hidden_states", None) is False:
            raise ValueError("This model's config sets tie_last_hidden_states=False and its output head is not a "
                             "plain linear layer: its final hidden state cannot be read, so ParallelSpec cannot run.")
        out = model(**kwargs, logits_to_keep=rows)
        return TargetOutput(check_finite(out.logits[0]), out.hidden_states if hidden_states else None)
    out = model.base_model(**kwargs)
    head = model.get_output_embeddings()
    h = out.last_hidden_state[0, rows].to(head.weight.dtype)  # (R, D)
    uses_packed = getattr(head, "uses_packed", None)  # runtime.backends.PackedLinear (duck-typed: decoding/
    if uses_packed is not None and uses_packed(h.shape[0]):  # imports nothing from runtime/)
        logits = head(h)  # the onednn backend's packed head
    elif h.device.type == "cpu" and h.shape[0] in _MATMUL_ROWS:
        logits = (head.weight @ h.T).T  # (R, V)
        logits = logits if head.bias is None else logits + head.bias
    else:
        logits = head(h)
    # the last entry is the state the head reads, whatever the config's tie_last_hidden_states says
    states = out.hidden_states[:-1] + (out.last_hidden_state,) if hidden_states else None
    return TargetOutput(check_finite(logits), states)
