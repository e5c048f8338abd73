"""Portable arithmetic: every elementwise op the book uses gives numpy's correctly rounded bits.

No Intel machine is at hand in CI, so these tests check the principle that makes an op portable:
it is plain IEEE arithmetic or correctly rounded, hence the same on every x86-64 CPU. torch's own
``sqrt`` (MKL's vendor-dispatched vector math) fails that on an AMD EPYC in 208 of 1,000 float32
values; :func:`attnlib.portable.sqrt` passes. A static check keeps the vendor-dispatched ops out
of attnlib, and the optimizer's bits are pinned by a fingerprint measured equal on an Intel Xeon
and an AMD EPYC (``../shared/cross-cpu``).
"""
import ast
import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnlib
from attnlib import portable

ROOT = Path(attnlib.__file__).resolve().parent


def _values(dtype, n: int = 4096) -> np.ndarray:
    """A few thousand positive values over many binades, with edge cases."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.random(n // 2), np.exp(rng.uniform(-60, 60, n // 2)), [0.0, 1.0, 2.0, 4.0, 1e-30, 3.0]])
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_portable_sqrt_is_correctly_rounded(dtype):
    x = _values(dtype)
    ours = portable.sqrt(torch.from_numpy(x)).numpy()
    assert ours.dtype == dtype
    assert np.array_equal(ours, np.sqrt(x))  # numpy: the hardware's IEEE square root
    # and the float32 root is the float64 root rounded once (correct rounding, checked independently)
    if dtype == np.float32:
        assert np.array_equal(ours, np.sqrt(x.astype(np.float64)).astype(np.float32))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=3.4028234663852886e38, width=32), min_size=1, max_size=50))
def test_portable_sqrt_is_correctly_rounded_on_any_float32(xs):
    x = np.array(xs, dtype=np.float32)
    assert np.array_equal(portable.sqrt(torch.from_numpy(x)).numpy(), np.sqrt(x))


def test_portable_sqrt_is_differentiable_and_refuses_bad_input():
    x = torch.tensor([0.25, 4.0, 9.0], dtype=torch.float64, requires_grad=True)
    portable.sqrt(x).sum().backward()
    assert torch.equal(x.grad, torch.tensor([1.0, 0.25, 1 / 6], dtype=torch.float64))
    assert portable.sqrt(torch.tensor(4.0)).item() == 2.0  # a 0-d tensor
    with pytest.raises(TypeError, match="floating-point"):
        portable.sqrt(torch.tensor([4]))
    with pytest.raises(TypeError, match="torch.Tensor"):
        portable.sqrt(4.0)


# The elementwise arithmetic of the book's paths (the optimizer, metrics, softmax's normalisation):
# IEEE requires each to be correctly rounded, and torch's kernels must give numpy's bits.
_BINARY = {
    "add": (torch.add, np.add), "sub": (torch.sub, np.subtract), "mul": (torch.mul, np.multiply),
    "div": (torch.div, np.divide), "maximum": (torch.maximum, np.maximum), "minimum": (torch.minimum, np.minimum),
}
_UNARY = {
    "reciprocal": (torch.reciprocal, np.reciprocal), "neg": (torch.neg, np.negative), "abs": (torch.abs, np.abs),
    "square": (torch.square, np.square), "portable.sqrt": (portable.sqrt, np.sqrt),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(_BINARY))
def test_binary_arithmetic_agrees_bit_for_bit_with_numpy(name, dtype):
    rng = np.random.default_rng(1)
    a = (rng.standard_normal(5000) * np.exp(rng.uniform(-20, 20, 5000))).astype(dtype)
    b = (rng.standard_normal(5000) * np.exp(rng.uniform(-20, 20, 5000))).astype(dtype)
    ours, ref = _BINARY[name]
    assert np.array_equal(ours(torch.from_numpy(a), torch.from_numpy(b)).numpy(), ref(a, b))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(_UNARY))
def test_unary_arithmetic_agrees_bit_for_bit_with_numpy(name, dtype):
    x = _values(dtype)
    x = x[x > 0]  # no zeros: reciprocal
    ours, ref = _UNARY[name]
    with np.errstate(over="ignore"):  # square overflows to inf in float32, on both sides
        assert np.array_equal(ours(torch.from_numpy(x)).numpy(), ref(x))


def _three_fused_steps() -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    """(sha256 of the parameters, the parameters, the start, the gradients) after 3 fused Adam steps."""
    g = torch.Generator().manual_seed(5)
    p = torch.nn.Parameter(torch.randn(512, 50, generator=g))
    start = p.detach().clone().numpy()
    grads = [torch.randn(512, 50, generator=g) for _ in range(3)]
    opt = portable.adam([p], lr=1e-3, amsgrad=True, weight_decay=1e-5)
    for grad in grads:
        p.grad = grad.clone()
        opt.step()
    final = p.detach().numpy()
    return hashlib.sha256(final.tobytes()).hexdigest(), final, start, np.stack([x.numpy() for x in grads])


#: Three fused Adam steps (amsgrad, L2 weight decay: the book's recipe) on fixed tensors, recorded on
#: an AMD EPYC. The cross-CPU kit found the fused kernel's bits equal on an Intel Xeon and an AMD
#: EPYC, so every x86-64 CPU must give these.
GOLDEN_ADAM = "419f7b2d5ee659da96d24ec30a44d457343315b560a9a2caa58ccfe3ca6ae093"


def test_the_optimizer_is_torchs_fused_adam_and_computes_adam():
    assert portable.adam([torch.nn.Parameter(torch.zeros(3))], lr=1e-3).defaults["fused"] is True
    digest, final, start, grads = _three_fused_steps()
    assert _three_fused_steps()[0] == digest  # deterministic
    # against Adam (amsgrad, L2 weight decay) written out in float64: equal up to float32 rounding
    p, m, v, vmax = start.astype(np.float64), 0.0, 0.0, 0.0
    b1, b2, lr, wd, eps = 0.9, 0.999, 1e-3, 1e-5, 1e-8
    for t, grad in enumerate(grads.astype(np.float64), start=1):
        grad = grad + wd * p
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad * grad
        vmax = np.maximum(vmax, v)
        p = p - lr * (m / (1 - b1**t)) / (np.sqrt(vmax / (1 - b2**t)) + eps)
    assert np.allclose(final, p, rtol=0, atol=1e-6)
    assert digest == GOLDEN_ADAM, f"the fused Adam gave {digest}, not the bits measured on Intel and AMD"


def test_the_private_torch_function_lbfgs_step_swaps_is_the_one_it_was_written_against(monkeypatch):
    """Issue 52: a torch upgrade that changes or removes ``lbfgs._cubic_interpolate`` fails here, with the fix."""
    from torch.optim import lbfgs

    assert portable.lbfgs_private_changed() is None, portable.lbfgs_private_changed()

    def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):  # a "newer torch": other code
        return (x1 + x2) / 2

    monkeypatch.setattr(lbfgs, "_cubic_interpolate", _cubic_interpolate)
    said = portable.lbfgs_private_changed()
    assert said is not None and "update attnlib.portable.LBFGS_PRIVATE" in said
    monkeypatch.delattr(lbfgs, "_cubic_interpolate")
    assert "has no torch.optim.lbfgs._cubic_interpolate" in portable.lbfgs_private_changed()


def test_the_compiled_kernels_ctypes_declarations_match_their_c_prototypes():
    """Issue 52: each function ctypes calls in attnlib/_fmagemm.c has declared argument types that match its
    C prototype one for one (a mismatch would crash the process instead of raising)."""
    import ctypes
    import re
    from pathlib import Path

    lib = portable._gemm_library()
    assert lib is not None, "the compiled kernel is not built here (pip install -e . builds it)"
    source = (Path(portable.__file__).parent / "_fmagemm.c").read_text()
    kinds = {"int": ctypes.c_int, "long": ctypes.c_long, "ptrdiff_t": ctypes.c_ssize_t}
    prototypes = re.findall(r"^(\w+) (pg_\w+)\(([^)]*)\)\s*\{", source, flags=re.M)
    for ret, name, params in prototypes:
        want = [ctypes.c_void_p if "*" in param else kinds[param.split()[0]]
                for param in (p.strip() for p in " ".join(params.split()).split(",")) if param and param != "void"]
        function = getattr(lib, name)
        assert list(function.argtypes or []) == want, f"{name}: ctypes {function.argtypes} against C {params}"
        assert function.restype == (None if ret == "void" else kinds[ret]), name
    assert sorted(name for _, name, _ in prototypes) == ["pg_activation", "pg_kernel", "pg_lstm", "pg_lstm_cells",
                                                        "pg_sgemm", "pg_sgemm_reference"]


def test_lbfgs_step_uses_the_portable_line_search_and_restores_torchs():
    from torch.optim import lbfgs

    original = lbfgs._cubic_interpolate
    g = torch.Generator().manual_seed(0)
    X = torch.randn(200, 5, generator=g, dtype=torch.float64)
    y = (X @ torch.tensor([1.0, -2.0, 0.5, 0.0, 3.0], dtype=torch.float64) > 0).double()
    results = []
    for step in (portable.lbfgs_step, lambda opt, closure: opt.step(closure)):
        w = torch.zeros(5, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS([w], max_iter=50, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(X @ w, y) + 1e-3 * (w * w).sum()
            loss.backward()
            return loss

        step(opt, closure)
        results.append(w.detach().clone())
    assert lbfgs._cubic_interpolate is original
    assert torch.allclose(results[0], results[1], atol=1e-6)  # the same optimum, whichever square root
    with pytest.raises(TypeError, match="LBFGS"):
        portable.lbfgs_step(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1), lambda: 0.0)


def test_portable_cubic_interpolate_matches_torchs_but_for_the_square_root():
    from torch.optim import lbfgs

    rng = np.random.default_rng(0)
    for _ in range(200):
        x1, f1, g1, x2, f2, g2 = (torch.tensor(v, dtype=torch.float64) for v in rng.normal(size=6))
        ours = portable._portable_cubic_interpolate(x1, f1, g1, x2, f2, g2)
        theirs = lbfgs._cubic_interpolate(x1, f1, g1, x2, f2, g2)
        assert abs(float(ours) - float(theirs)) <= 1e-12 * max(1.0, abs(float(theirs)))


# ------------------------------------------------------------------------------ the static guard
#: Vendor-dispatched on a CPU (MKL's vector math): never called by attnlib outside attnlib.portable.
_FORBIDDEN_CALLS = {"sqrt", "pow", "float_power"}
_OPTIMIZERS = {"Adam", "AdamW", "SGD", "RMSprop", "Adagrad"}


def _vendor_dispatched_calls(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        f, base = node.func, node.func.value
        if f.attr in _FORBIDDEN_CALLS and not (isinstance(base, ast.Name) and base.id in ("math", "np", "numpy", "portable")):
            found.append(f"line {node.lineno}: {ast.unparse(f)}()")
        if f.attr in _OPTIMIZERS and isinstance(base, ast.Attribute) and base.attr == "optim":
            found.append(f"line {node.lineno}: torch.optim.{f.attr} (use attnlib.portable.adam)")
    return found


@pytest.mark.parametrize("path", sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts
                                        and p.name != "portable.py"), ids=lambda p: str(p.relative_to(ROOT)))
def test_attnlib_calls_no_vendor_dispatched_op(path):
    assert _vendor_dispatched_calls(path.read_text()) == []


def test_the_static_guard_catches_torchs_sqrt_and_default_adam():
    assert _vendor_dispatched_calls("d = torch.sqrt(x)\ne = v.sqrt()\nf = x.pow(0.5)") == [
        "line 1: torch.sqrt()", "line 2: v.sqrt()", "line 3: x.pow()"]
    assert _vendor_dispatched_calls("opt = torch.optim.Adam(p, lr=1e-3)") == [
        "line 1: torch.optim.Adam (use attnlib.portable.adam)"]
    assert _vendor_dispatched_calls("a = math.sqrt(2) + np.sqrt(x)") == []


#: torch 2.13.0's private ``torch.optim.lbfgs._cubic_interpolate``, whose source
#: attnlib.portable.lbfgs_step swaps for a correctly rounded copy (issue 52): its SHA-256.
_CUBIC_INTERPOLATE_CHECKED = "cd63e37c40214ac725596e12f838fad9ae5fa3872ec4574a3c4073339b03d681"


def test_the_private_lbfgs_function_lbfgs_step_swaps_is_the_one_it_was_written_against():
    """A torch upgrade that changes or removes the private function fails here, naming the fix,
    instead of silently changing how the pretrained model's head is fitted."""
    import hashlib
    import inspect

    from torch.optim import lbfgs

    fix = ("attnlib.portable.lbfgs_step swaps torch.optim.lbfgs._cubic_interpolate for "
           "_portable_cubic_interpolate, a copy of torch 2.13.0's with its square root correctly rounded: "
           "compare the new torch source with that copy, carry the change over, then update "
           "_CUBIC_INTERPOLATE_CHECKED (or pin torch back in requirements/constraints.txt)")
    assert callable(getattr(lbfgs, "_cubic_interpolate", None)), f"torch removed the function. {fix}"
    digest = hashlib.sha256(inspect.getsource(lbfgs._cubic_interpolate).encode()).hexdigest()
    assert digest == _CUBIC_INTERPOLATE_CHECKED, f"torch {torch.__version__} changed the function. {fix}"
    # the line search finds it by its module-global name, which is what the swap replaces
    assert "_cubic_interpolate" in lbfgs._strong_wolfe.__code__.co_names, f"the line search no longer calls it. {fix}"
