"""The glue contract, read statically (issue 52): every ``{name}`` a chapter's prose quotes is produced by
that chapter's readings module (``attnlib.presentation.readings.chNN``, or a shared readings module), and
every value a chapter glues goes through a readings function; no chapter calls ``glue`` itself."""
import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))
READINGS = ROOT / "attnlib" / "presentation" / "readings"
#: Readings modules every chapter may draw on (shared helpers), beside its own chNN.
SHARED = ("binned", "wording")

_PROTECTED = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$|```.*?```|`[^`\n]*`", re.S)  # as attnlib.presentation.glue
_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_]\w*)(?::([^{}]*))?\}")


def _code_cells(path: Path) -> list[ast.Module]:
    trees = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "code":
            try:
                trees.append(ast.parse("".join(cell["source"])))
            except SyntaxError:  # an exercise's starter code may not parse until answered
                continue
    return trees


def _calls(trees, name: str):
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
                yield node


def quoted(path: Path) -> set[str]:
    """The names a chapter's prose templates quote (outside math and code spans)."""
    names = set()
    for call in _calls(_code_cells(path), "prose"):
        if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
            text = _PROTECTED.sub("", call.args[0].value)
            names |= {m.group(1) for m in _FIELD.finditer(text) if m.group(1)}
    return names


def _patterns(source: str) -> list[re.Pattern]:
    """What a module can produce as a glued name: its string constants, and its f-strings with their
    fields as wildcards (``f"ch03_inst_{short}0"`` -> ``ch03_inst_\\w+0``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            found.append(re.compile(re.escape(node.value)))
        elif isinstance(node, ast.JoinedStr):
            parts = [re.escape(v.value) if isinstance(v, ast.Constant) else r"\w+" for v in node.values]
            if parts and parts[0] != r"\w+":
                found.append(re.compile("".join(parts)))
    return found


def produced(chapter: str) -> list[re.Pattern]:
    sources = [READINGS / f"{m}.py" for m in (f"ch{chapter}", *SHARED)]
    return [p for s in sources if s.exists() for p in _patterns(s.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem[:2])
def test_every_quoted_name_comes_from_the_chapters_readings(path):
    chapter = path.stem[:2]
    patterns = produced(chapter)
    missing = sorted(n for n in quoted(path) if not any(p.fullmatch(n) for p in patterns))
    assert missing == [], f"{path.name} quotes names no readings module produces: {missing}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem[:2])
def test_a_chapter_glues_only_what_a_readings_function_returns(path):
    trees = _code_cells(path)
    direct = [ast.unparse(c)[:80] for c in _calls(trees, "glue")]
    assert direct == [], f"{path.name} glues values itself: {direct}"
    literal = [ast.unparse(c)[:80] for c in _calls(trees, "glue_all")
               if c.args and isinstance(c.args[0], (ast.Dict, ast.DictComp))]
    assert literal == [], f"{path.name} glues a dict it builds itself: {literal}"


def test_the_static_reading_finds_quotes_and_producers():
    """The reader above is not vacuous: a chapter's prose quotes names, the readings produce them, and a
    name made up for the test is found missing."""
    ch03 = ROOT / "chapters" / "03_feature_importance.ipynb"
    names = quoted(ch03)
    assert len(names) > 20 and "ch03_inst_top" in names
    patterns = produced("03")
    assert any(p.fullmatch("ch03_inst_att0") for p in patterns)  # an f-string key
    assert not any(p.fullmatch("ch03_madeupforthetest") for p in patterns)
