"""Held-out evaluation of a ParallelSpec drafter: per-position agreement and simulated greedy decoding.

Xiao et al. 2024, section 4 (acceptance); docs/algorithms.md section 6 (mean accepted tokens,
Spec-Bench's definition). The confidence gate calibrated here is this project's extension.
"""

from __future__ import annotations

import torch

from pass_core.training.parallelspec_data import Features, make_batch
from pass_core.drafters.parallelspec.model import ParallelDrafter


@torch.no_grad()
def evaluate(drafter: ParallelDrafter, parts, features: Features, num_draft: int, vocab_map: torch.Tensor,
             device, min_confidence: float = 0.0) -> dict:
    """Held-out per-position top-1 agreement and simulated greedy decoding.

    Returns a dict: ``per_position_agreement`` (draft i equals the target's argmax, over every
    generated position), ``accepted_tokens_per_step`` (greedy ParallelSpec simulated along the
    held-out greedy generations), ``positions`` and ``records`` (per sequence: ok, valid,
    confidence, each (R, k)) for ``simulate``.
    """
    was_training = drafter.training
    drafter.eval()
    m = num_draft - 1
    agree_hits, agree_total, records = [0] * num_draft, [0] * num_draft, []
    for i, seq in enumerate(features.seqs):
        r, lo = len(seq) - 1, int(features.offsets[i])
        first = max(features.prompt_lens[i] - 1, 0)
        if first >= r:
            continue
        anchors = torch.arange(first, r)
        batch = make_batch(features, [i], m, len(anchors), torch.Generator().manual_seed(0), device, max_len=10**9)
        feats = drafter(parts, batch["token_ids"], batch["prev_ids"], batch["hidden"], batch["mask_ids"],
                        batch["position_ids"], batch["attention_mask"])[0]  # (Q, D)
        top = drafter.logits(parts, feats).float().softmax(-1).max(-1)
        pred, prob = top.indices.cpu(), top.values.cpu()  # (Q,) draft-vocabulary index, its probability
        ok = torch.zeros((r, num_draft), dtype=torch.bool)  # ok[a, j]: draft j+1 at anchor a equals argmax p
        valid = torch.zeros((r, num_draft), dtype=torch.bool)
        conf = torch.zeros((r, num_draft))
        for j in range(num_draft):
            slot = anchors if j == 0 else r + torch.arange(len(anchors)) * m + (j - 1)
            target = anchors + 1 + j
            v = target <= len(seq) - 1
            truth = vocab_map[features.top_ids[lo + target.clamp(max=len(seq) - 1), 0]]
            ok[anchors, j], valid[anchors, j], conf[anchors, j] = (pred[slot] == truth) & v, v, prob[slot]
            agree_hits[j] += int(ok[anchors, j].sum())
            agree_total[j] += int(v.sum())
        records.append((first, ok, valid, conf))
    drafter.train(was_training)
    sim = simulate(records, num_draft, min_confidence)
    return {"per_position_agreement": [h / max(t, 1) for h, t in zip(agree_hits, agree_total)],
            "accepted_tokens_per_step": sim["tokens"] / max(sim["steps"], 1), "positions": agree_total[0],
            "records": records}


def simulate(records, num_draft: int, min_confidence: float = 0.0, cost_per_draft: float = 0.0,
             drafter_cost: float = 0.0) -> dict:
    """Greedy decoding along held-out greedy generations: accept the leading agreeing drafts, then one token.

    With ``min_confidence`` a step whose first draft has a lower drafter probability verifies no
    draft (the gate of ``parallelspec_drafter``). Cost model in AR-step units: a step costs
    ``1 + cost_per_draft * k + drafter_cost``.

    Returns:
        {"tokens", "steps", "cost", "speedup"}: speedup = tokens / cost (AR = 1).
    """
    tokens = steps = 0
    cost = 0.0
    for first, ok, valid, conf in records:
        a, r = first, ok.shape[0]
        while a < r:
            k = 0 if min_confidence > 0 and conf[a, 0] < min_confidence else num_draft
            acc = 0
            while acc < k and valid[a, acc] and ok[a, acc]:
                acc += 1
            tokens, steps, a = tokens + acc + 1, steps + 1, a + acc + 1
            cost += 1 + cost_per_draft * k + drafter_cost
    return {"tokens": tokens, "steps": steps, "cost": cost, "speedup": tokens / cost if cost else 0.0}


def calibrate_confidence(records, num_draft: int, cost_per_draft: float, drafter_cost: float) -> tuple[float, dict]:
    """The ``min_confidence`` with the best simulated speed-up on held-out data (0 = always draft k)."""
    grid = [0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6]
    results = {thr: simulate(records, num_draft, thr, cost_per_draft, drafter_cost) for thr in grid}
    best = max(grid, key=lambda thr: results[thr]["speedup"])
    return best, {str(thr): round(res["speedup"], 3) for thr, res in results.items()}
