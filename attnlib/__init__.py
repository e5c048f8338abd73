"""attnlib: models, metrics and experiments for the book *Is attention explanation?*

The package is layered; lower layers never import higher ones::

    metrics, _checks, cache, profiles      (foundations)
    data -> models -> train -> experiments (importance, counterfactual, baselines, adversarial_training,
    diagnostic, erasure) -> viz / widgets / exercises

Submodules are imported on first use, so ``attnlib.metrics.jsd`` works without an explicit
``import attnlib.metrics``. Importing attnlib pins torch's CPU kernels and sizes its thread
pool to the CPU quota (:mod:`attnlib.cpu`): import it before running any torch code, so that
a run gives the book's numbers on every x86-64 CPU.
"""
from __future__ import annotations

import importlib
import os
import random

__version__ = "0.1.0"

from . import cpu  # noqa: E402  (first: the kernel pins must precede any torch computation)

cpu.configure()

_SUBMODULES = {
    "cache",
    "counterfactual",
    "data",
    "exercises",
    "importance",
    "metrics",
    "models",
    "profiles",
    "published",
    "baselines",
    "adversarial_training",
    "diagnostic",
    "erasure",
    "train",
    "viz",
    "widgets",
}

__all__ = ["__version__", "seed_everything", "get_device", "get_profile", *sorted(_SUBMODULES)]


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch, and ask torch for deterministic kernels.

    CPU runs with the same seed and library versions give the same numbers twice;
    training always runs on :data:`attnlib.train.TRAIN_THREADS` threads, so a trained
    model does not depend on the machine's core count. GPU runs are close but not
    bit-identical.
    """
    import numpy as np
    import torch

    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)


def get_device(device: "str | None" = None):
    """The torch device to use: ``device`` if given, else CUDA when present, else CPU."""
    import torch

    if device is not None:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def get_profile(name: "str | None" = None):
    """Shortcut for :func:`attnlib.profiles.get_profile`."""
    from .profiles import get_profile as _get_profile

    return _get_profile(name)


def __getattr__(name: str):
    if name in _SUBMODULES:
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'attnlib' has no attribute {name!r}")
