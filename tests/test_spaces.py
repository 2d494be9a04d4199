"""The Hugging Face Space folder: assembled from the repo's files, valid metadata, an app that imports."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import gradio
import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent


def load_build_module():
    spec = importlib.util.spec_from_file_location("spaces_build", REPO / "spaces" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def space(tmp_path_factory) -> Path:
    return load_build_module().build_space(tmp_path_factory.mktemp("space") / "build")


def front_matter(readme: Path) -> dict:
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("---\n"), "README.md must start with YAML front matter"
    return yaml.safe_load(text.split("---\n", 2)[1])


def test_front_matter_is_valid_and_pins_installed_gradio(space):
    meta = front_matter(space / "README.md")
    assert meta["sdk"] == "gradio"
    assert meta["sdk_version"] == gradio.__version__
    assert (space / meta["app_file"]).is_file()
    assert meta["python_version"] == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert "HuggingFaceTB/SmolLM2-135M-Instruct" in meta["models"]
    for key in ("title", "emoji", "colorFrom", "colorTo", "short_description", "license"):
        assert meta.get(key), key
    assert len(meta["short_description"]) <= 60  # the Hub's limit


def test_requirements_pin_everything_and_match_gradio(space):
    lines = [ln.strip() for ln in (space / "requirements.txt").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert all("==" in ln for ln in lines), lines
    pins = {re.sub(r"[-_.]+", "-", name.lower()): version for name, version in (ln.split("==") for ln in lines)}
    assert pins["gradio"] == gradio.__version__
    with open(REPO / "pyproject.toml", "rb") as f:  # every dependency of the package, and ZeroGPU's ``spaces``
        needed = [re.split(r"[<>=!~ \[;]", dep, maxsplit=1)[0] for dep in tomllib.load(f)["project"]["dependencies"]]
    for name in (*needed, "spaces"):
        assert re.sub(r"[-_.]+", "-", name.lower()) in pins, name
    for name in needed:  # the versions tested here (transformers was pinned at 5.24.0 while 5.25.0 was tested)
        assert pins[re.sub(r"[-_.]+", "-", name.lower())] == importlib.metadata.version(name).split("+")[0], name
    stale = load_build_module().space_requirements("# pins\ntorch==1.0\ntransformers==0.1\nno-such-package==1.2\n", "9.9")
    assert stale == (f"# pins\ntorch=={importlib.metadata.version('torch').split('+')[0]}\n"
                     f"transformers=={importlib.metadata.version('transformers')}\nno-such-package==1.2\n")


def test_folder_holds_the_repo_sources_only(space):
    for name in ("app.py", "pass_core/__init__.py", "pass_core/registry.py", "playground/race_charts.py",
                 "playground/bench_html.py", "playground/race_handlers.py", "assets/help/how-to-read.md", "assets/drafter"):
        assert (space / name).exists(), name
    assert sorted(p.name for p in space.iterdir()) == ["README.md", "app.py", "assets", "pass_core", "playground", "requirements.txt"]
    assert (space / "app.py").read_bytes() == (REPO / "app.py").read_bytes()
    assert not list(space.rglob("__pycache__"))
    assert not (space / "tests").exists() and not (space / "spaces").exists()
    # only what the app needs: no experiment scripts or their result files
    assert not (space / "experiments").exists() and not list(space.rglob("*.py.orig"))
    assert not [p for p in (space / "assets").rglob("*") if p.suffix == ".py" or "results" in p.parts]
    # nor the trainers' reports (results), their prompts or the benchmark's suites, which the app never reads
    assert not [p.name for p in (space / "assets").rglob("*") if "report" in p.name]
    assert not (space / "assets" / "prompts").exists() and not (space / "assets" / "bench").exists()
    assert (space / "pass_core" / "bench").is_dir()  # the package's own code is whole


def test_build_refuses_to_replace_an_unrelated_folder_or_a_clone_of_the_space(tmp_path, capsys):
    """An earlier build is replaced; a folder holding anything a build does not write is kept, with a message: a
    git clone of the Space (its app.py and README.md beside .git) used to be deleted, .git and all."""
    build = load_build_module()
    (tmp_path / "other" / "precious.txt").parent.mkdir()
    (tmp_path / "other" / "precious.txt").write_text("keep me")
    clone = tmp_path / "clone"
    (clone / ".git").mkdir(parents=True)
    for name in ("app.py", "README.md", ".git/config", "NOTES.md"):
        (clone / name).write_text("mine")
    for folder, holds in ((tmp_path / "other", "precious.txt"), (clone, ".git, NOTES.md")):
        with pytest.raises(ValueError, match=f"is not an earlier Space build \\(it holds {holds}\\); not replacing"):
            build.build_space(folder)
    assert (tmp_path / "other" / "precious.txt").exists() and (clone / ".git" / "config").read_text() == "mine"
    with pytest.raises(SystemExit, match=r"^error: .*clone is not empty"):  # the command line: a line, no traceback
        build.main(["--out", str(clone)])
    (clone / "NOTES.md").unlink()
    shutil.rmtree(clone / ".git")
    assert build.build_space(clone) == clone and (clone / "pass_core").is_dir()  # its own app.py and README.md


def test_an_interrupted_build_leaves_the_earlier_build_whole(tmp_path, monkeypatch):
    """Ctrl-C during a build (its slow ``import gradio``) left a Space without README.md and requirements.txt, the
    earlier build already deleted, and a folder with app.py that a later build or a push took for a build (found by
    a bad-input helper). The build is now written beside it and takes its place only once whole."""
    build = load_build_module()
    folder = build.build_space(tmp_path / "build")
    before = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(build, "space_requirements", interrupted)  # Ctrl-C while the build is being written
    with pytest.raises(KeyboardInterrupt):
        build.build_space(folder)
    assert {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["build"]  # no half build left beside it
    with pytest.raises(SystemExit, match=r"^error: --out /proc/space: cannot write the Space there"):
        build.main(["--out", "/proc/space"])


#: Run in a fresh interpreter in the Space folder: its own app and pass_core, not the repository's.
SPACE_APP_CHECK = """
import sys, types
# Hugging Face's `spaces` package as a CPU Space has it (no SPACES_ZERO_GPU): its GPU does nothing there
sys.modules["spaces"] = types.SimpleNamespace(GPU=lambda duration=60: (lambda fn: fn))
import app, pass_core, pass_core.drafters.shipped as shipped
from pathlib import Path
from playground import page
assert page.spaces is None, "a CPU Space taken for ZeroGPU: its races capped, its live step-through off"
here = Path.cwd().resolve()
assert Path(app.__file__).resolve().parent == here, app.__file__
assert Path(pass_core.__file__).resolve().parent == here / "pass_core", pass_core.__file__
assert shipped.assets_dir().resolve() == here / "assets", shipped.assets_dir()
holder = app.ModelHolder()
demo = app.build_demo(holder)
assert any(fn.api_name == "race" for fn in demo.fns.values())
import gradio as gr
from pass_core.registry import METHODS
box = next(c for c in demo.blocks.values() if isinstance(c, gr.CheckboxGroup))
assert [key for _, key in box.choices] == list(METHODS), box.choices
print("BUILT", flush=True)
# a fixed pass-cost curve: measuring c(w) at start-up takes 64 passes (13 s alone); tests/test_pass_cost.py tests it
import pass_core.runtime.pass_cost as pass_cost
c = [1.0, 1.16, 1.32, 1.48, 1.57, 1.66, 1.75, 1.84, 1.93, 1.99, 2.06, 2.12, 2.18, 2.25, 2.31, 2.37]
pass_cost._measure = lambda loaded, widths, repeats, progress=None: dict(
    c=c, ms=[100 * x for x in c], widths=list(range(1, 17)), cache_len=200, repeats=3, device="cpu",
    dtype="float32", threads=1, load_average_1min=None, cores=2)
holder.start()
print("MODEL", holder.wait(timeout_s=120).describe())
print("WARM-UP PROBLEMS", holder.warmup_problems, "ERROR", holder.error)
"""


def run_space_app(space: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PASS_PLAYGROUND_ASSETS", "SPACES_ZERO_GPU")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False")
    return subprocess.run([sys.executable, "-c", SPACE_APP_CHECK, *args], cwd=space, env=env, capture_output=True,
                          text=True, timeout=240)


@pytest.mark.process
def test_assembled_app_builds_its_demo_and_loads_the_embedded_model_offline(space, embedded_gguf):
    """A fresh interpreter in the Space folder: importing app launches nothing, build_demo works from that folder's
    own app, pass_core and assets before any model loads, and then the embedded model loads offline from the
    folder's pass_core, and every method warms up with the folder's own drafter files (the measurement of c(w) that
    start-up makes next is replaced by a fixed curve: tests/test_pass_cost.py tests it)."""
    proc = run_space_app(space)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "WARM-UP PROBLEMS [] ERROR None" in proc.stdout, proc.stdout
    assert "MODEL smollm2-135m-instruct" in proc.stdout and "GGUF SmolLM2-135M-Instruct" in proc.stdout, proc.stdout
    assert proc.stdout.index("BUILT") < proc.stdout.index("MODEL"), proc.stdout


def test_readme_states_the_zerogpu_figure_and_its_source():
    """The Space README gives the GPU time a race asks for, as the code has it, and where the figure comes from."""
    from playground import race_inputs

    text = " ".join((REPO / "spaces" / "README.md").read_text(encoding="utf-8").split())
    assert f"{race_inputs.ZEROGPU_MAX_S} s at most" in text
    assert "https://huggingface.co/docs/hub/spaces-zerogpu" in text and "2 minutes of GPU a day" in text
    caps = [race_inputs.zerogpu_token_cap(n) for n in (2, 3, 4)]
    assert f"{caps[0]} with two methods, {caps[1]} with three, {caps[2]} with four" in text
    assert f"{race_inputs.gpu_seconds(1024, 3)} s" in text  # the old request, refused to anonymous visitors
