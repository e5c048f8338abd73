"""Code moved out of chapters 5, 6 and 9 into attnlib (helper B): diagnostic.guides_test_attention."""
import numpy as np
import pytest

from attnlib import data, train
from attnlib import diagnostic as dg


@pytest.fixture(scope="module")
def tiny():
    return data.load_dataset("synthetic", n=200, seed=0)  # train 160, dev 20, test 20


@pytest.fixture(scope="module")
def guide_model(tiny):
    # use_cache=False: a module fixture runs outside conftest's per-test private cache.
    return train.train_model(tiny, encoder="average", attention="tanh", epochs=1, use_cache=False,
                             progress=False)


def test_every_guide_gives_its_test_attention_in_order(tiny, guide_model):
    oracle = {s: [r / r.sum() for r in (x.astype(np.float32) for x in tiny[s].rationales)]
              for s in ("train", "dev", "test")}
    guides = {"uniform": "uniform", "trained MLP": "trained", "model": guide_model, "oracle": oracle}
    out = dg.guides_test_attention(guides, tiny, seed=0, epochs=1)
    assert list(out) == list(guides)
    lengths = tiny.test.lengths()
    for name, arrays in out.items():
        assert [len(a) for a in arrays] == list(lengths), name
        np.testing.assert_allclose([a.sum() for a in arrays], 1.0, rtol=1e-5, err_msg=name)
    np.testing.assert_allclose(np.concatenate(out["uniform"]), np.repeat(1.0 / lengths, lengths), rtol=1e-6)
    expected_model = train.predict(guide_model.model, tiny.test).attention
    for a, b in zip(out["model"], expected_model):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(out["oracle"], oracle["test"]):
        np.testing.assert_array_equal(a, b)
    # the trained guide's weights are the jointly trained diagnostic model's own attention
    trained = dg.train_diagnostic(tiny, "trained", seed=0, epochs=1, progress=False)
    for a, b in zip(out["trained MLP"], train.predict(trained.model, tiny.test).attention):
        np.testing.assert_array_equal(a, b)
    assert not all(np.allclose(a, b) for a, b in zip(out["trained MLP"], out["uniform"]))


def test_a_bad_guide_fails_before_anything_is_trained(tiny, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("trained before checking the guides")

    monkeypatch.setattr(dg, "train_diagnostic", no_training)
    with pytest.raises(ValueError, match="unknown guide"):
        dg.guides_test_attention({"trained MLP": "trained", "bad": "random"}, tiny)
    with pytest.raises(ValueError, match="non-empty"):
        dg.guides_test_attention({}, tiny)
    with pytest.raises(ValueError, match="Dataset"):
        dg.guides_test_attention({"uniform": "uniform"}, tiny.test)
