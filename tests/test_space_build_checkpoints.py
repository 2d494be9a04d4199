"""``make space`` ships the repository's files, not a training run's leftovers: docs/training.md's recipes write
their output into assets/lookahead/ and leave the run's checkpoint beside it (``OUT.ckpt.safetensors``, with the
Adam moments: 29 MB for the look-ahead adapters), which the Space build copied with the rest of assets/."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_space_leaves_out_training_checkpoints(tmp_path):
    spec = importlib.util.spec_from_file_location("spaces_build", REPO / "spaces" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    repo = tmp_path / "repo"
    for folder in ("playground", "pass_core", "assets/lookahead", "assets/prompts", "pass_core/bench"):
        (repo / folder).mkdir(parents=True)
    (repo / "app.py").write_text("")
    for name in ("m-L4.safetensors", "m-L4.ckpt.safetensors", "report.md"):
        (repo / "assets" / "lookahead" / name).write_bytes(b"x")
    out = build.build_space(tmp_path / "build", repo=repo)
    # nor the trainers' reports (their results: the app reads none of them)
    assert sorted(p.name for p in (out / "assets" / "lookahead").iterdir()) == ["m-L4.safetensors"]
    assert not (out / "assets" / "prompts").exists() and (out / "pass_core" / "bench").is_dir()  # of this repo's
