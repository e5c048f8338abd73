"""nbval over the chapters: when a cell's output drifts, say which numbers moved and by how much.

nbval's own report of a drifted table is a raw diff of every line; on a machine whose numbers
differ (Apple Silicon, a GPU, the ``paper`` profile, unpinned kernels) that is hundreds of lines.
This hook replaces it with one line per cell: chapter, cell, how many numbers moved, the largest
change and the first few ``committed -> now`` pairs (a prose cell's paragraph is its text/plain,
so the numbers the prose quotes are paired like a table's); and ends the run with a table per chapter.
Cells that fail for another reason (an exception, a timeout) keep nbval's report.
"""
from __future__ import annotations

import re
from collections import defaultdict

import pytest

_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_SHOWN = 6  # pairs shown per cell
_DRIFT: dict[str, list[tuple[int, int, float, list[str]]]] = defaultdict(list)



def _text(outputs) -> str:
    """The text of a cell's outputs: streams, text/plain and errors."""
    parts = []
    for out in outputs or []:
        if out.get("output_type") == "stream":
            parts.append("".join(out.get("text", "")))
        elif "data" in out:
            data = out["data"]
            text = data.get("text/plain")
            if text is not None:
                parts.append("".join(text))
        elif out.get("output_type") == "error":
            parts.append(f"{out.get('ename')}: {out.get('evalue')}")
    return "\n".join(parts)


def drift_summary(committed: str, now: str) -> tuple[int, float, list[str], list[str]]:
    """Numbers that moved between two outputs: (count, largest |change|, pairs, changed lines of text).

    When the outputs have the same words around their numbers, the numbers are paired in order;
    otherwise the lines that differ are returned (at most a few) instead of pairs.
    """
    skeleton_a, skeleton_b = _NUMBER.sub("#", committed), _NUMBER.sub("#", now)
    if skeleton_a != skeleton_b:
        a_lines, b_lines = committed.splitlines(), now.splitlines()
        changed = [f"- {x}\n+ {y}" for x, y in zip(a_lines, b_lines) if x != y][:3]
        if len(a_lines) != len(b_lines):
            changed.append(f"({len(a_lines)} lines committed, {len(b_lines)} now)")
        return 0, float("nan"), [], changed
    pairs, largest = [], 0.0
    for line_a, line_b in zip(committed.splitlines(), now.splitlines()):  # same skeleton: same lines
        for x, y in zip(_NUMBER.findall(line_a), _NUMBER.findall(line_b)):
            if x != y:
                delta = float(y) - float(x)
                largest = max(largest, abs(delta))
                pairs.append(f"{x} -> {y} ({delta:+.3g})")
    return len(pairs), largest, pairs, []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed or call.excinfo is None:
        return
    if "Cell outputs differ" not in str(call.excinfo.value) or not hasattr(item, "test_outputs"):
        return
    committed, now = _text(item.cell.outputs), _text(item.test_outputs)
    count, largest, pairs, lines = drift_summary(committed, now)
    chapter = item.path.name
    if pairs:
        shown = "; ".join(pairs[:_SHOWN]) + (f"; ... {len(pairs) - _SHOWN} more" if len(pairs) > _SHOWN else "")
        report.longrepr = (f"{chapter}, cell {item.cell_num}: {count} number(s) differ from the committed output, "
                           f"largest change {largest:.3g}: {shown}")
    else:
        report.longrepr = (f"{chapter}, cell {item.cell_num}: the output's text differs from the committed one:\n"
                           + "\n".join(lines))
    # Carried in the report (not kept here), so that under pytest -n (xdist) the controller,
    # which prints the summary, receives it from the worker that ran the chapter.
    report.user_properties.append(("attnlib_drift", (chapter, item.cell_num, count, largest, pairs[:_SHOWN])))


def pytest_runtest_logreport(report):
    for name, value in getattr(report, "user_properties", ()):
        if name == "attnlib_drift":
            chapter, cell, count, largest, pairs = value
            _DRIFT[chapter].append((cell, count, largest, pairs))


def pytest_terminal_summary(terminalreporter):
    if not _DRIFT:
        return
    terminalreporter.section("chapters whose outputs drifted from the committed ones")
    for chapter, cells in sorted(_DRIFT.items()):
        numbers = sum(c for _, c, _, _ in cells)
        largest = max((d for _, c, d, _ in cells if c), default=float("nan"))
        terminalreporter.line(f"{chapter}: {len(cells)} cell(s) (cells {', '.join(str(c) for c, *_ in cells)}), "
                              f"{numbers} number(s) moved, largest change {largest:.3g}")
    terminalreporter.line("A different CPU kind, a GPU, another profile or unpinned kernels give other numbers: "
                          "see the README, 'The same numbers on every machine'.")
