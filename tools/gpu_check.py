"""The GPU check (issue 24, part 4): the unit tests on CUDA, then every chapter's main experiment.

    .venv/bin/python tools/gpu_check.py                 # on a machine with CUDA: make gpu-check
    .venv/bin/python tools/gpu_check.py --device cpu    # a dry run of this script on a CPU

What it does, on the device it is given (default CUDA; without one it stops with exit status 2):

1. prints the device (``torch.cuda.get_device_name``), torch's and CUDA's versions and the profile;
2. "unit tests on CUDA" (``--no-unit`` skips it): ``python -m pytest tests`` in a subprocess, without
   the tests that are CPU-specific by design (:data:`UNIT_EXCLUDED`: the golden digest and the
   simulated CPUs, the kernel pins, the bit-for-bit CPU arithmetic, nbval). ``attnlib.get_device()``
   picks CUDA when present, so these tests run their models on the GPU. Every failure is reported
   (no ``-x``), with the passed/failed counts and the time;
3. each chapter's main experiment (Chapters 3-15), through attnlib's public API, in the ``paper``
   profile (``--profile``), on rt-polarity (Chapter 13: its deception task built from rt-polarity).
   One line per step: chapter, what ran, seconds (on CUDA also the step's peak GPU memory), OK and a
   short result, or FAIL with the exception (type and first line of its message) and the traceback's
   last frame; below it, the step's distinct warnings (e.g. torch's note that a CUDA kernel is not
   deterministic). A failing step does not stop the others; Ctrl-C or SIGTERM stops the run and
   still prints the summary. Models are trained once and shared between chapters (the BiLSTM of Chapters
   3-10 and 15, the transformer of Chapters 11, 12 and 14), through attnlib's model cache.

It ends with a summary table and exits 1 when any step (or a unit test) failed, else 0.
``--out FILE`` also writes every step as a JSON line. ``--chapters 03 05`` picks chapters,
``--max-instances N`` caps the test instances (and sentences) of every experiment.

``--device cpu`` hides CUDA from torch (``CUDA_VISIBLE_DEVICES=""``) and is this script's dry run:
it implies ``--quick`` (one epoch, 400 training sentences, 64 test sentences, short searches, two
seeds), so the whole list runs in minutes on a laptop; ``--no-quick`` keeps the profile's sizes.
A GPU's numbers are not the CPU book's (other kernels, other rounding): the check reports times
and failures, not the book's values.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]

#: Tests left out of the CUDA run, with why: each checks the CPU by design, or runs notebooks.
UNIT_EXCLUDED = {
    "tests/test_cpu.py": "the CPU kernel pins and the thread rule",
    "tests/test_train.py::test_the_books_model_is_the_same_on_every_simulated_cpu_and_matches_the_golden_digest":
        "the golden digest of the CPU book",
    "tests/test_train.py::test_unpinned_kernels_change_the_model_so_the_pins_are_what_holds_it":
        "the simulated CPUs",
    "tests/test_portable.py::test_portable_sqrt_is_correctly_rounded": "bit-for-bit CPU arithmetic",
    "tests/test_portable.py::test_binary_arithmetic_agrees_bit_for_bit_with_numpy": "bit-for-bit CPU arithmetic",
    "tests/test_portable.py::test_unary_arithmetic_agrees_bit_for_bit_with_numpy": "bit-for-bit CPU arithmetic",
    "tests/test_portable.py::test_the_optimizer_is_torchs_fused_adam_and_computes_adam": "the CPU's fused-Adam bits",
    "tests/test_nbval_drift.py::test_a_drifted_notebook_is_reported_in_one_line_per_cell": "runs nbval",
    "tests/test_train.py::test_the_trained_model_does_not_depend_on_the_callers_thread_count":
        "the CPU's thread count (a GPU model does not depend on it)",
}

#: --quick (the dry run): training sentences, test sentences, and the caps on searches and sweeps.
QUICK = {"max_train": 400, "max_eval": 64, "epochs": 1, "steps": 30, "permutations": 10, "seeds": 2,
         "lambdas": 2, "ig_steps": 8}

DATASET = "rt-polarity"
CHAPTERS = tuple(f"{n:02d}" for n in range(3, 16))


# ----------------------------------------------------------------------------- the run's settings
@dataclass
class Context:
    """What every step needs: the profile, the device, the caps; and the data and models made so far.

    ``datasets`` may be filled beforehand (name -> attnlib.data.Dataset) to run the steps on other
    data (the tests use a tiny synthetic task in place of rt-polarity).
    """

    profile: object
    device: object
    max_instances: int | None = None
    quick: bool = False
    seed: int = 0
    datasets: dict = field(default_factory=dict)
    models: dict = field(default_factory=dict)

    # sizes -------------------------------------------------------------------
    def n(self, value: int | None) -> int | None:
        """A profile's instance count (None = all) under ``--max-instances`` (and --quick's test split)."""
        caps = [c for c in (value, self.max_instances) if c is not None]
        return min(caps) if caps else None

    def epochs(self, value: int) -> int:
        return QUICK["epochs"] if self.quick else value

    def steps(self, value: int) -> int:
        return min(value, QUICK["steps"]) if self.quick else value

    def permutations(self, value: int) -> int:
        return min(value, QUICK["permutations"]) if self.quick else value

    def seeds(self, values) -> tuple:
        return tuple(values)[: QUICK["seeds"]] if self.quick else tuple(values)

    def sizes(self, name: str) -> dict:
        """load_dataset's max_train / max_eval: the profile's, or --quick's small ones."""
        if self.quick:
            return {"max_train": QUICK["max_train"], "max_eval": QUICK["max_eval"]}
        return self.profile.dataset_kwargs(name)

    # data and models, made once ---------------------------------------------
    def dataset(self, name: str = DATASET):
        from attnlib import data

        if name not in self.datasets:
            self.datasets[name] = data.load_dataset(name, seed=self.seed, **self.sizes(name))
        return self.datasets[name]

    def deception_dataset(self):
        from attnlib import data

        if "deception" not in self.datasets:
            P = self.profile
            kwargs = (self.sizes("deception") if self.quick
                      else {"max_train": P.deception.train, "max_eval": None})
            self.datasets["deception"] = data.load_deception(seed=self.seed, **kwargs)
        return self.datasets["deception"]

    def bilstm(self):
        """Chapters 3-10's model: the BiLSTM + tanh attention, seed 0, the profile's epochs."""
        from attnlib import train

        if "bilstm" not in self.models:
            self.models["bilstm"] = train.train_model(
                self.dataset(), encoder="lstm", attention="tanh", seed=self.seed,
                epochs=self.epochs(self.profile.epochs), device=self.device, progress=False)
        return self.models["bilstm"]

    def transformer(self):
        """Chapters 11, 12 and 14's transformer: 4 layers x 4 heads, d_v = 32, seed 0."""
        from attnlib import train
        from attnlib.models import TransformerConfig

        if "transformer" not in self.models:
            self.models["transformer"] = train.train_model(
                self.dataset(), config=TransformerConfig(layers=4, heads=4, head_dim=32), seed=self.seed,
                epochs=self.epochs(self.profile.transformer.epochs), device=self.device, progress=False)
        return self.models["transformer"]


def _scores(trained) -> str:
    test = trained.test
    return f"test accuracy {test['accuracy']:.3f}, F1 {test['f1']:.3f}"


def _first_rows(split, n: int | None):
    """The split's first ``n`` instances (all when None), for the calls without max_instances."""
    import numpy as np

    return split if n is None or n >= len(split) else split.subset(np.arange(n))


# ----------------------------------------------------------------------------- the steps
@dataclass(frozen=True)
class Step:
    chapter: str
    name: str  # what runs: the attnlib calls
    run: Callable[[Context], str]  # returns a short result
    needs: tuple = ()  # the shared models it uses ("bilstm", "transformer")
    provides: str = ""  # the shared model it trains (a training step)


def _train_bilstm(ctx: Context) -> str:
    t = ctx.bilstm()
    return f"{_scores(t)}, {len(ctx.dataset().train)} training sentences, {t.config.name}"


def _importance(ctx: Context) -> str:
    from attnlib import importance

    r = importance.importance(ctx.bilstm().model, ctx.dataset().test,
                              max_instances=ctx.n(ctx.profile.eval_instances(DATASET)), seed=ctx.seed)
    table = importance.agreement(r)
    return f"{len(r.indices)} sentences, mean tau_g {table['tau_g mean'].mean():.3f}"


def _permutation(ctx: Context) -> str:
    import numpy as np

    from attnlib import counterfactual

    P = ctx.profile
    r = counterfactual.permute_attention(ctx.bilstm().model, ctx.dataset().test,
                                         n_permutations=ctx.permutations(P.n_permutations),
                                         max_instances=ctx.n(P.eval_instances(DATASET)), seed=ctx.seed)
    counterfactual.bin_by_max_attention(r.median_tvd, r.max_attention, predicted=r.predicted)
    median = float(np.median(r.median_tvd))
    return f"{len(r.indices)} sentences x {r.n_permutations} permutations, median TVD {median:.4f}"


def _adversary(ctx: Context) -> str:
    from attnlib import counterfactual

    P = ctx.profile
    r = counterfactual.adversarial_attention(ctx.bilstm().model, ctx.dataset().test, eps=0.01, k=5,
                                             steps=ctx.steps(P.adversary_steps),
                                             max_instances=ctx.n(P.eval_instances(DATASET)), seed=ctx.seed)
    frac = counterfactual.fraction_very_different(r)
    return (f"{len(r.indices)} sentences, k = 5, {ctx.steps(P.adversary_steps)} steps, "
            f"{int(frac['n_very_different'].sum())} very different")


def _uniform(ctx: Context) -> str:
    from attnlib import baselines

    ctx.bilstm()  # the trained half comes from the cache
    c = baselines.uniform_comparison(ctx.dataset(), ("lstm",), seed=ctx.seed,
                                     epochs=ctx.epochs(ctx.profile.epochs), progress=False)
    gap = c.gap()["F1 gap (ours)"].iloc[0]
    return f"BiLSTM trained vs uniform attention: F1 gap {gap:+.3f}"


def _seeds(ctx: Context) -> str:
    from attnlib import baselines

    others = ctx.seeds(s for s in ctx.profile.seeds if s != ctx.seed)
    ctx.bilstm()
    sv = baselines.seed_variance(ctx.dataset(), encoder="lstm", attention="tanh", base_seed=ctx.seed, seeds=others,
                                 epochs=ctx.epochs(ctx.profile.epochs), progress=False)
    return f"seeds {', '.join(map(str, others))} retrained, median JSD {sv.per_instance['jsd'].median():.3f}"


def _lambda_sweep(ctx: Context) -> str:
    from attnlib import adversarial_training

    lambdas = ctx.profile.wp.lambdas[: QUICK["lambdas"]] if ctx.quick else ctx.profile.wp.lambdas
    sweep = adversarial_training.lambda_sweep(ctx.dataset(), ctx.bilstm(), lambdas, seed=ctx.seed,
                                              epochs=ctx.epochs(ctx.profile.wp.adversary_epochs), progress=False)
    jsd = ", ".join(f"{v:.3f}" for v in sweep.frame["mean_jsd"])
    return f"{len(lambdas)} adversaries (lambda {', '.join(f'{v:g}' for v in lambdas)}), mean JSD {jsd}"


def _diagnostic(ctx: Context) -> str:
    from attnlib import adversarial_training, diagnostic

    P, ds, base = ctx.profile, ctx.dataset(), ctx.bilstm()
    adversary = adversarial_training.train_adversary(ds, base, diagnostic.ADVERSARY_LAMBDA, seed=ctx.seed,
                                                     epochs=ctx.epochs(P.wp.adversary_epochs), progress=False)
    guides = {"uniform": "uniform", "trained MLP": "trained", "base LSTM": base, "adversary": adversary}
    seeds = ctx.seeds(P.seeds)
    table = diagnostic.diagnostic_table(ds, guides, seeds=seeds, epochs=ctx.epochs(P.epochs), device=ctx.device,
                                        progress=False)
    f1 = ", ".join(f"{v:.3f}" for v in table["test f1"])
    return f"4 guides x {len(seeds)} seeds, test F1 {f1}"


def _erasure(ctx: Context) -> str:
    from attnlib import erasure

    model, test, n = ctx.bilstm().model, ctx.dataset().test, ctx.n(None)
    single = erasure.single_weight(model, test, max_instances=n, seed=ctx.seed)
    ranked = erasure.ranked_removal(model, test, max_instances=n, seed=ctx.seed)
    erasure.removal_summary(ranked)
    flips = erasure.flip_summary(single)
    return f"{len(single.indices)} sentences, top-weight flips {float(flips['flip_top']):.3f}"


def _train_transformer(ctx: Context) -> str:
    t = ctx.transformer()
    return f"{_scores(t)}, {ctx.epochs(ctx.profile.transformer.epochs)} epochs"


def _identifiability(ctx: Context) -> str:
    import numpy as np

    from attnlib import identifiability
    from attnlib.models import PretrainedClassifier

    P, test = ctx.profile, ctx.dataset().test
    n = ctx.n(P.identifiability.sentences) or len(test)
    rows = np.sort(np.random.default_rng(ctx.seed).choice(len(test), size=min(n, len(test)), replace=False))
    sentences = test.subset(rows)
    _quiet_transformers()
    minilm = PretrainedClassifier().to(ctx.device)
    frames = [identifiability.trace_statistics(minilm.trace(batch))
              for batch in minilm.batches(sentences.texts, sentences.labels, batch_size=32)]
    small = ctx.transformer().model
    frames += [identifiability.trace_statistics(small.trace(batch)) for batch in sentences.batches(64)]
    heads = sum(len(f) for f in frames)
    null = sum(int((f["null_dim"] > 0).sum()) for f in frames)
    return f"{len(rows)} sentences, MiniLM and the transformer: {heads} (sentence, head) pairs, {null} with null space"


def _quiet_transformers() -> None:
    """No "Loading weights" progress bar between the step lines."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # PretrainedClassifier says what is missing
        pass


def _heads(ctx: Context) -> str:
    from attnlib import head_importance, head_perturbation

    P, ds, model = ctx.profile, ctx.dataset(), ctx.transformer().model
    perm = head_perturbation.permute_heads(model, ds.test, n_permutations=ctx.permutations(P.heads.permutations),
                                           max_instances=ctx.n(P.heads.instances), seed=ctx.seed)
    n = ctx.n(None)
    head_importance.head_importance(model, _first_rows(ds.dev, n))
    head_importance.head_ablation(model, _first_rows(ds.test, n))
    return (f"{perm.n_instances} sentences x {perm.n_permutations} permutations, "
            f"accuracy {perm.base_accuracy:.3f}; importance and ablation of 16 heads")


def _deception(ctx: Context) -> str:
    from attnlib import deception, importance
    from attnlib.models import ModelConfig, TransformerConfig

    P, ds = ctx.profile, ctx.deception_dataset()
    lam = max(P.deception.lambdas)
    families = {"BiLSTM": (ModelConfig(encoder="lstm", attention="tanh"), P.deception.lstm_epochs),
                "transformer": (TransformerConfig(*P.deception.transformer), P.deception.transformer_epochs)}
    models = {name: deception.train_deceiver(ds, config, lam=lam, seed=ctx.seed, epochs=ctx.epochs(epochs),
                                             device=ctx.device, progress=False)
              for name, (config, epochs) in families.items()}
    table = deception.deception_table(models, ds.test)
    r = importance.importance(models["BiLSTM"].model, ds.test, max_instances=ctx.n(P.deception.explained),
                              seed=ctx.seed)
    acc = ", ".join(f"{v:.3f}" for v in table["accuracy"])
    return f"lambda {lam:g}: BiLSTM and transformer deceivers, accuracy {acc}; importance on {len(r.indices)}"


def _flow(ctx: Context) -> str:
    from attnlib import flow, importance

    P, test, model = ctx.profile, ctx.dataset().test, ctx.transformer().model
    n = ctx.n(P.flow.instances)
    relevance = flow.relevance_by_layer(model, test, max_instances=n, seed=ctx.seed)
    importance.importance(model, test, max_instances=n, seed=ctx.seed, loo_mode="replace")
    return f"{len(relevance.indices)} sentences: raw attention, rollout and flow after each layer; importance"


def _explain(which: str) -> Callable[[Context], str]:
    def run(ctx: Context) -> str:
        from attnlib import explanations, faithfulness

        trained = ctx.bilstm() if which == "bilstm" else ctx.transformer()
        test, n = ctx.dataset().test, ctx.n(ctx.profile.capstone.instances)
        kwargs = {"ig_steps": QUICK["ig_steps"]} if ctx.quick else {}
        expl = explanations.explain(trained.model, test, max_instances=n, seed=ctx.seed, **kwargs)
        faith = faithfulness.faithfulness(trained.model, test, expl.by_position(), max_instances=n, seed=ctx.seed)
        faithfulness.faithfulness_summary(faith)
        return f"{len(expl.indices)} sentences, {len(expl.methods)} methods scored"

    return run


B, T = ("bilstm",), ("transformer",)
STEPS: tuple[Step, ...] = (
    Step("03", "train.train_model lstm+tanh", _train_bilstm, provides="bilstm"),
    Step("03", "importance.importance + agreement", _importance, B),
    Step("04", "counterfactual.permute_attention", _permutation, B),
    Step("05", "counterfactual.adversarial_attention", _adversary, B),
    Step("06", "baselines.uniform_comparison lstm", _uniform, B),
    Step("07", "baselines.seed_variance lstm+tanh", _seeds, B),
    Step("08", "adversarial_training.lambda_sweep", _lambda_sweep, B),
    Step("09", "train_adversary + diagnostic.diagnostic_table", _diagnostic, B),
    Step("10", "erasure.single_weight + ranked_removal", _erasure, B),
    Step("11", "train.train_model transformer 4x4, d_v 32", _train_transformer, provides="transformer"),
    Step("11", "PretrainedClassifier.trace + identifiability.trace_statistics", _identifiability, T),
    Step("12", "head_perturbation.permute_heads + head_importance", _heads, T),
    Step("13", "deception.train_deceiver x2 + deception_table + importance", _deception),
    Step("14", "flow.relevance_by_layer + importance (replace)", _flow, T),
    Step("15", "explanations.explain + faithfulness, BiLSTM", _explain("bilstm"), B),
    Step("15", "explanations.explain + faithfulness, transformer", _explain("transformer"), T),
)


# ----------------------------------------------------------------------------- running and reporting
@dataclass
class Outcome:
    chapter: str
    step: str
    seconds: float
    ok: bool
    result: str = ""
    error: str = ""  # "Type: first line of the message"
    where: str = ""  # the traceback's last frame: file:line in function
    peak_gib: float | None = None  # the most CUDA memory the step held (None on the CPU)
    warnings: list = field(default_factory=list)  # distinct warnings, "Category: first line"

    @property
    def label(self) -> str:
        return f"ch{self.chapter}" if self.chapter.isdigit() else self.chapter

    def line(self) -> str:
        """One line: chapter, step, seconds, (peak GPU memory,) OK and the result, or FAIL and the error."""
        head = f"{self.label:<5} {self.step:<62} {self.seconds:8.1f} s  "
        if self.peak_gib is not None:
            head += f"{self.peak_gib:6.2f} GiB  "
        if self.ok:
            return head + f"OK    {self.result}"
        return head + f"FAIL  {self.error}  [{self.where}]"

    def warning_lines(self, limit: int = 3) -> list[str]:
        shown = [f"      warning: {w}" for w in self.warnings[:limit]]
        if len(self.warnings) > limit:
            shown.append(f"      ... and {len(self.warnings) - limit} more warning(s) (--out has them all)")
        return shown


def _describe(err: BaseException) -> tuple[str, str]:
    message = str(err).strip().splitlines()
    text = f"{type(err).__name__}: {message[0]}" if message else type(err).__name__
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return text, "no traceback"
    last = frames[-1]
    path = Path(last.filename)
    try:
        shown = path.resolve().relative_to(ROOT)
    except ValueError:
        shown = Path(*path.parts[-2:]) if len(path.parts) > 1 else path
    return text, f"{shown}:{last.lineno} in {last.name}"


def _on_cuda(device) -> bool:
    import torch

    return getattr(device, "type", str(device)) == "cuda" and torch.cuda.is_available()


def run_step(step: Step, ctx: Context, *, printer=print) -> Outcome:
    """Run one step; an exception becomes a FAIL outcome (type, first message line, last frame).

    The time includes the device's queued work (CUDA is synchronised before the clock stops);
    warnings raised during the step (e.g. torch's note that a CUDA kernel is not deterministic)
    are collected, each distinct one once.
    """
    import torch

    cuda = _on_cuda(ctx.device)
    if cuda:
        torch.cuda.reset_peak_memory_stats(ctx.device)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = step.run(ctx)
            if cuda:
                torch.cuda.synchronize(ctx.device)
            outcome = Outcome(step.chapter, step.name, time.perf_counter() - start, True, result=str(result or ""))
        except Exception as err:  # noqa: BLE001  (a failing step is reported, the next one runs)
            error, where = _describe(err)
            outcome = Outcome(step.chapter, step.name, time.perf_counter() - start, False, error=error, where=where)
    if cuda:
        outcome.peak_gib = torch.cuda.max_memory_allocated(ctx.device) / 2**30
    seen = dict.fromkeys(f"{w.category.__name__}: {(str(w.message).strip().splitlines() or [''])[0]}"[:300]
                         for w in caught)
    outcome.warnings = list(seen)
    _free_device_memory()
    printer(outcome.line())
    for line in outcome.warning_lines():
        printer(line)
    return outcome


def run_steps(steps, ctx: Context, *, out=None, printer=print) -> list[Outcome]:
    """Every step in order, each printed as it ends (and written to ``out`` as a JSON line)."""
    outcomes = []
    for step in steps:
        stopped = False
        try:
            outcome = run_step(step, ctx, printer=printer)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM (main): report what ran, then stop
            outcome = Outcome(step.chapter, step.name, 0.0, False, error="Interrupted: the run was stopped here",
                              where="-")
            printer(outcome.line())
            stopped = True
        outcomes.append(outcome)
        if out is not None:
            out.write(json.dumps({"kind": "step", "device": str(ctx.device), "profile": ctx.profile.name,
                                  **asdict(outcome)}) + "\n")
            out.flush()
        if stopped:
            break
    return outcomes


def select_steps(chapters=None, steps=STEPS) -> list[Step]:
    """The steps of ``chapters`` (all when empty), with the training steps of the models they use.

    A shared model is trained in its own step (Chapter 3's BiLSTM, Chapter 11's transformer), so
    that its time is reported apart from the experiments', whichever chapters are picked.
    """
    if not chapters:
        return list(steps)
    wanted = {f"{int(c):02d}" for c in chapters}
    needed = {m for s in steps if s.chapter in wanted for m in s.needs}
    return [s for s in steps if s.chapter in wanted or (s.provides and s.provides in needed)]


def summary(outcomes: list[Outcome]) -> str:
    """The closing table: per chapter, its steps' seconds and status; then the totals."""
    lines = ["", "summary", f"{'chapter':<8} {'steps':>5} {'failed':>6} {'seconds':>9}"]
    for chapter in dict.fromkeys(o.chapter for o in outcomes):
        mine = [o for o in outcomes if o.chapter == chapter]
        failed = sum(not o.ok for o in mine)
        lines.append(f"{mine[0].label:<8} {len(mine):>5} {failed:>6} {sum(o.seconds for o in mine):>9.1f}"
                     + ("  FAIL" if failed else "  OK"))
    failed = [o for o in outcomes if not o.ok]
    lines.append(f"{len(outcomes)} step(s), {len(failed)} failed, {sum(o.seconds for o in outcomes):.1f} s in all")
    lines += [f"  FAILED {o.label} {o.step}: {o.error}" for o in failed]
    return "\n".join(lines)


def exit_status(outcomes: list[Outcome]) -> int:
    return 1 if any(not o.ok for o in outcomes) else 0


def _free_device_memory() -> None:
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001  (best effort)
        pass


# ----------------------------------------------------------------------------- the unit tests
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|deselected|xfailed|xpassed)")


def unit_command(extra=()) -> list[str]:
    """``python -m pytest tests`` without the CPU-specific tests (:data:`UNIT_EXCLUDED`); no -x."""
    # -v: one line per test as it ends, so a run cut short by a timeout still names its failures
    cmd = [sys.executable, "-m", "pytest", "tests", "-v", "-p", "no:cacheprovider", "-rfE"]
    for path in UNIT_EXCLUDED:
        cmd += ["--deselect", path] if "::" in path else ["--ignore", path]
    return cmd + list(extra)


def parse_pytest_counts(text: str) -> dict:
    """{'passed': n, 'failed': n, 'error': n, ...} from pytest's closing line."""
    counts: dict = {}
    for line in reversed(text.strip().splitlines()):
        found = _COUNT.findall(line)
        if found:
            for n, kind in found:
                counts[kind.rstrip("s") if kind.startswith("error") else kind] = int(n)
            break
    return counts


_OUTCOME = re.compile(r"\b(FAILED|ERROR) (tests/\S+::\S+)")


def parse_pytest_failures(text: str) -> list[str]:
    """'FAILED tests/x.py::test_y' for every failing or erroring test in pytest's output, once each,
    in order: from ``-v``'s per-test lines (``[gw2] [ 40%] FAILED tests/...``, which a run stopped
    by a timeout has too) and from ``-rfE``'s closing summary (``FAILED tests/... - message``)."""
    seen: dict[str, None] = {}
    for line in text.splitlines():
        for kind, node in _OUTCOME.findall(line):
            seen.setdefault(f"{kind} {node}")
    return list(seen)


def run_unit_tests(*, extra=(), timeout=None, printer=print) -> Outcome:
    cmd = unit_command(extra)
    printer("unit tests: " + " ".join(cmd[1:]))
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        text, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as err:
        text = (err.stdout or b"").decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
        rc = None
    seconds = time.perf_counter() - start
    for failure in parse_pytest_failures(text):
        printer("  " + failure[:300])
    counts = parse_pytest_counts(text)
    shown = ", ".join(f"{n} {k}" for k, n in counts.items()) or "no test counts"
    name = "pytest tests (the unit tests, on the device)"
    if rc is None:
        outcome = Outcome("unit", name, seconds, False, error=f"TimeoutExpired: stopped after {timeout} s; {shown}",
                          where="pytest")
    elif rc == 0:
        outcome = Outcome("unit", name, seconds, True, result=shown)
    else:
        tail = "" if counts else " | " + " / ".join(text.strip().splitlines()[-3:])[:400]
        outcome = Outcome("unit", name, seconds, False, error=f"pytest exit {rc}: {shown}{tail}", where="pytest")
    printer(outcome.line())
    return outcome


# ----------------------------------------------------------------------------- the command line
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cuda (default; exit 2 without one) or cpu: a dry run of this script, implies --quick")
    p.add_argument("--profile", default="paper", help="attnlib profile of the experiments' sizes (default paper)")
    p.add_argument("--chapters", nargs="+", metavar="NN",
                   help=f"chapters to run (default all: {CHAPTERS[0]}-{CHAPTERS[-1]})")
    p.add_argument("--max-instances", type=int, metavar="N", help="at most N test instances per experiment")
    p.add_argument("--quick", action=argparse.BooleanOptionalAction, default=None,
                   help="1 epoch, small data, short searches (default: on with --device cpu, off with cuda)")
    p.add_argument("--no-unit", dest="unit", action="store_false", help="skip the unit tests")
    p.add_argument("--unit-timeout", type=float, metavar="S", help="stop the unit tests after S seconds")
    p.add_argument("--pytest-args", default="", metavar="ARGS", help="extra pytest arguments, one string")
    p.add_argument("--out", metavar="FILE", help="also write each step as a JSON line to FILE")
    p.add_argument("--seed", type=int, default=0)
    return p


def _check_chapters(parser, chapters) -> None:
    for c in chapters or ():
        if not c.isdigit() or f"{int(c):02d}" not in CHAPTERS:
            parser.error(f"--chapters: {c!r} is not a chapter with a main experiment ({', '.join(CHAPTERS)})")


def header(device, profile, quick: bool) -> list[str]:
    import torch

    import attnlib

    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        cap = ".".join(map(str, torch.cuda.get_device_capability(device)))
        free, total = torch.cuda.mem_get_info(device)
        where = f"{name} (compute capability {cap}, {total / 2**30:.0f} GiB, {free / 2**30:.0f} GiB free)"
    else:
        where = f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores): a dry run"
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return [
        f"device:  {where}",
        f"torch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN {cudnn}), Python {platform.python_version()}, "
        f"attnlib {attnlib.__version__} from {Path(attnlib.__file__).parent}",
        f"profile: {profile.name}{' with --quick sizes' if quick else ''}",
    ]


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    _check_chapters(parser, args.chapters)
    if args.max_instances is not None and args.max_instances < 1:
        parser.error("--max-instances must be at least 1")
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # before torch meets CUDA: attnlib.get_device() gives the CPU too
    quick = args.device == "cpu" if args.quick is None else args.quick

    import attnlib.reproducible  # first: its kernel pins precede any torch computation
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"gpu_check: no CUDA device: torch {torch.__version__} (built for CUDA {torch.version.cuda}) sees "
              "none. This check is for a machine with an NVIDIA GPU; for a dry run of the script on this CPU "
              "pass --device cpu.", file=sys.stderr)
        return 2
    try:
        profile = attnlib.get_profile(args.profile)
    except ValueError as err:
        parser.error(f"--profile: {err}")
    device = attnlib.get_device(args.device)
    signal.signal(signal.SIGTERM, _interrupt)  # a timeout's SIGTERM still prints the summary
    for line in header(device, profile, quick):
        print(line, flush=True)

    out = open(args.out, "w", encoding="utf-8") if args.out else None
    try:
        outcomes = []
        if args.unit:
            print("\n== unit tests on " + device.type.upper(), flush=True)
            try:
                outcome = run_unit_tests(extra=shlex.split(args.pytest_args), timeout=args.unit_timeout,
                                         printer=lambda s: print(s, flush=True))
            except KeyboardInterrupt:
                outcome = Outcome("unit", "pytest tests (the unit tests, on the device)", 0.0, False,
                                  error="Interrupted: the run was stopped here", where="-")
                print(outcome.line(), flush=True)
                print(summary([outcome]))
                return 1
            outcomes.append(outcome)
            if out is not None:
                out.write(json.dumps({"kind": "unit", "device": str(device), **asdict(outcome)}) + "\n")
                out.flush()
        print(f"\n== every chapter's main experiment, profile {profile.name!r}, on {DATASET}, device {device}",
              flush=True)
        attnlib.seed_everything(args.seed)
        ctx = Context(profile=profile, device=device, max_instances=args.max_instances, quick=quick, seed=args.seed)
        outcomes += run_steps(select_steps(args.chapters), ctx, out=out, printer=lambda s: print(s, flush=True))
    finally:
        if out is not None:
            out.close()
    print(summary(outcomes))
    return exit_status(outcomes)


if __name__ == "__main__":
    sys.exit(main())
