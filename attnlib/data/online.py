"""Hugging Face ``datasets`` access for the paper's own data sets (SST-2, AG News, 20 Newsgroups).

These need either a network connection (the first time; afterwards the
Hugging Face cache works offline) or local copies passed as ``data_files``.
``datasets`` is imported only here, only when needed (``pip install attnlib[online]``).
"""
from __future__ import annotations

import contextlib
import os
import socket
import urllib.parse
from pathlib import Path

import pandas as pd

__all__ = ["DatasetUnavailableError", "OFFLINE_ALTERNATIVES", "load_hf_frames"]

#: data sets that need no network; named in every "not available" error
OFFLINE_ALTERNATIVES = ("rt-polarity", "imdb", "synthetic")

_SPLIT_NAMES = {"train": "train", "validation": "dev", "valid": "dev", "dev": "dev", "test": "test"}
_FORMATS = {"csv": "csv", "tsv": "csv", "json": "json", "jsonl": "json", "ndjson": "json", "parquet": "parquet", "pq": "parquet"}
_COMPRESSION = (".gz", ".bz2", ".xz", ".zst", ".zip")
_TRUE = {"1", "on", "yes", "true"}
_RESERVED = {"path", "name", "data_files", "split"}


class DatasetUnavailableError(ConnectionError, RuntimeError):
    """An online data set could not be fetched (no network, or offline mode and not cached).

    A ConnectionError *and* a RuntimeError, so either ``except`` clause catches it.
    The message names the offline alternatives.
    """


def _env_offline() -> bool:
    return any(os.environ.get(k, "").strip().lower() in _TRUE for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _hub_unreachable(timeout: float = 3.0) -> str | None:
    """None if the Hub looks reachable (or a proxy hides the answer), else the reason."""
    if any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HTTP_PROXY", "http_proxy")):
        return None
    endpoint = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        return f"cannot connect to {host}:{port} ({exc})"
    return None


@contextlib.contextmanager
def _forced_offline(datasets_module):
    """Put already-imported ``datasets``/``huggingface_hub`` in offline mode (cache only) for a moment.

    Their offline flags are read from the environment at import time, so setting
    HF_HUB_OFFLINE later has no effect on its own; without this, a machine with no
    network spends ~25 s in retries before failing.
    """
    targets = [(datasets_module.config, "HF_HUB_OFFLINE"), (datasets_module.config, "HF_DATASETS_OFFLINE")]
    try:
        import huggingface_hub.constants as hub_constants

        targets.append((hub_constants, "HF_HUB_OFFLINE"))
    except ImportError:  # pragma: no cover
        pass
    saved = [(obj, attr, getattr(obj, attr)) for obj, attr in targets if hasattr(obj, attr)]
    try:
        for obj, attr, _ in saved:
            setattr(obj, attr, True)
        yield
    finally:
        for obj, attr, value in saved:
            setattr(obj, attr, value)


def _unavailable_message(name: str, hub_id: str, reason: str) -> str:
    alts = ", ".join(repr(a) for a in OFFLINE_ALTERNATIVES)
    return (
        f"data set {name!r} ({hub_id!r} on the Hugging Face Hub) is not available: {reason}. "
        f"It needs a network connection the first time (afterwards the Hugging Face cache is used). "
        f"Offline alternatives that need no network: {alts} -- 'rt-polarity' is the Rotten Tomatoes "
        f"sentence data SST was built from. Or pass local copies of the files, e.g. "
        f"load_dataset({name!r}, data_files={{'train': 'train.csv', 'test': 'test.csv'}})."
    )


def _is_network_error(exc: BaseException) -> bool:
    if isinstance(exc, (OSError, TimeoutError)):
        return True
    return any(
        (cls.__module__ or "").split(".")[0] in {"httpx", "httpcore", "requests", "urllib3", "huggingface_hub", "aiohttp"}
        for cls in type(exc).__mro__
    )


def _import_datasets():
    try:
        import datasets
    except ImportError as exc:
        raise ImportError(
            "the online data sets need the Hugging Face 'datasets' package: pip install 'attnlib[online]' "
            f"(or use an offline data set: {', '.join(OFFLINE_ALTERNATIVES)})"
        ) from exc
    return datasets


def _normalize_data_files(data_files) -> tuple[dict[str, list[str]], str, dict]:
    if isinstance(data_files, (str, os.PathLike)):
        data_files = {"train": [data_files]}
    elif isinstance(data_files, (list, tuple)):
        data_files = {"train": list(data_files)}
    elif not isinstance(data_files, dict):
        raise ValueError(f"data_files must be a path, a list of paths or a dict split -> path(s), got {type(data_files).__name__}")
    out: dict[str, list[str]] = {}
    for split, files in data_files.items():
        if split not in _SPLIT_NAMES:
            raise ValueError(f"unknown split {split!r} in data_files; use {sorted(_SPLIT_NAMES)}")
        files = [files] if isinstance(files, (str, os.PathLike)) else list(files)
        if not files:
            raise ValueError(f"data_files[{split!r}] is empty")
        paths = []
        for f in files:
            f = os.fspath(f)
            if "://" not in f and not any(c in f for c in "*?[") and not Path(f).exists():
                raise FileNotFoundError(f"data_files[{split!r}]: no such file: {f}")
            paths.append(f)
        out[split] = paths
    if not out:
        raise ValueError("data_files is empty")
    exts = set()
    for f in (f for fs in out.values() for f in fs):
        stem = f.lower()
        for c in _COMPRESSION:
            if stem.endswith(c):
                stem = stem[: -len(c)]
        exts.add(stem.rsplit(".", 1)[-1] if "." in Path(stem).name else "")
    if len(exts) != 1 or next(iter(exts)) not in _FORMATS:
        raise ValueError(f"data_files must all be one of the formats {sorted(_FORMATS)} (by extension), got {sorted(exts)}")
    ext = exts.pop()
    builder_kwargs = {"delimiter": "\t"} if ext == "tsv" else {}
    return out, _FORMATS[ext], builder_kwargs


def load_hf_frames(name: str, hub_id: str, data_files=None, **hf_kwargs) -> dict[str, pd.DataFrame]:
    """Load ``hub_id`` (or local ``data_files``) with ``datasets.load_dataset``.

    Returns one pandas frame per split, keyed 'train' / 'dev' / 'test'
    ('validation' is renamed 'dev'). Network failures raise
    `DatasetUnavailableError` quickly instead of retrying for half a minute.
    """
    bad = _RESERVED & set(hf_kwargs)
    if bad:
        raise ValueError(f"load_dataset() manages {sorted(bad)} itself; do not pass them")
    datasets = _import_datasets()
    if data_files is not None:
        files, builder, builder_kwargs = _normalize_data_files(data_files)
        dd = datasets.load_dataset(builder, data_files=files, **{**builder_kwargs, **hf_kwargs})
    else:
        reason = None
        if _env_offline() or getattr(datasets.config, "HF_HUB_OFFLINE", False):
            reason = "offline mode is on (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE) and it is not in the local cache"
        else:
            unreachable = _hub_unreachable()
            if unreachable:
                reason = f"no network ({unreachable}) and it is not in the local cache"
        if reason is not None:
            try:
                with _forced_offline(datasets):
                    dd = datasets.load_dataset(hub_id, **hf_kwargs)
            except TypeError:
                raise
            except Exception as exc:
                raise DatasetUnavailableError(_unavailable_message(name, hub_id, reason)) from exc
        else:
            try:
                dd = datasets.load_dataset(hub_id, **hf_kwargs)
            except Exception as exc:
                if _is_network_error(exc):
                    raise DatasetUnavailableError(_unavailable_message(name, hub_id, f"download failed ({exc})")) from exc
                raise
    frames: dict[str, pd.DataFrame] = {}
    for split in dd:
        key = _SPLIT_NAMES.get(split)
        if key is None:
            continue  # e.g. an 'unsupervised' split
        if key in frames:
            raise ValueError(f"two splits map to {key!r} (e.g. both 'validation' and 'dev')")
        frames[key] = dd[split].to_pandas()
    return frames
