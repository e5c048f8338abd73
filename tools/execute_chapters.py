"""Re-execute chapter notebooks in place, so their committed outputs are what the code produces.

    .venv/bin/python tools/execute_chapters.py                 # every chapter
    .venv/bin/python tools/execute_chapters.py chapters/02_measures.ipynb
    .venv/bin/python tools/execute_chapters.py --reuse-cache chapters/08_adversarial_training.ipynb
    .venv/bin/python tools/execute_chapters.py --jobs 2           # two chapters at a time

Runs each notebook top to bottom in a fresh kernel with chapters/ as the working directory,
the ``book`` profile, and the widget state stored (the built book embeds it). `make test`
(nbval) then proves the committed outputs are reproducible.

The chapters share one EMPTY model cache (a temporary folder), as in CI's first build, so
the committed outputs are exactly what CI reproduces. ``--reuse-cache`` uses
``$ATTNLIB_CACHE_DIR`` or the user cache instead: faster, and still safe, since cache keys
include :func:`attnlib.cache.code_version` (a change to the training code retrains).
``--jobs N`` executes N chapters at a time (each kernel trains on one thread), in order: a model
two chapters need is trained once, the other waits on its cache entry's lock
(:func:`attnlib.cache.building`) and loads it. The outputs do not depend on which chapter
trained a model, so they are the same as one at a time.
A chapter executed on its own trains every model it needs, including those an earlier
chapter would have left in the cache.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zmq_poll_fix  # noqa: E402

zmq_poll_fix.apply()  # a lost wake-up must not hang a chapter (see tools/zmq_poll_fix.py)

ROOT = Path(__file__).resolve().parents[1]


def execute(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    client = NotebookClient(nb, timeout=1200, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    for cell in nb.cells:  # keep diffs quiet: no per-run timestamps
        cell.get("metadata", {}).pop("execution", None)
    nbformat.write(nb, path)
    return time.perf_counter() - start


def _execute_logged(path: Path) -> tuple[Path, float]:
    seconds = execute(path)
    print(f"  {path.name} done in {seconds:.1f} s", flush=True)
    return path, seconds


def main(argv: list[str]) -> int:
    os.environ.setdefault("ATTNLIB_PROFILE", "book")
    reuse = "--reuse-cache" in argv
    jobs = 1
    if "--jobs" in argv:
        i = argv.index("--jobs")
        jobs = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    paths = [Path(p).resolve() for p in argv if p != "--reuse-cache"] or sorted((ROOT / "chapters").glob("[0-9]*.ipynb"))
    with tempfile.TemporaryDirectory(prefix="attnlib-cache-") as fresh:
        if not reuse:
            os.environ["ATTNLIB_CACHE_DIR"] = fresh  # the kernels inherit it
        print(f"model cache: {os.environ.get('ATTNLIB_CACHE_DIR', 'the user cache')}; {jobs} at a time", flush=True)
        start = time.perf_counter()
        if jobs <= 1:
            for path in paths:
                print(f"executing {path} ...", flush=True)
                _execute_logged(path)
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
                for path in paths:
                    print(f"queued {path.name}", flush=True)
                for future in [pool.submit(_execute_logged, path) for path in paths]:
                    future.result()
        print(f"all done in {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
