"""Input validation shared by the public API (private: not part of attnlib's interface).

Every public function validates at its boundary and raises ``ValueError`` with a
message that names the argument and what is wrong; the internals then trust data.
"""
from __future__ import annotations

import numbers

import numpy as np
import torch

#: Rows of a distribution must sum to 1 within this absolute tolerance. Loose enough
#: for float32 softmax outputs over a few thousand tokens, tight enough to catch
#: unnormalised scores (documented in :mod:`attnlib.metrics`).
SUM_TOL = 1e-3


def as_tensor(x, name: str, dtype=torch.float64) -> tuple[torch.Tensor, bool]:
    """Convert array-like ``x`` to a tensor; report whether the input was already torch."""
    if isinstance(x, torch.Tensor):
        return x.to(dtype) if dtype is not None else x, True
    try:
        arr = np.asarray(x, dtype=np.float64 if dtype is torch.float64 else None)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be array-like of numbers: {err}") from None
    if arr.dtype == object:
        raise ValueError(f"{name} must be a rectangular array of numbers (got ragged or object data)")
    arr = np.ascontiguousarray(arr)
    if not arr.flags.writeable:  # e.g. np.broadcast_to views: torch warns on read-only memory
        arr = arr.copy()
    t = torch.from_numpy(arr)
    return (t.to(dtype) if dtype is not None else t), False


def to_output(t: torch.Tensor, was_torch: bool):
    """Return torch for torch input, NumPy (or a Python float for 0-d) otherwise."""
    if was_torch:
        return t
    out = t.detach().cpu().numpy()
    return float(out) if out.ndim == 0 else out


def resolve_mask(shape: torch.Size, mask=None, lengths=None, device=None) -> torch.Tensor | None:
    """A boolean mask (..., T) from ``mask`` or per-row ``lengths`` (valid prefix), or None."""
    if mask is not None and lengths is not None:
        raise ValueError("give either mask or lengths, not both")
    if mask is not None:
        m = mask if isinstance(mask, torch.Tensor) else torch.as_tensor(np.asarray(mask))
        if m.dtype != torch.bool:
            if not torch.all((m == 0) | (m == 1)):
                raise ValueError("mask must be boolean (or 0/1)")
            m = m.bool()
        if m.shape != shape:
            raise ValueError(f"mask has shape {tuple(m.shape)} but the inputs have shape {tuple(shape)}")
        return m.to(device)
    if lengths is not None:
        ln = lengths if isinstance(lengths, torch.Tensor) else torch.as_tensor(np.asarray(lengths))
        if ln.shape != shape[:-1]:
            raise ValueError(
                f"lengths has shape {tuple(ln.shape)} but must match the leading dimensions {tuple(shape[:-1])}"
            )
        if ln.dtype.is_floating_point or ln.dtype == torch.bool:
            raise ValueError("lengths must be integers")
        if torch.any(ln < 0) or torch.any(ln > shape[-1]):
            raise ValueError(f"lengths must lie in [0, {shape[-1]}]")
        return torch.arange(shape[-1], device=ln.device) < ln.unsqueeze(-1)
    return None


def check_same_shape(p: torch.Tensor, q: torch.Tensor, names=("p", "q")) -> None:
    if p.shape != q.shape:
        raise ValueError(f"{names[0]} and {names[1]} must have the same shape, got {tuple(p.shape)} and {tuple(q.shape)}")
    if p.ndim == 0:
        raise ValueError(f"{names[0]} and {names[1]} must have at least one dimension (the last one is the support)")


def check_finite(x: torch.Tensor, name: str) -> None:
    if torch.isnan(x).any():
        raise ValueError(f"{name} contains NaN")
    if torch.isinf(x).any():
        raise ValueError(f"{name} contains inf")


def check_distribution(p: torch.Tensor, name: str, mask: torch.Tensor | None = None, tol: float = SUM_TOL) -> None:
    """Rows of ``p`` (over the last dim, restricted to ``mask``) are non-negative and sum to 1."""
    check_finite(p, name)
    if p.shape[-1] == 0:
        raise ValueError(f"{name} has an empty last dimension")
    if (p < 0).any():
        raise ValueError(f"{name} has negative entries (min {p.min().item():.3g}); a distribution must be non-negative")
    sums = (p * mask).sum(-1) if mask is not None else p.sum(-1)
    bad = (sums - 1).abs() > tol
    if bad.any():
        worst = sums[bad].flatten()[0].item()
        raise ValueError(
            f"rows of {name} must sum to 1 (tolerance {tol:g}){' over the masked entries' if mask is not None else ''}; "
            f"{int(bad.sum())} row(s) do not, e.g. one sums to {worst:.6g}"
        )


def check_positive_number(x, name: str, *, allow_zero: bool = False) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not np.isfinite(x):
        raise ValueError(f"{name} must be a finite number, got {x!r}")
    if x < 0 or (x == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {x!r}")
    return float(x)


def check_positive_int(x, name: str, minimum: int = 1) -> int:
    if isinstance(x, bool) or not isinstance(x, numbers.Integral) or x < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {x!r}")
    return int(x)


def check_seed(seed, name: str = "seed") -> int:
    """A seed: a non-negative int (NumPy ints too, not bools)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"{name} must be a non-negative int, got {seed!r}")
    return int(seed)


def layer_indices(layer, n_layers: int, what: str = "the model") -> list[int]:
    """The layers a function of every layer (``layer=None``) or of one (its index, negative from the
    top) runs over: ``[0, ..., n_layers - 1]`` or ``[layer % n_layers]``; a ValueError names ``what``."""
    if layer is None:
        return list(range(n_layers))
    if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) or not -n_layers <= layer < n_layers:
        raise ValueError(f"layer must be an int in {-n_layers} .. {n_layers - 1} ({what} has {n_layers} layers), "
                         f"got {layer!r}")
    return [int(layer) % n_layers]


def check_bool(x, name: str) -> bool:
    if not isinstance(x, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {x!r}")
    return bool(x)
