"""The build of attnlib's one compiled part: the portable GEMM (attnlib/_fmagemm.c).

Everything else is in pyproject.toml. The extension is a plain shared library (no Python
headers needed; attnlib.portable loads it with ctypes, it is never imported), and optional:
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
    extra_compile_args=["-O2", "-pthread", "-fno-fast-math"] if posix else [],
    extra_link_args=["-pthread"] if posix else [],
)])
