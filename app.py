"""PaSS Playground: autoregressive decoding (AR) raced against speculative decoding methods.

``python app.py [--model NAME] [--port N]`` serves on 127.0.0.1:7860 (--host / --port, or GRADIO_SERVER_NAME /
GRADIO_SERVER_PORT, override). Importing this module loads nothing and launches nothing: the page is
``playground.page.build_demo``; this file parses the command line, starts loading the model and launches.
"""

from __future__ import annotations

import argparse
import os

from playground.page import build_demo, launch_options  # page first: it imports Hugging Face's `spaces` before CUDA
from playground.race_inputs import DEFAULT_RACE, method_offer
from pass_core.runtime.backends import AUTO, BACKEND_CHOICES, BACKENDS, check_backend, default_backend, set_cpu_threads
from pass_core.runtime.holder import ModelHolder
from pass_core.runtime.models import DEFAULT_MODEL, pick_device

def port_number(text: str) -> int:
    """``--port``'s value: a whole number from 1 to 65535 (-1 or 70000 aborted the process in the socket's bind)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port: give one from 1 to 65535")
    return port


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python app.py`` (docs/guide.md, "Starting the app", lists every option)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"model name for load_model (default {DEFAULT_MODEL})")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    parser.add_argument("--backend", choices=list(BACKEND_CHOICES), default=None,
                        help="how every method's passes are computed (AR too): "
                             + "; ".join(f"{b.name}: {b.description}" for b in (AUTO, *BACKENDS.values()))
                             + f" (default here: {default_backend('auto')})")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: measured with --backend auto, else torch's choice; 1 avoids the worst slow-downs when other "
                             "jobs share the CPU)")
    parser.add_argument("--untrained-drafters", action="store_true",
                        help="on a model without trained drafter files, offer the methods that need them anyway, with "
                             "untrained drafters (expect almost no accepted drafts; train files: docs/training.md)")
    parser.add_argument("--replay-only", action="store_true",
                        help="load no model: serve the page to replay traces (Run and the lab need a model)")
    parser.add_argument("--port", type=port_number, default=os.environ.get("GRADIO_SERVER_PORT", "7860"),
                        help="port to serve on (default: GRADIO_SERVER_PORT, else 7860)")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                        help="address to serve on (default: GRADIO_SERVER_NAME, else 127.0.0.1; 0.0.0.0: every "
                             "network interface)")
    return parser


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, start loading the model and serve the page (blocks)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    backend = args.backend or default_backend(args.device)
    try:
        dtype = check_backend(backend, pick_device(args.device)).dtype
        set_cpu_threads(args.threads)
    except ValueError as err:
        parser.error(str(err))
    offered = method_offer(args.model, DEFAULT_RACE, args.untrained_drafters).keys  # warmed up: the ones offered
    holder = (ModelHolder.without_model() if args.replay_only
              else ModelHolder(args.model, args.device, dtype=dtype, backend=backend, threads=args.threads,
                               methods=offered).start())
    demo = build_demo(holder, untrained_drafters=args.untrained_drafters)
    try:
        demo.launch(server_name=args.host, server_port=args.port, **launch_options())
    except OSError:  # gradio's traceback said "Cannot find empty port", also for a host that is not this machine's
        parser.exit(1, f"error: --host {args.host} --port {args.port}: cannot serve there (the port is in use, or the "
                       "host is not an address of this machine): give another --port or --host.\n")


if __name__ == "__main__":
    main()
