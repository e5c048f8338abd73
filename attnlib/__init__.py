"""attnlib: models, metrics and experiments for the book *Is attention explanation?*

The layout is the architecture. Lower layers never import higher ones, and no module
imports a private (underscored) name of another (``tests/test_layout.py`` checks both)::

    _checks, metrics, cpu, reproducible, portable, cache, profiles, published   foundations
    data/            texts -> vocabularies, splits, padded batches, GloVe
    models/          the model protocol (what an experiment needs from a model), the
                     interventions on attention rows, and the families that meet it
    train            recipes, seeds, the model cache, training several models at once
    runs             the one experiment runner: subset, length buckets, chunks under a
                     memory bound, device, eval mode; InstanceResult, every result's base
    experiments/     what the chapters run: importance, counterfactual, erasure,
                     baselines, adversarial_training, diagnostic; Part IV's identifiability,
                     token_identity, head_perturbation, head_importance, adversarial_keys,
                     deception, flow (rollout and attention flow), faithfulness (ERASER's
                     comprehensiveness and sufficiency, rationale recovery), explanations
                     (every explanation method of Chapter 15 on the same instances), audit (the
                     battery on your own model and texts in one call); Part V's norm_attention
                     (Kobayashi et al.'s vector norms, from any transformer's trace) and
                     disagreement (Krishna et al.'s agreement of explanations, Chapter 18)
    presentation/    viz, widgets, exercises: figures and checkers (not in the cache key)

Why folders: a second model family (transformers) and four more experiment modules come
next, and each should land where its layer is, visible from the tree. Why one runner and one
protocol: permutation, the adversary and erasure are the same loop (hidden states once, then
many candidate attentions decoded at a site), so a new family writes the protocol's three
methods and every experiment runs on it.

The flat names of earlier editions keep working: ``attnlib.counterfactual``,
``from attnlib import viz`` and ``import attnlib.erasure`` give the modules above.
Submodules are imported on first use. Importing attnlib changes no setting of its host (torch's
kernels and threads, numpy's, the environment): a practitioner's script keeps its own. The
book's reproducible kernels are asked for in one visible line, ``import attnlib.reproducible``,
first in every chapter (:mod:`attnlib.reproducible`, :mod:`attnlib.cpu`).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import random
import sys

__version__ = "0.1.0"

#: Public submodules by the short name the chapters use, and where each lives.
_SUBMODULES = {
    "cache": "cache",
    "cpu": "cpu",
    "reproducible": "reproducible",
    "portable": "portable",
    "data": "data",
    "metrics": "metrics",
    "uncertainty": "uncertainty",
    "models": "models",
    "profiles": "profiles",
    "published": "published",
    "train": "train",
    "runs": "runs",
    "experiments": "experiments",
    "presentation": "presentation",
    "importance": "experiments.importance",
    "counterfactual": "experiments.counterfactual",
    "erasure": "experiments.erasure",
    "baselines": "experiments.baselines",
    "adversarial_training": "experiments.adversarial_training",
    "diagnostic": "experiments.diagnostic",
    "deception": "experiments.deception",
    "identifiability": "experiments.identifiability",
    "token_identity": "experiments.token_identity",
    "adversarial_keys": "experiments.adversarial_keys",
    "head_perturbation": "experiments.head_perturbation",
    "head_importance": "experiments.head_importance",
    "flow": "experiments.flow",
    "faithfulness": "experiments.faithfulness",
    "explanations": "experiments.explanations",
    "audit": "experiments.audit",
    "norm_attention": "experiments.norm_attention",
    "globenc": "experiments.globenc",
    "disagreement": "experiments.disagreement",
    "viz": "presentation.viz",
    "widgets": "presentation.widgets",
    "exercises": "presentation.exercises",
}


class _ShortNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import attnlib.viz`` (a short name) gives the module ``attnlib.presentation.viz`` itself."""

    def find_spec(self, fullname, path=None, target=None):
        prefix, _, short = fullname.partition(".")
        if prefix != __name__ or _SUBMODULES.get(short, short) == short:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return importlib.import_module(f"{__name__}.{_SUBMODULES[spec.name.partition('.')[2]]}")

    def exec_module(self, module):
        pass  # the real module is executed already, under its own name


if not any(isinstance(f, _ShortNames) for f in sys.meta_path):
    sys.meta_path.append(_ShortNames())

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

    from ._checks import check_seed

    seed = check_seed(seed)
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
        module = importlib.import_module(f".{_SUBMODULES[name]}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'attnlib' has no attribute {name!r}")
