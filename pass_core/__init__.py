"""PaSS Playground's core: speculative decoding as a stream of typed step events.

The front door (everything else lives in the subpackages, see docs/architecture.md):

- ``load_model(name="smollm2-135m-instruct", device="auto", dtype="auto")``: the target
  model and its tokenizer, as a ``LoadedModel``.
- ``METHODS`` / ``get_method(key)``: the registered decoding methods ("ar", "pass", "parallelspec", ...).
- ``DecodeSettings``: validated settings of one run (max new tokens, temperature, drafts per step, seed, ...).
- ``StepEvent``, ``TokenRecord``, ``DraftRecord``: what every method yields, one event per step;
  ``summarize(events)`` gives a run's metrics as a ``RunSummary``, ``output_text(events)`` its text.

Example::

    from pass_core import DecodeSettings, get_method, load_model, output_text, summarize

    loaded = load_model()                                   # the embedded SmolLM2-135M-Instruct
    settings = DecodeSettings(max_new_tokens=32, temperature=0.0, num_lookahead=3)
    events = list(get_method("parallelspec").decode(loaded, "Write a haiku about rain", settings))
    print(output_text(events))
    print(summarize(events).mean_accepted_tokens)          # tokens per verification step

Layers (read ``decoding/`` first; it imports nothing from the folders after it):
``decoding`` (the algorithm) -> ``drafters`` (PaSS look-ahead, ParallelSpec, prompt lookup, draft model) ->
``runtime`` (models, backends, pass cost) -> ``teaching`` (race, trace, theory, lab) / ``training`` / ``bench``.
"""

from pass_core.decoding.events import DraftRecord, StepEvent, TokenRecord, output_text
from pass_core.decoding.metrics import RunSummary, summarize
from pass_core.decoding.settings import DecodeSettings
from pass_core.registry import METHODS, get_method
from pass_core.runtime.models import LoadedModel, load_model

__all__ = ["load_model", "LoadedModel", "METHODS", "get_method", "DecodeSettings", "StepEvent", "TokenRecord",
           "DraftRecord", "RunSummary", "summarize", "output_text"]
