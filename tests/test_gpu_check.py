"""tools/gpu_check.py: its steps run through attnlib on the CPU, print one line each, and a failure is reported.

The check itself runs on a GPU machine (make gpu-check); here its step functions run in-process on
the tiny synthetic task in place of rt-polarity, with --quick sizes, for Chapters 4, 5 and 10.
"""
import io
import json
import re
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import gpu_check  # noqa: E402

import attnlib  # noqa: E402

LINE = re.compile(r"^(ch\d\d|unit) +(?P<step>.+?) +(?P<seconds>\d+\.\d) s  (?P<status>OK|FAIL)  +(?P<rest>.*)$")


def _boom(ctx):
    raise ValueError("the injected failure\nsecond line, not shown")


def _context(tiny_dataset):
    return gpu_check.Context(profile=attnlib.get_profile("book"), device=torch.device("cpu"), max_instances=6,
                             quick=True, datasets={"rt-polarity": tiny_dataset})


def test_steps_run_on_the_cpu_print_a_line_each_and_a_failing_step_fails_the_run(tiny_dataset):
    steps = gpu_check.select_steps(["04", "05", "10"])
    assert [s.chapter for s in steps] == ["03", "04", "05", "10"]  # the BiLSTM's training step comes along
    steps.append(gpu_check.Step("99", "an injected step that raises", _boom))
    printed, out = [], io.StringIO()
    outcomes = gpu_check.run_steps(steps, _context(tiny_dataset), out=out, printer=printed.append)

    assert len(printed) == len(outcomes) == 5
    for line in printed:
        assert LINE.match(line), line
    assert [o.ok for o in outcomes] == [True, True, True, True, False]
    assert "6 sentences" in outcomes[1].result and "10 permutations" in outcomes[1].result
    failed = LINE.match(printed[-1])
    assert failed["status"] == "FAIL"
    assert failed["rest"].startswith("ValueError: the injected failure  [")
    assert "second line" not in printed[-1]
    assert re.search(r"\[tests/test_gpu_check\.py:\d+ in _boom\]$", printed[-1])

    records = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [r["chapter"] for r in records] == ["03", "04", "05", "10", "99"]
    assert records[-1]["ok"] is False and records[-1]["error"].startswith("ValueError")
    assert {"step", "seconds", "result", "where", "device", "profile"} <= set(records[0])

    assert gpu_check.exit_status(outcomes) == 1
    assert gpu_check.exit_status(outcomes[:-1]) == 0
    table = gpu_check.summary(outcomes)
    assert "5 step(s), 1 failed" in table and "FAILED ch99 an injected step that raises: ValueError" in table


def test_without_cuda_it_refuses_with_exit_status_2_and_names_the_dry_run(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main(["--no-unit", "--chapters", "04"]) == 2
    captured = capsys.readouterr()
    assert "no CUDA device" in captured.err and "--device cpu" in captured.err
    assert "ch04" not in captured.out  # nothing ran


def test_bad_chapters_are_refused():
    with pytest.raises(SystemExit) as exit_info:
        gpu_check.main(["--chapters", "02"])
    assert exit_info.value.code == 2


def test_the_unit_test_command_reports_every_failure_and_leaves_out_the_cpu_checks():
    cmd = gpu_check.unit_command(["-k", "metrics"])
    assert "-x" not in cmd and cmd[-2:] == ["-k", "metrics"]
    assert ["--ignore", "tests/test_cpu.py"] == cmd[cmd.index("--ignore"):cmd.index("--ignore") + 2]
    deselected = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--deselect"]
    assert any("golden_digest" in d for d in deselected) and any("bit_for_bit" in d for d in deselected)
    for node in deselected:  # every name still exists: a renamed test would silently run again
        path, name = node.split("::")
        assert f"def {name}(" in (gpu_check.ROOT / path).read_text(), node


def test_pytest_counts_are_read_from_the_closing_line():
    text = "....F\nFAILED tests/test_x.py::test_y - boom\n1 failed, 4 passed, 2 deselected, 1 error in 3.21s\n"
    assert gpu_check.parse_pytest_counts(text) == {"failed": 1, "passed": 4, "deselected": 2, "error": 1}
    assert gpu_check.parse_pytest_counts("nothing here") == {}


def test_failures_are_named_also_when_a_timeout_cut_the_run_before_its_summary():
    cut = ("[gw1] [ 10%] PASSED tests/test_a.py::test_ok \n"
           "[gw0] [ 12%] FAILED tests/test_a.py::test_bad[cuda-1] \n"
           "[gw3] [ 13%] ERROR tests/test_b.py::test_fixture \n")
    assert gpu_check.parse_pytest_failures(cut) == ["FAILED tests/test_a.py::test_bad[cuda-1]",
                                                    "ERROR tests/test_b.py::test_fixture"]
    whole = cut + "FAILED tests/test_a.py::test_bad[cuda-1] - AssertionError: x\n1 failed in 2s\n"
    assert gpu_check.parse_pytest_failures(whole) == gpu_check.parse_pytest_failures(cut)
    assert "-v" in gpu_check.unit_command() and "-q" not in gpu_check.unit_command()


def _warns(ctx):
    import warnings

    for _ in range(2):
        warnings.warn("a kernel without a deterministic implementation", UserWarning)
    return "done"


def _interrupted(ctx):
    raise KeyboardInterrupt


def test_warnings_are_reported_once_and_an_interrupt_stops_the_run_with_a_fail(tiny_dataset):
    steps = [gpu_check.Step("98", "a step that warns", _warns), gpu_check.Step("99", "stopped here", _interrupted),
             gpu_check.Step("99", "never runs", _boom)]
    printed = []
    outcomes = gpu_check.run_steps(steps, _context(tiny_dataset), printer=printed.append)
    assert outcomes[0].ok and outcomes[0].warnings == ["UserWarning: a kernel without a deterministic implementation"]
    assert printed[1] == "      warning: UserWarning: a kernel without a deterministic implementation"
    assert len(outcomes) == 2 and not outcomes[1].ok and outcomes[1].error.startswith("Interrupted")
    assert gpu_check.exit_status(outcomes) == 1
