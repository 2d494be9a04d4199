"""Command line: decode one prompt with any registered method and print coloured tokens and a summary.

    python -m pass_core.generate --method pass --prompt "Write a haiku about rain"
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

from pass_core.decoding.events import ended_at_once, output_text, output_token_ids
from pass_core.decoding.metrics import summarize
from pass_core.runtime.backends import AUTO, BACKEND_CHOICES, BACKENDS, prepare_backend, resolve_backend, set_cpu_threads
from pass_core.runtime.backend_choice import choice_line
from pass_core.runtime.models import DEFAULT_MODEL, load_model, pick_device
from pass_core.runtime.outputs import check_output_path, file_name, json_with, stdout_failed
from pass_core.registry import METHODS, fusable_keys
from pass_core.decoding.text import check_prompt, count
from pass_core.teaching.trace import SCHEMA as TRACE_SCHEMA, make_trace, save_trace
from pass_core.decoding.settings import SETTING_RANGES, DecodeSettings, command_line_message

#: ANSI colours per label (Okabe-Ito-like on a terminal).
ANSI = {
    "target": "", "exact": "\033[34m", "accepted": "\033[32m", "rejected": "\033[9;31m",
    "resampled": "\033[33m", "bonus": "\033[35m",
}
RESET = "\033[0m"
#: Control characters a model may write (escape, carriage return, backspace...): shown as ``\x1b`` and the like, not
#: sent raw to the terminal (an escape sequence from the model recoloured or rewrote the terminal).
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def visible(text: str) -> str:
    """``text`` with its control characters but newline and tab written as ``\\xNN`` (``CONTROL``)."""
    return CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def build_parser() -> argparse.ArgumentParser:
    """The CLI's argument parser."""
    d = DecodeSettings()
    p = argparse.ArgumentParser(prog="python -m pass_core.generate", description=__doc__.splitlines()[0])
    p.add_argument("--method", default="pass", choices=list(METHODS),
                   help="; ".join(f"{k}: {m.description}" for k, m in METHODS.items()) + " (default: %(default)s)")
    p.add_argument("--prompt", required=True, help="the user's text")
    p.add_argument("--model", default=DEFAULT_MODEL, help="model name, hub id, folder or .gguf file")
    p.add_argument("--lookahead", type=file_name, help="look-ahead safetensors file, or 'fixed-token' (PaSS)")
    p.add_argument("--adapters", type=file_name, default=None,
                   help="look-ahead adapter file (PaSS + look-ahead adapters, method pass-lora; default: the "
                        "shipped one)")
    p.add_argument("--drafter", type=file_name, help="ParallelSpec drafter file (default: the shipped one)")
    p.add_argument("--draft-model", type=file_name, default=None, metavar="NAME",
                   help="method draft-model: a causal LM folder, hub id or .gguf file with the target's vocabulary, "
                        "or a copy of the target: bf16 (the default), first-layers, int8 or int8-all")
    lo, hi, _ = SETTING_RANGES["num_lookahead"]
    p.add_argument("--num-lookahead", type=int, default=d.num_lookahead, help=f"L, {lo}-{hi} (default: %(default)s)")
    lo, hi, _ = SETTING_RANGES["max_new_tokens"]
    p.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens,
                   help=f"tokens to generate, {lo}-{hi:,} (default: %(default)s)")
    p.add_argument("--temperature", type=float, default=d.temperature, help="0 = greedy (default: %(default)s)")
    p.add_argument("--top-k", type=int, default=d.top_k, help="0 = off (default: %(default)s)")
    p.add_argument("--top-p", type=float, default=d.top_p, help="1 = off (default: %(default)s)")
    p.add_argument("--seed", type=int, default=d.seed,
                   help="seed of the run's random generator (sampling; default: %(default)s)")
    p.add_argument("--raw", action="store_true", help="feed the prompt without the chat template")
    p.add_argument("--fused", action="store_true", help="PaSS with the fused step (extension, 1 pass per step)")
    p.add_argument("--show-rejected", action="store_true", help="print rejected drafts (struck through)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or mps (default: %(default)s)")
    p.add_argument("--dtype", default="auto",
                   help="auto (float32 on the default backend), float32, bfloat16 or float16 (plain eager PyTorch)")
    p.add_argument("--backend", choices=list(BACKEND_CHOICES), help="how passes are computed: "
                   + "; ".join(f"{b.name}: {b.description}" for b in (AUTO, *BACKENDS.values()))
                   + " (sets the dtype; default: auto on a CPU, else fp32, unless --dtype is given)")
    p.add_argument("--auto-drafts", action="store_true",
                   help="cost-aware draft lengths (extension): each step verifies 0..L drafts, chosen from this "
                        "machine's pass-cost curve and the acceptance so far")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: with --backend auto the count it measured "
                                               "fastest, 1 or all cores, else torch's choice; 1 avoids the worst "
                                               "slow-downs when other jobs share the CPU)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--trace", metavar="FILE", help="also write the run as a JSON trace (events with the token "
                                                   "inspector's data), replayable in the app without a model; "
                                                   "a name ending in .json")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code (2 on bad input, with a message on stderr)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.trace is not None:  # "" was ignored without a word, a .txt written that the app will not replay
            check_output_path(args.trace, "--trace", "trace.json", "a trace is a .json file (the app replays .json "
                              "files only)", json_with(schema=TRACE_SCHEMA))  # not a model's config.json
        set_cpu_threads(args.threads)
    except ValueError as err:
        parser.error(str(err))
    log = (lambda msg: print(msg, file=sys.stderr)) if not args.json else (lambda msg: None)
    method = METHODS[args.method]
    for option in ("lookahead", "adapters", "drafter", "draft_model"):
        if getattr(args, option) and method.file_option != option:
            print(f"note: --{option.replace('_', '-')} is not used by --method {args.method}", file=sys.stderr)
    given = getattr(args, method.file_option) if method.file_option in ("lookahead", "adapters", "drafter") else None
    if given and given != "fixed-token" and not os.path.exists(given):  # before the model loads (seconds)
        print(f"error: --{method.file_option} {given!r} does not exist.", file=sys.stderr)
        return 2
    if args.auto_drafts and method.drafter is None:  # taken unsaid (--fused gets a note)
        print(f"note: --auto-drafts is not used by --method {args.method}: it drafts nothing", file=sys.stderr)
    if args.fused and not method.fusable:
        print(f"note: --fused is not used by --method {args.method} (fused step: "
              f"{', '.join(fusable_keys())})", file=sys.stderr)
    colours = ANSI if sys.stdout.isatty() else dict.fromkeys(ANSI, "")  # no escape codes in files and pipes
    events, interrupted = [], False
    try:
        settings = DecodeSettings(max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                                  top_k=args.top_k, top_p=args.top_p, seed=args.seed,
                                  num_lookahead=args.num_lookahead, chat_template=not args.raw, fused=args.fused,
                                  inspect=bool(args.trace), auto_drafts=args.auto_drafts)
        check_prompt(args.prompt)  # before the model loads
        backend, dtype = resolve_backend(args.backend, args.dtype, pick_device(args.device))
        loaded = load_model(args.model, device=args.device, dtype=dtype, progress=log)
        if backend:
            prepare_backend(loaded, backend, args.threads, progress=log)
        if loaded.backend_choice:
            log(choice_line(loaded.backend_choice))
        log(f"model: {loaded.describe()}")
        path = getattr(args, method.file_option) if method.file_option else None
        state, which = method.find_files(loaded, settings.num_lookahead, path)
        # a look-ahead file decides L
        settings = settings.with_(num_lookahead=getattr(state, "num_lookahead", settings.num_lookahead))
        if which:
            log(f"{method.file_option or 'files'}: {which}")
        if settings.auto_drafts and method.drafter is not None:  # else a silent pause of about 10 s (wall time only)
            log("cost-aware draft lengths: measuring this machine's pass cost c(w) first (a few seconds; not counted "
                "as compute)")
        start = time.perf_counter()
        for event in method.decode(loaded, args.prompt, settings, state):
            events.append(event)
            if not args.json:
                for tok in event.tokens:
                    if tok.committed or args.show_rejected:
                        text = visible(tok.text if tok.committed or colours is ANSI else f"~~{tok.text}~~")
                        sys.stdout.write(f"{colours[tok.label]}{text}{RESET if colours[tok.label] else ''}")
                sys.stdout.flush()
    except ValueError as err:
        print(f"error: {command_line_message(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: the steps made so far are still shown, traced and counted
        if not events:
            print("\ninterrupted (Ctrl-C) before the first step: nothing was generated.", file=sys.stderr)
            return 130
        interrupted = True
        print(f"\ninterrupted (Ctrl-C) after {len(events)} steps: what follows covers those steps.", file=sys.stderr)
    wall = time.perf_counter() - start
    if not args.json:
        print()  # ends the output's line: the notes below go to stderr, which a terminal shows on the same line
    failed = ""  # the output comes first: a trace that cannot be written loses nothing else
    if args.trace:
        try:
            log(f"trace: {save_trace(make_trace(loaded, args.prompt, settings, {args.method: events}), args.trace)}")
        except OSError as err:
            failed = (f"error: the trace {args.trace} could not be written ({err.strerror or err}); nothing was "
                      "changed there")
    if ended_at_once(events):
        print("note: the model ended immediately (its first token was EOS) and wrote nothing"
              + ("; try without --raw, so that the prompt is wrapped in the chat template" if args.raw else ""),
              file=sys.stderr)
    summary = summarize(events, method=args.method)
    if args.json:
        out = {
            "method": args.method, "model": loaded.name, "model_description": loaded.describe(),
            "backend": loaded.backend or None, "files": which or None,
            "settings": settings.to_dict(),
            "token_ids": output_token_ids(events), "text": output_text(events),
            "summary": {**summary.to_dict(), "wall_time_s": wall}, "interrupted": interrupted,
        }
        print(json.dumps(out, ensure_ascii=False))
        return _end(failed, interrupted)
    seen = {tok.label for e in events for tok in e.tokens if tok.committed or args.show_rejected}
    legend = " ".join(f"{colours[k]}{k}{RESET if colours[k] else ''}" for k in colours if k in seen)
    print(f"\n[{legend}]" + ("" if colours is ANSI else " (colours on a terminal only)"))
    s = summary
    acc = "-" if s.acceptance_rate is None else f"{s.acceptance_rate:.2f}"
    print(f"{count(s.tokens, 'token')} in {count(s.steps, 'step')}, {count(s.forward_passes, 'forward pass')} | "
          f"tokens/forward pass {s.tokens_per_forward_pass:.2f} | mean accepted tokens {s.mean_accepted_tokens:.2f} | "
          f"acceptance rate {acc} | {s.tokens_per_s:.1f} tokens/s of compute ({s.compute_time_s:.2f} s), "
          f"wall {wall:.2f} s | finish: {s.finish_reason or ('interrupted' if interrupted else '-')}")
    return _end(failed, interrupted)


def _end(failed: str, interrupted: bool = False) -> int:
    """The exit status: 1 after saying why when an output file could not be written, 130 after Ctrl-C (as a shell
    reports it), else 0."""
    if failed:
        print(failed, file=sys.stderr)
    return 1 if failed else 130 if interrupted else 0


def cli(argv: list[str] | None = None) -> int:
    """``python -m pass_core.generate``: ``main``, and when its output cannot be written, exit 1: quietly where the
    reader went away (``| head``, as other command-line tools do), else in one line (``> /dev/full``: a traceback)."""
    try:
        return main(argv)
    except OSError as err:
        return stdout_failed(err)


if __name__ == "__main__":
    sys.exit(cli())
