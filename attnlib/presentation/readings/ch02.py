"""Chapter 2's readings: the measures on the worked example, two distributions far apart, the
batched Kendall τ against SciPy's, and the speed of the batched code.

Each function returns ``{glued name: value}`` for :func:`attnlib.presentation.glue.glue_all`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...metrics import jsd, tvd

__all__ = ["AGREE_ATOL", "AGREE_ATOL_TEXT", "example", "far_apart", "agreement", "speed"]


def example(alpha_1, alpha_2, tau: float, p_value: float) -> dict[str, Any]:
    """The worked example: TVD and JSD between two attention rows, their Kendall τ and its p-value,
    and the largest JSD there can be (ln 2, natural logs)."""
    return {"ch02_ln2": float(np.log(2)), "ch02_ex_tvd": float(tvd(alpha_1, alpha_2)),
            "ch02_ex_jsd": float(jsd(alpha_1, alpha_2)), "ch02_ex_tau": float(tau), "ch02_ex_p": float(p_value)}


def far_apart(d_jsd, d_tvd, *, jsd_at_least: float = 0.49) -> dict[str, Any]:
    """Among random pairs (their JSDs ``d_jsd`` and TVDs ``d_tvd``): the share with a JSD of at least
    ``jsd_at_least``, and the smallest TVD among them."""
    d_jsd, d_tvd = np.asarray(d_jsd), np.asarray(d_tvd)
    if d_jsd.shape != d_tvd.shape or d_jsd.size == 0:
        raise ValueError(f"d_jsd and d_tvd must be non-empty and of one shape, got {d_jsd.shape} and {d_tvd.shape}")
    far = d_jsd >= jsd_at_least
    if not far.any():
        raise ValueError(f"no pair has a JSD of at least {jsd_at_least}: nothing to read")
    return {"ch02_frac_049": float(np.mean(far)), "ch02_min_tvd_049": float(d_tvd[far].min())}


#: How close the batched τ and p-values must come to SciPy's, and how the prose writes it.
AGREE_ATOL, AGREE_ATOL_TEXT = 1e-9, "1e-9"


def agreement(tau, p_value, reference) -> dict[str, Any]:
    """Whether the batched τ and p-values (``tau``, ``p_value``: one per row) agree with SciPy's
    (``reference``: (rows, 2), τ then p) to :data:`AGREE_ATOL`, and which rows each leaves undefined."""
    tau, p_value, reference = np.asarray(tau), np.asarray(p_value), np.asarray(reference)
    if reference.shape != (len(tau), 2) or p_value.shape != tau.shape:
        raise ValueError(f"reference must be (rows, 2) beside tau and p_value of (rows,), got "
                         f"{reference.shape}, {tau.shape}, {p_value.shape}")
    tau_ok = np.nanmax(np.abs(tau - reference[:, 0])) < AGREE_ATOL
    p_ok = np.nanmax(np.abs(p_value - reference[:, 1])) < AGREE_ATOL
    n_ours, n_scipy = int(np.isnan(tau).sum()), int(np.isnan(reference[:, 0]).sum())
    return {
        "ch02_agree": f"agree to within {AGREE_ATOL_TEXT}" if tau_ok and p_ok
        else f"do NOT agree to within {AGREE_ATOL_TEXT} (see the output above)",
        "ch02_nan_rows": f"both leave the same {n_ours} constant rows undefined" if n_ours == n_scipy
        else f"ours leaves {n_ours} rows undefined, SciPy {n_scipy}",
    }


def speed(looped: float, batched: float) -> dict[str, Any]:
    """How many times faster the batched code ran than the loop (both in seconds, from one run)."""
    if not (looped > 0 and batched > 0):
        raise ValueError(f"both times must be positive seconds, got {looped!r} and {batched!r}")
    return {"ch02_ratio": float(looped / batched)}
