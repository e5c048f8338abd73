"""attnlib.cache (atomic, checksummed, self-healing) and attnlib.profiles."""
import os

import pytest
import torch

from attnlib import cache, get_profile, seed_everything
from attnlib.profiles import PROFILES


def test_round_trip_and_location(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path / "elsewhere"))
    obj = {"w": torch.arange(6.0).reshape(2, 3), "history": [{"epoch": 1, "auc": 0.9}], "name": "x"}
    path = cache.save("models", "abc", obj)
    assert path.parent.parent == tmp_path / "elsewhere"
    back = cache.load("models", "abc")
    assert torch.equal(back["w"], obj["w"]) and back["history"] == obj["history"]
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_missing_entry_is_none():
    assert cache.load("models", "nothing-here") is None


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],  # truncated mid-write
        lambda b: b[:-10] + bytes(10),  # flipped bytes: checksum catches a silently wrong model
        lambda b: b"garbage",  # not ours
        lambda b: b"",  # empty
    ],
)
def test_corrupt_entry_warns_deletes_and_returns_none(damage):
    path = cache.save("models", "k", {"w": torch.ones(100)})
    path.write_bytes(damage(path.read_bytes()))
    with pytest.warns(cache.CacheCorruptionWarning):
        assert cache.load("models", "k") is None
    assert not path.exists()
    cache.save("models", "k", {"w": torch.ones(3)})  # and it can be rebuilt
    assert torch.equal(cache.load("models", "k")["w"], torch.ones(3))


def test_failed_write_leaves_old_entry_intact(monkeypatch):
    cache.save("models", "k", {"v": 1})

    def boom(*args, **kwargs):
        raise OSError("disk full")

    with monkeypatch.context() as m:
        m.setattr(os, "replace", boom)
        with pytest.raises(OSError):
            cache.save("models", "k", {"v": 2})
    assert cache.load("models", "k") == {"v": 1}
    assert not [p for p in cache.cache_dir().joinpath("models").iterdir() if p.name.endswith(".tmp")]


def test_cache_key_is_stable_and_sensitive():
    a = cache.cache_key(dataset="d", seed=0, config={"x": 1, "y": 2})
    assert a == cache.cache_key(seed=0, config={"y": 2, "x": 1}, dataset="d")
    assert a != cache.cache_key(dataset="d", seed=1, config={"x": 1, "y": 2})


def test_bad_kind_rejected():
    with pytest.raises(ValueError):
        cache.save("../escape", "k", {})


def test_profiles(monkeypatch):
    monkeypatch.delenv("ATTNLIB_PROFILE", raising=False)
    assert get_profile().name == "book"
    monkeypatch.setenv("ATTNLIB_PROFILE", "paper")
    assert get_profile().name == "paper"
    assert get_profile("book").name == "book"
    assert get_profile(" Book ").name == "book"
    with pytest.raises(ValueError, match="book, paper"):
        get_profile("huge")
    monkeypatch.setenv("ATTNLIB_PROFILE", "nope")
    with pytest.raises(ValueError, match="ATTNLIB_PROFILE"):
        get_profile()
    assert PROFILES["paper"].dataset_kwargs("imdb") == {"max_train": None, "max_eval": None}
    assert PROFILES["book"].dataset_kwargs("imdb")["max_train"] < 25000


def test_seed_everything_is_deterministic_and_validates():
    seed_everything(3)
    a = torch.randn(4)
    seed_everything(3)
    assert torch.equal(a, torch.randn(4))
    with pytest.raises(ValueError):
        seed_everything(-1)


def test_code_version_follows_the_training_code_not_the_plots(tmp_path):
    import shutil
    from pathlib import Path

    import attnlib

    copy = tmp_path / "attnlib"
    shutil.copytree(Path(attnlib.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = cache.code_version(copy)
    assert before.startswith(attnlib.__version__ + "+") and before == cache.code_version(copy)
    assert cache.code_version(copy) == cache.code_version()  # the copy is the installed package
    with open(copy / "presentation" / "viz.py", "a") as f:
        f.write("\nNEW_COLOUR = 'tab:olive'\n")
    (copy / "presentation" / "new_figures.py").write_text("X = 1\n")
    assert cache.code_version(copy) == before  # the presentation package, by folder, does not invalidate models
    for reader in ("published.py", "uncertainty.py", "profiles.py", "runs.py", "experiments/importance.py",
                   "experiments/deception.py"):
        with open(copy / reader, "a") as f:
            f.write("\nNEW_NUMBER = 0.5\n")
    assert cache.code_version(copy) == before  # nor code that only reads a model, or sizes a run
    deceivers = cache.code_version(copy, modules=["attnlib.experiments.deception"])
    assert deceivers != before  # a module whose own loss trains an entry is in that entry's version
    with open(copy / "experiments" / "deception.py", "a") as f:
        f.write("\nPENALTY_CHANGE = 1\n")
    assert cache.code_version(copy, modules=["experiments.deception"]) != deceivers
    assert cache.code_version(copy) == before
    with pytest.raises(ValueError, match="no module experiments.nothing"):
        cache.code_version(copy, modules=["experiments.nothing"])
    with open(copy / "data" / "text.py", "a") as f:
        f.write("\n# a comment\n")
    assert cache.code_version(copy) == before  # comments are not code
    text = (copy / "train.py").read_text()
    (copy / "train.py").write_text(text.replace('"""Training and evaluation', '"""Training, and evaluation', 1))
    assert cache.code_version(copy) == before  # nor are docstrings
    with open(copy / "data" / "text.py", "a") as f:
        f.write("\nTOKENIZER_CHANGE = 1\n")
    changed = cache.code_version(copy)
    assert changed != before  # the data pipeline is, even in a sub-package
    _edit_function(copy / "train.py", "fit", "recipe_change = 2")
    assert cache.code_version(copy) not in (before, changed)


def _edit_function(path, name: str, statement: str) -> None:
    """Put ``statement`` first in the body of the top-level function ``name`` of ``path`` (a code edit)."""
    import ast

    text = path.read_text()
    node = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == name)
    lines = text.splitlines(keepends=True)
    first = node.body[0]
    at = first.lineno - 1
    indent = " " * first.col_offset
    lines.insert(at, f"{indent}{statement}\n")
    path.write_text("".join(lines))


#: Issue 52: an edit and the families whose model keys it moves (BiLSTM/CNN: ModelConfig; the transformer).
EDITS = {
    "a string in the pretrained family": ("models/pretrained.py", "append", ()),
    "a string in the online data sources": ("data/online.py", "append", ()),
    "a progress-bar setting of the scheduler": ("train.py", "run_concurrently", ()),
    "attnlib's list of submodules": ("__init__.py", "append", ()),
    "an experiment that only reads models": ("experiments/flow.py", "append", ()),
    "the transformer family": ("models/transformer.py", "append", ("transformer",)),
    "J&W's classifier (the transformer shares its tokens)": ("models/classifier.py", "append", ("bilstm", "transformer")),
    "the training loop": ("train.py", "fit", ("bilstm", "transformer")),
    "the seeding": ("__init__.py", "seed_everything", ("bilstm", "transformer")),
    "the batches": ("data/batching.py", "append", ("bilstm", "transformer")),
    "the portable kernels": ("portable.py", "append", ("bilstm", "transformer")),
}


@pytest.mark.parametrize("what", EDITS)
def test_an_edit_moves_the_keys_of_the_families_whose_training_runs_it(tmp_path, what):
    import shutil
    from pathlib import Path

    import attnlib
    from attnlib.models import ModelConfig, TransformerConfig

    copy = tmp_path / "attnlib"
    shutil.copytree(Path(attnlib.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    families = {"bilstm": ModelConfig.training_code, "transformer": TransformerConfig.training_code}
    before = {name: cache.code_version(copy, family=code) for name, code in families.items()}
    assert before["bilstm"] != before["transformer"]
    path, where, moves = EDITS[what]
    if where == "append":
        with open(copy / path, "a") as f:
            f.write("\nEDITED = 'tab:olive'\n")
    else:
        _edit_function(copy / path, where, "edited = 'tab:olive'")
    after = {name: cache.code_version(copy, family=code) for name, code in families.items()}
    assert {name for name in families if after[name] != before[name]} == set(moves)


def test_a_model_trained_by_other_code_is_not_served(tmp_path, monkeypatch):
    from attnlib import data, train

    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path))
    small = data.load_dataset("synthetic", max_train=100, max_eval=40, seed=0)
    first = train.train_model(small, encoder="average", epochs=1, progress=False)
    assert train.train_model(small, encoder="average", epochs=1, progress=False).from_cache
    monkeypatch.setattr(cache, "code_version", lambda package_dir=None, **_: "0.1.0+edited")
    again = train.train_model(small, encoder="average", epochs=1, progress=False)
    assert not again.from_cache and again.key != first.key


_TWO_TRAINERS = r"""
import json, sys, time
import attnlib.reproducible
from attnlib import data, train
ds = data.load_dataset("synthetic", n=120, seed=0)
start = time.perf_counter()
r = train.train_model(ds, encoder="average", attention="tanh", seed=3, epochs=2, progress=False)
print(json.dumps({"from_cache": r.from_cache, "best_epoch": r.best_epoch,
                  "weights": float(sum(p.double().sum() for p in r.model.parameters()))}))
"""


def test_two_processes_needing_one_model_train_it_once(tmp_path):
    """Two chapters side by side (pytest -n 2): the second waits on the entry's lock and loads the model."""
    import json
    import subprocess
    import sys

    env = {**os.environ, "ATTNLIB_CACHE_DIR": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", _TWO_TRAINERS], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(r["from_cache"] for r in results) == [False, True]  # trained once, loaded once
    assert results[0]["weights"] == results[1]["weights"]
    assert len(list((tmp_path / "models").glob("*.pt"))) == 1


def test_the_build_lock_excludes_a_second_holder_until_released(tmp_path, monkeypatch):
    import threading

    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path))
    order = []

    def second():
        with cache.building("models", "k"):
            order.append("second")

    with cache.building("models", "k"):
        t = threading.Thread(target=second)
        t.start()
        t.join(0.5)  # blocked on the lock meanwhile
        order.append("first released")
    t.join(5)
    assert order == ["first released", "second"]
    assert (tmp_path / "models" / "k.lock").exists() and not list((tmp_path / "models").glob("*.pt"))


def test_every_experiment_that_trains_a_cached_entry_puts_its_own_code_in_the_key():
    from pathlib import Path

    import attnlib

    folder = Path(attnlib.__file__).parent / "experiments"
    trainers = [p for p in sorted(folder.glob("*.py")) if "cache.save(" in p.read_text() or "load_or_train(" in p.read_text()]
    assert {p.stem for p in trainers} >= {"adversarial_training", "deception", "adversarial_keys"}
    for path in trainers:
        source = path.read_text()
        assert "code_version(modules=[__name__], family=" in source and "code_version()" not in source, path.name


def test_a_profile_is_shared_settings_plus_one_section_per_part_or_chapter():
    """A new chapter adds a section (a small frozen dataclass), not one Profile field per number (issue 28)."""
    import dataclasses

    from attnlib.profiles import SECTIONS, HeadSizes, Profile

    shared = [f.name for f in dataclasses.fields(Profile) if f.name not in SECTIONS]
    assert len(shared) <= 12, shared
    for name, kind in SECTIONS.items():
        for profile in PROFILES.values():
            assert isinstance(getattr(profile, name), kind)
    book = PROFILES["book"]
    smaller = book.with_(heads={"instances": 7}, epochs=2)
    assert smaller.heads.instances == 7 and smaller.heads.permutations == book.heads.permutations
    assert smaller.epochs == 2 and book.heads.instances == 100  # a copy: the book profile is unchanged
    assert book.with_(heads=HeadSizes(instances=3)).heads.permutations == HeadSizes().permutations
    with pytest.raises(ValueError, match="HeadSizes"):
        Profile(name="x", heads={"instances": 3})
    with pytest.raises(TypeError):
        book.with_(heads={"no_such_setting": 1})
