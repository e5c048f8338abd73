"""chapters/conftest.py: nbval's report of a drifted chapter names the numbers that moved."""
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]


def _hook_module():
    spec = importlib.util.spec_from_file_location("chapters_conftest", ROOT / "chapters" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_drift_summary_pairs_numbers_when_the_words_agree():
    drift = _hook_module().drift_summary
    count, largest, pairs, lines = drift("F1 0.745, tau 0.32 / 0.24\n", "F1 0.753, tau 0.32 / 0.18\n")
    assert count == 2 and abs(largest - 0.06) < 1e-12 and lines == []
    assert pairs == ["0.745 -> 0.753 (+0.008)", "0.24 -> 0.18 (-0.06)"]
    assert drift("same 1.0", "same 1.0")[:3] == (0, 0.0, [])


def test_drift_summary_shows_changed_lines_when_the_words_differ():
    count, _, pairs, lines = _hook_module().drift_summary("a 1\nb 2\n", "a 1\nc 2\nextra\n")
    assert count == 0 and pairs == []
    assert lines[0] == "- b 2\n+ c 2" and lines[-1] == "(2 lines committed, 3 now)"


def test_a_drifted_notebook_is_reported_in_one_line_per_cell(tmp_path):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print('accuracy', 0.5 + 0.25, 'of', 100)")
    cell.execution_count = 1
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="accuracy 0.7 of 100\n")]
    nb.cells = [cell]
    folder = tmp_path / "chapters"
    folder.mkdir()
    nbformat.write(nb, folder / "99_drift.ipynb")
    shutil.copy(ROOT / "chapters" / "conftest.py", folder / "conftest.py")
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
                          str(folder), "-q"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 1, out.stdout[-3000:]
    assert "99_drift.ipynb, cell 0: 1 number(s) differ from the committed output, largest change 0.05: 0.7 -> 0.75 (+0.05)" in out.stdout
    assert "99_drift.ipynb: 1 cell(s) (cells 0), 1 number(s) moved" in out.stdout
    assert "1 failed" in out.stdout
