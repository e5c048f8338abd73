"""chapters/conftest.py: nbval's report of a drifted chapter names the numbers that moved."""
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

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


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_a_drifted_notebook_is_reported_in_one_line_per_cell(tmp_path, workers):
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
                          *workers, str(folder), "-q"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 1, out.stdout[-3000:]
    assert "99_drift.ipynb, cell 0: 1 number(s) differ from the committed output, largest change 0.05: 0.7 -> 0.75 (+0.05)" in out.stdout
    assert "99_drift.ipynb: 1 cell(s) (cells 0), 1 number(s) moved" in out.stdout
    assert "1 failed" in out.stdout


def test_a_prose_paragraph_drifts_number_by_number():
    """A prose cell's output is its paragraph (text/plain): the numbers it quotes pair up."""
    hook = _hook_module()

    def prose(text):
        return {"output_type": "display_data", "metadata": {},
                "data": {"text/markdown": text, "text/plain": text}}
    committed = hook._text([prose("**Reading it.** Chapter 11 finds 0.070 at $d_v = 32$.")])
    now = hook._text([prose("**Reading it.** Chapter 11 finds 0.071 at $d_v = 32$.")])
    assert committed == "**Reading it.** Chapter 11 finds 0.070 at $d_v = 32$."
    count, largest, pairs, _ = hook.drift_summary(committed, now)
    assert count == 1 and pairs == ["0.070 -> 0.071 (+0.001)"]
    assert abs(largest - 0.001) < 1e-12


def _sanitize(text: str) -> str:
    """Apply tests/nbval_sanitize.cfg's sections in order, as nbval does."""
    import configparser
    import re

    config = configparser.ConfigParser()
    config.read(ROOT / "tests" / "nbval_sanitize.cfg")
    for section in config.sections():
        text = re.sub(config[section]["regex"], config[section]["replace"], text)
    return text


# (committed, now, equal after sanitising?): an absolute precision of 1e-10 in every notation
_FLOAT_PAIRS = [
    ("0.7742302630158561", "0.774230263015856", True),  # a last-bit change (Chapter 2 on an AMD EPYC)
    ("0.5300739201796476", "0.5300739201794906", True),  # 1.6e-13
    ("0.5300739201796476", "0.5300739203796476", False),  # 2e-10
    ("6.4194446782662825e-09", "6.419444661661174e-09", True),  # rounding residue: 2e-17 apart
    ("6.4194446782662825e-09", "6.519444661661174e-09", False),  # 1e-10 apart
    ("3.2e-12", "-7.9e-11", True),  # both below 1e-10: zero at this precision
    ("3.2e-12", "3.2e-09", False),
    ("1.2345678912345e-05", "1.2345678998e-05", True),  # 8.6e-15 apart
    ("1.2345678912345e-05", "1.2345778912345e-05", False),  # 1e-10 apart
    ("0.25", "0.26", False),
    ("12", "13", False),
    ("ch11_x1e-05", "ch11_x1e-05", True),
]


def test_the_float_sanitizer_compares_every_notation_to_an_absolute_1e_10():
    for committed, now, equal in _FLOAT_PAIRS:
        assert (_sanitize(f"value {committed} end") == _sanitize(f"value {now} end")) is equal, (committed, now)
