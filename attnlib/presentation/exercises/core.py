"""What every exercise checker is made of: a :class:`Spec` (cases and the reference), the
student's :class:`Answer` per case, the verdict (:func:`judge`, a :class:`CheckResult`), the
registry :data:`SPECS` (filled by the parts' modules) and the answers as data that
``tools/grade.py`` moves between its sandbox and its judge.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

__all__ = [
    "CheckResult",
    "Answer",
    "Spec",
    "ANSWER_KINDS",
    "SPECS",
    "answers_of",
    "as_answer",
    "judge",
    "check_against",
    "make_checker",
    "record_answers",
    "read_answers",
    "judge_recorded",
    "Recorded",
    "MAX_ANSWER_BYTES",
    "shorten",
    "case_rng",
    "case_generator",
]


class CheckResult:
    """The verdict of a checker: ``bool(result)`` says whether it passed; ``repr`` explains."""

    def __init__(self, passed: bool, message: str):
        self.passed, self.message = passed, message

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return self.message

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython
        printer.text(self.message)


#: The kinds of :class:`Answer`: a value, or why there is none.
ANSWER_KINDS = ("value", "not_implemented", "raised", "invalid")
_DETAIL_CHARS = 300  # a student's error message, as much of it as a verdict quotes


@dataclass(frozen=True)
class Answer:
    """What a student's function gave on one case: ``kind`` "value" with ``value`` (an array of
    numbers), "not_implemented", "raised" (``detail``: the error) or "invalid" (``detail``: why
    the value is not an array of numbers of the right form)."""

    kind: str
    value: np.ndarray | None = None
    detail: str = ""

    def __post_init__(self):
        if self.kind not in ANSWER_KINDS:
            raise ValueError(f"Answer kind must be one of {ANSWER_KINDS}, got {self.kind!r}")
        if (self.kind == "value") != (self.value is not None):
            raise ValueError("an Answer has a value exactly when its kind is 'value'")


@dataclass(frozen=True)
class Spec:
    """A checker: seeded ``cases`` (argument tuples), the ``reference`` that gives each case's
    expected value, the tolerance ``atol`` and ``to_numpy``, which turns a returned value into
    an array. A checker whose verdict is not case by case (Chapter 4's permutation: how the
    draws spread, and that they follow the generator) gives ``judge(answers)``, its
    :class:`CheckResult` on the list of :class:`Answer`, instead of a ``reference``.

    ``modules``: the attnlib modules an answer may use when ``tools/grade.py`` judges it in a
    fresh sandboxed process: the helpers the exercise allows (``attnlib.metrics`` for its
    ``jsd``) and what its cases are made of (``attnlib.models`` for a model). Every other
    module of attnlib, and this package with every reference and case, is absent there, so an
    answer that calls the exercise's reference, even through a wrapper, has nothing to call.
    ``withheld``: modules that ``modules`` import but the answer must not have (the model's own
    fast path of leave-one-out, for Chapter 3)."""

    name: str
    cases: list = field(default_factory=list)
    reference: Callable | None = None
    atol: float = 1e-6
    to_numpy: Callable = np.asarray
    judge: Callable[[list], CheckResult] | None = None
    modules: tuple = ()
    withheld: tuple = ()  # modules that ``modules`` import but the answer must not have (a fast path of the reference)


def case_rng(base: int, seed: int | None = None) -> np.random.Generator:
    """The NumPy generator a checker draws its cases from: ``base`` (the book's fixed cases, what
    the chapters' check cells print) when ``seed`` is None, else a stream of (``seed``, ``base``)
    (the grader's seed, picked per run and per student)."""
    return np.random.default_rng(base if seed is None else [int(seed), int(base)])


def case_generator(base: int, seed: int | None = None) -> torch.Generator:
    """The torch generator a checker draws its cases from (see :func:`case_rng`)."""
    number = base if seed is None else int(np.random.SeedSequence([int(seed), int(base)]).generate_state(1, np.uint64)[0] >> 1)
    return torch.Generator().manual_seed(number)


def shorten(text: str) -> str:
    """``text`` on one line, at most as long as a verdict quotes of a student's error message."""
    text = " ".join(str(text).split())
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 3] + "..."


def _numbers(value) -> np.ndarray:
    """``value`` as an array of bools, integers or floats; TypeError for anything else."""
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"not an array of numbers (dtype {array.dtype})")
    return array


def _answer(spec: Spec, fn: Callable, args: tuple) -> Answer:
    """Run ``fn`` on one case of ``spec``."""
    try:
        got = fn(*args)
    except NotImplementedError:
        return Answer("not_implemented")
    except Exception as err:  # noqa: BLE001 - report any student error readably
        return Answer("raised", detail=shorten(f"{type(err).__name__}: {err}"))
    return as_answer(spec, got)


def as_answer(spec: Spec, got) -> Answer:
    """The value ``got`` that an answer returned, as an :class:`Answer` of ``spec`` ("invalid"
    when it is not numbers of the right form)."""
    try:
        return Answer("value", _numbers(spec.to_numpy(got.detach() if isinstance(got, torch.Tensor) else got)))
    except Exception as err:  # noqa: BLE001 - a value of the wrong kind is a wrong answer
        return Answer("invalid", detail=shorten(err if isinstance(err, ValueError) else f"{type(err).__name__}: {err}"))


def _case_verdict(spec: Spec, i: int, answer: Answer, expected) -> CheckResult | None:
    """The failing verdict of case ``i`` (0-based), or None when the answer is right."""
    name = spec.name
    if answer.kind == "not_implemented":
        return CheckResult(False, f"{name}: not implemented yet (the starter still raises NotImplementedError).")
    if answer.kind == "raised":
        return CheckResult(False, f"{name}: case {i + 1} raised {answer.detail}")
    if answer.kind == "invalid":
        return CheckResult(False, f"{name}: {answer.detail}")
    got = answer.value
    if np.shape(got) != np.shape(expected):
        return CheckResult(False, f"{name}: case {i + 1} returned shape {np.shape(got)}, "
                                  f"expected {np.shape(expected)}.")
    if not np.allclose(got, expected, atol=spec.atol, equal_nan=True):
        where = np.argmax(np.abs(np.nan_to_num(np.asarray(got, float) - np.asarray(expected, float))).ravel())
        return CheckResult(
            False,
            f"{name}: case {i + 1} is off: got {np.asarray(got).ravel()[where]:.6g}, "
            f"expected {np.asarray(expected).ravel()[where]:.6g}.",
        )
    return None


def _attnlib_function(fn) -> str | None:
    """``attnlib.metrics.tvd`` when ``fn`` is a function of attnlib itself (an imported answer), else None."""
    module = getattr(fn, "__module__", None)
    if isinstance(module, str) and (module == "attnlib" or module.startswith("attnlib.")) and callable(fn):
        return f"{module}.{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"
    return None


def _imported(name: str, where: str) -> CheckResult:
    return CheckResult(False, f"{name}: the answer is attnlib's own {where}, imported, not written: "
                              "write the function yourself.")


def answers_of(spec: Spec, fn: Callable) -> list[Answer]:
    """The student's function ``fn`` run on every case of ``spec``, up to the first that gives no value."""
    answers = []
    for args in spec.cases:
        answers.append(_answer(spec, fn, args))
        if answers[-1].kind != "value":
            break
    return answers


def judge(spec: Spec, answers: list[Answer], imported: str | None = None) -> CheckResult:
    """The verdict on ``answers`` (from :func:`answers_of`, perhaps in another process), computed
    with the reference on this process's own ``spec``; ``imported`` names the attnlib function
    that was handed in as the answer, if any."""
    if imported:
        return _imported(spec.name, imported)
    if spec.judge is not None:
        return spec.judge(answers)
    for i, args in enumerate(spec.cases):
        if i >= len(answers):
            return CheckResult(False, f"{spec.name}: case {i + 1} gave no answer (the run ended first).")
        bad = _case_verdict(spec, i, answers[i], spec.to_numpy(spec.reference(*args)))
        if bad is not None:
            return bad
    return CheckResult(True, f"{spec.name}: correct on all {len(spec.cases)} cases.")


def check_against(spec: Spec, fn: Callable) -> CheckResult:
    """A checker in the notebook: each case's reference, then the student's answer, in turn."""
    imported = _attnlib_function(fn)
    if imported:
        return _imported(spec.name, imported)
    if spec.judge is not None:
        return spec.judge(answers_of(spec, fn))
    for i, args in enumerate(spec.cases):
        expected = spec.to_numpy(spec.reference(*args))
        bad = _case_verdict(spec, i, _answer(spec, fn, args), expected)
        if bad is not None:
            return bad
    return CheckResult(True, f"{spec.name}: correct on all {len(spec.cases)} cases.")



#: Each checker's name -> the function that builds its :class:`Spec` (cases are built afresh
#: each time); the parts' modules (part1 ... part4) fill it through :mod:`attnlib.presentation.exercises`.
SPECS: dict[str, Callable[[], Spec]] = {}


def make_checker(name: str, build: Callable[[], Spec]) -> Callable[[Callable], CheckResult]:
    """The ``check_*`` function of one Spec builder: it runs the student's function on fresh cases."""

    def check(fn: Callable) -> CheckResult:
        return check_against(build(), fn)

    check.__name__ = check.__qualname__ = name
    check.__doc__ = build.__doc__
    return check


# ----------------------------------------------------------------------------- answers as data (tools/grade.py)

#: The most bytes :func:`read_answers` reads of one checker's answers (its JSON and its arrays).
MAX_ANSWER_BYTES = 64 * 2**20


def _write_atomic(path: Path, write) -> None:
    part = path.with_name(path.name + ".part")
    with open(part, "wb") as out:
        write(out)
    os.replace(part, path)


def record_answers(checker: str, get_answer: Callable[[], Callable], folder) -> None:
    """Run the answer that ``get_answer()`` returns on the cases of ``checker`` (a name in
    :data:`SPECS`) and write what it gave to ``folder``: ``<checker>.npz``, the values
    (``a0``, ``a1``, ...), and ``<checker>.json``: each answer's kind and detail, the attnlib
    function handed in as the answer if any, and why there is no answer at all (``missing``,
    e.g. the answer's name is not defined). No pickles: the reader trusts none of it."""
    if checker not in SPECS:
        raise ValueError(f"unknown checker {checker!r}; expected one of {sorted(SPECS)}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    record = {"checker": checker, "imported": None, "missing": None, "answers": []}
    arrays = {}
    try:
        fn = get_answer()
    except Exception as err:  # noqa: BLE001 - e.g. NameError: the answer is not defined
        record["missing"] = shorten(f"{type(err).__name__}: {err}")
    else:
        record["imported"] = _attnlib_function(fn)
        if record["imported"] is None:
            for i, answer in enumerate(answers_of(SPECS[checker](), fn)):
                record["answers"].append({"kind": answer.kind, "detail": answer.detail})
                if answer.value is not None:
                    arrays[f"a{i}"] = np.asarray(answer.value)
    _write_atomic(folder / f"{checker}.npz", lambda out: np.savez(out, **arrays))
    _write_atomic(folder / f"{checker}.json", lambda out: out.write(json.dumps(record).encode("utf-8")))


def _check_npz(path: Path, max_bytes: int) -> None:
    """ValueError unless the ``.npz`` at ``path`` expands to at most ``max_bytes`` and each array's
    header claims no more than its member holds (a zip bomb, or a header that asks for terabytes)."""
    import zipfile

    with zipfile.ZipFile(path) as archive:
        members = archive.infolist()
        if sum(m.file_size for m in members) > max_bytes:
            raise ValueError(f"the arrays expand to more than {max_bytes} bytes")
        for member in members:
            with archive.open(member) as f:
                version = np.lib.format.read_magic(f)
                shape, _, dtype = (np.lib.format.read_array_header_1_0(f) if version == (1, 0)
                                   else np.lib.format.read_array_header_2_0(f))
                if dtype.hasobject or int(np.prod(shape, dtype=object)) * dtype.itemsize > member.file_size:
                    raise ValueError(f"array {member.filename} claims more than it holds")


@dataclass(frozen=True)
class Recorded:
    """What :func:`read_answers` found: the answers, the attnlib function handed in (if any),
    why there is no answer (``missing``) or why the record cannot be read (``unreadable``)."""

    answers: list
    imported: str | None = None
    missing: str | None = None
    unreadable: str | None = None


def read_answers(checker: str, folder, max_bytes: int = MAX_ANSWER_BYTES) -> Recorded | None:
    """The answers :func:`record_answers` wrote to ``folder`` for ``checker``, checked strictly
    (sizes, kinds, arrays of numbers; ``np.load`` without pickles); None when there are none."""
    folder = Path(folder)
    meta, data = folder / f"{checker}.json", folder / f"{checker}.npz"
    if folder.is_symlink() or not meta.is_file() or meta.is_symlink():
        return None
    try:
        if data.is_symlink() or not data.is_file():  # a link, a pipe or nothing: never opened
            raise ValueError("the arrays are missing or not a plain file")
        if meta.stat().st_size + data.stat().st_size > max_bytes:
            raise ValueError(f"the answers take more than {max_bytes} bytes")
        record = json.loads(meta.read_text(encoding="utf-8"))
        if not isinstance(record, dict) or record.get("checker") != checker:
            raise ValueError("not a record of this checker")
        texts = {k: record.get(k) for k in ("imported", "missing")}
        if any(v is not None and not isinstance(v, str) for v in texts.values()):
            raise ValueError("a field that should be text is not")
        answers = []
        entries = record.get("answers")
        if not isinstance(entries, list):
            raise ValueError("no list of answers")
        _check_npz(data, max_bytes)
        with np.load(data, allow_pickle=False) as arrays:
            for i, entry in enumerate(entries):
                kind, detail = entry.get("kind"), entry.get("detail", "")
                if kind not in ANSWER_KINDS or not isinstance(detail, str):
                    raise ValueError(f"answer {i + 1} is malformed")
                value = _numbers(arrays[f"a{i}"]) if kind == "value" else None
                answers.append(Answer(kind, value, shorten(detail)))
        return Recorded(answers, texts["imported"] and shorten(texts["imported"]),
                        texts["missing"] and shorten(texts["missing"]))
    except Exception as err:  # noqa: BLE001 - whatever the sandbox left, it is data, never a pass
        return Recorded([], unreadable=shorten(f"{type(err).__name__}: {err}"))


def judge_recorded(checker: str, folder) -> CheckResult | None:
    """The verdict on the answers recorded in ``folder`` for ``checker``, computed here with the
    reference on this process's own cases; None when nothing was recorded (see :func:`read_answers`)."""
    recorded = read_answers(checker, folder)
    if recorded is None:
        return None
    spec = SPECS[checker]()
    if recorded.unreadable:
        return CheckResult(False, f"{spec.name}: the recorded answers cannot be read ({recorded.unreadable}).")
    if recorded.missing:
        return CheckResult(False, f"{spec.name}: no answer to check: {recorded.missing}")
    return judge(spec, recorded.answers, recorded.imported)
