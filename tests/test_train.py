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


def test_no_warnings_from_a_normal_run(small):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train.train_model(small, encoder="average", epochs=1, progress=False)


_TRAIN_AND_HASH = """
import hashlib
from attnlib import data, train
dataset = data.load_dataset("rt-polarity", max_eval=60, seed=0)  # the book's train split: small ones hide the effect
model = train.train_model(dataset, encoder="lstm", epochs=1, use_cache=False, progress=False).model
digest = hashlib.sha256()
for value in model.state_dict().values():
    digest.update(value.numpy().tobytes())
print(digest.hexdigest())
"""


def _trained_model_digest(**env) -> str:
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _TRAIN_AND_HASH], env={**os.environ, **env},
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_the_trained_model_does_not_depend_on_the_thread_runtimes_choices():
    # MKL_DYNAMIC=FALSE makes MKL use every thread it is given; OMP_DYNAMIC=TRUE lets the OpenMP
    # runtime grant fewer threads than asked on a loaded machine. Trained on two threads, the
    # latter changed the BiLSTM's epoch-1 loss on a busy 2-core machine (0.6238 against 0.6182).
    digests = {name: _trained_model_digest(**env) for name, env in
               {"default": {}, "MKL_DYNAMIC=FALSE": {"MKL_DYNAMIC": "FALSE"},
                "OMP_DYNAMIC=TRUE": {"OMP_DYNAMIC": "TRUE"}}.items()}
    assert len(set(digests.values())) == 1, digests
