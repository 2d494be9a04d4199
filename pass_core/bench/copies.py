"""One loaded copy of the model per backend named in ``--methods`` ("parallelspec@bf16"), for a benchmark that
compares backends in one run."""

from __future__ import annotations

from pass_core.bench.peers import PEERS
from pass_core.registry import BASELINE
from pass_core.runtime.backends import BACKENDS, check_backend, prepare_backend
from pass_core.runtime.models import load_model


def split_backend(name: str) -> tuple[str, str | None]:
    """A ``--methods`` entry -> (entry without its backend, backend or None for the run's default):
    "parallelspec+auto@bf16" -> ("parallelspec+auto", "bf16").

    Raises:
        ValueError: an unknown backend.
    """
    entry, at, backend = name.partition("@")
    if at and backend not in BACKENDS:
        raise ValueError(f"{name!r}: unknown backend {backend!r} after @: choose from {', '.join(BACKENDS)}.")
    return entry, (backend or None)


def method_backend(name: str, loaded, models: dict | None = None) -> str:
    """The backend an entry runs on: its @suffix, else the run's; the peers run on the fp32 copy when one was
    loaded (``models``, ``load_backend_copies``'s; they were said to run on the run's backend, and compared with
    its AR)."""
    if name in PEERS:
        return "fp32" if "fp32" in (models or {}) else loaded.backend_name
    return split_backend(name)[1] or loaded.backend_name


def load_backend_copies(args, methods: list[str], loaded, device, log) -> tuple[list[str], dict, dict]:
    """One loaded copy per backend named by an @suffix (the peers get an fp32 copy). An entry whose backend is
    the run's own loses its suffix (one AR, not two); an entry whose backend this machine does not offer is
    skipped with a note (e.g. bf16 on a CPU without native bfloat16 matmuls).

    Returns:
        (the entries to run, {backend: loaded copy}, {entry: why it was skipped}).
    """
    own = method_backend(BASELINE, loaded)
    wanted = {split_backend(m)[1] for m in methods if m not in PEERS} - {None, own}
    if any(m in PEERS for m in methods) and own != "fp32":
        wanted.add("fp32")
    models, skipped, refused = {own: loaded}, {}, {}
    for name in sorted(wanted):
        try:
            check_backend(name, device)
        except ValueError as err:
            refused[name] = str(err)
            continue
        log(f"loading a copy for backend {name}…")
        copy = load_model(args.model, device=args.device, dtype=BACKENDS[name].dtype, progress=None)
        models[name] = prepare_backend(copy, name)
    out = []
    for m in methods:
        entry, suffix = split_backend(m) if m not in PEERS else (m, None)
        if suffix in refused:
            skipped[m] = f"skipped: {refused[suffix]}"
            log(f"{m}: {skipped[m]}")
        else:
            out.append(entry if suffix == own else m)
    return list(dict.fromkeys(out)), models, skipped
