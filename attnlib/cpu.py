"""The CPU rules: one set of kernels on every x86-64 CPU, and threads that fit the CPU quota.

**Kernels.** A float computation gives bit-identical results only when it runs the same
instructions in the same order. torch picks its kernels by CPU at run time, three times
over: ATen's vectorised kernels by instruction set (AVX-512, AVX2, ...), oneDNN's (the LSTM,
convolutions) by instruction set and cache sizes, and MKL's BLAS by instruction set, vendor
and cache sizes. Each choice on its own changed the book's trained BiLSTM (measured: the
epoch-1 loss moved between 0.6136 and 0.6235 across choices on one machine). Importing
``attnlib.reproducible`` therefore pins all three for the process (plain
``import attnlib`` changes nothing of its host):

* ``ATEN_CPU_CAPABILITY=avx2``: ATen's AVX2 kernels on every CPU that has AVX2, AVX-512
  or not (AMD and Intel run the same AVX2 code);
* ``MKL_CBWR=COMPATIBLE,STRICT``: MKL's conditional-numerical-reproducibility mode on its
  SSE2 branch, the one Intel documents as giving the same results on Intel and compatible
  (AMD) processors, in strict mode (results independent of thread count and alignment for
  GEMM). MKL's AVX2 branch is documented for Intel CPUs only, and on an AMD CPU its results
  matched neither the auto choice nor the SSE2 branch: so the SSE2 branch;
* oneDNN off (``torch.backends.mkldnn.enabled = False``): the LSTM and the convolutions run
  on ATen's own kernels and MKL's GEMM, so oneDNN's per-CPU JIT code never runs.

The environment variables are read once, when torch first computes. attnlib sets them before
it imports torch, and also works when torch was imported first, as long as nothing was
computed yet. When something was (a notebook that ran torch code before ``import attnlib.reproducible``),
the pins cannot take effect any more: :func:`status` says so, training warns, and the model
cache keeps such models apart (:func:`kernel_signature` is part of every cache key).

Cost, measured on one machine (2 cores, AMD EPYC with AVX-512): one epoch of the book's
BiLSTM on rt-polarity took 11.1 s pinned against 7.0 s unpinned (oneDNN's LSTM, MKL's auto
branch): most of it is MKL's SSE2 branch (8.2 s on its AVX2 branch).

**Threads.** torch sizes its thread pool by the machine's visible cores; in a container
(Binder, Colab, CI) the CPU quota can be smaller, and a thread pool larger than the CPU time
it gets stalls in OpenMP's barriers. ``import attnlib.reproducible`` sets torch's threads to
:func:`available_cores`: the smallest of the cgroup CPU quota (``cpu.max``), the CPU affinity
and the visible core count. ``ATTNLIB_THREADS`` overrides it. It also shortens the time
OpenMP's waiting threads spin before they sleep (``GOMP_SPINCOUNT=1000``, when torch was not
imported before attnlib and neither ``GOMP_SPINCOUNT`` nor ``OMP_WAIT_POLICY`` is set): a
spinning thread takes the core from the one it waits for on a busy machine. Measured on
2 cores (``benchmarks/bench_threads.py``; 300 sentences, idle / beside one busy process):
chapter 3's gradients + leave-one-out took 1.31 / 2.73 s against torch's default spinning
1.31 / 3.73 s; chapter 5's adversary 0.43 / 1.03 s against 0.34 / 1.19 s. Sleeping at once
(``OMP_WAIT_POLICY=PASSIVE``) was better beside the busy process (2.34 s, 0.58 s) but up to 3x
slower idle (1.67 s, 1.05 s); one thread was flat (1.98 / 1.98 s, 0.44 / 0.43 s). A model always
trains on :data:`attnlib.train.TRAIN_THREADS` threads, whatever this says; the thread count
here is also how many models :func:`attnlib.train.train_models` trains at once.

**numpy and SciPy.** Their BLAS and LAPACK (OpenBLAS, built ``DYNAMIC_ARCH``) pick kernels
by CPU too (``SkylakeX`` on an AMD EPYC with AVX-512), and numpy's own loops dispatch by
instruction set: its float64 ``exp`` and ``log`` give other bits on AVX-512 (``X86_V4``) than
on AVX2 (``X86_V3``). ``attnlib.reproducible`` pins OpenBLAS to its ``Haswell`` kernels
(``OPENBLAS_CORETYPE``: AVX2 and FMA, the same code on every such CPU) and numpy's dispatch to
``X86_V3`` (``NPY_DISABLE_CPU_FEATURES``), both read when the library loads: so import
attnlib.reproducible before numpy, as the chapters do. OpenBLAS runs one thread (``OPENBLAS_NUM_THREADS=1``, and
``threadpoolctl`` for a library already loaded): results then depend on no thread count, and
beside a busy process small SVDs took 2.9 ms on one OpenBLAS thread against 77 ms on two
(threads stalled in OpenBLAS's barriers). :func:`status` says what holds (``blas``, ``numpy``).

``ATTNLIB_CPU_PINS=0`` turns the kernel pins off (faster; numbers then depend on the CPU).
"""
from __future__ import annotations

import math
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "KERNEL_PINS",
    "BLAS_PINS",
    "NUMPY_LEVEL",
    "PINS_ENV_VAR",
    "THREADS_ENV_VAR",
    "CpuStatus",
    "ReproducibilityWarning",
    "available_cores",
    "release_memory",
    "configure",
    "kernel_signature",
    "status",
    "warn_if_unpinned",
]

#: The environment variables pinned at import (read by torch when it first computes).
KERNEL_PINS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE,STRICT"}
#: numpy's and SciPy's OpenBLAS: the AVX2 kernels and one thread (read when the library loads).
BLAS_PINS = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_NUM_THREADS": "1"}
#: numpy's dispatch level: AVX2 (``X86_V3``) on every CPU; the features above it that this CPU
#: has (by its /proc/cpuinfo flag) are switched off before numpy loads.
NUMPY_LEVEL = "X86_V3"
_NUMPY_ABOVE_V3 = {"X86_V4": ("avx512f",), "AVX512_ICL": ("avx512_vbmi2", "avx512vbmi2"),
                   "AVX512_SPR": ("avx512_fp16", "avx512fp16")}
#: Set to ``0`` to leave torch's kernel choice alone.
PINS_ENV_VAR = "ATTNLIB_CPU_PINS"
#: Set to a positive integer to choose torch's (inference) thread count.
THREADS_ENV_VAR = "ATTNLIB_THREADS"

# MKL's conditional numerical reproducibility constants (mkl_service.h).
_MKL_CBWR_BRANCH = 1
_MKL_CBWR_ALL = ~0
_MKL_CBWR_COMPATIBLE = 3
_MKL_CBWR_STRICT = 0x10000
_MKL_BRANCH_NAMES = {0: "off", 1: "off", 2: "auto", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1",
                     8: "SSE4_2", 9: "AVX", 10: "AVX2", 11: "AVX512_MIC", 12: "AVX512", 13: "AVX512_MIC_E1",
                     14: "AVX512_E1", 15: "AVX512_E2", 16: "AVX512_E3", 17: "AVX512_E4", 18: "AVX2_E1",
                     19: "AVX512_E5"}


class ReproducibilityWarning(UserWarning):
    """The CPU kernels are not the pinned ones: numbers may differ from the book's."""


@dataclass(frozen=True)
class CpuStatus:
    """What this process computes with."""

    pinned: bool  # every kernel pin is in effect
    aten_capability: str  # ATen's kernel set, e.g. "AVX2"
    mkl_branch: str  # MKL's CNR branch, e.g. "COMPATIBLE,STRICT"; "n/a" without MKL
    onednn: bool  # whether oneDNN is enabled
    threads: int  # torch's (inference) thread count
    cores: int  # available_cores()
    reason: str = ""  # why not pinned
    blas: str = "n/a"  # numpy's and SciPy's OpenBLAS kernels and threads, e.g. "Haswell x1"
    numpy: str = "n/a"  # numpy's highest dispatched instruction-set level, e.g. "X86_V3"
    numeric_reason: str = ""  # why numpy's or SciPy's kernels are not the pinned ones ("" when they are)

    @property
    def numeric_pinned(self) -> bool:
        """numpy's and SciPy's kernels are the pinned ones (OpenBLAS Haswell, one thread; numpy X86_V3)."""
        return not self.numeric_reason

    def __str__(self) -> str:
        state = "pinned" if self.pinned else f"NOT pinned ({self.reason})"
        return (f"CPU kernels {state}: ATen {self.aten_capability}, MKL branch {self.mkl_branch}, "
                f"oneDNN {'on' if self.onednn else 'off'}; {self.threads} torch threads "
                f"({self.cores} cores available); numpy/SciPy "
                + (f"unpinned ({self.numeric_reason})" if self.numeric_reason else "pinned")
                + f": OpenBLAS {self.blas}, numpy {self.numpy}")


def _cgroup_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs granted by the cgroup quota (v2 ``cpu.max`` or v1 ``cfs_quota_us``), None if unlimited."""
    try:
        text = (root / "cpu.max").read_text().split()
        if text and text[0] != "max":
            return float(text[0]) / float(text[1] if len(text) > 1 else 100000)
    except (OSError, ValueError, IndexError, ZeroDivisionError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        if quota > 0 and period > 0:
            return quota / period
    except (OSError, ValueError):
        pass
    return None


def available_cores(cgroup_root: str | Path = "/sys/fs/cgroup") -> int:
    """The cores this process can really use: min(cgroup CPU quota rounded up, affinity, visible cores)."""
    counts = [os.cpu_count() or 1]
    if hasattr(os, "sched_getaffinity"):
        counts.append(len(os.sched_getaffinity(0)))
    quota = _cgroup_quota(Path(cgroup_root))
    if quota is not None and quota > 0:
        counts.append(max(1, math.ceil(quota - 1e-9)))
    return max(1, min(counts))


def _thread_count() -> int:
    value = os.environ.get(THREADS_ENV_VAR, "").strip()
    if value:
        try:
            n = int(value)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(f"{THREADS_ENV_VAR} must be a positive integer, got {value!r}")
        return n
    return available_cores()


def _pins_wanted() -> bool:
    return os.environ.get(PINS_ENV_VAR, "1").strip().lower() not in {"0", "false", "no", "off"}


def _mkl_library():
    """The loaded library that holds MKL's service functions (torch links MKL statically), or None."""
    import ctypes

    import torch

    lib_dir = Path(torch.__file__).resolve().parent / "lib"
    for name in ("libtorch_cpu.so", "libtorch_cpu.dylib", "torch_cpu.dll"):
        path = lib_dir / name
        if path.exists():
            try:
                lib = ctypes.CDLL(str(path))
                getattr(lib, "mkl_serv_cbwr_get")
                return lib
            except (OSError, AttributeError):
                return None
    return None


def _mkl_branch() -> str:
    lib = _mkl_library()
    if lib is None:
        return "n/a"
    value = int(lib.mkl_serv_cbwr_get(_MKL_CBWR_ALL))
    name = _MKL_BRANCH_NAMES.get(value & 0xFFFF, str(value & 0xFFFF))
    return name + (",STRICT" if value & _MKL_CBWR_STRICT else "")


def _cpu_flags() -> set:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def _pin_numeric_env() -> None:
    """Set numpy's and OpenBLAS's load-time switches (effective for the libraries not yet loaded)."""
    flags = _cpu_flags()
    for name, value in BLAS_PINS.items():
        if name == "OPENBLAS_CORETYPE" and not {"avx2", "fma"} <= flags:
            continue  # a CPU without AVX2 cannot run those kernels: OpenBLAS keeps its own choice
        os.environ[name] = value
    above = [feature for feature, names in _NUMPY_ABOVE_V3.items() if flags & set(names)]
    if above and "NPY_DISABLE_CPU_FEATURES" not in os.environ:
        os.environ["NPY_DISABLE_CPU_FEATURES"] = " ".join(above)


def _numeric_state(wanted: bool) -> tuple[str, str, str]:
    """(blas, numpy level, reason not pinned) for numpy's and SciPy's loaded libraries; one BLAS thread."""
    reasons = []
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:  # numpy 1.x
        try:
            from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__
        except ImportError:
            __cpu_dispatch__, __cpu_features__ = [], {}
    levels = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
    level = levels[-1] if levels else "baseline"
    if wanted and any(__cpu_features__.get(f) for f in _NUMPY_ABOVE_V3):
        reasons.append(f"numpy dispatches {level}, not {NUMPY_LEVEL} (numpy was imported before attnlib)")
    blas = "n/a"
    try:
        from threadpoolctl import threadpool_info, threadpool_limits

        if wanted:
            threadpool_limits(1, user_api="blas")
        libs = [i for i in threadpool_info() if i.get("internal_api") == "openblas"]
        if libs:
            blas = ", ".join(sorted({f"{i.get('architecture')} x{i.get('num_threads')}" for i in libs}))
            if wanted and any(i.get("architecture") != BLAS_PINS["OPENBLAS_CORETYPE"] for i in libs):
                reasons.append(f"OpenBLAS runs {blas} (numpy was imported before attnlib)")
    except ImportError:
        pass
    if not wanted:
        reasons.append(f"{PINS_ENV_VAR}=0")
    return blas, level, "; ".join(reasons)


_STATUS: CpuStatus | None = None


def configure() -> CpuStatus:
    """Apply the kernel pins and the thread rule to this process (idempotent); return :func:`status`.

    Called when attnlib is imported. Before torch computes anything this pins the kernels; after,
    it can only report that they are not pinned.
    """
    global _STATUS
    wanted = _pins_wanted()
    torch_was_imported = "torch" in sys.modules
    if wanted:
        for name, value in KERNEL_PINS.items():
            os.environ[name] = value
        _pin_numeric_env()
    if not torch_was_imported:
        if "OMP_WAIT_POLICY" not in os.environ:
            os.environ.setdefault("GOMP_SPINCOUNT", "1000")

    import torch

    threads = _thread_count()
    torch.set_num_threads(threads)
    if wanted:
        torch.backends.mkldnn.enabled = False
    capability = torch.backends.cpu.get_cpu_capability()  # fixes ATen's choice from here on
    branch = _mkl_branch()
    reasons = []
    if not wanted:
        reasons.append(f"{PINS_ENV_VAR}=0")
    else:
        if capability != KERNEL_PINS["ATEN_CPU_CAPABILITY"].upper():
            reasons.append(f"ATen runs {capability} kernels (torch computed before attnlib was imported, or the CPU lacks AVX2)")
        if branch not in ("n/a", KERNEL_PINS["MKL_CBWR"]):
            reasons.append(f"MKL runs branch {branch} (torch computed before attnlib was imported)")
        if branch == "n/a":
            reasons.append("no MKL in this torch build (not x86-64 Linux)")
    blas, level, numeric_reason = _numeric_state(wanted)
    _STATUS = CpuStatus(
        pinned=not reasons, aten_capability=capability, mkl_branch=branch,
        onednn=bool(torch.backends.mkldnn.enabled), threads=threads, cores=available_cores(),
        reason="; ".join(reasons), blas=blas, numpy=level, numeric_reason=numeric_reason,
    )
    return _STATUS


#: Why the kernels are not pinned in a process that did not ask for them.
NOT_CONFIGURED = "attnlib.reproducible was not imported (the host's own kernels and threads)"


def _observed() -> CpuStatus:
    """What a process that did not import :mod:`attnlib.reproducible` computes with, observed: nothing is set."""
    import torch

    blas, level, _ = _numeric_state(False)
    return CpuStatus(pinned=False, aten_capability=torch.backends.cpu.get_cpu_capability(), mkl_branch=_mkl_branch(),
                     onednn=bool(torch.backends.mkldnn.enabled), threads=torch.get_num_threads(),
                     cores=available_cores(), reason=NOT_CONFIGURED, blas=blas, numpy=level,
                     numeric_reason=NOT_CONFIGURED)


def status() -> CpuStatus:
    """What this process computes with: pinned kernels or not, and torch's thread count. Changes nothing:
    without ``import attnlib.reproducible`` it reports the host's own settings as not pinned."""
    import torch

    if _STATUS is None:
        return _observed()
    current = _STATUS
    if current.threads != torch.get_num_threads() or current.onednn != bool(torch.backends.mkldnn.enabled):
        # somebody changed them since: report what holds now
        onednn = bool(torch.backends.mkldnn.enabled)
        reason = current.reason
        pinned = current.pinned and not onednn
        if onednn and current.pinned:
            reason = "oneDNN was switched back on"
        current = CpuStatus(pinned=pinned, aten_capability=current.aten_capability, mkl_branch=current.mkl_branch,
                            onednn=onednn, threads=torch.get_num_threads(), cores=current.cores, reason=reason,
                            blas=current.blas, numpy=current.numpy, numeric_reason=current.numeric_reason)
    return current


def kernel_signature() -> str:
    """A short name of the kernels in use, part of every cache key: ``x86-pinned-v1`` when pinned."""
    s = status()
    if s.pinned:
        return "x86-pinned-v1"
    return f"unpinned-{s.aten_capability}-{s.mkl_branch}-{'onednn' if s.onednn else 'aten'}"


def warn_if_unpinned(what: str = "this run") -> None:
    """Warn (:class:`ReproducibilityWarning`) when the kernels are not pinned, once per reason."""
    s = status()
    if not s.pinned and s.reason not in _WARNED:
        _WARNED.add(s.reason)
        warnings.warn(f"{what} may not reproduce the book's numbers: {s}. Restart the kernel and make "
                      "`import attnlib.reproducible` its first line, before any torch code.", ReproducibilityWarning, stacklevel=3)


_WARNED: set = set()


def release_memory() -> bool:
    """Hand freed heap memory back to the system (glibc's ``malloc_trim``); False where unavailable.

    Training in threads (:func:`attnlib.train.run_concurrently`) leaves each thread's malloc
    arena holding memory it has freed: after two models trained at once, about 200 MB of a
    chapter's resident memory was free heap that only ``malloc_trim`` returns. A chapter must
    stay under 2 GB (Binder's limit), so training calls this when it finishes.
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (e.g. musl)
        return False
    return bool(libc.malloc_trim(0))
