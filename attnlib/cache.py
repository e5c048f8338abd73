"""An on-disk cache for trained models and precomputed sweeps: atomic, checksummed, self-healing.

Location: ``$ATTNLIB_CACHE_DIR`` if set, else the user cache directory
(``~/.cache/attnlib`` on Linux). Entries are named by a SHA-256 key of everything that
determines them (see :func:`cache_key`).

File format: a magic line, the SHA-256 of the payload, then the payload (``torch.save``
of plain tensors, numbers, strings, lists and dicts; loaded with ``weights_only=True``).
Writes go to a temporary file in the same folder, are flushed to disk, then renamed
over the target, so a reader never sees half a file. A truncated, corrupt or
unreadable entry triggers a warning, is deleted, and :func:`load` returns ``None`` so
the caller recomputes it: never a crash, never a silently wrong model.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

try:  # POSIX: a lock between processes (two chapters, two pytest workers) on one cache entry
    import fcntl
except ImportError:  # pragma: no cover - Windows: entries are still written atomically, perhaps twice
    fcntl = None

import torch

__all__ = ["cache_dir", "cache_key", "code_version", "save", "load", "building", "CacheCorruptionWarning", "ENV_VAR"]

ENV_VAR = "ATTNLIB_CACHE_DIR"
_MAGIC = b"ATTNLIB-CACHE-1\n"


class CacheCorruptionWarning(UserWarning):
    """A cache entry was unreadable and will be rebuilt."""


def cache_dir() -> Path:
    """The cache folder (created if missing): ``$ATTNLIB_CACHE_DIR`` or the user cache dir."""
    env = os.environ.get(ENV_VAR)
    if env:
        path = Path(env).expanduser()
    else:
        from platformdirs import user_cache_dir

        path = Path(user_cache_dir("attnlib", appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


# CPython 3.11's ast module is not thread-safe ("AST constructor recursion depth mismatch" when
# two threads parse at once, as train.run_concurrently's do): one parse at a time, and each file
# parsed once per version of it.
_AST_LOCK = threading.Lock()
_CODE_MEMO: dict = {}


def _code_of(path: Path) -> bytes:
    """The code of a module without its comments and docstrings (their edits keep the cache)."""
    source = path.read_bytes()
    memo_key = (str(path), hashlib.sha256(source).digest())
    with _AST_LOCK:
        if memo_key not in _CODE_MEMO:
            _CODE_MEMO[memo_key] = _strip_docstrings(source)
        return _CODE_MEMO[memo_key]


def _strip_docstrings(source: bytes) -> bytes:
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree).encode()


#: The code every cached model's training runs, whatever its family, by module (relative to attnlib);
#: ``module:name,name`` keeps only those top-level definitions of a module that holds more than
#: training: attnlib's own ``__init__`` (seeding and the device, not its list of submodules) and
#: ``train`` (the recipe, the loop, the evaluation stored with a model, the cache's load-or-train; not
#: the scheduler that trains several models at once, its progress bars, nor the prediction helpers).
#: The arithmetic (``portable`` and its C source), the kernel pins (``cpu``), the metrics a loss may
#: use and the data path a training run reads (batches, splits, GloVe, the special tokens) are in
#: it; the datasets' sources are not (a dataset enters a key by its content,
#: :func:`attnlib.train.dataset_fingerprint`). Each family adds its own modules
#: (:func:`code_version`'s ``family``: a config's ``training_code``); an experiment whose own code
#: trains an entry (an adversary's loss, a deceiver's penalty) adds its module (``modules``).
#: Editing anything else (another family, the experiments, the presentation, a progress bar, the
#: published numbers, the intervals, the profiles, whose values enter a key as arguments) keeps
#: every trained model.
TRAINING_CODE = (
    "__init__:seed_everything,get_device",
    "_checks", "cpu", "portable", "metrics",
    "data.batching", "data.splits", "data.embeddings", "data.text",
    "models.protocol",
    "train:TrainConfig,TRANSFORMER_TRAIN,dataset_fingerprint,make_optimizer,classification_metrics,"
    "predict_proba,evaluate,label_loss,_select_by_dev_auc,TRAIN_THREADS,training_threads,seeded,lr_schedule,"
    "fit,train_model,STORED_FIELDS,load_or_train,_load_or_train",
)


def _selected(path: Path, names: tuple) -> bytes:
    """The code of ``names`` (top-level definitions and assignments) of a module, docstrings stripped
    (parsed once per version of the file, under the parser's lock: training threads ask at once)."""
    source = path.read_bytes()
    memo_key = (str(path), hashlib.sha256(source).digest(), names)
    with _AST_LOCK:
        if memo_key not in _CODE_MEMO:
            _CODE_MEMO[memo_key] = _select(source, names, path.name)
        return _CODE_MEMO[memo_key]


def _select(source: bytes, names: tuple, filename: str) -> bytes:
    import ast

    tree = ast.parse(source)
    found = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined = [node.name]
        elif isinstance(node, ast.Assign):
            defined = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined = [node.target.id]
        else:
            continue
        for name in defined:
            if name in names:
                found[name] = _strip_docstrings(ast.unparse(node).encode())
    missing = sorted(set(names) - set(found))
    if missing:
        raise ValueError(f"code_version: {filename} defines no {', '.join(missing)}")
    return b"\0".join(name.encode() + b"=" + found[name] for name in sorted(found))


def code_version(package_dir: str | Path | None = None, *, modules=(), family=None) -> str:
    """attnlib's version, a SHA-256 of the code that trains the entry, and the CPU kernels in
    use (:func:`attnlib.cpu.kernel_signature`): ``0.1.0+1a2b3c4d5e6f+x86-pinned-v1``.

    Cache keys hold it, so that a change to the training code (the data path, the family's model,
    the recipe, the thread count) can never be answered with a model the old code trained:
    the version string alone stays the same between releases. The code hashed is
    :data:`TRAINING_CODE`, the family's modules (``family``: dotted names below attnlib, a
    config's ``training_code``; None: every model family, ``"models"``) and ``modules`` (an
    experiment's own, e.g. ``"experiments.deception"`` or a module's ``__name__``). Edits
    elsewhere, to comments and to docstrings keep the cache.
    """
    from . import __version__

    root = Path(package_dir) if package_dir is not None else Path(__file__).resolve().parent
    wanted, parts = {}, [*TRAINING_CODE, *(("models",) if family is None else family), *map(str, modules)]
    for entry in parts:
        name, _, names = entry.partition(":")
        name = name[len("attnlib."):] if name.startswith("attnlib.") else name
        wanted[name] = tuple(sorted(set(wanted.get(name) or ()) | set(filter(None, names.split(","))))) \
            if names and (name not in wanted or wanted[name]) else None
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        dotted = ".".join(rel.with_suffix("").parts)
        match = [w for w in wanted if dotted == w or dotted.startswith(w + ".")]
        if not match:
            continue
        names = wanted[dotted] if dotted in wanted else None
        digest.update(rel.as_posix().encode() + b"\0" + (_selected(path, names) if names else _code_of(path)) + b"\0")
    if "portable" in wanted:  # its compiled GEMM's source, and whether it is built here
        from .portable import gemm_kernel

        for path in sorted(root.glob("*.c")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
        digest.update(b"chains" if gemm_kernel() is not None else b"torch GEMMs")
    missing = [w for w in wanted if not (root / (w.replace(".", "/") + ".py")).exists()
               and not (root / w.replace(".", "/")).is_dir()]
    if missing:
        raise ValueError(f"code_version: no module {', '.join(sorted(missing))} in {root}")
    from .cpu import kernel_signature

    # the kernels are part of the version: a model trained on unpinned kernels never answers a pinned run
    return f"{__version__}+{digest.hexdigest()[:12]}+{kernel_signature()}"


def cache_key(**parts: Any) -> str:
    """A stable SHA-256 hex key of JSON-serialisable ``parts`` (sorted, canonical)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def _path(kind: str, key: str) -> Path:
    if not kind.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"cache kind must be alphanumeric (with - or _), got {kind!r}")
    folder = cache_dir() / kind
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{key}.pt"


def save(kind: str, key: str, obj: Any) -> Path:
    """Atomically write ``obj`` under ``kind/key``; returns the path."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    payload = buffer.getvalue()
    digest = hashlib.sha256(payload).hexdigest().encode()
    target = _path(kind, key)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + digest + b"\n" + payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def load(kind: str, key: str) -> Any | None:
    """The object stored under ``kind/key``, or ``None`` if absent or corrupt (with a warning)."""
    target = _path(kind, key)
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        warnings.warn(f"cache entry {target} is unreadable ({err}); rebuilding it", CacheCorruptionWarning, stacklevel=2)
        return None
    problem = None
    if not data.startswith(_MAGIC):
        problem = "it has no attnlib cache header"
    else:
        rest = data[len(_MAGIC) :]
        digest, sep, payload = rest.partition(b"\n")
        if not sep or hashlib.sha256(payload).hexdigest().encode() != digest:
            problem = "its checksum does not match (truncated or corrupt)"
        else:
            try:
                return torch.load(io.BytesIO(payload), weights_only=True, map_location="cpu")
            except Exception as err:  # noqa: BLE001 - any unpickling failure means: rebuild
                problem = f"it cannot be loaded ({type(err).__name__}: {err})"
    warnings.warn(f"cache entry {target} is corrupt: {problem}; deleting and rebuilding it", CacheCorruptionWarning, stacklevel=2)
    target.unlink(missing_ok=True)
    return None


@contextmanager
def building(kind: str, key: str) -> Iterator[None]:
    """Hold ``kind/key``'s build lock: one process or thread at a time looks up, builds and saves an entry.

    Two chapters executed side by side (``pytest -n 2``, two notebooks open in JupyterLab) often
    need the same model. Without the lock both train it (the same bits, since training is
    deterministic, and the atomic :func:`save` keeps the file whole, but twice the time). With
    it, the second waits for the first and then loads the entry::

        with cache.building("models", key):
            entry = cache.load("models", key)
            if entry is None:
                entry = train()
                cache.save("models", key, entry)

    An advisory ``flock`` on ``kind/key.lock`` (released when its holder ends, even by a crash;
    the lock file stays, empty). Where ``fcntl`` is missing (Windows) it does nothing.
    """
    if fcntl is None:
        yield
        return
    lock_path = _path(kind, key).with_suffix(".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
