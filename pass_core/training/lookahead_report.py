"""The look-ahead training report as markdown (``python -m pass_core.train --report``): data, steps, time,
held-out agreement per look-ahead position, accepted drafts per step and the agreement-vs-data curve.
"""

from __future__ import annotations

from pathlib import Path

from pass_core.decoding.text import count


def loss_summary(losses: list[float]) -> dict:
    """The report's loss fields: the mean loss of the run's first steps (``initial_loss``, up to 5) and of its last
    steps (``final_loss``, up to 20), with how many steps each holds. The two never share a step (a run of 5 steps
    compared its 5 steps with the same 5): a run of fewer than 25 steps gives the first half (rounded down, at most
    5) to the first and the rest to the last; a run of one step has no last steps (``final_loss`` None)."""
    first = min(5, len(losses) // 2) if len(losses) > 1 else len(losses)
    last = min(20, len(losses) - first)
    mean = lambda part: round(sum(part) / len(part), 4) if part else None  # noqa: E731
    return {"initial_loss": mean(losses[:first]), "initial_loss_steps": first,
            "final_loss": mean(losses[len(losses) - last:] if last else []), "final_loss_steps": last}


def report_markdown(report: dict, command: str) -> str:
    """The training report as markdown: data, steps, time, agreement, accepted drafts, baseline."""
    def row(name, ev):  # a part not evaluated (--eval-sequences 0, --eval-prompts 0) says so (it printed nan)
        agree = " / ".join(f"{a:.1%}" for a in ev.get("top1_agreement", [])) or "not measured (--eval-sequences 0)"
        g = ev.get("greedy_pass", {})
        cells = [f"{g[key]:.3f}" if key in g else "not measured (--eval-prompts 0)"
                 for key in ("accepted_drafts_per_step", "mean_accepted_tokens", "acceptance_rate")]
        return f"| {name} | {agree} | " + " | ".join(cells) + " |"
    lines = [
        f"# Look-ahead embeddings for {report['model']}, L={report['num_lookahead']}", "",
        f"Command: `{command}`", "",
        f"- data: {_data(report)}",
        f"- steps: {report['steps']} x {report['batch_positions']} prefix positions, lr {report['lr']}, "
        f"loss {report['loss_kind']}, init {report['init']}"
        + (f" (rows seeded from {Path(report['init_from']).name})" if report.get("init_from") else "")
        + f", shared {report['shared']}, "
        f"tokens per draft {report['tokens_per_draft']}",
        f"- training time: {report['train_time_s']} s ({report['positions_per_s']} positions/s); "
        f"total with data and evaluation: {report['total_time_s']} s",
        f"- loss: {_loss(report)}",
        *([f"- look-ahead adapters (extension, method pass-lora): rank {report['adapter_rank']}, alpha "
           f"{report['adapter_alpha']}, lr {report['adapter_lr']}, {report['adapter_parameters']:,} numbers on every "
           "linear layer, active at look-ahead positions only"] if report.get("adapter_rank") else []),
        *([f"- training positions seen: {report['positions_seen']:,}"] if report.get("positions_seen") else []),
        "",
        "| embeddings | top-1 agreement LA_1 / LA_2 / ... (held-out) | accepted drafts per step (greedy "
        + ("PaSS + look-ahead adapters" if report.get("adapter_rank") else "PaSS") + ") | "
        "mean accepted tokens | draft acceptance rate |", "|---|---|---|---|---|",
        row("trained" + (" with look-ahead adapters" if report.get("adapter_rank") else ""), report.get("eval", {})),
    ]
    if "baseline_fixed_token" in report:
        lines.append(row("fixed-token baseline (untrained)", report["baseline_fixed_token"]))
    if report.get("curve"):
        lines += ["", "Held-out top-1 agreement against training positions seen (the agreement-vs-data curve, "
                  f"{len(report['curve'])} points):", "", "| step | positions | LA_1 / LA_2 / ... |", "|---|---|---|"]
        lines += [f"| {c['step']} | {c['positions']:,} | " + " / ".join(f"{a:.1%}" for a in c["top1_agreement"]) + " |"
                  for c in report["curve"]]
    return "\n".join(lines) + "\n"


def _data(report: dict) -> str:
    """The report's data line: what the training sequences were (``data_description``; a report written before it
    existed said "the model's own greedy generations" even for a ``--data`` text file, so only ``self`` says so)."""
    if "data_description" in report:
        return f"{report['data_description']} ({report['train_sequences']} sequences in all)"
    own = " of the model's own greedy generations" if report["data"] == "self" else ""
    return f"{report['data']} ({report['train_sequences']} sequences{own})"


def _loss(report: dict) -> str:
    """The report's loss line: first steps -> last steps (``loss_summary``), or why there is nothing to compare.
    Reports written before the step counts were kept had 5 and 20 steps."""
    if report.get("initial_loss") is None:
        return "no training step was recorded"
    if report.get("final_loss") is None:
        return f"{report['initial_loss']} (a run of one step: too short to compare first and last steps)"
    return (f"{report['initial_loss']} (first {count(report.get('initial_loss_steps', 5), 'step')}) -> "
            f"{report['final_loss']} (last {count(report.get('final_loss_steps', 20), 'step')})")
