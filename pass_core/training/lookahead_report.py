"""The look-ahead training report as markdown (``python -m pass_core.train --report``): data, steps, time,
held-out agreement per look-ahead position, accepted drafts per step and the agreement-vs-data curve.
"""

from __future__ import annotations

from pathlib import Path


def report_markdown(report: dict, command: str) -> str:
    """The training report as markdown: data, steps, time, agreement, accepted drafts, baseline."""
    def row(name, ev):
        agree = " / ".join(f"{a:.1%}" for a in ev.get("top1_agreement", []))
        g = ev.get("greedy_pass", {})
        return (f"| {name} | {agree} | {g.get('accepted_drafts_per_step', float('nan')):.3f} | "
                f"{g.get('mean_accepted_tokens', float('nan')):.3f} | {g.get('acceptance_rate', float('nan')):.3f} |")
    lines = [
        f"# Look-ahead embeddings for {report['model']}, L={report['num_lookahead']}", "",
        f"Command: `{command}`", "",
        f"- data: {report['data']} ({report['train_sequences']} sequences of the model's own greedy generations)",
        f"- steps: {report['steps']} x {report['batch_positions']} prefix positions, lr {report['lr']}, "
        f"loss {report['loss_kind']}, init {report['init']}"
        + (f" (rows seeded from {Path(report['init_from']).name})" if report.get("init_from") else "")
        + f", shared {report['shared']}, "
        f"tokens per draft {report['tokens_per_draft']}",
        f"- training time: {report['train_time_s']} s ({report['positions_per_s']} positions/s); "
        f"total with data and evaluation: {report['total_time_s']} s",
        f"- loss: {report['initial_loss']} (first 5 steps) -> {report['final_loss']} (last 20 steps)",
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
