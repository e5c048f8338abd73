"""Call one student's answer to one exercise on the grader's cases: the process of tools/grade.py's
judge, run in a fresh sandbox of its own, one per exercise.

    python judge_runner.py        (standard input: the program, then the cases; standard output: the answers)

What it is sent, on standard input, in two parts (each an 8-byte big-endian length, then the
bytes), and when:

1. the program, JSON: ``{"answer": "my_tvd", "units": [{"cell": 12, "source": "..."}, ...]}``,
   the student's code for this exercise only (the exercise's own cells, and the statements of
   the student's earlier cells that they need), taken by the grader from the notebook's source.
   It runs first, unit by unit, before the cases exist in this process.
2. the cases, a pickle (the grader's, trusted here), drawn from a seed the grader picked for
   this student after the notebook had finished.

What it writes back, on the standard output it had when it started (the student's prints go
to standard error): ``ATTNLIB-JUDGE 1\\n``, an 8-byte length and a JSON header (``errors``: each
failing unit's cell, first line and "ename: evalue"; ``missing``: why there is no answer; ``answers``: each case's
kind and value, as a tree of lists, strings, data frames and references to arrays), then each
array's raw bytes in order. Numbers only, no pickles: the grader trusts none of it, and needs to
trust none of it, since the references and the expected values are not in this process.
"""
from __future__ import annotations

import json
import os
import pickle
import struct
import sys

MAGIC = b"ATTNLIB-JUDGE 1\n"
_TEXT = 300
_MAX_ITEMS = 100_000  # list elements in one answer
_MAX_DEPTH = 8


def _read_part(stream) -> bytes:
    head = stream.read(8)
    if len(head) != 8:
        raise EOFError("the grader's message ended early")
    (size,) = struct.unpack(">Q", head)
    data = stream.read(size)
    if len(data) != size:
        raise EOFError("the grader's message ended early")
    return data


def _short(text) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _TEXT else text[: _TEXT - 3] + "..."


def _error(err: BaseException) -> str:
    return _short(f"{type(err).__name__}: {err}").rstrip(": ")


class _Encoder:
    """A returned value as a JSON tree whose leaves are arrays of numbers (kept aside), text or None."""

    def __init__(self):
        self.arrays = []

    def array(self, value):
        import numpy as np

        array = np.asarray(value)
        array = np.ascontiguousarray(array) if array.ndim else array  # 0-d stays 0-d
        if array.dtype.kind not in "biuf":
            raise TypeError(f"not an array of numbers (dtype {array.dtype})")
        self.arrays.append(array)
        return {"array": len(self.arrays) - 1, "dtype": array.dtype.str, "shape": list(array.shape)}

    def __call__(self, value, depth: int = 0):
        import numpy as np

        if depth > _MAX_DEPTH:
            raise TypeError("nested too deep")
        if value is None:
            return {"none": True}
        if isinstance(value, str):
            return {"text": value[:1000]}
        if isinstance(value, (bool, int, float, np.generic, np.ndarray)):
            return self.array(value)
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(value, torch.Tensor):
            return self.array(value.detach().cpu().numpy())
        pandas = sys.modules.get("pandas")
        if pandas is not None and isinstance(value, pandas.DataFrame):
            return {"frame": {"index": [self(v, depth + 1) for v in value.index.tolist()[:_MAX_ITEMS]],
                              "columns": [self(c, depth + 1) for c in value.columns.tolist()[:_MAX_ITEMS]],
                              "values": self.array(value.to_numpy(dtype=float))}}
        if pandas is not None and isinstance(value, pandas.Series):
            return {"series": {"index": [self(v, depth + 1) for v in value.index.tolist()[:_MAX_ITEMS]],
                               "values": self.array(value.to_numpy(dtype=float))}}
        if isinstance(value, (list, tuple)):
            if len(value) > _MAX_ITEMS:
                raise TypeError(f"a sequence of {len(value)} items")
            return {"list": [self(v, depth + 1) for v in value]}
        try:  # anything else that NumPy reads as numbers
            return self.array(np.asarray(value))
        except Exception:  # noqa: BLE001
            raise TypeError(f"returned a {type(value).__name__}, not numbers") from None


def main() -> int:
    out = os.fdopen(os.dup(1), "wb")  # the channel back to the grader
    os.dup2(2, 1)  # the student's prints go to standard error
    sys.stdout = sys.stderr
    stdin = sys.stdin.buffer
    program = json.loads(_read_part(stdin).decode("utf-8"))
    try:  # the book's kernel pins (as attnlib.reproducible sets them), where attnlib's own code runs too
        from attnlib import cpu

        cpu.configure()
    except Exception:  # noqa: BLE001
        pass
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    errors = []  # [cell, the unit's first line, its error]
    for unit in program["units"]:
        try:
            exec(compile(unit["source"], f"<cell {unit['cell'] + 1}>", "exec"), namespace)  # noqa: S102
        except BaseException as err:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too: a cell's error
            first = next((line.strip() for line in unit["source"].splitlines() if line.strip()), "")
            errors.append([unit["cell"], first[:60], _error(err)])
    header = {"errors": errors, "missing": None, "answers": []}
    encode = _Encoder()
    try:
        fn = eval(program["answer"], namespace)  # noqa: S307 - a name the grader checked: my_tvd
    except BaseException as err:  # noqa: BLE001
        header["missing"] = _error(err)
        fn = None
    cases = pickle.loads(_read_part(stdin))  # only now: the answer was defined without them
    if fn is not None:
        for args in cases:
            try:
                got = fn(*args)
            except NotImplementedError:
                header["answers"].append({"kind": "not_implemented"})
            except BaseException as err:  # noqa: BLE001
                header["answers"].append({"kind": "raised", "detail": _error(err)})
            else:
                try:
                    header["answers"].append({"kind": "value", "value": encode(got)})
                except Exception as err:  # noqa: BLE001
                    header["answers"].append({"kind": "invalid", "detail": _error(err)})
            if header["answers"][-1]["kind"] != "value":
                break
    body = json.dumps(header).encode("utf-8")
    out.write(MAGIC + struct.pack(">Q", len(body)) + body)
    for array in encode.arrays:
        out.write(array.tobytes())
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
