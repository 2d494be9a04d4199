"""The race's text lines, from events and summaries alone: the metric strings, the compute line,
the first-step line and the greedy check (``pass_core.decoding.events.compare_outputs``). Plain markdown; no
figures, no Gradio. Figures live in ``race_charts``.
"""

from __future__ import annotations

from pass_core.decoding.events import StepEvent, compare_outputs, rounding_tolerance
from pass_core.decoding.metrics import RunSummary, speedup
from pass_core.registry import BASELINE, tree_entry_nodes
from pass_core.decoding.text import count
from pass_core.teaching.race import decode_rate, decode_speedup

from playground.race_charts import drafting_summaries, short_name
from playground.style import number


def prefill_line(events: dict[str, list[StepEvent]]) -> str:
    """Markdown: each method's first step in ms (the prompt prefill and the first token), kept out of the
    latency chart; "" before any method has a step."""
    parts = [f"{short_name(key)} {evs[0].step_s * 1000:,.0f} ms" for key, evs in events.items() if evs]
    return ("**First step** (prompt prefill + first token, not in the latency chart): " + "  ·  ".join(parts)
            if parts else "")


def _reference(keys) -> str:
    """The method others are compared with: the baseline (AR) when it races, else the first one."""
    keys = list(keys)
    return BASELINE if BASELINE in keys else keys[0]


def baseline_label(backend: str, auto: bool, replayed: bool = False) -> str:
    """What the speed-up is measured against: "vs AR on fp32", and "(chosen by measurement: the fastest AR here)"
    when ``--backend auto`` chose that backend on this machine (``LoadedModel.backend_choice``); ``replayed``: a
    trace's record of it ("" when the trace does not record it: ``UNKNOWN_BASELINE``)."""
    if replayed and not backend:
        return ""
    where = "on the machine that recorded it" if replayed else "here"
    return f"vs AR on {backend or 'this backend'}" + (f" (chosen by measurement: the fastest AR {where})" if auto
                                                       else "")


#: The speed-up's baseline when the backend AR ran on is unknown (a trace written before traces recorded it).
UNKNOWN_BASELINE = "vs AR (its backend is not recorded)"
#: A method's speed-up before it (or the baseline) has a step after the prefill.
NOT_YET = "not yet"
#: A method's speed-up when it or the baseline ended after its first step (one new token: the prefill wrote it), so
#: no rate after the prefill exists ("not yet" stood there after the race had ended).
ONLY_PREFILL = "– (ended at its prefill)"
#: The speed-up's second line in a sampled race.
SAMPLED_NOTE = ("sampled: each method drew its own text, so the ratio compares rates on different texts (even of "
                "equal length); tokens/s is each method's own rate")


def metric_texts(summaries: dict[str, RunSummary | None], events: dict[str, list[StepEvent]] | None = None,
                 baseline: str = "", greedy: bool = True) -> dict[str, str]:
    """Display strings of the headline metrics, keyed like ``METRIC_FORMULAS``.

    Args:
        summaries: method key -> its summary so far, or None before its first step; the order
            is the race's.
        events: the same methods' events: the speed-up then leaves each one's first step (the prompt prefill,
            ``prefill_line``) out (``teaching.race.decode_speedup``); None: whole runs (``events.speedup``).
        baseline: what AR ran on (``baseline_label``), the speed-up's second line ("": ``UNKNOWN_BASELINE``, a
            replay).
        greedy: temperature 0; a sampled race adds ``SAMPLED_NOTE`` to the speed-up.

    Returns:
        One string per metric, each naming the methods ("AR 16.1  ·  PaSS 12.0"). The speed-up is against AR
        when AR races, else against the first method; its later lines say what it compares.
    """
    def each(attr: str, spec: str) -> str:
        return "  ·  ".join(f"{short_name(k)} {number(s and getattr(s, attr), spec)}" for k, s in summaries.items())

    base = _reference(summaries)
    ratio = (lambda k: decode_speedup(events[k], events[base])) if events else (
        lambda k: speedup(summaries[k], summaries[base]))

    def missing(k: str) -> str:  # no ratio: "not yet" while it may come, "–" once a side ended on its prefill
        ended = events and any(len(events[key]) == 1 and events[key][-1].finish_reason for key in (k, base))
        return ONLY_PREFILL if ended else NOT_YET

    ratios = [f"{short_name(k)} " + (missing(k) if (r := ratio(k)) is None else f"{r:.2f}×") for k in summaries
              if k != base]  # "–×" read as a broken number
    notes = [((baseline or UNKNOWN_BASELINE) if base == BASELINE else f"vs {short_name(base)}")
             + ("; after the first step (the prefill)" if events else "")]
    notes += [] if greedy else [SAMPLED_NOTE]
    rates = []
    for key, s in drafting_summaries(summaries).items():
        rate = "–" if s is None or s.acceptance_rate is None else (
            f"{s.acceptance_rate:.1%} ({s.accepted_drafts} of {s.judged_drafts} "
            # a tree's rule tries every sibling in turn: a rate per node tried, lower than a chain's at equal drafts
            f"{'tree nodes tried' if tree_entry_nodes(key) else 'judged drafts'}; {s.drafted_tokens} drafted)")
        rates.append(f"{short_name(key)} {rate}")
    return {
        "tokens_per_s": each("tokens_per_s", ".1f"),
        "speedup": "\n".join([("  ·  ".join(ratios) or "–") + ("" if base == BASELINE else
                                                             f" (vs {short_name(base)}; {short_name(BASELINE)} "
                                                             "not racing)"), *notes]),
        "tokens_per_forward_pass": each("tokens_per_forward_pass", ".2f"),
        # "–" for a drafting method that verified no draft yet (1 or 2 tokens: its prefill): no verification
        # step to average over (AR keeps its 1.00, the baseline's convention)
        "mean_accepted_tokens": "  ·  ".join(
            f"{short_name(k)} " + ("–" if s and k != BASELINE and not s.verification_steps else
                                   number(s and s.mean_accepted_tokens, ".2f")) for k, s in summaries.items()),
        "acceptance_rate": "  ·  ".join(rates) or "–",
    }


def so_far(metrics: dict[str, str], running: bool) -> dict[str, str]:
    """``metrics`` (``metric_texts``) with "(so far)" after each box's first line while ``running`` (a race not yet
    finished, or a step-through's earlier step): a paused race's boxes read as final (ParallelSpec 2.01x after 4
    tokens)."""
    if not running:
        return metrics
    return {key: "\n".join([f"{first} (so far)", *rest]) for key, (first, *rest) in
            ((key, value.split("\n")) for key, value in metrics.items())}


def finish_line(summaries: dict[str, RunSummary | None],
                events: dict[str, list[StepEvent]] | None = None) -> str:
    """The finish view: markdown naming the method with the highest tokens/s (the tokens/s metric: generated
    tokens / summed compute time, whole run) and every other method's rate, fastest first; "" before two methods
    have a step. Greedy races write the same tokens, so the highest rate is also the first to finish on the
    compute clock; sampled races may write different lengths, so it is the rate that is compared. A race in which
    no method verified a draft (one new token: the prefill wrote it) names no method: each ran as AR does.
    With ``events``, when another method is fastest without each first step (the prompt prefill, which the
    speed-up leaves out: ``teaching.race.decode_rate``), a second sentence names it and those rates: in a short
    race one prefill's noise could name a winner whose speed-up was below 1x."""
    rates = sorted(((s.tokens_per_s, key) for key, s in summaries.items() if s and s.steps),
                   key=lambda pair: -pair[0])
    if len(rates) < 2:
        return ""
    if not any(s.verification_steps for s in summaries.values() if s):
        every = ", ".join(f"{short_name(key)} {rate_text(rate)}" for rate, key in rates)
        return (f"**No method verified a draft in this race**: each ran as AR does, so the tokens/s differ by timing "
                f"alone ({every}). Raise max new tokens to see drafting.")
    (best, winner), rest = rates[0], rates[1:]
    others = ", ".join(f"{short_name(key)} {rate_text(rate)}" for rate, key in rest)
    line = f"**Highest tokens/s: {short_name(winner)}** at {rate_text(best)} tokens/s (then {others})."
    after = sorted(((rate, key) for key, evs in (events or {}).items() if (rate := decode_rate(evs))),
                   key=lambda pair: -pair[0])
    if len(after) >= 2 and after[0][1] != winner:
        decoding = ", ".join(f"{short_name(key)} {rate_text(rate)}" for rate, key in after)
        line += (f" Without each first step (the prompt prefill, which the speed-up leaves out) "
                 f"**{short_name(after[0][1])}** was fastest: {decoding} tokens/s.")
    return line


def rate_text(rate: float) -> str:
    """A tokens/s rate with one decimal, or two significant digits below 1 (one token after a long prefill read
    "0.0 tokens/s")."""
    return f"{rate:.1f}" if rate >= 1 else f"{rate:.2g}"


def compute_line(summaries: dict[str, RunSummary | None]) -> str:
    """One markdown line of compute facts per method: tokens, steps (and how many verified drafts),
    forward passes (target + drafter when a separate drafter model ran), compute time, ms per step, and whether
    it ended on the end-of-text token (a sampled method that ends early said nothing of why)."""
    parts = []
    for key, s in summaries.items():
        if not s or not s.steps:
            continue
        steps = count(s.steps, "step") + (f" ({count(s.verification_steps, 'verification step')})"
                                          if key != BASELINE else "")
        passes = (f"{s.forward_passes} target + {count(s.drafter_passes, 'drafter pass')}" if s.drafter_passes
                  else count(s.forward_passes, "forward pass"))
        parts.append(f"**{short_name(key)}** {count(s.tokens, 'token')} in {steps}, {passes}, "
                     f"{s.compute_time_s:.2f} s compute ({s.ms_per_step:.1f} ms/step)"
                     + ("; it wrote the end-of-text token (EOS)" if s.finish_reason == "eos" else ""))
    return "  \n".join(parts)


def _tie_note(c, dtype: str) -> str:
    """Why two greedy outputs differ: a near-tie within the dtype's rounding, or a real error."""
    near = c.near_tie(dtype)
    if near is None:
        return ""
    margin, name = min(m for m in (c.reference_margin, c.other_margin) if m is not None), dtype.replace("torch.", "")
    if near:
        return (f" The top two tokens were {margin:.3g} logits apart there: a near-tie within {name} rounding "
                f"(up to {rounding_tolerance(name):.2g}), where passes over several tokens may round the other "
                "way; not an error. Use float32 for exact agreement.")
    return f" The top two tokens were {margin:.3g} logits apart, far beyond {name} rounding: this is an error."


def greedy_check(events: dict[str, list[StepEvent]], greedy: bool, finished: bool, dtype: str = "float32") -> str:
    """Markdown saying whether each method's output equals the reference's (greedy only), and where
    it first differs (``pass_core.decoding.events.compare_outputs``).

    In greedy mode speculative decoding must reproduce AR token for token; a difference
    points at numerics (batched verification rounding differently near a tie) or a bug.

    Args:
        events: method key -> its events so far, in race order. The reference is AR when it
            races, else the first method (the drafting methods must then agree with each other).
        greedy: temperature 0.
        finished: the race is over (lengths are compared only then).
        dtype: the model's weights' dtype: at a difference, the logit margin of the top two tokens
            says whether it is a near-tie within its rounding (``OutputComparison.near_tie``).
    """
    if not greedy:
        return ("Sampling (temperature > 0): the outputs differ by design; speculative decoding keeps "
                "the target model's distribution, not its exact draws.")
    ref_key = _reference(events)
    ref_name = short_name(ref_key)
    lines = []
    for key, evs in events.items():
        if key == ref_key:
            continue
        c, name = compare_outputs(events[ref_key], evs), short_name(key)
        if c.first_difference is not None:
            lines.append(f"✗ **{name} differs from {ref_name} at token {c.first_difference}** (0-based): "
                         f"{ref_name} `{c.reference_text!r}` vs {name} `{c.other_text!r}`, after `{c.context!r}`."
                         + _tie_note(c, dtype))
        elif finished and c.identical:
            lines.append(f"✓ **Greedy check: {name} output is identical to {ref_name}** "
                         f"({count(c.compared, 'token')}).")
        elif finished:
            lines.append(f"✗ **{name}: same first {count(c.compared, 'token')} as {ref_name}, but different "
                         f"lengths**: {ref_name} {count(c.reference_tokens, 'token')}, "
                         f"{name} {count(c.other_tokens, 'token')}.")
        else:
            lines.append(f"… Greedy check: {name} identical to {ref_name} so far "
                         f"({count(c.compared, 'token')} compared).")
    return "  \n".join(lines)
