"""The process's one target model, loaded in a background thread so that a page can appear at once,
then warmed up: each registered method decodes a few tokens once, so that the first step of a race
holds the prompt prefill only, not one-time set-up costs (first kernels, allocations, file reads)."""

from __future__ import annotations

import sys
import threading
import time

from pass_core.runtime.backend_choice import choice_line
from pass_core.runtime.backends import prepare_backend
from pass_core.runtime.models import DEFAULT_MODEL, LoadedModel, load_model
from pass_core.runtime.pass_cost import busy_warning, cached_pass_cost, confirm_or_remeasure, pass_cost_curves
from pass_core.registry import METHODS
from pass_core.decoding.settings import DecodeSettings
from pass_core.decoding.text import Detokenizer

#: The warm-up: this prompt, this many new tokens per method (a few seconds in all on the embedded model, CPU).
WARMUP_PROMPT = "Hello"
WARMUP_TOKENS = 4
#: Why Run and the lab refuse when the app was started with ``--replay-only``.
NO_MODEL = "No model is loaded: the app was started with --replay-only. Run and the lab need a model; Replay works."


class ModelNotReady(RuntimeError):
    """The model failed to load, or is still loading after the wait."""


class ModelHolder:
    """The process's one target model, loaded once in a background thread and shared read-only.

    The model is a process resource, not per-user data (the app keeps per-user data in its
    session state). The page appears at once and shows ``status()`` while this loads.
    """

    def __init__(self, name: str = DEFAULT_MODEL, device: str = "auto", loaded: LoadedModel | None = None,
                 dtype: str = "auto", backend: str | None = None, threads: int | None = None,
                 methods: tuple[str, ...] | None = None):
        self.name, self.device, self.loaded, self.dtype, self.backend = name, device, loaded, dtype, backend
        self.methods = tuple(METHODS) if methods is None else tuple(methods)  # the ones warmed up: the page's offer
        self.threads = threads  # fixed by --threads; None: auto chooses (or torch's default)
        self.error: str | None = None
        self.progress = "ready" if loaded else "Loading model…"
        self.warmup_s: float | None = None  # seconds the warm-up took (None: not warmed up here)
        self.warmup_problems: list[str] = []  # "method: error" for each method whose warm-up failed
        self.replay_only = False  # started without a model (``without_model``)
        self._done = threading.Event()
        if loaded is not None:
            self._done.set()

    @classmethod
    def without_model(cls) -> "ModelHolder":
        """A holder that never loads a model (``app.py --replay-only``): ``wait`` raises ``ModelNotReady``
        with ``NO_MODEL``, and the status lines say so."""
        holder = cls(name="")
        holder.replay_only = True
        holder._done.set()
        return holder

    def token_text(self, token_id: int) -> str:
        """The text of one token of the loaded model (for chart labels); the id itself without a model."""
        if self.loaded is None:
            return str(token_id)
        return Detokenizer(self.loaded.tokenizer).token_text(token_id)

    def start(self) -> "ModelHolder":
        """Start loading in a daemon thread; return self."""
        threading.Thread(target=self._load, name="load-model", daemon=True).start()
        return self

    def _load(self) -> None:
        start = time.perf_counter()
        try:
            loaded = load_model(self.name, device=self.device, dtype=self.dtype, progress=self._set_progress)
            if self.backend:
                self._set_progress(f"preparing the {self.backend} backend…")
                prepare_backend(loaded, self.backend, self.threads, progress=self._set_progress)
            self._set_progress("warming up each method…")
            self.warm_up(loaded)
            self._set_progress("measuring this machine's pass cost c(w)…")
            if pass_cost_curves(loaded).refused is not None:  # once; the cost chart and auto draft lengths read it
                # a noisy moment spoils a curve even on an idle machine, and some CPUs have real dips: once more (its
                # dips only, where they were the problem); still refused: the page says so (Re-measure pass cost)
                self._set_progress("checking the pass cost c(w) once more: the first curve was not physical…")
                confirm_or_remeasure(loaded)
            warning = busy_warning(cached_pass_cost(loaded))  # the newest curve, refused or not
            if warning:
                print(f"warning: pass cost c(w): {warning}", file=sys.stderr)
            self.loaded = loaded
            # the server's log said only gradio's "Running on local URL": a first race through the API waited 30 s
            # unexplained (helper 71)
            print(f"Model ready: {loaded.display_name} (loaded, warmed up and its pass cost measured in "
                  f"{time.perf_counter() - start:.1f} s): races and the lab run now.", flush=True)
        except Exception as err:  # noqa: BLE001 - shown in the status line; the app keeps serving
            self.error = f"{type(err).__name__}: {err}"
            print(f"error: the model could not be loaded: {self.error} (the page still serves replays)",
                  file=sys.stderr)
        finally:
            self._done.set()

    def warm_up(self, loaded: LoadedModel) -> float:
        """Decode ``WARMUP_TOKENS`` tokens of ``WARMUP_PROMPT`` once with each method of ``methods`` (the ones the
        page offers; default settings, greedy), so that no race pays one-time set-up costs in its first step. A
        method that fails is noted in ``warmup_problems`` (it will fail again, with its message, when it races) and
        the others still warm up.

        Returns:
            The seconds it took (also kept in ``warmup_s``).
        """
        settings = DecodeSettings(max_new_tokens=WARMUP_TOKENS, temperature=0.0)
        start = time.perf_counter()
        for key in self.methods:
            method = METHODS[key]
            try:
                state, _ = method.find_files(loaded, settings.num_lookahead)
                for _ in method.decode(loaded, WARMUP_PROMPT, settings, state):
                    pass
            except Exception as err:  # noqa: BLE001 - the race reports it to the visitor
                self.warmup_problems.append(f"{key}: {type(err).__name__}: {err}")
        self.warmup_s = time.perf_counter() - start
        return self.warmup_s

    def _set_progress(self, message: str) -> None:
        self.progress = f"Loading model… {message}"

    @property
    def ready(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout_s: float | None = None) -> LoadedModel:
        """The loaded model, waiting for the load.

        Raises:
            ModelNotReady: the load failed (the message says why) or did not finish in ``timeout_s``.
        """
        if not self._done.wait(timeout_s):
            raise ModelNotReady("The model is still loading; try again in a moment.")
        if self.replay_only:
            raise ModelNotReady(NO_MODEL)
        if self.loaded is None:
            raise ModelNotReady(f"The model could not be loaded: {self.error}")
        return self.loaded

    def status(self) -> str:
        """Markdown status line: loading progress, the error, or the model's description (and the warm-up)."""
        if not self.ready:
            return self.progress
        if self.replay_only:
            return NO_MODEL
        if self.loaded is None:
            return f"⚠ **Model failed to load**: {self.error}"
        choice = self.loaded.backend_choice
        return (f"**Target model:** {self.loaded.describe()}" + self._warmup_note()
                + (f"  \n**Backend:** {choice_line(choice).removeprefix('backend ')}" if choice else ""))  # not twice

    def headline(self) -> str:
        """A short status for the top of the page (fits one line on a phone): loading progress, "ready", or
        that the load failed; ``status`` has the details."""
        if not self.ready:
            return self.progress
        if self.replay_only:
            return "**Replay only:** no model loaded; load a trace under *Traces* to replay a race."
        if self.loaded is None:
            return "⚠ **Model failed to load** (details under *Model and drafters*)."
        return f"**Ready:** {self.loaded.display_name}."

    def _warmup_note(self) -> str:
        if self.warmup_s is None:
            return ""
        problems = f" (failed: {'; '.join(self.warmup_problems)})" if self.warmup_problems else ""
        return f"  \nWarmed up: each method decoded {WARMUP_TOKENS} tokens once, in {self.warmup_s:.1f} s{problems}."
