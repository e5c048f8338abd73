"""attnlib.cpu: the kernel pins and the thread rule."""
import os
import platform
import subprocess
import sys

import pytest
import torch

from attnlib import cache, cpu

X86_LINUX = platform.machine() in ("x86_64", "AMD64") and sys.platform.startswith("linux")


def _cgroup(tmp_path, v2=None, v1=None):
    root = tmp_path / "cgroup"
    root.mkdir()
    if v2 is not None:
        (root / "cpu.max").write_text(v2)
    if v1 is not None:
        (root / "cpu").mkdir()
        (root / "cpu" / "cpu.cfs_quota_us").write_text(str(v1[0]))
        (root / "cpu" / "cpu.cfs_period_us").write_text(str(v1[1]))
    return root


def fresh_env(**extra) -> dict:
    """This process's environment without what importing attnlib set in it: a fresh shell's."""
    env = {k: v for k, v in os.environ.items()
           if k not in {*cpu.KERNEL_PINS, *cpu.BLAS_PINS, "NPY_DISABLE_CPU_FEATURES", "GOMP_SPINCOUNT"}}
    return {**env, **extra}


def _visible():
    counts = [os.cpu_count() or 1]
    if hasattr(os, "sched_getaffinity"):
        counts.append(len(os.sched_getaffinity(0)))
    return min(counts)


@pytest.mark.parametrize("v2, v1, quota", [
    ("max 100000\n", None, None),  # no quota: the visible cores
    ("150000 100000\n", None, 2),  # 1.5 CPUs: round up
    ("100000 100000\n", None, 1),
    ("50000 100000\n", None, 1),  # half a CPU still gets one thread
    (None, (100000, 100000), 1),  # cgroup v1
    (None, (-1, 100000), None),  # v1 without a quota
    ("garbage", None, None),  # unreadable: ignored
])
def test_available_cores_is_the_smallest_of_quota_affinity_and_visible_cores(tmp_path, v2, v1, quota):
    root = _cgroup(tmp_path, v2=v2, v1=v1)
    expected = _visible() if quota is None else min(quota, _visible())
    assert cpu.available_cores(root) == expected


def test_no_cgroup_at_all_means_the_visible_cores(tmp_path):
    assert cpu.available_cores(tmp_path / "missing") == _visible()


def test_attnlib_threads_overrides_the_thread_count_and_bad_values_are_refused(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv(cpu.THREADS_ENV_VAR, "1")
        assert cpu.configure().threads == 1 and torch.get_num_threads() == 1
        assert cpu.status().threads == 1
        for bad in ("0", "-2", "two"):
            monkeypatch.setenv(cpu.THREADS_ENV_VAR, bad)
            with pytest.raises(ValueError, match="ATTNLIB_THREADS must be a positive integer"):
                cpu.configure()
    finally:
        monkeypatch.delenv(cpu.THREADS_ENV_VAR)
        cpu.configure()
        torch.set_num_threads(before)


@pytest.mark.skipif(not X86_LINUX, reason="the pins are x86-64 Linux's (MKL); elsewhere status() says unpinned")
def test_the_test_process_runs_on_the_pinned_kernels():
    s = cpu.status()
    assert s.pinned, str(s)
    assert (s.aten_capability, s.mkl_branch, s.onednn) == ("AVX2", "COMPATIBLE,STRICT", False)
    assert torch.backends.cpu.get_cpu_capability() == "AVX2" and not torch.backends.mkldnn.enabled
    assert cpu.kernel_signature() == "x86-pinned-v1"
    assert cache.code_version().endswith("+x86-pinned-v1")
    assert "pinned" in str(s) and "NOT" not in str(s)


def test_status_notices_when_onednn_is_switched_back_on():
    if not cpu.status().pinned:
        pytest.skip("kernels not pinned on this platform")
    try:
        torch.backends.mkldnn.enabled = True
        s = cpu.status()
        assert not s.pinned and "oneDNN" in s.reason
        assert cpu.kernel_signature().startswith("unpinned-")
    finally:
        torch.backends.mkldnn.enabled = False
    assert cpu.status().pinned


_LATE_IMPORT = """
import warnings
import torch
torch.randn(64, 64).tanh().sum()  # torch computes before attnlib is imported: ATen's kernels are chosen now
import attnlib.reproducible
from attnlib import cache, cpu, data, train
s = cpu.status()
print(s.pinned, cpu.kernel_signature().startswith("unpinned-"), cache.code_version().split("+")[-1].startswith("unpinned"))
ds = data.load_dataset("synthetic", max_train=64, max_eval=32, seed=0)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    train.train_model(ds, encoder="average", epochs=1, use_cache=False, progress=False)
print(any(issubclass(w.category, cpu.ReproducibilityWarning) and "import attnlib.reproducible" in str(w.message)
          for w in caught))
"""


@pytest.mark.skipif(not X86_LINUX, reason="the pins are x86-64 Linux's (MKL)")
def test_torch_computing_before_attnlib_is_reported_warned_and_kept_out_of_the_cache():
    out = subprocess.run([sys.executable, "-c", _LATE_IMPORT], capture_output=True, text=True, timeout=300,
                         env=fresh_env())
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "True", "True", "True"], out.stdout


def test_pins_can_be_turned_off():
    code = "import attnlib.reproducible; from attnlib import cpu; s = cpu.status(); print(s.pinned, s.reason)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=fresh_env(**{cpu.PINS_ENV_VAR: "0"}))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("False") and "ATTNLIB_CPU_PINS=0" in out.stdout


def test_release_memory_hands_freed_heap_back():
    import sys

    import psutil

    from attnlib import cpu

    proc = psutil.Process()
    junk = [bytearray(512) for _ in range(200_000)]  # ~100 MB in small blocks, from malloc's heap
    del junk
    before = proc.memory_info().rss
    released = cpu.release_memory()
    assert isinstance(released, bool)
    assert proc.memory_info().rss <= before
    if sys.platform.startswith("linux"):
        assert released  # glibc: the freed small blocks go back


# numpy's and SciPy's kernels: OpenBLAS's Haswell kernels on one thread, numpy's AVX2 dispatch.
_NUMERIC = """
import hashlib, os
if os.environ.get("IMPORT_NUMPY_FIRST"):
    import numpy
import attnlib.reproducible
import numpy as np, scipy.linalg
rng = np.random.default_rng(0)
A = rng.standard_normal((120, 80)); b = rng.standard_normal(120); x = rng.random(20000) * 40 - 20
parts = [np.linalg.svd(A, compute_uv=False), scipy.linalg.svd(A[:60, :40], compute_uv=False),
         np.linalg.lstsq(A, b, rcond=None)[0], A.T @ A, np.exp(x), np.log(np.abs(x) + 1), np.tanh(x),
         np.linalg.norm(A, axis=1), np.argsort(np.round(x, 0))]
s = attnlib.cpu.status()
digest = hashlib.sha256(b"".join(np.ascontiguousarray(p).tobytes() for p in parts)).hexdigest()
print("|".join([str(s.numeric_pinned), s.blas, s.numpy, digest]))
"""

#: The computations above (SVDs in numpy and SciPy, least squares, a Gram matrix, exp, log, tanh, norms,
#: a sort with ties) with attnlib's pins, recorded on an AMD EPYC: OpenBLAS's Haswell kernels and
#: numpy's X86_V3 loops are the same code on every x86-64 CPU with AVX2.
NUMERIC_DIGEST = "41f326feca7866397d9994bb91b3f93d6a36524e9c8228e630897f135d012ab6"


def _numeric(**env) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _NUMERIC], capture_output=True, text=True, timeout=300,
                         env=fresh_env(**env))
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().split("|")


def _has_avx512() -> bool:
    try:
        return " avx512f " in open("/proc/cpuinfo").read()
    except OSError:
        return False


@pytest.mark.skipif(not X86_LINUX, reason="OpenBLAS's and numpy's x86 kernels")
def test_numpy_and_scipy_run_avx2_kernels_on_one_thread_when_attnlib_is_imported_first():
    pinned, blas, level, digest = _numeric()
    assert (pinned, blas, level) == ("True", "Haswell x1", "X86_V3")
    assert digest == NUMERIC_DIGEST, f"this machine's numpy/SciPy gave {digest}, not the book's"
    # attnlib's pins off, this CPU's own choice: on an AVX-512 CPU, other bits (the pins are what holds it)
    unpinned = _numeric(ATTNLIB_CPU_PINS="0")
    assert unpinned[0] == "False"
    if _has_avx512():
        assert unpinned[-1] != digest
    # numpy imported before attnlib: its libraries loaded with the CPU's own choice, and status() says so
    late = _numeric(IMPORT_NUMPY_FIRST="1")
    if _has_avx512():
        assert late[0] == "False" and late[2] != "X86_V3"
