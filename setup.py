"""The build of attnlib's one compiled part: the portable GEMM (attnlib/_fmagemm.c).

Everything else is in pyproject.toml. attnlib.portable loads the extension with ctypes; it is
an empty importable module only where the Python headers are at hand (it builds without them),
and optional:
without a C compiler attnlib installs all the same, and attnlib.portable.matmul says that it
falls back to torch's kernels.
"""
import sys

from setuptools import Extension, setup

posix = sys.platform != "win32"
setup(ext_modules=[Extension(
    "attnlib._fmagemm",
    ["attnlib/_fmagemm.c"],
    optional=True,
    extra_compile_args=["-O2", "-pthread", "-fno-fast-math", "-ffp-contract=off"] if posix else [],
    extra_link_args=["-pthread"] if posix else [],
)])
