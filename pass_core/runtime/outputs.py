"""Output files of the command lines (``generate --trace``, ``bench --json``, the trainers' ``--out``): checked
before any work, so that a run of minutes or hours is not lost to a path it cannot write at its end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path


def file_name(text: str) -> str:
    """argparse ``type`` of a file option: ``text`` unless it is empty or blank (``--out ''`` was taken as "not
    given", and a trainer wrote to its default path under a name beginning with "--"). Raises
    argparse.ArgumentTypeError (argparse's "error: argument --out: ...", exit 2)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"give a file name, not {text!r}")
    return text


def safetensors_of(*formats: str):
    """A ``replaceable`` test for ``check_output_path``: a safetensors file whose metadata ``format`` is one of
    ``formats`` (a file this option writes)."""
    def test(path: Path) -> bool:
        from safetensors import safe_open

        try:
            with safe_open(str(path), framework="pt") as handle:
                return (handle.metadata() or {}).get("format") in formats
        except Exception:  # noqa: BLE001 - not a safetensors file at all: not one this option writes
            return False
    test.what = f"a safetensors file of format {' or '.join(formats)}"
    return test


def json_with(*keys: str, **values):
    """A ``replaceable`` test for ``check_output_path``: a JSON object that holds ``keys`` and ``values``."""
    def test(path: Path) -> bool:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return (isinstance(data, dict) and all(key in data for key in keys)
                and all(data.get(key) == value for key, value in values.items()))
    test.what = "a JSON file with " + ", ".join([*map(repr, keys), *(f"{k!r}: {v!r}" for k, v in values.items())])
    return test


def check_output_path(path: str | os.PathLike, option: str, example: str = "out.json", why: str = "",
                      replaceable=None) -> Path:
    """``path`` as a ``Path``, once it is sure that the file can be written there: the writers create missing
    folders, so the nearest existing folder above it must be a writable folder. The file's folder is made now and a
    file is written there and removed (permissions alone do not tell: root may write anywhere by them, yet not in
    /proc or on a read-only disk); the folders this check made are removed again (a later refusal, e.g. of a missing
    ``--data`` file, left them behind), and the writer makes them when it writes.

    Args:
        path: the output file given on the command line.
        option: the option's name for the message (e.g. "--json").
        example: a file name for the message's suggestion when ``path`` is a folder.
        why: what the file is, e.g. "a trace is a .json file (the app replays .json files only)": given, the name
            must end in ``example``'s ending (any case; a report named out.html or a drafter named a.txt was
            written, then read by nothing that looks for its kind).
        replaceable: given, a file already at ``path`` is replaced only when this test of it says it is one the
            option writes (``safetensors_of``, ``json_with``): a model's weights or config.json were overwritten.

    Raises:
        ValueError: ``path`` is a folder, its name lacks the ending that ``why`` asks for, ``path`` is a file that
            ``replaceable`` does not take, a file stands where a
            folder of it would go, or the nearest existing folder is not writable, or the folder cannot be made or
            written (the system's reason).
    """
    out = Path(path)
    if str(path) and out.is_dir():  # "" is no name (Path("") is ".")
        raise ValueError(f"{option} {path} is a folder: give a file name, e.g. {out / example}.")
    suffix = Path(example).suffix
    if why and out.suffix.lower() != suffix:
        name = path or repr(str(path))
        raise ValueError(f"{option} {name}: {why}: give a name ending in {suffix}, e.g. {example}")
    if replaceable is not None and out.is_file() and not replaceable(out):
        raise ValueError(f"{option} {path} exists and is not {replaceable.what}, as this option writes: it would be "
                         "replaced. Give a new name, or delete or move that file first.")
    above = out.absolute().parent
    while not above.exists():
        above = above.parent
    if not above.is_dir():
        raise ValueError(f"{option} {path}: {above} is a file, so no folder can be made there; choose another path.")
    if not os.access(above, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {path}: the folder {above} is not writable; choose another path.")
    made = [folder for folder in out.absolute().parents if folder.is_relative_to(above) and folder != above]
    try:
        out.absolute().parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out.absolute().parent):
            pass
    except OSError as err:
        raise ValueError(f"{option} {path}: cannot write in {out.absolute().parent} ({err.strerror or err}); choose "
                         "another path.") from None
    finally:
        for folder in made:  # deepest first; one another process has filled meanwhile stays
            with contextlib.suppress(OSError):
                folder.rmdir()
    return out


def write_text_atomically(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all: into a temporary file beside it, then renamed over
    it, so that a full disk or an interrupted write leaves the old file as it was (it used to leave 4 KB of broken
    JSON where an earlier trace had been). Makes missing folders; returns ``path`` as a ``Path``.

    Raises:
        OSError: the system's reason (e.g. no space left); no temporary file is left behind.
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(temporary, 0o644)  # mkstemp's 0600 would make the file private to its writer
        os.replace(temporary, out)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return out


def stdout_failed(err: OSError) -> int:
    """A command line's answer when its standard output cannot be written: quietly where the reader went away
    (``| head``, a ``BrokenPipeError``, as other command-line tools do), else in one line on stderr (``> /dev/full``:
    a traceback); stdout then points at /dev/null (Python's flush at exit repeated the error). Returns exit code 1.

    Raises:
        OSError: ``err`` itself when it names a file (not a failure of the standard output).
    """
    if err.filename is not None:
        raise err
    if not isinstance(err, BrokenPipeError):
        print(f"error: the output could not be written ({err.strerror or err})", file=sys.stderr)
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # a stdout without a file descriptor
        pass
    return 1
