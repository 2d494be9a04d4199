"""The ParallelSpec drafter's training report (``python -m pass_core.train_drafter``): JSON and markdown next to
the drafter file: the command, data used, wall times, held-out agreement per draft position, simulated accepted
tokens per step and the calibrated confidence gate.
"""

from __future__ import annotations

import json
from pathlib import Path


#: The confidence gate's step cost in AR steps (``--cost-per-draft``, ``--drafter-cost``), measured on the 2-core
#: development CPU with one thread: the trainer's defaults.
STEP_COSTS = {"cost_per_draft": 0.1, "drafter_cost": 0.09}


def write_report(out: Path, report: dict) -> None:
    """The training report as JSON and markdown next to the drafter file."""
    out.with_suffix(".report.json").write_text(json.dumps(report, indent=1) + "\n")
    agree, args = report["heldout"]["per_position_agreement"], report["args"]
    lines = [
        f"# ParallelSpec drafter for {report['model']} (k = {report['num_draft']})", "",
        f"File: `{Path(report['file']).name}` ({report['file_mb']} MB, float16), trained with", "",
        f"    {report['command']}", "",
        "| quantity | value |", "|---|---|",
        f"| training steps | {args['steps']} (batch {args['batch_size']} sequences, {args['anchors']} mask groups "
        f"each, lr {args['lr']}, feature-loss weight {args['feature_weight']}) |",
        f"| training data | {report['train_sequences']} sequences: greedy + {args['sampled_copies']} sampled "
        f"(T={args['sampled_temperature']}) generation(s) per training prompt"
        + (f", the target's greedy answers to {report.get('answers')} corpus prompts "
           f"({report.get('answer_positions')} positions)" if report.get("answers") else "")
        + (f", teacher-forced {report['corpus']} text ({report['corpus_positions']} positions)"
           if report.get("corpus", "none") != "none" else "")
        + f"; {report['train_positions']} positions in all |",
        f"| CPU threads | {report['threads']} |",
        f"| self-distillation data (s) | {report['data_s']} (0 when cached) |",
        f"| target features (s) | {report['features_s']} (0 when cached) |",
        f"| training (s; every run of it, --resume included) | {report['train_s']} |",
        f"| total wall time of this run (s) | {report['total_s']} |",
        f"| draft vocabulary | {report['draft_vocab']} tokens, covers "
        f"{100 * report['heldout_draft_vocab_coverage']:.1f} % of held-out greedy tokens |",
        f"| held-out top-1 agreement, draft 1..k | {' / '.join(f'{100 * a:.1f} %' for a in agree)} |",
        f"| held-out mean accepted tokens per step (greedy, simulated, k drafts every step) | "
        f"{report['heldout']['accepted_tokens_per_step']:.2f} |",
        f"| confidence gate (extension) | min_confidence {report['min_confidence']}: "
        f"{report['heldout_gated_accepted_tokens_per_step']:.2f} accepted tokens per step |", "",
        "Agreement: share of held-out generated positions where draft i equals the target's argmax (unconditional).",
        "Accepted tokens per step: greedy decoding simulated along the held-out greedy generations "
        "(accepted drafts + 1 target token per step, Spec-Bench's definition).",
        "Confidence gate (extension): a step whose first draft has a drafter probability below min_confidence "
        "verifies no draft (a plain target step); chosen on held-out data for the best simulated speed-up "
        "with a step cost of "
        f"1 + {args['cost_per_draft']} k + {args['drafter_cost']} AR steps ("
        + ("the defaults, measured on the 2-core development CPU with one thread" if all(
            args[name] == value for name, value in STEP_COSTS.items()) else
           "given with --cost-per-draft and --drafter-cost") + ").", ""]  # "measured" whatever was given
    out.with_suffix(".report.md").write_text("\n".join(lines))
