"""attnlib.adversarial_training: W&P's loss (KL direction, masking, zeros), training, sweep, cache."""
import copy
import math
import warnings

import numpy as np
import pytest
import torch

from attnlib import adversarial_training as at
from attnlib import cache, data, metrics, seed_everything, train
from attnlib.models import AttentionClassifier, masked_softmax

EPOCHS = 2


@pytest.fixture(scope="module")
def synthetic():
    return data.load_dataset("synthetic", n=400, seed=0)


@pytest.fixture(scope="module")
def base(synthetic):
    # Module-scoped fixtures run before the per-test private cache is set: never cache here.
    return train.train_model(synthetic, encoder="average", attention="tanh", epochs=EPOCHS, use_cache=False, progress=False)


def _adversary(synthetic, base, lam, **kwargs):
    kwargs = {"epochs": EPOCHS, "progress": False, **kwargs}
    return at.train_adversary(synthetic, base, lam, **kwargs)


def _states_equal(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k].cpu(), sb[k].cpu()) for k in sa)


# ----------------------------------------------------------------------------- the loss
def _padded_example():
    """Two instances: <SOS> w w w <EOS> and <SOS> w w <EOS> PAD; attention 0 off the real tokens."""
    mask = torch.tensor([[False, True, True, True, False], [False, True, True, False, False]])
    alpha_a = torch.tensor([[0.0, 0.5, 0.3, 0.2, 0.0], [0.0, 0.9, 0.1, 0.0, 0.0]], dtype=torch.float64)
    alpha_b = torch.tensor([[0.0, 0.2, 0.2, 0.6, 0.0], [0.0, 0.4, 0.6, 0.0, 0.0]], dtype=torch.float64)
    probs_a = torch.tensor([[0.7, 0.3], [0.2, 0.8]], dtype=torch.float64)
    probs_b = torch.tensor([[0.6, 0.4], [0.25, 0.75]], dtype=torch.float64)
    return probs_a, probs_b, alpha_a, alpha_b, mask


def test_loss_is_tvd_minus_lambda_kl_by_hand():
    probs_a, probs_b, alpha_a, alpha_b, mask = _padded_example()
    lam = 0.5
    expected = []
    for i in range(2):
        tvd = 0.5 * sum(abs(a - b) for a, b in zip(probs_a[i].tolist(), probs_b[i].tolist()))
        kl = sum(a * math.log(a / b) for a, b, m in zip(alpha_a[i].tolist(), alpha_b[i].tolist(), mask[i].tolist()) if m)
        expected.append(tvd - lam * kl)
    loss = at.adversarial_loss(probs_a, probs_b, alpha_a, alpha_b, mask, lam)
    assert loss.shape == (2,)
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-12)
    # lambda = 0: pure output matching, TVD only
    np.testing.assert_allclose(at.adversarial_loss(probs_a, probs_b, alpha_a, alpha_b, mask, 0.0).numpy(), [0.1, 0.05], rtol=1e-12)


def test_kl_is_alpha_a_given_alpha_b_not_the_reverse():
    mask = torch.ones(1, 2, dtype=torch.bool)
    alpha_a = torch.tensor([[0.9, 0.1]], dtype=torch.float64)
    alpha_b = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
    probs = torch.tensor([[0.3, 0.7]], dtype=torch.float64)  # same output: the loss is -KL
    kl_ab = 0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5)
    kl_ba = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)
    assert abs(kl_ab - kl_ba) > 0.1  # asymmetric enough to tell apart
    loss = at.adversarial_loss(probs, probs, alpha_a, alpha_b, mask, 1.0).item()
    assert loss == pytest.approx(-kl_ab, rel=1e-12)
    assert loss != pytest.approx(-kl_ba, rel=1e-3)
    assert loss == pytest.approx(-metrics.kl(alpha_a, alpha_b).item(), rel=1e-12)
    # the authors' call (without padding, where it is not NaN) evaluates this same direction
    authors = torch.nn.KLDivLoss(reduction="sum")(alpha_b.log(), alpha_a).item()
    assert loss == pytest.approx(-authors, rel=1e-12)


def test_no_nan_in_loss_or_gradient_with_padding_and_zero_attention():
    """Padding, alpha_b = 0 at a real token (softmax underflow) and alpha_a = 0 at a real token."""
    mask = torch.tensor([[False, True, True, True, False, False], [False, True, True, False, False, False]])
    scores = torch.tensor([[0.0, 1.0, -200.0, 0.5, 0.0, 0.0], [0.0, 0.3, 0.1, 0.0, 0.0, 0.0]], requires_grad=True)
    alpha_a = masked_softmax(scores, mask)  # (B, T) float32, underflows to exactly 0 at [0, 2]
    assert alpha_a[0, 2].item() == 0.0
    alpha_b = torch.tensor([[0.0, 0.0, 0.7, 0.3, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]])
    logit = torch.tensor([[0.2], [-1.0]], requires_grad=True)
    p = torch.sigmoid(logit)
    probs_a = torch.cat([1 - p, p], dim=-1)
    probs_b = torch.tensor([[0.5, 0.5], [0.9, 0.1]])
    loss = at.adversarial_loss(probs_a, probs_b, alpha_a, alpha_b, mask, 1.0)
    assert torch.isfinite(loss).all()
    loss.sum().backward()
    assert torch.isfinite(scores.grad).all() and torch.isfinite(logit.grad).all()
    # the guarded term: alpha_b = 0 where alpha_a > 0 costs alpha_a * ln(alpha_a / 1e-10), finite
    kl_row1 = metrics.kl(alpha_a[1:].detach().double(), alpha_b[1:].double(), mask=mask[1:]).item()
    assert loss[1].item() == pytest.approx(0.5 * (abs(probs_a[1, 0].item() - 0.9) * 2) - kl_row1, rel=1e-5)
    # the authors' formulation takes log(0) off the real tokens: NaN in current torch
    naive = torch.nn.KLDivLoss(reduction="sum")(alpha_b.log(), alpha_a.detach())
    assert torch.isnan(naive)


def test_loss_is_differentiable_and_pushes_attention_away():
    """A gradient step on alpha_a's scores at lambda > 0 increases KL(alpha_a || alpha_b)."""
    mask = torch.ones(1, 4, dtype=torch.bool)
    alpha_b = torch.tensor([[0.4, 0.3, 0.2, 0.1]])
    scores = torch.zeros(1, 4, requires_grad=True)
    probs = torch.tensor([[0.5, 0.5]])
    before = metrics.kl(masked_softmax(scores, mask).detach(), alpha_b).item()
    at.adversarial_loss(probs, probs, masked_softmax(scores, mask), alpha_b, mask, 1.0).sum().backward()
    after = metrics.kl(masked_softmax(scores - 0.5 * scores.grad, mask).detach(), alpha_b).item()
    assert after > before


@pytest.mark.parametrize("lam", [-0.1, float("nan"), float("inf"), -float("inf"), True, "1", None])
def test_bad_lambda(lam, synthetic, base):
    probs_a, probs_b, alpha_a, alpha_b, mask = _padded_example()
    with pytest.raises(ValueError, match="lambda"):
        at.adversarial_loss(probs_a, probs_b, alpha_a, alpha_b, mask, lam)
    with pytest.raises(ValueError, match="lambda"):
        at.train_adversary(synthetic, base, lam, progress=False)


def test_bad_loss_inputs():
    probs_a, probs_b, alpha_a, alpha_b, mask = _padded_example()
    with pytest.raises(ValueError, match="mask"):
        at.adversarial_loss(probs_a, probs_b, alpha_a, alpha_b, mask.long(), 0.1)
    with pytest.raises(ValueError, match="same shape"):
        at.adversarial_loss(probs_a, probs_b, alpha_a[:, :4], alpha_b, mask, 0.1)
    with pytest.raises(ValueError, match="sum to 1"):
        at.adversarial_loss(probs_a, probs_b, alpha_a * 2, alpha_b, mask, 0.1)
    with pytest.raises(ValueError, match="real token"):
        at.adversarial_loss(probs_a, probs_b, alpha_a, alpha_b, mask & False, 0.1)


@pytest.mark.parametrize("lambdas", [[], [0.1, 0.1], [0.0, 1, 1.0], [0.1, -1.0], [0.1, float("nan")], [float("inf")], 0.1, "0.1"])
def test_bad_lambdas(lambdas, synthetic, base):
    with pytest.raises(ValueError, match="lambda"):
        at.lambda_sweep(synthetic, base, lambdas, progress=False)


def test_default_lambdas_are_w_and_p_grid():
    assert at.DEFAULT_LAMBDAS[0] == pytest.approx(1e-4) and at.DEFAULT_LAMBDAS[-1] == pytest.approx(1.0)
    assert list(at.DEFAULT_LAMBDAS) == sorted(set(at.DEFAULT_LAMBDAS))


# ----------------------------------------------------------------------------- training
def test_base_outputs_are_aligned_with_the_base_predictions(synthetic, base):
    probs, alpha = at._base_outputs(base.model, synthetic.train, torch.device("cpu"))
    pred = train.predict(base.model, synthetic.train)
    np.testing.assert_allclose(probs.numpy(), pred.probs, atol=1e-6)
    for i in (0, 7, len(synthetic.train) - 1):
        n = len(synthetic.train.tokens[i])
        np.testing.assert_allclose(alpha[i, 1 : n + 1].numpy(), pred.attention[i], atol=1e-6)
        assert alpha[i, 0] == 0 and (alpha[i, n + 1 :] == 0).all()


def test_base_stays_frozen(synthetic, base):
    before = {k: v.clone() for k, v in base.model.state_dict().items()}
    grads = [None if p.grad is None else p.grad.clone() for p in base.model.parameters()]
    assert not base.model.training
    adv = _adversary(synthetic, base, 0.1, use_cache=False)
    assert not base.model.training
    for k, v in base.model.state_dict().items():
        assert torch.equal(v, before[k]), k
    for p, g in zip(base.model.parameters(), grads):  # no gradient reached the base
        assert (p.grad is None and g is None) or torch.equal(p.grad, g)
    assert adv.model is not base.model and not _states_equal(adv.model, base.model)


def test_attention_weight_drives_attention_away(synthetic, base):
    """The behaviour W&P rely on: lambda = 1 moves attention much further than lambda = 0."""
    free = _adversary(synthetic, base, 0.0, use_cache=False)
    pushed = _adversary(synthetic, base, 1.0, use_cache=False)
    assert pushed.agreement["jsd"] > free.agreement["jsd"] + 0.1, (free.agreement, pushed.agreement)
    assert pushed.agreement["jsd"] > 3 * free.agreement["jsd"]
    for adv in (free, pushed):
        assert set(adv.agreement) == {"jsd", "tvd", "same_decision", "n"} and adv.agreement["n"] == len(synthetic.test)
        assert set(adv.test) == {"accuracy", "f1", "roc_auc", "n"}
        assert 0 <= adv.agreement["jsd"] <= math.log(2) and 0 <= adv.agreement["tvd"] <= 1
        assert len(adv.history) == EPOCHS
        assert {"train_loss", "dev_loss", "dev_tvd", "dev_jsd"} <= set(adv.history[0])
        best = min(adv.history, key=lambda h: h["dev_loss"])
        assert adv.best_epoch == best["epoch"]
        # the kept model is the best epoch's: its dev JSD is the one recorded for that epoch
        dev = train.compare_models(adv.model, base.model, synthetic.dev)
        assert dev.attention_jsd.mean() == pytest.approx(best["dev_jsd"], abs=1e-5)
        assert dev.output_tvd.mean() == pytest.approx(best["dev_tvd"], abs=1e-5)
        test = adv.compare(synthetic.test)
        assert test.attention_jsd.mean() == pytest.approx(adv.agreement["jsd"], abs=1e-12)
        assert adv.summary()["lambda"] == adv.lam


def test_seeded_training_is_deterministic(synthetic, base):
    a = _adversary(synthetic, base, 0.01, seed=3, use_cache=False)
    b = _adversary(synthetic, base, 0.01, seed=3, use_cache=False)
    c = _adversary(synthetic, base, 0.01, seed=4, use_cache=False)
    assert _states_equal(a.model, b.model)
    assert a.agreement == b.agreement and a.test == b.test and a.history == b.history
    assert not _states_equal(a.model, c.model)


def _initial_model(dataset, config, seed):
    """The model train_model starts from with ``seed`` (before any training)."""
    seed_everything(seed)
    embeddings, _ = data.glove_embeddings(dataset.vocab, seed=seed)
    return AttentionClassifier(len(dataset.vocab), config, embeddings=embeddings)


def test_adversary_does_not_start_from_the_base_initialisation(synthetic, base, monkeypatch):
    """seed = the base's seed still gives a fresh start: train_model's start for seed + ADVERSARY_SEED_OFFSET."""
    starts = []

    class Stop(Exception):
        pass

    def record_start(model, *args, **kwargs):
        starts.append(copy.deepcopy(model))
        raise Stop

    monkeypatch.setattr(at, "fit", record_start)
    with pytest.raises(Stop):
        at.train_adversary(synthetic, base, 0.0, seed=base.seed, use_cache=False, progress=False)
    assert not _states_equal(starts[0], _initial_model(synthetic, base.config, base.seed))
    assert _states_equal(starts[0], _initial_model(synthetic, base.config, base.seed + at.ADVERSARY_SEED_OFFSET))


def test_cache_hit_returns_the_same_adversary(synthetic, base):
    first = _adversary(synthetic, base, 0.01)
    assert not first.from_cache
    second = _adversary(synthetic, base, 0.01)
    assert second.from_cache and second.key == first.key
    assert second.agreement == first.agreement and second.test == first.test and second.history == first.history
    assert second.best_epoch == first.best_epoch and second.train_seconds == first.train_seconds
    assert _states_equal(first.model, second.model)
    assert _adversary(synthetic, base, 0.1).key != first.key
    assert _adversary(synthetic, base, 0.01, seed=1).key != first.key


def test_corrupt_cache_warns_and_retrains(synthetic, base):
    first = _adversary(synthetic, base, 0.01)
    path = cache.cache_dir() / "models" / f"{first.key}.pt"
    path.write_bytes(path.read_bytes()[:100])  # truncated
    with pytest.warns(cache.CacheCorruptionWarning):
        again = _adversary(synthetic, base, 0.01)
    assert not again.from_cache and again.agreement == first.agreement and _states_equal(first.model, again.model)
    assert _adversary(synthetic, base, 0.01).from_cache  # rebuilt


def test_cached_entry_that_does_not_fit_is_retrained(synthetic, base):
    first = _adversary(synthetic, base, 0.01)
    entry = cache.load("models", first.key)
    del entry["agreement"]  # a valid file from an older layout
    cache.save("models", first.key, entry)
    with pytest.warns(cache.CacheCorruptionWarning, match="does not fit"):
        again = _adversary(synthetic, base, 0.01)
    assert not again.from_cache and again.agreement == first.agreement


def test_base_must_match_the_dataset_and_have_learned_attention(synthetic, base):
    other = data.load_dataset("synthetic", n=60, min_df=5)  # a smaller vocabulary
    with pytest.raises(ValueError, match="vocabulary|trained on"):
        at.train_adversary(other, base, 0.1, progress=False)
    uniform = train.train_model(synthetic, encoder="average", attention="uniform", epochs=1, use_cache=False, progress=False)
    with pytest.raises(ValueError, match="learned"):
        at.train_adversary(synthetic, uniform, 0.1, progress=False)
    with pytest.raises(ValueError, match="TrainedModel"):
        at.train_adversary(synthetic, base.model, 0.1, progress=False)
    with pytest.raises(ValueError, match="seed"):
        at.train_adversary(synthetic, base, 0.1, seed=-1, progress=False)


def test_lambda_sweep(synthetic, base):
    lambdas = (0.0, 1e-2, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sweep = at.lambda_sweep(synthetic, base, lambdas, epochs=1, progress=False)
    frame = sweep.frame
    assert frame["lambda"].tolist() == list(lambdas)
    assert {"lambda", "mean_jsd", "mean_tvd", "f1", "accuracy", "roc_auc", "best_epoch"} <= set(frame.columns)
    assert set(sweep.models) == set(lambdas) and sweep[1e-2] is sweep.models[0.01]
    for lam, row in zip(lambdas, frame.itertuples()):
        adv = sweep[lam]
        assert adv.lam == lam and row.mean_jsd == adv.agreement["jsd"] and row.f1 == adv.test["f1"]
        assert row.best_epoch == adv.best_epoch == 1
    comparison = sweep.comparison(1.0)
    assert len(comparison.attention_jsd) == len(synthetic.test)
    assert comparison.attention_jsd.mean() == pytest.approx(frame["mean_jsd"].iloc[-1], abs=1e-12)
    assert len(sweep.comparison(0.0, "dev").output_tvd) == len(synthetic.dev)
    with pytest.raises(ValueError, match="no adversary"):
        sweep.comparison(0.5)
    again = at.lambda_sweep(synthetic, base, lambdas, epochs=1, progress=False)
    assert again.frame["from_cache"].all()
    assert again.frame.drop(columns="from_cache").equals(frame.drop(columns="from_cache"))


def test_lambda_sweep_trains_other_models_in_its_pool(synthetic, base):
    """also_train: the same adversaries, and each other model exactly as train_model gives it."""
    spec = dict(dataset=synthetic, encoder="average", attention="tanh", epochs=1, progress=False)
    sweep = at.lambda_sweep(synthetic, base, (1e-2,), epochs=1, progress=False,
                            also_train=[dict(spec, seed=3), dict(spec, seed=4)])
    alone = at.lambda_sweep(synthetic, base, (1e-2,), epochs=1, progress=False, use_cache=False)
    assert _states_equal(sweep[1e-2].model, alone[1e-2].model)
    assert [m.seed for m in sweep.also_trained] == [3, 4]
    again = train.train_model(seed=4, use_cache=False, **spec)
    assert _states_equal(sweep.also_trained[1].model, again.model)
    assert at.lambda_sweep(synthetic, base, (1e-2,), epochs=1, progress=False).also_trained == ()
    for bad in ({"dataset": synthetic}, ["not a spec"], [dict(seed=1)]):
        with pytest.raises(ValueError, match="also_train"):
            at.lambda_sweep(synthetic, base, (1e-2,), epochs=1, progress=False, also_train=bad)


def test_lambda_widgets_move_along_the_sweep(synthetic, base):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnlib import widgets

    sweep = at.lambda_sweep(synthetic, base, (1e-2, 1.0), epochs=1, progress=False)
    curve, heat = widgets.lambda_figures(sweep, [0, 3], 1.0, points={"uniform": (0.3, 0.05)})
    titles = [t.get_text() for ax in heat.axes for t in ax.texts]
    assert any("adversary, λ = 1" in t for t in titles) and sum("base: p(positive)" in t for t in titles) == 2
    assert "shown: λ = 1" in curve.axes[0].get_legend_handles_labels()[1]
    plt.close("all")
    box = widgets.lambda_explorer(sweep, [0], 1e-2)
    slider, label = box.children[1], box.children[2]  # [0]: the kernel note
    assert slider.value == 1e-2 and "adversary F1" in label.value
    slider.value = 1.0
    assert f"{sweep[1.0].test['f1']:.3f}" in label.value
    with pytest.raises(ValueError, match="no adversary for lambda = 0.5"):
        widgets.lambda_explorer(sweep, [0], 0.5)
    with pytest.raises(ValueError, match="at least one instance"):
        widgets.lambda_figures(sweep, [], 1.0)
    plt.close("all")


# ----------------------------------------------------------------------------- W&P's own lambdas
def test_wp_lambdas_and_their_range_in_our_scale():
    from attnlib import published

    theirs = at.wp_lambdas()
    assert theirs["Table 4, sst"] == pytest.approx(5.25e-4) and theirs["footnote 8 (Table 3)"] == pytest.approx(1e-3)
    assert at.wp_lambda_range() == pytest.approx((2e-4 * published.WP_LAMBDA_SCALE, 1e-3 * published.WP_LAMBDA_SCALE))
    assert at.wp_lambda_range(scale=1.0) == pytest.approx((2e-4, 1e-3))
    low, high = at.wp_lambda_range()
    assert any(low <= v <= high for v in at.DEFAULT_LAMBDAS)


def test_wp_pick_applies_table4s_rule_within_the_range_only():
    import pandas as pd

    frame = pd.DataFrame({"lambda": [4e-4, 1e-3, 2e-3, 1e-2, 1.0], "mean_jsd": [0.35, 0.38, 0.68, 0.69, 0.69],
                          "mean_tvd": [0.12, 0.11, 0.13, 0.139, 0.05]})
    assert at.wp_pick(frame) == pytest.approx(2e-3)  # lambda = 1 has the smallest TVD but lies outside the range
    assert at.wp_pick(frame, within=(1e-4, 1.0)) == pytest.approx(1.0)
    assert at.wp_pick(frame.set_index("lambda")) == pytest.approx(2e-3)
    assert at.wp_pick(frame[frame["lambda"] < 2e-3]) is None  # nothing in range above 0.4
    assert at.wp_pick(frame, within=(10.0, 20.0)) is None
    with pytest.raises(ValueError, match="low <= high"):
        at.wp_pick(frame, within=(1.0, 0.1))
    with pytest.raises(ValueError, match="mean_jsd"):
        at.wp_pick(frame.drop(columns="mean_jsd"))
