"""Device-safe code, checked on a CPU (CI has no GPU): the bugs a CUDA run found, caught by reading.

On a GPU, `tensor.numpy()` fails for a CUDA tensor ("can't convert cuda:0 device type tensor to
numpy"), and a tensor made without a device meets the model's CUDA tensors ("Expected all tensors
to be on the same device"). Both are visible in the source:

* ``.numpy()`` is called only on ``.cpu()`` or ``.to("cpu", ...)``: the one boundary where a
  result leaves the device (``x.detach().cpu().numpy()``).
* every tensor an experiment (or the runner) makes with a torch factory says where it lives:
  ``device=`` the model's device, or ``device="cpu"`` where the work is meant for the CPU
  (set-up drawn from a CPU generator, numpy-side bookkeeping). ``*_like`` factories inherit it,
  and ``torch.from_numpy`` is the CPU by definition.
"""
import ast
from pathlib import Path

import pytest

import attnlib

ROOT = Path(attnlib.__file__).resolve().parent
MODULES = sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)
FACTORIES = {"zeros", "ones", "full", "empty", "arange", "tensor", "as_tensor", "rand", "randn", "randint",
             "randperm", "linspace", "eye"}
#: Where experiments run: the experiments and the runner they share.
EXPERIMENT_CODE = [p for p in MODULES if "experiments" in p.parts or p.name == "runs.py"]


def _is_cpu_call(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    if node.func.attr == "cpu":
        return True
    return (node.func.attr == "to" and node.args and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == "cpu")


def numpy_calls_off_the_cpu(source: str) -> list[int]:
    """Lines where ``.numpy()`` is called on something that is not ``.cpu()`` / ``.to("cpu")``."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "numpy"
            and not node.args and not _is_cpu_call(node.func.value)]


def factories_without_device(source: str) -> list[str]:
    """``torch.<factory>(...)`` calls that do not say ``device=``."""
    return [f"line {node.lineno}: torch.{node.func.attr}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in FACTORIES
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
            and not any(k.arg == "device" for k in node.keywords)]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_numpy_is_called_only_after_cpu(path):
    assert numpy_calls_off_the_cpu(path.read_text()) == [], f"{path.name}: .numpy() without .cpu() first"


@pytest.mark.parametrize("path", EXPERIMENT_CODE, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_tensor_an_experiment_makes_says_its_device(path):
    assert factories_without_device(path.read_text()) == [], path.name


def test_the_guards_catch_the_bugs_a_gpu_run_found():
    # head_perturbation.py, before: `.double().numpy()` of a CUDA tensor; counterfactual: torch.zeros(n, k, T)
    assert numpy_calls_off_the_cpu("tvd[rows] = metrics.tvd(p, q).double().numpy()") == [1]
    assert numpy_calls_off_the_cpu("a = x.detach().cpu().numpy()\nb = y.to('cpu', torch.float64).numpy()") == []
    assert factories_without_device("out = torch.zeros(n, k, T)") == ["line 1: torch.zeros"]
    assert factories_without_device("out = torch.zeros(n, device=d)\nz = torch.zeros_like(out)") == []
