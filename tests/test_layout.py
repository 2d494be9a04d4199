"""The package's architecture holds: ``decoding/`` imports nothing from the layers after it, ``pass_core``
imports no UI library, the front door exposes the public surface, and no module grows past its ceiling."""

from __future__ import annotations

import ast
from pathlib import Path

import pass_core

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "pass_core"
FORBIDDEN_FROM_DECODING = ("pass_core.runtime", "pass_core.training", "pass_core.bench", "pass_core.teaching",
                           "pass_core.drafters", "pass_core.registry")
MAX_LINES = 330  # "about 300" lines a file


def imported_modules(path: Path) -> set[str]:
    """Every module an ``import`` or ``from ... import`` names in ``path`` (relative imports resolved)."""
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                names.add(".".join(base + ([node.module] if node.module else [])))
            else:
                names.add(node.module)
    return names


def test_import_walker_sees_a_forbidden_import(tmp_path):
    """The walker itself can fail: a decoding module importing runtime is seen."""
    bad = PACKAGE / "decoding" / "_probe_bad_import.py"
    try:
        bad.write_text("from pass_core.runtime.pass_cost import cached_pass_cost\nfrom ..training import data\n")
        assert {"pass_core.runtime.pass_cost", "pass_core.training"} <= imported_modules(bad)
    finally:
        bad.unlink()


def test_decoding_imports_nothing_from_later_layers():
    offenders = [f"{path.relative_to(REPO)} imports {name}"
                 for path in sorted((PACKAGE / "decoding").glob("*.py"))
                 for name in imported_modules(path) if name.startswith(FORBIDDEN_FROM_DECODING)]
    assert not offenders, offenders


def test_core_imports_no_ui_library():
    offenders = [f"{path.relative_to(REPO)} imports {name}" for path in sorted(PACKAGE.rglob("*.py"))
                 for name in imported_modules(path) if name.split(".")[0] in ("gradio", "plotly")]
    assert not offenders, offenders


def test_front_door_exposes_the_public_surface():
    for name in ("load_model", "METHODS", "get_method", "DecodeSettings", "StepEvent", "summarize"):
        assert name in pass_core.__all__ and hasattr(pass_core, name), name
    assert "Example" in pass_core.__doc__ and "get_method" in pass_core.__doc__


def test_no_file_over_the_ceiling():
    too_long = {str(p.relative_to(REPO)): n for p in [*PACKAGE.rglob("*.py"), *(REPO / "playground").rglob("*.py")]
                if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not too_long, too_long
    assert len((REPO / "app.py").read_text(encoding="utf-8").splitlines()) <= 80
