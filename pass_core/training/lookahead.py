"""Train PaSS look-ahead embeddings on a frozen model (docs/algorithms.md section 3, training).

    python -m pass_core.train --model smollm2-135m-instruct --num-lookahead 3 --out la.safetensors

Only the L x D look-ahead numbers learn (Monea et al. 2023, section 2.2). The recipe is our choice (the paper's is not
public): self-distillation on the model's own greedy generations; for each training sequence the frozen prefix runs
once without gradients, then all sampled prefix positions get their look-ahead block in one pass under a group-wise
mask (``lookahead_batch``); the loss is KL(p || q) to the model's own next-token distribution at t+i (``--loss kl``),
or cross-entropy to its greedy token.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from pass_core.runtime.outputs import write_text_atomically
from pass_core.decoding.cache import new_cache
from pass_core.training.data import (check_generation_length, corpus_answers, default_prompt_file, describe_data,
                                     generate_self_data, prompt_lengths, read_prompts)
from pass_core.drafters.lookahead.embeddings import LookaheadEmbeddings
from pass_core.drafters.lookahead.adapters import GatedLoRA
from pass_core.training.lookahead_batch import lookahead_logits
from pass_core.runtime.backends import set_cpu_threads
from pass_core.runtime.models import load_model
from pass_core.training.checkpoint import checkpoint_path as _checkpoint_path, load_checkpoint, save_checkpoint
from pass_core.training.lookahead_cli import build_parser, check_arguments
from pass_core.training.lookahead_eval import agreement, check_eval_length, evaluate, held_out_sequences
from pass_core.training.lookahead_report import loss_summary, report_markdown  # noqa: F401 (report_markdown: re-exported)


def load_sequences(loaded, data: str, gen_tokens: int) -> tuple[list[list[int]], list[int], str]:
    """Training sequences, where each one's prompt ends (0 for plain text) and what they are, in words
    (``describe_data``). Raises ValueError for a file ``read_prompts`` refuses."""
    path = default_prompt_file("train") if data == "self" else data
    rows = read_prompts(path)
    seqs = generate_self_data(loaded, rows, max_new_tokens=gen_tokens, option="--gen-tokens")
    return seqs, prompt_lengths(loaded, rows), describe_data(rows, path)


def _seed_from_file(init: LookaheadEmbeddings, path: str, loaded) -> LookaheadEmbeddings:
    """``init`` with its first rows replaced by a trained file's (the file's L may be smaller or larger).

    Because LA_i attends only to the prefix and LA_<i, the first rows of a trained set stay a
    trained set: training L=8 from a trained L=4 file starts with LA_1..LA_4 already good.

    Raises:
        ValueError: the file is missing / corrupt, trained for another model, or uses another
            number of tokens per draft position.
    """
    try:
        src = LookaheadEmbeddings.load(path, loaded)
    except ValueError as err:  # a pass-lora file: its embeddings seed the rows (its adapters do not)
        if "pass-lora" not in str(err):
            raise
        src = LookaheadEmbeddings.load(path, loaded, adapters=True)
    if src.tokens_per_draft != init.tokens_per_draft:
        raise ValueError(f"{path} has {src.tokens_per_draft} tokens per draft position; --tokens-per-draft is "
                         f"{init.tokens_per_draft}.")
    n = min(src.block_len, init.block_len)
    init.weight[:n] = src.weight[:n].to(init.weight.dtype)
    return init


def _current(init: LookaheadEmbeddings, param: torch.Tensor, adapters: GatedLoRA | None, shared: bool,
             loaded) -> LookaheadEmbeddings:
    """A detached copy of what is being trained, as ``LookaheadEmbeddings`` (with adapters when trained)."""
    final = param.detach().expand(init.block_len, -1) if shared else param.detach()
    copy = None
    if adapters is not None:
        copy = GatedLoRA({n: (a.detach().float().cpu().clone(), b.detach().float().cpu().clone())
                          for n, (a, b) in adapters.weights.items()}, adapters.rank, adapters.alpha)
    return LookaheadEmbeddings(weight=final.float().cpu().clone(), model_name=loaded.name, signature=init.signature,
                               vocab_size=loaded.vocab_size, kind="trained", tokens_per_draft=init.tokens_per_draft,
                               adapters=copy)


def train(args) -> dict:
    """Run training as described by the parsed ``args``; returns the report dict.

    Raises:
        ValueError: bad arguments (``lookahead_cli.check_arguments``), before the model loads; a --gen-tokens or
            --eval-tokens beyond the model's context or an ``--init-from`` file that cannot seed this run, before the
            data is made; data problems.
    """
    check_arguments(args)
    set_cpu_threads(args.threads)  # None: torch's choice
    started = time.perf_counter()
    loaded = load_model(args.model, progress=lambda m: print(m, file=sys.stderr))
    check_generation_length(loaded, "--gen-tokens", args.gen_tokens)  # 100,000 generated past the context
    check_eval_length(loaded, args.eval_prompts, args.eval_tokens, args.num_lookahead)  # refused after training
    if args.adapter_rank > loaded.model.config.hidden_size:  # a rank above the width adds nothing (100,000 ran)
        raise ValueError(f"--adapter-rank {args.adapter_rank:,} is above this model's width of "
                         f"{loaded.model.config.hidden_size}: give at most that.")
    model, dev = loaded.model, loaded.device
    gen = torch.Generator().manual_seed(args.seed)
    init = LookaheadEmbeddings.initialise(loaded, args.num_lookahead, args.init, args.tokens_per_draft,
                                          generator=gen)
    if args.init_from:  # read (as is a --resume checkpoint) before the data is made: refused in seconds, not minutes
        init = _seed_from_file(init, args.init_from, loaded)
    rows = 1 if args.shared else init.block_len
    param = torch.nn.Parameter(init.weight[:rows].clone().to(dev))  # (1 or L*R, D), float32
    params, groups, adapters = {"param": param}, [{"params": [param], "lr": args.lr, "base_lr": args.lr}], None
    if args.adapter_rank:  # look-ahead adapters (extension): LoRA weights gated to the look-ahead rows
        fresh = GatedLoRA.initialise(model.get_decoder(), args.adapter_rank, args.adapter_alpha, generator=gen)
        adapters = GatedLoRA({name: (torch.nn.Parameter(a.to(dev)), torch.nn.Parameter(b.to(dev)))
                              for name, (a, b) in fresh.weights.items()}, fresh.rank, fresh.alpha)
        lora = {f"adapter.{name}.{part}": t for name, ab in adapters.weights.items() for part, t in zip("AB", ab)}
        params.update(lora)
        groups.append({"params": list(lora.values()), "lr": args.adapter_lr, "base_lr": args.adapter_lr})
    opt = torch.optim.Adam(groups)
    out = Path(args.out)
    step0, progress = (load_checkpoint(_checkpoint_path(out), params, opt, args)
                       if args.resume and _checkpoint_path(out).is_file() else (0, {}))
    seqs, plens, described = load_sequences(loaded, args.data, args.gen_tokens)
    if args.answers:
        more, more_lens = corpus_answers(loaded, args.answers, max_new_tokens=args.gen_tokens, option="--gen-tokens")
        seqs, plens = seqs + more, plens + more_lens
        described += f"; self-generated: the model's own greedy answers to corpus prompts ({args.answers})"
    # a block at t needs targets up to t + L: a sequence with L tokens or fewer after its prompt has no position to
    # train on (its steps passed with no update, yet counted: Adam's step, the curve and checkpoints went astray)
    need = max(args.num_lookahead, 2) + 1
    seqs = [(s, max(p - 1, 0)) for s, p in zip(seqs, plens) if len(s) - max(p - 1, 0) >= need]
    if not seqs:
        raise ValueError(f"No usable training sequences (each needs at least {need} tokens after its prompt for "
                         f"L = {args.num_lookahead}).")
    curve = progress.get("curve", [])  # held-out agreement against training positions seen
    curve_data = held_out_sequences(loaded, args.curve_sequences) if args.curve_every else None
    if curve_data and not curve:  # the starting point: the initialisation (or --init-from file) before training
        start_point = _current(init, param, adapters, args.shared, loaded)
        curve.append({"step": 0, "positions": 0, "top1_agreement": agreement(loaded, start_point, *curve_data)})
    sched = lambda s: min(1.0, (s + 1) / 20) * 0.5 * (1 + math.cos(math.pi * s / args.steps))  # noqa: E731
    draft_idx, L = init.draft_indices(), args.num_lookahead
    pos_weight = args.position_decay ** torch.arange(L, dtype=torch.float32, device=dev)  # (L,)
    tokens_seen, agree = int(progress.get("positions", 0)), torch.zeros(L)
    losses = list(progress.get("losses", []))  # the report's first steps are the run's, resumed or not
    tokens_before, train_before = tokens_seen, float(progress.get("train_s", 0.0))
    bar = tqdm(range(step0, args.steps), desc=f"training L={L}", unit="step", initial=step0, total=args.steps)
    train_start = time.perf_counter()

    def progress_now() -> dict:
        return {"positions": tokens_seen, "curve": curve, "losses": losses,
                "train_s": train_before + time.perf_counter() - train_start}

    for step in bar:
        if args.stop_at is not None and step >= args.stop_at:
            save_checkpoint(_checkpoint_path(out), params, opt, step, args, progress_now())
            bar.close()
            return {"stopped_at": step, "checkpoint": str(_checkpoint_path(out))}
        # deterministic per step, so --resume continues the same schedule
        rng = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
        seq, first = seqs[int(torch.randint(len(seqs), (1,), generator=rng))]
        ids = torch.tensor([seq], device=dev)
        T = len(seq)
        cache = new_cache(model)
        with torch.no_grad():
            teacher = model(input_ids=ids, cache=cache, use_cache=True).logits[0].float()  # (T, V)
        last = T - 1 - L  # block at t needs targets up to t+L <= T-1 (>= first: the sequences were chosen so)
        cand = torch.arange(first, last + 1)
        starts = cand[torch.randperm(len(cand), generator=rng)[: args.batch_positions]].sort().values.to(dev)
        weight = param.expand(init.block_len, -1) if args.shared else param
        for g in opt.param_groups:
            g["lr"] = g["base_lr"] * sched(step)
        logits = lookahead_logits(model, cache, T, starts, weight.to(loaded.dtype), draft_idx,
                                  adapters).float()  # (P, L, V)
        target_rows = starts[:, None] + torch.arange(1, L + 1, device=dev)[None]  # (P, L): t+i
        target = teacher[target_rows]  # (P, L, V)
        if args.loss == "kl":
            per = F.kl_div(logits.log_softmax(-1), target.log_softmax(-1), log_target=True,
                           reduction="none").sum(-1)  # (P, L)
        else:
            per = F.cross_entropy(logits.flatten(0, 1), target.argmax(-1).flatten(), reduction="none").view(-1, L)
        loss = (per.mean(0) * pos_weight).sum() / pos_weight.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        tokens_seen += int(starts.numel())
        with torch.no_grad():
            hit = (logits.argmax(-1) == target.argmax(-1)).float().mean(0).cpu()  # (L,)
        agree = hit if step == step0 else 0.9 * agree + 0.1 * hit
        losses.append(float(loss.detach()))
        rate = (tokens_seen - tokens_before) / (time.perf_counter() - train_start)
        bar.set_postfix(loss=f"{losses[-1]:.3f}", agree="/".join(f"{a:.2f}" for a in agree.tolist()),
                        pos_s=f"{rate:.0f}")
        if curve_data and ((step + 1) % args.curve_every == 0 or step + 1 == args.steps):
            now = _current(init, param, adapters, args.shared, loaded)
            curve.append({"step": step + 1, "positions": tokens_seen,
                          "top1_agreement": agreement(loaded, now, *curve_data)})
            bar.write(f"step {step + 1}: {tokens_seen} positions, held-out agreement {curve[-1]['top1_agreement']}")
        if (step + 1) % args.checkpoint_every == 0 or step + 1 == args.steps:
            save_checkpoint(_checkpoint_path(out), params, opt, step + 1, args, progress_now())
    part_s = time.perf_counter() - train_start
    train_s = train_before + part_s
    la = _current(init, param, adapters, args.shared, loaded)
    report = {
        "model": loaded.name, "num_lookahead": L, "tokens_per_draft": args.tokens_per_draft,
        "shared": args.shared, "loss_kind": args.loss, "init": args.init, "init_from": args.init_from, "lr": args.lr, "steps": args.steps,
        "batch_positions": args.batch_positions, "position_decay": args.position_decay, "seed": args.seed, "data": args.data,
        "data_description": described, "answers": args.answers, "train_sequences": len(seqs),
        "train_time_s": round(train_s, 1), "positions_seen": tokens_seen,
        "positions_per_s": round((tokens_seen - tokens_before) / max(part_s, 1e-9), 1),
        "adapter_rank": args.adapter_rank, "adapter_alpha": adapters.alpha if adapters else None,
        "adapter_lr": args.adapter_lr if adapters else None,
        "adapter_parameters": adapters.num_parameters if adapters else 0, "curve": curve,
        **loss_summary(losses),
    }
    la.info = dict(report)
    la.save(out)  # before the evaluation: an evaluation that fails keeps the trained file (saved again below)
    report["eval"] = evaluate(loaded, la, args.eval_prompts, args.eval_tokens, args.eval_sequences)
    if args.baseline:
        fixed = LookaheadEmbeddings.initialise(loaded, L, "fixed-token")
        report["baseline_fixed_token"] = evaluate(loaded, fixed, args.eval_prompts, args.eval_tokens,
                                                  args.eval_sequences)
    report["total_time_s"] = round(time.perf_counter() - started, 1)
    la.info = {k: v for k, v in report.items()}
    la.save(out)
    if args.report:
        write_text_atomically(args.report, json.dumps(report, indent=2))
        write_text_atomically(Path(args.report).with_suffix(".md"),
                              report_markdown(report, "python -m pass_core.train " + " ".join(sys.argv[1:])))
    return report


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; exit code 2 on bad input."""
    args = build_parser().parse_args(argv)
    try:
        report = train(args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2))
    return 0

