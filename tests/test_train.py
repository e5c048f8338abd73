"""attnlib.train: the recipe, determinism, the model cache and its failure modes."""
import contextlib
import warnings

import numpy as np
import pytest
import torch

from attnlib import cache, data, train
from attnlib.models import ModelConfig


@pytest.fixture(scope="module")
def small():
    return data.load_dataset("synthetic", max_train=400, max_eval=120, seed=0)


def test_learns_the_synthetic_task_and_reports_metrics(small):
    result = train.train_model(small, encoder="average", attention="tanh", epochs=4, progress=False)
    assert result.test["accuracy"] > 0.8, result.test  # marker words decide the label
    assert set(result.test) == {"accuracy", "f1", "roc_auc", "n"} and result.test["n"] == len(small.test)
    assert len(result.history) == 4 and 1 <= result.best_epoch <= 4
    best = max(result.history, key=lambda h: h["dev_roc_auc"])
    assert result.best_epoch == best["epoch"]
    # the kept model is the best epoch's: its dev score is the one recorded for that epoch
    assert train.evaluate(result.model, small.dev)["roc_auc"] == pytest.approx(best["dev_roc_auc"], abs=1e-9)


def test_seeded_training_is_deterministic(small):
    a = train.train_model(small, encoder="cnn", attention="dot", epochs=2, seed=3, use_cache=False, progress=False)
    b = train.train_model(small, encoder="cnn", attention="dot", epochs=2, seed=3, use_cache=False, progress=False)
    c = train.train_model(small, encoder="cnn", attention="dot", epochs=2, seed=4, use_cache=False, progress=False)
    for k, v in a.model.state_dict().items():
        assert torch.equal(v, b.model.state_dict()[k]), k
    assert a.test == b.test
    assert any(not torch.equal(v, c.model.state_dict()[k]) for k, v in a.model.state_dict().items())


def _train_on_threads(dataset, threads: int, monkeypatch, pinned: bool):
    if not pinned:  # fit leaves the caller's thread count alone
        monkeypatch.setattr(train, "training_threads", lambda device: contextlib.nullcontext())
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        result = train.train_model(dataset, encoder="lstm", epochs=2, use_cache=False, progress=False)
        assert torch.get_num_threads() == threads  # restored after training
    finally:
        torch.set_num_threads(before)
        monkeypatch.undo()
    return result.model.state_dict()


def test_the_trained_model_does_not_depend_on_the_callers_thread_count(monkeypatch):
    dataset = data.load_dataset("synthetic", max_train=500, max_eval=60, seed=0)
    one, three = (_train_on_threads(dataset, n, monkeypatch, pinned=True) for n in (1, 3))
    for k, v in one.items():
        assert torch.equal(v, three[k]), k
    # the pin matters: on the caller's own thread counts the rounding differs
    one, three = (_train_on_threads(dataset, n, monkeypatch, pinned=False) for n in (1, 3))
    assert any(not torch.equal(v, three[k]) for k, v in one.items())


def test_cache_hit_returns_the_same_model(small):
    first = train.train_model(small, encoder="lstm", epochs=1, progress=False)
    assert not first.from_cache
    second = train.train_model(small, encoder="lstm", epochs=1, progress=False)
    assert second.from_cache and second.key == first.key
    assert second.test == first.test and second.history == first.history
    for k, v in first.model.state_dict().items():
        assert torch.equal(v, second.model.state_dict()[k])
    other = train.train_model(small, encoder="lstm", epochs=1, seed=1, progress=False)
    assert other.key != first.key


def test_corrupt_cache_warns_and_retrains(small):
    first = train.train_model(small, encoder="average", epochs=1, progress=False)
    path = cache.cache_dir() / "models" / f"{first.key}.pt"
    path.write_bytes(path.read_bytes()[:100])  # truncated
    with pytest.warns(cache.CacheCorruptionWarning):
        again = train.train_model(small, encoder="average", epochs=1, progress=False)
    assert not again.from_cache and again.test == first.test
    assert train.train_model(small, encoder="average", epochs=1, progress=False).from_cache  # rebuilt


def test_cached_state_that_does_not_fit_is_retrained(small):
    first = train.train_model(small, encoder="average", epochs=1, progress=False)
    entry = cache.load("models", first.key)
    entry["state_dict"]["decoder.weight"] = torch.zeros(3, 3)  # wrong shape, valid file
    cache.save("models", first.key, entry)
    with pytest.warns(cache.CacheCorruptionWarning, match="does not fit"):
        again = train.train_model(small, encoder="average", epochs=1, progress=False)
    assert not again.from_cache


def test_weight_decay_spares_attention():
    from attnlib.models import AttentionClassifier

    model = AttentionClassifier(30, ModelConfig(encoder="average", attention="tanh"))
    opt = train.make_optimizer(model, train.TrainConfig())
    decays = {id(p): g["weight_decay"] for g in opt.param_groups for p in g["params"]}
    for p in model.attention_parameters():
        assert decays[id(p)] == 0.0
    assert decays[id(model.decoder.weight)] == 1e-5
    assert opt.defaults["amsgrad"] is True


def test_predict_returns_attention_over_real_tokens(small):
    result = train.train_model(small, encoder="average", epochs=1, progress=False)
    pred = train.predict(result.model, small.test)
    assert pred.probs.shape == (len(small.test), 2)
    assert [len(a) for a in pred.attention] == small.test.lengths().tolist()
    assert all(abs(a.sum() - 1) < 1e-5 for a in pred.attention)
    np.testing.assert_allclose(pred.probs, train.predict_proba(result.model, small.test))


def test_predict_works_for_a_transformer(tiny_dataset, transformer):
    """The one protocol: predict reads the batch's real tokens, not a BiLSTM's own encoding."""
    split = tiny_dataset.test
    pred = train.predict(transformer, split)
    assert [len(a) for a in pred.attention] == split.lengths().tolist()
    # the [CLS] row also weighs <SOS>/<EOS>: on the words it sums to at most 1, and is >= 0
    assert all(a.min() >= 0 and a.sum() <= 1 + 1e-5 for a in pred.attention)
    np.testing.assert_allclose(pred.probs, train.predict_proba(transformer, split))
    batch = next(iter(split.batches(len(split))))
    with torch.no_grad():
        alpha = transformer(batch).attention
    for row, i in enumerate(batch.index.tolist()):
        np.testing.assert_allclose(pred.attention[i], alpha[row][batch.mask[row]].numpy(), atol=1e-6)


def test_classification_metrics():
    m = train.classification_metrics(np.array([0, 1, 1, 0]), np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]))
    assert m["accuracy"] == 0.5 and m["roc_auc"] == pytest.approx(0.75) and m["f1"] == pytest.approx(0.5)


def test_bad_arguments(small):
    with pytest.raises(ValueError, match="Dataset"):
        train.train_model("rt-polarity")
    with pytest.raises(ValueError, match="either config"):
        train.train_model(small, ModelConfig(), encoder="cnn")
    with pytest.raises(ValueError, match="epochs"):
        train.train_model(small, epochs=0)
    with pytest.raises(ValueError, match="seed"):
        train.train_model(small, seed=-2)
    with pytest.raises(ValueError, match="n_classes"):
        train.train_model(small, ModelConfig(n_classes=3))
    with pytest.raises(ValueError, match="lr"):
        train.TrainConfig(lr=0)


def _state(result):
    return {k: v.clone() for k, v in result.model.state_dict().items()}


def test_models_trained_at_once_are_exactly_the_models_trained_one_by_one(small):
    specs = {
        ("lstm", 0): dict(dataset=small, encoder="lstm", attention="tanh", seed=0, epochs=2, use_cache=False),
        ("cnn", 1): dict(dataset=small, encoder="cnn", attention="dot", seed=1, epochs=2, use_cache=False),
        ("average", 2): dict(dataset=small, encoder="average", attention="tanh", seed=2, epochs=3, use_cache=False),
        ("lstm", 3): dict(dataset=small, encoder="lstm", attention="tanh", seed=3, epochs=1, use_cache=False),
    }
    threads = torch.get_num_threads()
    together = train.train_models(specs, workers=3, progress=False)
    assert list(together) == list(specs)  # the caller's order
    assert torch.get_num_threads() == threads  # restored
    for name, spec in specs.items():
        alone = train.train_model(**spec, progress=False)
        a, b = _state(alone), _state(together[name])
        assert all(torch.equal(a[k], b[k]) for k in a), name
        assert alone.test == together[name].test and alone.history == together[name].history, name
    lstm0, lstm3 = _state(together[("lstm", 0)]), _state(together[("lstm", 3)])
    assert any(not torch.equal(lstm0[k], lstm3[k]) for k in lstm0)  # not one model four times


def test_train_models_starts_the_costliest_first_a_transformer_by_its_size(small, monkeypatch):
    """Longest first: a 4 x 4 x 32 transformer for 3 epochs costs more than the BiLSTM for 5 (about
    29 s against 12.5 s an rt-polarity epoch), a 2 x 4 x 16 one less (its cost scales with its size)."""
    import threading

    from attnlib.models import TransformerConfig

    started, lock, both = [], threading.Lock(), threading.Barrier(2)

    def fake_train_model(**spec):
        with lock:
            started.append(spec["name"])
            first_two = len(started) <= 2
        if first_two:  # the third starts only when one of the first two has ended
            both.wait(timeout=30)
        return spec["name"]

    monkeypatch.setattr(train, "train_model", fake_train_model)
    specs = {
        "small transformer": dict(dataset=small, config=TransformerConfig(layers=2, heads=4, head_dim=16), epochs=3),
        "transformer": dict(dataset=small, config=TransformerConfig(layers=4, heads=4, head_dim=32), epochs=3),
        "lstm": dict(dataset=small, encoder="lstm", epochs=5),
    }
    for name, spec in specs.items():
        spec["name"] = name
    assert train.train_models(specs, workers=2, progress=False) == {name: name for name in specs}
    assert set(started[:2]) == {"transformer", "lstm"} and started[2] == "small transformer"


def test_run_concurrently_returns_in_order_and_a_failure_stops_the_rest(small):
    import functools

    assert train.run_concurrently([lambda i=i: i * i for i in range(5)], workers=2, progress=False) == [0, 1, 4, 9, 16]
    assert train.run_concurrently([], progress=False) == []
    started = []
    jobs = [lambda i=i: started.append(i) or i for i in range(4)]
    assert train.run_concurrently(jobs, workers=2, costs=[1, 5, 2, 9], progress=False) == [0, 1, 2, 3]
    assert set(started[:2]) == {3, 1}  # the costliest first
    with pytest.raises(ValueError, match="costs"):
        train.run_concurrently(jobs, workers=2, costs=[1, 2])
    import threading

    def inner():  # a nested call runs in its job's own thread: no oversubscription
        names = train.run_concurrently([lambda: threading.current_thread().name] * 3, workers=3, progress=False)
        return set(names) == {threading.current_thread().name}

    assert train.run_concurrently([inner, inner], workers=2, progress=False) == [True, True]

    def broken():
        raise ValueError("bad job")

    slow = functools.partial(train.train_model, small, encoder="lstm", epochs=50, use_cache=False, progress=False)
    import time

    start = time.perf_counter()
    with pytest.raises(ValueError, match="bad job"):
        train.run_concurrently([slow, broken], workers=2, progress=False)
    assert time.perf_counter() - start < 30  # the 50-epoch job stopped at its next batch
    assert torch.get_num_threads() >= 1


def test_run_concurrently_names_running_jobs_by_their_labels(capsys):
    import time

    def job(seconds):
        time.sleep(seconds)
        return seconds

    jobs = [lambda: job(1.3), lambda: job(2.6)]
    assert train.run_concurrently(jobs, workers=2, labels=["first run", "second run"], unit="run") == [1.3, 2.6]
    shown = capsys.readouterr().err
    assert "second run" in shown  # still running when the first finished and the bar redrew
    with pytest.raises(ValueError, match="labels"):
        train.run_concurrently(jobs, workers=2, labels=["one label"])
    with pytest.raises(ValueError, match="labels"):
        train.run_concurrently(jobs, workers=2, labels=["a", 2])


def test_run_concurrently_and_train_models_reject_bad_input(small):
    with pytest.raises(ValueError, match="callable"):
        train.run_concurrently([1, 2])
    for workers in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="workers"):
            train.run_concurrently([lambda: 1], workers=workers)
    with pytest.raises(ValueError, match="dict of name"):
        train.train_models("lstm")
    with pytest.raises(ValueError, match="'dataset'"):
        train.train_models([dict(encoder="lstm")])
    assert train.training_slots("cpu") >= 1


def test_no_warnings_from_a_normal_run(small):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train.train_model(small, encoder="average", epochs=1, progress=False)


_TRAIN_AND_HASH = """
import hashlib, os
if os.environ.get("IMPORT_TORCH_FIRST"):
    import torch  # a reader's notebook that imported torch before attnlib (nothing computed yet)
import attnlib.reproducible
from attnlib import cpu, data, train
dataset = data.load_dataset("rt-polarity", max_eval=60, seed=0)  # the book's train split: small ones hide the effect
if os.environ.get("TRAIN_CONCURRENTLY"):  # beside another model, in run_concurrently's threads
    specs = [dict(dataset=dataset, encoder=e, seed=s, epochs=1, use_cache=False) for e, s in (("lstm", 0), ("cnn", 5))]
    model = train.train_models(specs, workers=2, progress=False)[0].model
else:
    model = train.train_model(dataset, encoder="lstm", epochs=1, use_cache=False, progress=False).model
digest = hashlib.sha256()
for value in model.state_dict().values():
    digest.update(value.numpy().tobytes())
print(cpu.kernel_signature(), digest.hexdigest())
"""

#: The book's seed-0 BiLSTM on rt-polarity after one epoch, with the pinned kernels
#: (attnlib.cpu). Any x86-64 CPU with AVX2 (Intel or AMD, with or without AVX-512) and the
#: pinned library versions (requirements/constraints.txt) must train exactly this model;
#: recorded on an AMD EPYC with AVX-512 (epoch-1 loss 0.61727517772), with the portable
#: optimizer (attnlib.portable.adam: torch's fused Adam, whose square root is the hardware's)
#: and the recurrence on attnlib's portable LSTM (attnlib.portable.lstm_recurrence). Before
#: that LSTM (ATen's, under the pins) it was a75a4c22…, the same on an AMD EPYC and an Intel Xeon.
#: torch's default Adam took MKL's vendor-dispatched square root, and an Intel Xeon trained
#: another model from the first step (the cross-CPU kit): the simulated CPUs below cannot see that.
GOLDEN_DIGEST = "5edf3f3eff4824d5cb9d8225b88270d66bd31936cb95bb81fed5148ab8d0d1e6"

#: What other CPUs would make torch pick, asked for through the libraries' own switches, plus
#: the thread runtimes' run-time choices and a notebook that imported torch first.
SIMULATED_CPUS = {
    "this CPU, defaults": {},
    "an AVX-512 CPU (ATen, MKL and oneDNN at AVX-512)": {
        "ATEN_CPU_CAPABILITY": "avx512", "MKL_ENABLE_INSTRUCTIONS": "AVX512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
    "an AVX2-only CPU": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "an Intel CPU's MKL branch (AVX-512), runtimes free to pick threads": {
        "MKL_CBWR": "AVX512", "OMP_DYNAMIC": "TRUE", "MKL_DYNAMIC": "FALSE"},
    "torch imported before attnlib": {"IMPORT_TORCH_FIRST": "1", "ATEN_CPU_CAPABILITY": "default"},
    "trained beside another model (train_models)": {"TRAIN_CONCURRENTLY": "1"},
}


def _trained_model_digest(env: dict) -> tuple[str, str]:
    import os
    import subprocess
    import sys

    from test_cpu import fresh_env

    out = subprocess.run([sys.executable, "-c", _TRAIN_AND_HASH], env=fresh_env(**env),
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    signature, digest = out.stdout.strip().splitlines()[-1].split()
    return signature, digest


def test_the_books_model_is_the_same_on_every_simulated_cpu_and_matches_the_golden_digest():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:  # two subprocesses at a time, one training thread each
        results = dict(zip(SIMULATED_CPUS, pool.map(_trained_model_digest, SIMULATED_CPUS.values())))
    assert {sig for sig, _ in results.values()} == {"x86-pinned-v1"}, results
    digests = {name: digest for name, (_, digest) in results.items()}
    assert len(set(digests.values())) == 1, digests
    assert digests["this CPU, defaults"] == GOLDEN_DIGEST, (
        f"this machine trained a different BiLSTM ({digests['this CPU, defaults']}) from the book's; "
        "its numbers will differ from the committed chapters")


def test_unpinned_kernels_change_the_model_so_the_pins_are_what_holds_it():
    # Without the pins, the simulated AVX-512 CPU trains another model: the test above is not vacuous.
    env = {"ATTNLIB_CPU_PINS": "0", "ATEN_CPU_CAPABILITY": "avx2"}
    signature, digest = _trained_model_digest(env)
    assert signature.startswith("unpinned-")
    assert digest != GOLDEN_DIGEST


def test_training_leaves_the_global_random_generators_as_they_were(tiny_dataset):
    """A model built under ``seeded`` draws its first weights from the global generators seeded with its
    seed; afterwards Python's, numpy's and torch's generators are back where the caller had them."""
    import random

    import numpy as np
    import torch

    from attnlib import train

    # once first: the libraries training imports late (rich draws a number when it is imported) are in
    train.train_model(tiny_dataset, encoder="average", epochs=1, use_cache=False, progress=False)
    random.seed(5), np.random.seed(5), torch.manual_seed(5)
    states = random.getstate(), np.random.get_state()[1].copy(), torch.random.get_rng_state().clone()
    first = train.train_model(tiny_dataset, encoder="average", epochs=1, use_cache=False, progress=False)
    assert random.getstate() == states[0] and (np.random.get_state()[1] == states[1]).all()
    assert torch.equal(torch.random.get_rng_state(), states[2])
    torch.randn(100)  # the caller's draws in between change nothing of the model
    again = train.train_model(tiny_dataset, encoder="average", epochs=1, use_cache=False, progress=False)
    for a, b in zip(first.model.state_dict().values(), again.model.state_dict().values()):
        assert torch.equal(a, b)
