"""Assemble a ready-to-push Hugging Face Space folder from the repository's own files.

``python spaces/build.py [--out DIR]`` (or ``make space``) writes ``spaces/build/``:
app.py, playground/ (the UI: handlers and figures), pass_core/, assets/ (shipped files and the page's help
text), requirements.txt and README.md. The README's
``sdk_version`` and the requirements' pins are set to the installed Gradio and packages, and
``python_version`` to the running interpreter's, so that the Space runs what was tested.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_OUT = HERE / "build"
#: Repository paths copied into the Space (files or folders).
SOURCES = ("app.py", "playground", "pass_core", "assets")
#: Everything a build writes at its top level: a folder holding anything else is not replaced.
BUILT = frozenset((*SOURCES, "README.md", "requirements.txt"))
#: Not shipped: a look-ahead training run leaves its checkpoint (with the Adam moments: 29 MB for the adapters)
#: beside its output in assets/lookahead/ when it follows docs/training.md's recipes; the trainers' reports (their
#: results, JSON and Markdown) and the folders of assets/ the app never reads (``UNREAD``).
_PATTERNS = shutil.ignore_patterns("__pycache__", "*.pyc", ".DS_Store", "*.ckpt.safetensors", "report*.json",
                                   "report*.md", "*.report.json", "*.report.md")
#: assets/ folders for the command lines only: the trainers' prompts and the benchmark's suites.
UNREAD = ("prompts", "bench")


def _ignoring(root: Path):
    """copytree's ``ignore`` for the source folder ``root``: ``_PATTERNS`` everywhere, ``UNREAD`` in assets/."""
    def ignore(folder: str, names: list[str]) -> set[str]:
        skip = set(_PATTERNS(folder, names))
        at_assets = root.name == "assets" and Path(folder).resolve() == root.resolve()
        return skip | set(UNREAD) & set(names) if at_assets else skip
    return ignore


def _installed_gradio() -> str:
    import gradio

    return gradio.__version__


def space_readme(text: str, gradio_version: str, python_version: str) -> str:
    """The Space README with sdk_version / python_version set in its front matter.

    Raises:
        ValueError: the text has no front matter with both keys.
    """
    front = re.match(r"^---\n(.*?)\n---\n", text, flags=re.S)
    if not front or "sdk_version:" not in front.group(1) or "python_version:" not in front.group(1):
        raise ValueError("spaces/README.md needs YAML front matter with sdk_version and python_version")
    head = re.sub(r"(?m)^sdk_version:.*$", f"sdk_version: {gradio_version}", front.group(1))
    head = re.sub(r"(?m)^python_version:.*$", f'python_version: "{python_version}"', head)
    return f"---\n{head}\n---\n" + text[front.end():]


def space_requirements(text: str, gradio_version: str, installed=None) -> str:
    """requirements.txt with the gradio pin set to ``gradio_version`` and every other pinned package that is
    installed here set to its installed version (without a local tag such as torch's "+cpu"), so that the Space
    runs what was tested (the file's pins had drifted: transformers 5.24.0 there, 5.25.0 tested); a package not
    installed here (ZeroGPU's ``spaces``) keeps its pin. ``installed``: name -> version or None (default:
    ``importlib.metadata``)."""
    def installed_version(name: str):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    installed = installed or installed_version

    def pin(match: re.Match) -> str:
        name, old = match.group(1), match.group(2)
        version = gradio_version if name.lower() == "gradio" else installed(name) or old
        return f"{name}=={version.split('+')[0]}"

    return re.sub(r"(?m)^([A-Za-z0-9_.\-]+)==(\S+)$", pin, text)


def build_space(out: Path = DEFAULT_OUT, repo: Path = REPO) -> Path:
    """Write the Space folder to ``out`` (replacing an earlier build there); return ``out``. The build is written
    into a new folder beside ``out`` and takes its place only once whole: an interrupted build (Ctrl-C during the
    slow ``import gradio``) had deleted the earlier build and left one without its README.md and requirements.txt.

    Raises:
        ValueError: ``out`` is a file, or a non-empty folder holding anything a build does not write (a git
            clone's .git, say: it refuses to delete it), or a source file is missing.
        OSError: the folder cannot be written (the system's reason).
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} is a file: give a folder for the Space.")
    if out.exists() and any(out.iterdir()):
        foreign = sorted(p.name for p in out.iterdir() if p.name not in BUILT)
        if foreign or not (out / "app.py").is_file():  # a git clone of the Space has .git: never deleted here
            raise ValueError(f"{out} is not empty and is not an earlier Space build (it holds "
                             f"{', '.join(foreign[:5]) or 'no app.py'}); not replacing it. Build into a new or empty "
                             "folder, then copy the build into your clone.")
    gradio_version = _installed_gradio()  # the slow import, before anything is written
    out.absolute().parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.absolute().parent))
    try:
        for name in SOURCES:
            src = repo / name
            if src.is_dir():
                shutil.copytree(src, building / name, ignore=_ignoring(src))
            elif src.is_file():
                shutil.copy2(src, building / name)
            else:
                raise ValueError(f"{src} is missing: the Space needs it.")
        python_version = f"{sys.version_info.major}.{sys.version_info.minor}"
        readme = space_readme((HERE / "README.md").read_text(encoding="utf-8"), gradio_version, python_version)
        (building / "README.md").write_text(readme, encoding="utf-8")
        requirements = space_requirements((HERE / "requirements.txt").read_text(encoding="utf-8"), gradio_version)
        (building / "requirements.txt").write_text(requirements, encoding="utf-8")
        building.chmod(0o755)  # mkdtemp's folder is the owner's alone
        if out.exists():  # the earlier build (checked above) steps aside, then the new one takes its name
            earlier = Path(tempfile.mkdtemp(prefix=f".{out.name}.earlier-", dir=out.absolute().parent))
            out.replace(earlier / out.name)
            building.replace(out)
            shutil.rmtree(earlier)
        else:
            building.replace(out)
    finally:
        if building.exists():
            shutil.rmtree(building)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    try:
        out = build_space(args.out)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    except OSError as err:  # "[Errno 1] Operation not permitted: '/sys/sp'" named no option
        raise SystemExit(f"error: --out {args.out}: cannot write the Space there ({err.strerror or err}); choose "
                         "another folder.") from None
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"Space folder ready: {out} ({size / 1e6:.1f} MB). Push it with: "
          f"hf upload YOUR_NAME/pass-playground {out} . --repo-type space")


if __name__ == "__main__":
    main()
