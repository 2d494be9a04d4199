"""The manual says what the code does: docs/guide.md's option tables list every option of ``app.py`` and
``python -m pass_core.generate`` with the choices the parsers accept, its method table names every registered
method, and the error messages that the README and the guide quote are the ones the validator gives today.

A new user found all of these stale once (five methods where the page offers seven, ``--backend onednn`` as the
default after ``auto`` had replaced it, a quoted error listing five methods); these tests fail on each.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pass_core.registry import METHODS

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guide.md"
README = ROOT / "README.md"


def section(path: Path, heading: str) -> str:
    """The text of the markdown section ``## heading`` of ``path``, up to the next ``## `` heading."""
    text = path.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def table_options(markdown: str) -> dict[str, set[str] | None]:
    """Each ``--option`` named in the first column of the section's tables -> the ``{a,b}`` or ``a|b`` choices
    written beside it (None: none written)."""
    options = {}
    for row in re.findall(r"^\| (.*?) \|", markdown, flags=re.M):
        for name, rest in re.findall(r"`(--[a-z-]+)([^`]*)`", row):
            braces = re.search(r"\{([^}]*)\}", rest) or re.fullmatch(r" ([\w-]+(?:\\?\|[\w-]+)+)", rest)
            options[name] = set(re.split(r",|\\?\|", braces.group(1))) if braces else None
    return options


def parser_options(parser) -> dict[str, set[str] | None]:
    return {opt: (set(action.choices) if action.choices else None)
            for action in parser._actions for opt in action.option_strings if opt.startswith("--") and opt != "--help"}


@pytest.mark.parametrize("heading, module", [("Starting the app", "app"), ("Command line", "pass_core.generate")])
def test_each_option_table_matches_its_parser(heading, module):
    import importlib

    documented, real = table_options(section(GUIDE, heading)), parser_options(importlib.import_module(module).build_parser())
    assert set(documented) == set(real), f"{heading}: documented only {set(documented) - set(real)}, " \
                                         f"missing {set(real) - set(documented)}"
    for name, choices in real.items():
        if choices is not None:
            assert documented[name] == choices, f"{heading}: {name} lists {documented[name]}, the parser {choices}"


def test_the_backend_default_the_guide_gives_is_the_codes():
    from pass_core.runtime.backends import default_backend

    for heading in ("Starting the app", "Command line"):
        row = next(r for r in section(GUIDE, heading).splitlines() if r.startswith("| `--backend"))
        assert f"default `{default_backend('cpu')}` on a CPU" in row, (heading, row)


def test_the_settings_table_names_every_method_the_page_offers():
    text = section(GUIDE, "Settings")
    missing = [m.label for m in METHODS.values() if f"| {m.label} |" not in text]
    assert missing == [], f"docs/guide.md's Settings table leaves out {missing}"


def test_quoted_error_messages_are_the_validators():
    """Every ``- name: message`` the README and the guide quote from the API's ValidationError is the message
    the validator gives now, for the value quoted in it."""
    from playground.race_inputs import lab_runs_problem, methods_problem, setting_problem

    real = {"max_new_tokens": setting_problem("max_new_tokens", 100_000), "methods": methods_problem(["bogus"]),
            "runs": lab_runs_problem(5)}
    for path in (README, GUIDE):
        text = " ".join(path.read_text(encoding="utf-8").split())
        quoted = re.findall(r"`- (max_new_tokens|methods|runs): ([^`]*)`", text)
        assert {name for name, _ in quoted} == set(real), (path.name, quoted)
        for name, message in quoted:
            assert message == real[name], f"{path.name} quotes {message!r}; the validator says {real[name]!r}"


#: The user-facing markdown files whose links must work (the README's "one click" to every moved section).
LINKED_DOCS = [README, ROOT / "RESULTS.md", ROOT / "spaces" / "README.md", ROOT / "experiments" / "README.md",
               *sorted((ROOT / "docs").glob("*.md"))]


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped (letters, digits, ``_`` and ``-``
    kept), spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def prose(path: Path) -> str:
    """The markdown of ``path`` without its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)


def anchors(path: Path) -> set[str]:
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", prose(path), flags=re.M):
        slug, n = github_anchor(heading), 1
        while slug in found:  # a repeated heading gets -1, -2, ...
            slug, n = f"{github_anchor(heading)}-{n}", n + 1
        found.add(slug)
    return found


def broken_links(path: Path) -> list[str]:
    """Each relative link of ``path`` (outside code blocks) whose file, or whose #anchor in it, does not exist."""
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose(path)):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target} (no such heading)")
    return broken


@pytest.mark.parametrize("path", LINKED_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_exists(path):
    """An auditor found three dead links after the docs moved (``experiments/...`` from inside docs/, an anchor
    without its heading's date, ``docs/history.md#backends`` from inside docs/history.md)."""
    assert broken_links(path) == [], path.name


def test_the_link_check_finds_a_dead_link_and_a_dead_anchor(tmp_path):
    (tmp_path / "a.md").write_text("# Pass cost, CPU against GPU (2026-11-30)\n\n[ok](#pass-cost-cpu-against-gpu-2026-11-30)"
                                   " [x](#pass-cost-cpu-against-gpu) [y](b.md) [z](https://example.org)\n",
                                   encoding="utf-8")
    assert broken_links(tmp_path / "a.md") == ["#pass-cost-cpu-against-gpu (no such heading)", "b.md (no such file)"]


def test_architecture_names_every_module():
    """docs/architecture.md says where each part lives: every module of ``pass_core`` and ``playground`` has a
    row there (named by its path below its section's folder, e.g. `lookahead/drafter.py`). An auditor found
    thirteen modules missing."""
    named = set(re.findall(r"^\| `([\w/]+\.py)`", (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"),
                           flags=re.M))
    missing = []
    for package in ("pass_core", "playground"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).parts
            if path.name == "__init__.py":
                continue
            if not any("/".join(parts[i:]) in named for i in range(len(parts))):
                missing.append("/".join(parts))
    assert missing == []
