"""Re-execute chapter notebooks in place, so their committed outputs are what the code produces.

    .venv/bin/python tools/execute_chapters.py                 # every chapter
    .venv/bin/python tools/execute_chapters.py chapters/02_measures.ipynb
    .venv/bin/python tools/execute_chapters.py --reuse-cache chapters/08_adversarial_training.ipynb
    .venv/bin/python tools/execute_chapters.py --jobs 2           # two chapters at a time
    .venv/bin/python tools/execute_chapters.py --no-times         # leave book/chapter_times.md

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

A cold run of every chapter rewrites the landing page's table of times
(``book/chapter_times.md``). Those are measurements a reader plans by: take them on an idle
machine, and pass ``--no-times`` when anything else runs beside the chapters.
"""
from __future__ import annotations

import os
import re
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

#: a tqdm bar's text: "training 6 models (2 at once):  33%|###   | 2/6 [...]"
_BAR = re.compile(r"\d+%\|[^|\n]*\|\s*\d+/\d+")


def is_progress_bar(output) -> bool:
    """Whether a cell output is a progress bar: a widget view whose text is a tqdm bar, or a
    stream every line of which is one. A committed bar is frozen where the run left it (0% in
    the widget's text form, which JupyterLab, Colab and the built pages show), so none is kept."""
    if output.get("output_type") == "stream":
        lines = [line for line in re.split(r"[\r\n]", "".join(output.get("text", ""))) if line.strip()]
        return bool(lines) and all(_BAR.search(line) for line in lines)
    data = output.get("data", {})
    return "application/vnd.jupyter.widget-view+json" in data and bool(_BAR.search("".join(data.get("text/plain", ""))))


def strip_progress_bars(nb) -> int:
    """Remove every progress-bar output from a notebook (in place); the number removed. A live
    run still shows its bars; every cell that draws one is tagged nbval-ignore-output."""
    removed = 0
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        kept = [out for out in cell.get("outputs", []) if not is_progress_bar(out)]
        removed += len(cell.get("outputs", [])) - len(kept)
        cell["outputs"] = kept
    prune_widget_state(nb)
    return removed


_WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def prune_widget_state(nb) -> int:
    """Drop from the notebook's stored widget state every widget no remaining output shows (the
    stripped bars' models, with their layouts and styles); the number dropped. What an output
    shows is its view's model and every model that one names ("IPY_MODEL_<id>"), transitively."""
    state = nb.metadata.get("widgets", {}).get(_WIDGET_STATE, {}).get("state")
    if not state:
        return 0
    todo = [out["data"][_WIDGET_VIEW]["model_id"] for cell in nb.cells for out in cell.get("outputs", [])
            if _WIDGET_VIEW in out.get("data", {})]
    keep: set[str] = set()
    while todo:
        model = todo.pop()
        if model in keep or model not in state:
            continue
        keep.add(model)
        todo += re.findall(r"IPY_MODEL_([0-9a-f]+)", repr(state[model]))
    dropped = [m for m in state if m not in keep]
    for m in dropped:
        del state[m]
    if not state:
        del nb.metadata["widgets"]
    return len(dropped)


def execute(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    client = NotebookClient(nb, timeout=1200, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    for cell in nb.cells:  # keep diffs quiet: no per-run timestamps
        cell.get("metadata", {}).pop("execution", None)
    strip_progress_bars(nb)  # a committed bar is frozen at 0% in every front end
    nbformat.write(nb, path)
    return time.perf_counter() - start


TIMES_PAGE = ROOT / "book" / "chapter_times.md"


def write_times_page(times: dict, wall: float, *, jobs: int, cores: int | None = None,
                     path: Path = TIMES_PAGE) -> Path:
    """The landing page's table of cold execution times (book/chapter_times.md, included by intro.md).

    ``times``: notebook stem -> seconds; ``wall``: the whole run's seconds. Written (atomically)
    only after a run of every chapter from an empty cache: the numbers are that run's
    measurements, never typed by hand.
    """
    import datetime

    cores = cores or os.cpu_count()
    lines = [
        f"Measured on {datetime.date.today().isoformat()}: every chapter executed from an empty "
        f"model cache, `{os.environ.get('ATTNLIB_PROFILE', 'book')}` profile, {cores} CPU cores, "
        f"{jobs} chapter(s) at a time (`tools/execute_chapters.py`). A chapter opened first also "
        "trains the models an earlier chapter would have cached, so it can take longer; a second "
        "run loads them from the cache.",
        "",
        "| chapter | minutes, cold |",
        "|---|---|",
    ]
    for stem, seconds in sorted(times.items()):
        number, _, title = stem.partition("_")
        lines.append(f"| {int(number)}. {title.replace('_', ' ')} | {seconds / 60:.1f} |")
    lines.append(f"| the whole book | {wall / 60:.1f} |")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)
    return path


def _execute_logged(path: Path) -> tuple[Path, float]:
    seconds = execute(path)
    print(f"  {path.name} done in {seconds:.1f} s", flush=True)
    return path, seconds


def main(argv: list[str]) -> int:
    os.environ.setdefault("ATTNLIB_PROFILE", "book")
    reuse = "--reuse-cache" in argv
    record_times = "--no-times" not in argv
    jobs = 1
    if "--jobs" in argv:
        i = argv.index("--jobs")
        jobs = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    args = [p for p in argv if p not in ("--reuse-cache", "--no-times")]
    unknown = [a for a in args if a.startswith("-")]
    missing = [a for a in args if not a.startswith("-") and not (Path(a).is_file() and a.endswith(".ipynb"))]
    if unknown or missing:
        print("\n\n".join(__doc__.split("\n\n")[:2]), file=sys.stderr)
        print(f"execute_chapters: {'unknown option ' + ', '.join(unknown) if unknown else 'no such notebook: ' + ', '.join(missing)}",
              file=sys.stderr)
        return 2
    paths = [Path(p).resolve() for p in args] or sorted((ROOT / "chapters").glob("[0-9]*.ipynb"))
    with tempfile.TemporaryDirectory(prefix="attnlib-cache-") as fresh:
        if not reuse:
            os.environ["ATTNLIB_CACHE_DIR"] = fresh  # the kernels inherit it
        print(f"model cache: {os.environ.get('ATTNLIB_CACHE_DIR', 'the user cache')}; {jobs} at a time", flush=True)
        cache = Path(os.environ.get("ATTNLIB_CACHE_DIR") or fresh)
        cold = not reuse or not any(cache.rglob("*.pt"))  # an empty cache, ours or the one given
        start = time.perf_counter()
        times: dict = {}
        if jobs <= 1:
            for path in paths:
                print(f"executing {path} ...", flush=True)
                times[path.stem] = _execute_logged(path)[1]
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
                for path in paths:
                    print(f"queued {path.name}", flush=True)
                for future in [pool.submit(_execute_logged, path) for path in paths]:
                    done, seconds = future.result()
                    times[done.stem] = seconds
        wall = time.perf_counter() - start
        print(f"all done in {wall:.1f} s", flush=True)
        every = {p.resolve() for p in (ROOT / "chapters").glob("[0-9]*.ipynb")}
        if record_times and cold and set(paths) == every:  # a whole cold run: the landing page's times
            print(f"wrote {write_times_page(times, wall, jobs=jobs).relative_to(ROOT)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
