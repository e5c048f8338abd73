"""Run one student notebook's graded cells in a kernel: the part of tools/grade.py that runs in its sandbox.

    python grade_runner.py JOB.json OUT_FOLDER

``JOB.json`` (written by tools/grade.py) lists the code cells to run, in order, with a time
limit for all of them (``timeout``, seconds, the kernel's start included) and the kernel's
working folder (``workdir``). Some of the cells are the grader's own: they call
``attnlib.presentation.exercises.record_answers``, which writes the answers' values into
``OUT_FOLDER/answers``.

This process writes ``OUT_FOLDER/run.json`` after every cell: the cell running now
(``running``), each cell's error (``errors``: position -> "ename: evalue") and why the run
stopped early (``stopped``). Everything it writes is data for the grader, which trusts none of
it: it runs beside the student's code, as the same user, in the same sandbox. Outputs are
not kept (a cell's error aside), and a cell's output beyond ``max_output`` bytes is dropped
as it arrives, so a huge print costs neither this process's memory nor the grader's.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zmq_poll_fix  # noqa: E402

zmq_poll_fix.apply()

MAX_OUTPUT = 1 << 20  # bytes of a cell's outputs kept while it runs (only its error is reported)
_TEXT = 500  # characters of an error kept


class _CappedClient(NotebookClient):
    """A client that keeps at most ``max_output`` bytes of a cell's outputs (errors always)."""

    max_output = MAX_OUTPUT
    _kept = 0

    def output(self, outs, msg, display_id, cell_index):
        if msg.get("msg_type") != "error":
            size = len(json.dumps(msg.get("content", {}), default=str))
            if self._kept + size > self.max_output:
                return None
            self._kept += size
        return super().output(outs, msg, display_id, cell_index)


def _error_of(cell) -> str | None:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            value = str(out.get("evalue", "")).strip().splitlines()
            return f"{out.get('ename', 'Error')}: {value[0] if value else ''}"[:_TEXT].rstrip(": ")
    return None


def main(job_path: str, out: str) -> int:
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    deadline = time.monotonic() + float(job["timeout"])
    out_dir = Path(out)
    state = {"running": None, "errors": {}, "stopped": None, "finished": False}

    def save() -> None:
        part = out_dir / "run.json.part"
        part.write_text(json.dumps(state), encoding="utf-8")
        os.replace(part, out_dir / "run.json")

    save()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in job["cells"]])
    workdir = Path(job["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    client = _CappedClient(nb, timeout=int(job["timeout"]), kernel_name="python3", allow_errors=True,
                           shutdown_kernel="immediate", resources={"metadata": {"path": str(workdir)}})
    try:
        with client.setup_kernel():
            for k, cell in enumerate(nb.cells):
                state["running"] = k
                save()
                left = deadline - time.monotonic()
                if left <= 0:
                    state["stopped"] = "timeout"
                    break
                client.timeout = max(1, int(left + 0.999))
                client._kept = 0
                try:
                    client.execute_cell(cell, k)
                except CellTimeoutError:
                    state["stopped"] = "timeout"
                    break
                except DeadKernelError:
                    state["stopped"] = "dead kernel"
                    break
                error = _error_of(cell)
                if error:
                    state["errors"][str(k)] = error
                cell.outputs = []
    except Exception as err:  # noqa: BLE001 - a kernel that cannot start is reported, not raised
        if state["stopped"] is None:
            state["stopped"] = f"could not run: {type(err).__name__}: {err}"[:_TEXT]
    if state["stopped"] is None:
        state["running"] = None
        state["finished"] = True
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
