"""The process's one target model, loaded in a background thread so that a page can appear at once."""

from __future__ import annotations

import threading

from .models import DEFAULT_MODEL, LoadedModel, load_model


class ModelNotReady(RuntimeError):
    """The model failed to load, or is still loading after the wait."""


class ModelHolder:
    """The process's one target model, loaded once in a background thread and shared read-only.

    The model is a process resource, not per-user data (the app keeps per-user data in its
    session state). The page appears at once and shows ``status()`` while this loads.
    """

    def __init__(self, name: str = DEFAULT_MODEL, device: str = "auto", loaded: LoadedModel | None = None):
        self.name, self.device, self.loaded = name, device, loaded
        self.error: str | None = None
        self.progress = "ready" if loaded else "Loading model…"
        self._done = threading.Event()
        if loaded is not None:
            self._done.set()

    def start(self) -> "ModelHolder":
        """Start loading in a daemon thread; return self."""
        threading.Thread(target=self._load, name="load-model", daemon=True).start()
        return self

    def _load(self) -> None:
        try:
            self.loaded = load_model(self.name, device=self.device, progress=self._set_progress)
        except Exception as err:  # noqa: BLE001 - shown in the status line; the app keeps serving
            self.error = f"{type(err).__name__}: {err}"
        finally:
            self._done.set()

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
        if self.loaded is None:
            raise ModelNotReady(f"The model could not be loaded: {self.error}")
        return self.loaded

    def status(self) -> str:
        """Markdown status line: loading progress, the error, or the model's description."""
        if not self.ready:
            return self.progress
        if self.loaded is None:
            return f"⚠ **Model failed to load**: {self.error}"
        return f"**Target model:** {self.loaded.describe()}"
