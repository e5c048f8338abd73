"""A fresh virtual environment with only ``attnlib[run]`` (and a kernel) imports all of attnlib and runs a chapter.

    .venv/bin/python tools/check_run_extra.py                 # chapter 15 (make check-run-extra)
    .venv/bin/python tools/check_run_extra.py --chapters 01 15 --venv /tmp/run-venv

What a reader gets in Colab or Binder, on this machine: ``python -m venv``, then
``pip install -c requirements/constraints.txt ".[run]" ipykernel`` (the package built from
this checkout, not editable, as the install cell installs it from git; ``ipykernel`` is the
kernel Colab and Jupyter bring). In that environment it

1. imports every module of attnlib (a missing dependency fails here, whatever chapter needs it);
2. checks that the book build is absent (Sphinx, MyST-NB, Jupyter Book: the extra must not
   bring them into a reader's runtime);
3. executes the chapters with papermill (driven from this checkout's .venv, the kernel from the
   fresh environment) into ``_build/run-extra/``.

The model cache is ``ATTNLIB_CACHE_DIR`` as set (CI shares its run's cache, so the chapter loads
the models nbval trained); the profile is ``ATTNLIB_PROFILE`` (default book). Exit 0 when
every step passed; each step prints its time.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNEL = "attnlib-run"

IMPORT_ALL = """
import importlib, pkgutil, attnlib
names = [m.name for m in pkgutil.walk_packages(attnlib.__path__, "attnlib.")]
for name in names:
    importlib.import_module(name)
print(f"imported attnlib and its {len(names)} modules")
"""

ABSENT = """
import importlib.util
present = [m for m in ("sphinx", "myst_nb", "jupyter_book", "papermill", "nbval") if importlib.util.find_spec(m)]
assert not present, f"the run extra brought the book build: {present}"
print("no Sphinx, MyST-NB, Jupyter Book, papermill or nbval in the environment")
"""


def step(title: str, argv: list, **kwargs) -> None:
    start = time.perf_counter()
    print(f"== {title}", flush=True)
    subprocess.run(argv, check=True, **kwargs)
    print(f"   ok, {time.perf_counter() - start:.0f} s", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chapters", nargs="+", default=["15"], help="chapter numbers to execute (default: 15)")
    parser.add_argument("--venv", type=Path, default=None, help="where to build the environment (default: a temp dir)")
    args = parser.parse_args(argv)
    notebooks = []
    for number in args.chapters:
        found = sorted((ROOT / "chapters").glob(f"{number}_*.ipynb"))
        if len(found) != 1:
            parser.error(f"no single chapter numbered {number!r}")
        notebooks += found

    venv = args.venv or Path(tempfile.mkdtemp(prefix="attnlib-run-"))
    if venv.exists():
        shutil.rmtree(venv)
    python = venv / "bin" / "python"
    out = ROOT / "_build" / "run-extra"
    out.mkdir(parents=True, exist_ok=True)
    try:
        step(f"fresh venv {venv}", [sys.executable, "-m", "venv", str(venv)])
        step("pip install '.[run]' ipykernel (constraints)",
             [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c",
              str(ROOT / "requirements" / "constraints.txt"), f"{ROOT}[run]", "ipykernel"])
        step("import every attnlib module", [str(python), "-c", IMPORT_ALL], cwd=tempfile.gettempdir())
        step("the book build is absent", [str(python), "-c", ABSENT], cwd=tempfile.gettempdir())
        step(f"kernel {KERNEL}", [str(python), "-m", "ipykernel", "install", "--prefix", str(venv), "--name", KERNEL])
        env = dict(os.environ, JUPYTER_PATH=str(venv / "share" / "jupyter"))
        env.setdefault("ATTNLIB_PROFILE", "book")
        for nb in notebooks:
            step(f"papermill {nb.name} on the fresh kernel",
                 [sys.executable, str(ROOT / "tools" / "run_papermill.py"), "-k", KERNEL, "--cwd", str(ROOT / "chapters"),
                  "--no-progress-bar", "--execution-timeout", "1200", str(nb), str(out / nb.name),
                  "-p", "profile", env["ATTNLIB_PROFILE"]], env=env)
    except subprocess.CalledProcessError as err:
        print(f"check-run-extra: failed: {' '.join(map(str, err.cmd))[:200]}", file=sys.stderr)
        return 1
    finally:
        if args.venv is None:
            shutil.rmtree(venv, ignore_errors=True)
    print(f"check-run-extra: passed ({', '.join(nb.name for nb in notebooks)} in a venv with attnlib[run] only)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
