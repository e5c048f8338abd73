"""The package layout is the architecture: imports point down the layers, and no private name crosses a module."""
import ast
from pathlib import Path

import pytest

import attnlib

ROOT = Path(attnlib.__file__).resolve().parent

#: Layer of each top-level part of the package; a module may import only from its own layer or below.
LAYERS = {
    "": 0,  # the package itself (__version__, seed_everything, get_device)
    "_checks": 0, "metrics": 0, "uncertainty": 0, "cpu": 0, "reproducible": 0, "portable": 0, "cache": 0, "profiles": 0,
    "published": 0,
    "data": 1,
    "models": 2,
    "train": 3, "runs": 3, "seeds": 3,
    "experiments": 4,
    "presentation": 5,
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(module: str, is_package: bool, source: str):
    """(imported module, names) of every attnlib import in ``source``, relative ones resolved."""
    here = module.split(".") if module else []
    package = here if is_package else here[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            elif node.module and (node.module == "attnlib" or node.module.startswith("attnlib.")):
                target = node.module[len("attnlib."):] if node.module != "attnlib" else ""
            else:
                continue
            yield target, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("attnlib."):
                    yield a.name[len("attnlib."):], []


def _is_module(dotted: str) -> bool:
    p = ROOT.joinpath(*dotted.split(".")) if dotted else ROOT
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def _violations(module: str, is_package: bool, source: str) -> list:
    """Upward imports and private names taken from another module."""
    mine = LAYERS[module.split(".")[0]]
    found = []
    for target, names in _imports(module, is_package, source):
        for name in names or [""]:
            as_module = f"{target}.{name}".strip(".")
            full = as_module if name and _is_module(as_module) else target
            layer = LAYERS[full.split(".")[0]] if full else 0
            if layer > mine:
                found.append(f"{module} (layer {mine}) imports {full or 'attnlib'} (layer {layer})")
            if name.startswith("_") and name != "__version__" and not _is_module(as_module):
                found.append(f"{module} imports the private name {name} from {target or 'attnlib'}")
    return found


MODULES = sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_layer_table_covers_every_part_of_the_package():
    tops = {_module_name(p).split(".")[0] for p in MODULES}
    assert tops <= set(LAYERS), f"parts without a layer: {sorted(tops - set(LAYERS))}"


@pytest.mark.parametrize("path", [p for p in MODULES if p != ROOT / "__init__.py"], ids=_module_name)
def test_imports_point_down_and_take_no_private_names(path):
    assert _violations(_module_name(path), path.name == "__init__.py", path.read_text()) == []


def test_the_check_sees_an_upward_and_a_private_import():
    source = "from ..experiments.counterfactual import bin_by_max_attention\nfrom .interventions import _hidden\n"
    found = _violations("models.classifier", False, source)
    assert len(found) == 2 and "layer 4" in found[0] and "_hidden" in found[1]
    assert _violations("experiments.erasure", False, "from .. import runs\nfrom ..models import interventions\n") == []


#: The experiments that act on tokens (gradients, leave-one-out, deletion, explanations) reach every
#: family through the token-level protocol only.
TOKEN_LEVEL = ("importance", "faithfulness", "explanations")
#: Names an experiment module must not use: the concrete families, and their internals.
FAMILY_CLASSES = {"AttentionClassifier", "TransformerClassifier", "PretrainedClassifier"}
FAMILY_INTERNALS = {"embedding", "encode", "attend", "decode", "lstm", "layers", "project", "positions",
                    "embeddings"}


def _family_uses(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and node.id in FAMILY_CLASSES:
            found.append(f"names {node.id} (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom):
            found += [f"imports {a.name} (line {node.lineno})" for a in node.names if a.name in FAMILY_CLASSES]
        elif isinstance(node, ast.Attribute) and node.attr in FAMILY_INTERNALS and \
                isinstance(node.value, ast.Name) and node.value.id in ("model", "m", "self"):
            found.append(f"reaches into {node.value.id}.{node.attr} (line {node.lineno})")
        elif isinstance(node, ast.Attribute) and node.attr in ("layers", "heads", "encoder", "n_classes") and \
                isinstance(node.value, ast.Attribute) and node.value.attr == "config":
            found.append(f"reads config.{node.attr} (line {node.lineno})")
    return found


@pytest.mark.parametrize("name", TOKEN_LEVEL)
def test_token_level_experiments_name_no_model_family(name):
    """importance, faithfulness and explanations run on any TokenModel: no family class, no model internals."""
    path = ROOT / "experiments" / f"{name}.py"
    found = _family_uses(path.read_text())
    assert not found, f"experiments/{name}.py " + "; ".join(found)


def test_the_family_check_catches_what_it_should():
    bad = ("from ..models import AttentionClassifier\n"
           "def f(model):\n    isinstance(model, TransformerClassifier)\n    model.embedding(1)\n"
           "    model.config.layers\n")
    found = _family_uses(bad)
    assert len(found) == 4, found


# --- Chapters define nothing (issue 28 item 4) -------------------------------------------------
#: A chapter calls attnlib: a function, class or long cell belongs in the library, with a test.
#: Exercise scaffolds, their checks and their solutions are the reader's code, and are allowed.
CHAPTERS = sorted((ROOT.parent / "chapters").glob("*.ipynb"))
READER_CODE = {"exercise", "exercise-check", "solution"}
#: The longest code cell a chapter may have (non-blank lines; a prose cell's Markdown is prose).
MAX_CELL_LINES = 25


def _inline_code(cells) -> list[str]:
    found = []
    for number, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        tags = set(cell.get("metadata", {}).get("tags", []))
        if tags & READER_CODE:
            continue
        source = "".join(cell["source"])
        lines = [line for line in source.splitlines() if line.strip()]
        if "prose" not in tags and len(lines) > MAX_CELL_LINES:
            found.append(f"cell {number} has {len(lines)} lines (at most {MAX_CELL_LINES})")
        try:
            tree = ast.parse("\n".join(l for l in source.splitlines() if not l.lstrip().startswith(("%", "!"))))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                kind = "class" if isinstance(node, ast.ClassDef) else "def"
                found.append(f"cell {number} defines {kind} {node.name}")
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapters_define_nothing_inline(path):
    import json

    found = _inline_code(json.loads(path.read_text())["cells"])
    assert not found, f"{path.name}: " + "; ".join(found) + " (move it into attnlib, with a test)"


def test_the_inline_check_sees_a_def_a_class_and_a_long_cell():
    code = lambda src, tags=(): {"cell_type": "code", "source": src, "metadata": {"tags": list(tags)}}
    cells = [code("def f():\n    pass\n"), code("class A:\n    pass\n"), code("x = 1\n" * 30),
             code("def g():\n    pass\n", ["solution"]), code("prose('''" + "text\n" * 40 + "''')", ["prose"]),
             code("%matplotlib inline\nx = 1\n")]
    found = _inline_code(cells)
    assert found == ["cell 0 defines def f", "cell 1 defines class A", "cell 2 has 30 lines (at most 25)"], found


def _import_graph() -> dict:
    """module -> the attnlib modules it imports, lazy imports inside functions included."""
    graph: dict = {}
    for path in MODULES:
        module = _module_name(path)
        edges = graph.setdefault(module, set())
        for target, names in _imports(module, path.name == "__init__.py", path.read_text()):
            for name in names or [""]:
                as_module = f"{target}.{name}".strip(".")
                full = as_module if name and _is_module(as_module) else target
                if full != module:
                    edges.add(full)
    return graph


def _circles(graph: dict) -> list:
    """Every strongly connected group of two or more modules (Tarjan), each sorted."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_two_modules_import_each_other_even_lazily():
    """A lazy import inside a function is still a circle: each side then needs the other to be
    understood or changed (issue 52)."""
    assert _circles(_import_graph()) == []


def test_the_circle_check_finds_a_lazy_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []
    source_a = "def f():\n    from .b import g\n"
    assert list(_imports("experiments.a", False, source_a)) == [("experiments.b", ["g"])]


def _import_graph() -> dict:
    """{module: the attnlib modules it imports, at module level or inside a function}, package __init__s included."""
    graph = {}
    for path in MODULES:
        module = _module_name(path)
        targets = set()
        for target, names in _imports(module, path.name == "__init__.py", path.read_text()):
            for name in names or [""]:
                as_module = f"{target}.{name}".strip(".")
                full = as_module if name and _is_module(as_module) else target
                if full != module:
                    targets.add(full)
        graph[module] = targets
    return graph


def test_no_import_circle_in_the_package():
    """Issue 52: no two modules import each other, directly or round a longer circle, lazy imports included
    (a package's ``__init__`` that re-exports its own modules is its modules' parent, not a circle)."""
    import networkx as nx

    graph = nx.DiGraph()
    for module, targets in _import_graph().items():
        for target in targets:
            if module.startswith(target + ".") or target == "":
                continue  # a module's own package (its __init__ runs first anyway), or attnlib itself
            graph.add_edge(module, target)
    circles = list(nx.simple_cycles(graph))
    assert circles == [], f"import circles: {circles[:5]}"
    assert graph.number_of_edges() > 50  # the graph was read: it has the package's imports
    assert graph.has_edge("models.classifier", "models.fast_paths")  # lazy imports (inside a function) count


@pytest.mark.parametrize("path", sorted((ROOT / "experiments").glob("*.py")), ids=lambda p: p.stem)
def test_experiments_check_a_capability_never_a_family_class(path):
    """Issue 52: an experiment asks a model what it can do (models.protocol's capabilities), never which class
    it is, and reads its layers and heads from its sites, not from a family's config."""
    found = _class_dispatch(path.read_text())
    assert found == [], f"{path.stem}: {found}"


def _class_dispatch(source: str) -> list[str]:
    """``isinstance``/``issubclass`` on a family class, and reads of a config's layers or heads."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "issubclass") \
                and len(node.args) == 2:
            names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            found += [f"{node.func.id}(..., {name}) (line {node.lineno})" for name in sorted(names & FAMILY_CLASSES)]
        elif isinstance(node, ast.Attribute) and node.attr in ("layers", "heads") and \
                isinstance(node.value, ast.Attribute) and node.value.attr == "config":
            found.append(f"reads config.{node.attr} (line {node.lineno})")
    return found


def test_the_dispatch_check_sees_a_class_test_and_a_config_read():
    source = "if isinstance(model, (str, TransformerClassifier)):\n    n = model.config.layers\n"
    assert len(_class_dispatch(source)) == 2
    assert _class_dispatch("if has_capability(model, 'key_edits'):\n    n = layer_count(model)\n") == []


def _defining_module(package: str, name: str) -> str:
    """The module of ``package`` a name imported from the package comes from (its __init__'s re-export)."""
    init = ROOT.joinpath(*package.split("."), "__init__.py")
    for target, names in _imports(package, True, init.read_text()):
        if name in names:
            return target
    return package


def _training_closure(modules) -> set:
    """Every attnlib module the given modules import at module level, at any depth, a package's names
    followed to the submodule that defines them (``from ..data import PAD`` -> data.text)."""
    seen, todo = set(), list(modules)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
        if not path.exists():
            continue
        tree = ast.parse(path.read_text())
        top = ast.Module(body=[n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))], type_ignores=[])
        for target, names in _imports(module, False, ast.unparse(top)):
            for name in names or [""]:
                as_module = f"{target}.{name}".strip(".")
                if name and _is_module(as_module):
                    todo.append(as_module)
                elif target and (ROOT.joinpath(*target.split(".")) / "__init__.py").exists():
                    todo.append(_defining_module(target, name))
                elif target:
                    todo.append(target)
    return seen


@pytest.mark.parametrize("config", ["ModelConfig", "TransformerConfig"])
def test_a_familys_training_code_holds_every_module_its_model_imports(config):
    """Issue 52: a model's cache key hashes its family's modules (``training_code``) and the shared
    training code (attnlib.cache.TRAINING_CODE); every module the family imports is among them, so
    an edit that changes a model's numbers always moves its key."""
    from attnlib import cache, models

    declared = set(getattr(models, config).training_code)
    shared = {entry.partition(":")[0] for entry in cache.TRAINING_CODE}
    needed = _training_closure(declared) - {""}
    assert needed - declared - shared == set()
    assert "data.online" not in needed and "models.pretrained" not in needed
