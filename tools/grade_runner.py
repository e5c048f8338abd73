"""Run one student notebook's graded cells in a kernel: the part of tools/grade.py that runs in its sandbox.

    python grade_runner.py JOB.json REPORT_FD

``JOB.json`` (written by tools/grade.py) lists the code cells to run, in order, with a time
limit for all of them (``timeout``, seconds, the kernel's start included) and the kernel's
working folder (``workdir``). They are the student's cells only: no answer is recorded here
(the grader judges each exercise apart, in a fresh sandbox of its own).

This process writes its state to the file descriptor ``REPORT_FD`` (a pipe to the grader,
which the kernel does not inherit), one JSON line before and after every cell: the cell
running now (``running``), each cell's error (``errors``: position -> "ename: evalue") and why
the run stopped early (``stopped``). It is feedback for the grader, which trusts none of it for
a verdict: it runs beside the student's code, as the same user, in the same sandbox (it makes
itself not dumpable, so that the kernel cannot open its file descriptors). Outputs are
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


def _not_dumpable() -> None:
    """No process of the same user may open this one's ``/proc/<pid>/fd`` (its report pipe) or
    trace it: the kernel it starts can kill it, not write its report."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    except (OSError, AttributeError):
        pass


def main(job_path: str, report_fd: str) -> int:
    _not_dumpable()
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    deadline = time.monotonic() + float(job["timeout"])
    report = os.fdopen(int(report_fd), "w", encoding="utf-8")
    os.set_inheritable(report.fileno(), False)
    state = {"running": None, "errors": {}, "stopped": None, "finished": False}

    def save() -> None:
        try:
            report.write(json.dumps(state) + "\n")
            report.flush()
        except OSError:  # the grader stopped reading: it reads the run as stopped
            pass

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
