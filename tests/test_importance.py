"""attnlib.importance: gradient and leave-one-out importance, agreement with attention, rationales.

Cross-checked against captum (LayerGradientXActivation, FeatureAblation), against
one-forward-per-deletion loops, and against scipy / sklearn for the statistics.
"""

import dataclasses

import numpy as np
import pandas as pd
import pytest
import scipy.stats
import torch

from attnlib import data
from attnlib.data import EOS, PAD, SOS, UNK, collate
from attnlib.importance import (
    ImportanceResult,
    agreement,
    gradient_importance,
    importance,
    instance_agreement,
    leave_one_out,
)
from attnlib.faithfulness import rationale_recovery
from attnlib.models import AttentionClassifier, ModelConfig, TransformerClassifier, TransformerConfig, real_token_mask
from attnlib.train import predict

captum_attr = pytest.importorskip("captum.attr")

ENCODERS = ("lstm", "cnn", "average")


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Tiny tensors gain nothing from threads, and on a shared machine they cost a lot."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def synthetic(tiny_dataset):
    return tiny_dataset


@pytest.fixture(scope="module")
def trained(tiny_model):
    """average + tanh on the marker task (conftest's shared tiny model): trained enough to find the markers."""
    return tiny_model("average", "tanh", epochs=3)


def untrained(vocab_size, encoder="lstm", attention="tanh", n_classes=2, seed=0):
    torch.manual_seed(seed)
    # larger-than-default embeddings so that outputs move visibly when tokens change
    model = AttentionClassifier(vocab_size, ModelConfig(encoder=encoder, attention=attention, n_classes=n_classes))
    with torch.no_grad():
        model.embedding.weight.normal_(0, 1).mul_(2.0)
        model.embedding.weight[PAD].zero_()
        model.decoder.weight.mul_(5.0)
    return model.eval()


def mixed_batch(split, n=6):
    """A batch of instances of DIFFERENT lengths (so padding and chunking are exercised)."""
    lengths = split.lengths()
    order = np.argsort(lengths, kind="stable")
    pick = order[np.linspace(0, len(order) - 1, n).astype(int)]
    return split.batch(pick)


# ----------------------------------------------------------------------------- gradient


@pytest.mark.parametrize("encoder", ENCODERS)
def test_gradient_matches_captum_gradient_x_activation(synthetic, encoder):
    model = untrained(len(synthetic.vocab), encoder)
    batch = mixed_batch(synthetic.test)
    ours = gradient_importance(model, batch)

    lga = captum_attr.LayerGradientXActivation(
        lambda tokens: model(tokens, detach_attention=True).probs[:, 1], model.embedding
    )
    attr = lga.attribute(batch.tokens).sum(-1).abs().detach()  # <dy/de_t, e_t>, |.|
    mask = real_token_mask(batch.tokens)
    attr = attr.masked_fill(~mask, 0.0)
    attr = attr / attr.sum(-1, keepdim=True)
    torch.testing.assert_close(ours, attr, atol=1e-5, rtol=0)
    assert torch.all(ours[~mask] == 0)
    torch.testing.assert_close(ours.sum(-1), torch.ones(len(batch)), atol=1e-5, rtol=0)


def test_gradient_uses_predicted_class_probability_for_more_classes(synthetic):
    model = untrained(len(synthetic.vocab), "cnn", n_classes=3)
    batch = mixed_batch(synthetic.test, 4)
    pred = model(batch.tokens).probs.argmax(-1)
    lga = captum_attr.LayerGradientXActivation(lambda x: model(x, detach_attention=True).probs, model.embedding)
    attr = lga.attribute(batch.tokens, target=pred).sum(-1).abs().detach()
    attr = attr.masked_fill(~batch.mask, 0.0)
    torch.testing.assert_close(gradient_importance(model, batch), attr / attr.sum(-1, keepdim=True), atol=1e-5, rtol=0)


def test_detaching_attention_matters_only_when_attention_depends_on_the_input(synthetic):
    batch = mixed_batch(synthetic.test)
    tanh = untrained(len(synthetic.vocab), "lstm", "tanh")
    detached = gradient_importance(tanh, batch, detach_attention=True)
    attached = gradient_importance(tanh, batch, detach_attention=False)
    assert (detached - attached).abs().max() > 1e-3
    torch.testing.assert_close(attached.sum(-1), torch.ones(len(batch)), atol=1e-5, rtol=0)

    uniform = untrained(len(synthetic.vocab), "lstm", "uniform")
    torch.testing.assert_close(
        gradient_importance(uniform, batch, detach_attention=True),
        gradient_importance(uniform, batch, detach_attention=False),
        atol=1e-7,
        rtol=0,
    )


def test_model_mode_and_gradients_are_left_alone(synthetic):
    model = untrained(len(synthetic.vocab), "lstm").train()
    batch = mixed_batch(synthetic.test, 3)
    gradient_importance(model, batch)
    leave_one_out(model, batch)
    assert model.training
    assert all(p.grad is None for p in model.parameters())
    model.eval()
    gradient_importance(model, batch.tokens)  # a plain LongTensor works too
    assert not model.training


# ----------------------------------------------------------------------------- leave-one-out


def loo_loop(model, batch, replace_with=None):
    """Reference: one forward pass per deletion (or replacement), TVD to the full output."""
    out = torch.zeros(batch.tokens.shape)
    with torch.no_grad():
        for b in range(len(batch)):
            x = batch.tokens[b, : int(batch.lengths[b])]
            full = model(x[None]).probs[0]
            for t in range(1, len(x) - 1):
                if replace_with is None:
                    y = torch.cat([x[:t], x[t + 1 :]])
                else:
                    y = x.clone()
                    y[t] = replace_with
                p = model(y[None]).probs[0]
                out[b, t] = 0.5 * (full - p).abs().sum()
    return out


@pytest.mark.parametrize("encoder", ENCODERS)
def test_loo_batched_equals_one_forward_per_deletion(synthetic, encoder):
    model = untrained(len(synthetic.vocab), encoder)
    batch = mixed_batch(synthetic.test)
    ref = loo_loop(model, batch)
    assert ref.max() > 1e-3  # the outputs really move
    torch.testing.assert_close(leave_one_out(model, batch), ref, atol=1e-5, rtol=0)
    # tiny chunks: every chunk boundary and length group is crossed
    torch.testing.assert_close(leave_one_out(model, batch, max_tokens=50), ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("encoder", ("lstm", "cnn"))
def test_loo_fast_path_on_long_sentences_equals_one_forward_per_deletion(encoder):
    """The state-reusing paths (BiLSTM, CNN) on sentences far longer than the CNN's window (r = 3)."""
    model = untrained(60, encoder)
    assert model.deletion_tvd is not None
    rng = np.random.default_rng(1)
    words = [rng.integers(4, 60, size=n) for n in (2, 3, 7, 13, 29, 40)]
    batch = collate([np.concatenate([[SOS], w, [EOS]]) for w in words], np.zeros(len(words)))
    ref = loo_loop(model, batch)
    for max_tokens in (10**6, 300):
        torch.testing.assert_close(leave_one_out(model, batch, max_tokens=max_tokens), ref, atol=1e-5, rtol=0)


def test_loo_with_three_classes_is_the_tvd_of_the_distribution(synthetic):
    model = untrained(len(synthetic.vocab), "lstm", "dot", n_classes=3)
    batch = mixed_batch(synthetic.test, 3)
    torch.testing.assert_close(leave_one_out(model, batch), loo_loop(model, batch), atol=1e-5, rtol=0)


@pytest.mark.parametrize("encoder", ("lstm", "average"))
def test_loo_matches_captum_feature_ablation(synthetic, encoder):
    model = untrained(len(synthetic.vocab), encoder)
    batch = mixed_batch(synthetic.test, 4)
    tokens, real = batch.tokens, batch.mask

    def forward_dropping(keep):
        rows = []
        for b in range(tokens.shape[0]):  # rebuild each row without its dropped real tokens
            kept = (keep[b] > 0.5) | ~real[b]
            row = tokens[b][kept & (tokens[b] != PAD)]
            rows.append(row.cpu().numpy())
        return model(collate(rows, np.zeros(len(rows)))).probs[:, 1]

    T = tokens.shape[1]
    feature_mask = torch.arange(T).expand(len(batch), T)  # one feature per position
    with torch.no_grad():
        attr = captum_attr.FeatureAblation(forward_dropping).attribute(
            torch.ones(tokens.shape), baselines=0.0, feature_mask=feature_mask
        )
    ours = leave_one_out(model, batch)
    torch.testing.assert_close(ours, attr.abs().masked_fill(~real, 0.0), atol=1e-5, rtol=0)


@pytest.mark.parametrize("encoder", ENCODERS)
def test_loo_replace_by_unk_equals_replacing_by_hand(synthetic, encoder):
    model = untrained(len(synthetic.vocab), encoder)
    batch = mixed_batch(synthetic.test, 4)
    torch.testing.assert_close(
        leave_one_out(model, batch, mode="replace"), loo_loop(model, batch, replace_with=UNK), atol=1e-5, rtol=0
    )
    word = 17
    torch.testing.assert_close(
        leave_one_out(model, batch, mode="replace", replacement=word),
        loo_loop(model, batch, replace_with=word),
        atol=1e-5,
        rtol=0,
    )


def test_loo_replace_by_pad_hides_the_token(synthetic):
    batch = mixed_batch(synthetic.test, 4)
    # no context in the average encoder: hiding a token == deleting it
    avg = untrained(len(synthetic.vocab), "average")
    torch.testing.assert_close(
        leave_one_out(avg, batch, mode="replace", replacement=PAD), leave_one_out(avg, batch), atol=1e-6, rtol=0
    )
    # the LSTM still steps over the (zero) embedding: a different perturbation than deletion
    lstm = untrained(len(synthetic.vocab), "lstm")
    hidden = leave_one_out(lstm, batch, mode="replace", replacement=PAD)
    assert torch.all(hidden[~batch.mask] == 0) and hidden.max() > 0
    assert (hidden - leave_one_out(lstm, batch)).abs().max() > 1e-4


def test_loo_single_token_instances(synthetic):
    model = untrained(len(synthetic.vocab), "lstm")
    ids = [np.array([SOS, 10, EOS]), np.array([SOS, 10, 11, 12, EOS])]
    batch = collate(ids, [0, 1])
    with pytest.raises(ValueError, match="fewer than 2 real tokens"):
        leave_one_out(model, batch)
    with pytest.raises(ValueError, match="fewer than 2 real tokens"):
        leave_one_out(model, batch, mode="replace", replacement=PAD)
    scores = leave_one_out(model, batch, mode="replace")  # replacing by UNK is defined
    torch.testing.assert_close(scores, loo_loop(model, batch, replace_with=UNK), atol=1e-5, rtol=0)


# ----------------------------------------------------------------------------- whole split


def test_importance_over_a_split_is_aligned_and_matches_the_single_batch_functions(synthetic, trained):
    split = synthetic.test
    res = importance(trained, split, chunk_size=16)
    assert len(res) == len(split) and list(res.indices) == list(range(len(split)))
    pred = predict(trained, split)
    np.testing.assert_allclose(res.probs, pred.probs, atol=1e-6)
    assert (res.predicted == pred.probs.argmax(-1)).all()
    assert (res.labels == split.labels).all()
    for i in (0, 7, 55):
        assert len(res.attention[i]) == len(res.gradient[i]) == len(res.loo[i]) == len(split.tokens[i])
        np.testing.assert_allclose(res.attention[i], pred.attention[i], atol=1e-6)
        batch = split.batch([i])
        np.testing.assert_allclose(res.gradient[i], gradient_importance(trained, batch)[0, 1:-1].cpu().numpy(), atol=1e-6)
        np.testing.assert_allclose(res.loo[i], leave_one_out(trained, batch)[0, 1:-1].cpu().numpy(), atol=1e-6)
        assert res.gradient[i].sum() == pytest.approx(1.0, abs=1e-5)

    replaced = importance(trained, split, max_instances=5, loo_mode="replace", detach_attention=False)
    batch = split.batch(replaced.indices)
    loo = leave_one_out(trained, batch, mode="replace")
    grad = gradient_importance(trained, batch, detach_attention=False)
    for k in range(5):
        np.testing.assert_allclose(replaced.loo[k], loo[k][batch.mask[k]].cpu().numpy(), atol=1e-6)
        np.testing.assert_allclose(replaced.gradient[k], grad[k][batch.mask[k]].cpu().numpy(), atol=1e-6)


def test_importance_subset_is_seeded_and_stratified(synthetic, trained):
    split = synthetic.test
    a = importance(trained, split, max_instances=20, seed=3)
    b = importance(trained, split, max_instances=20, seed=3)
    c = importance(trained, split, max_instances=20, seed=4)
    assert len(a) == 20 and (np.diff(a.indices) > 0).all()
    assert (a.indices == b.indices).all() and not (a.indices == c.indices).all()
    assert np.bincount(a.labels).tolist() == [10, 10]  # the test split is balanced
    assert (a.labels == split.labels[a.indices]).all()


def test_importance_leaves_out_instances_with_one_token(synthetic, trained):
    split = synthetic.test.subset(range(6))
    split.tokens[2] = split.tokens[2][:1]
    split.ids[2] = np.array([SOS, split.ids[2][1], EOS])
    split.rationales[2] = split.rationales[2][:1]
    with pytest.warns(UserWarning, match="1 instance"):
        res = importance(trained, split)
    assert list(res.indices) == [0, 1, 3, 4, 5]


# ----------------------------------------------------------------------------- agreement


def test_agreement_matches_scipy_per_instance_and_groups_by_predicted_class(synthetic, trained):
    res = importance(trained, synthetic.test)
    per = instance_agreement(res)
    assert list(per.index) == list(res.indices)
    pairs = {"g": ("attention", "gradient"), "loo": ("attention", "loo"), "g_vs_loo": ("gradient", "loo")}
    for k, (name, (a, b)) in enumerate(pairs.items()):
        for i in range(0, len(res), 9):
            ref = scipy.stats.kendalltau(getattr(res, a)[i], getattr(res, b)[i])
            assert per[f"tau_{name}"].iloc[i] == pytest.approx(ref.statistic, abs=1e-9)
            assert per[f"p_{name}"].iloc[i] == pytest.approx(ref.pvalue, rel=1e-6, abs=1e-12)

    table = agreement(res)
    assert list(table.index) == [0, 1] and table.index.name == "predicted class"
    assert list(table.columns) == [
        "n",
        *[f"{p} {s}" for p in ("tau_g", "tau_loo", "tau_g_vs_loo") for s in ("mean", "sd", "sig. frac.")],
    ]
    for c in (0, 1):
        group = per[res.predicted == c]
        assert table.loc[c, "n"] == len(group) == (res.predicted == c).sum()
        assert table.loc[c, "tau_g mean"] == pytest.approx(group["tau_g"].mean())
        assert table.loc[c, "tau_loo sd"] == pytest.approx(group["tau_loo"].std(ddof=0))
        assert table.loc[c, "tau_g_vs_loo sig. frac."] == pytest.approx((group["p_g_vs_loo"] <= 0.05).mean())
    # on this easy task the measures agree with attention, significantly, for most instances
    assert (table["tau_g mean"] > 0.3).all() and (table["tau_g sig. frac."] > 0.5).all()


def test_agreement_sig_frac_counts_undefined_tau_as_not_significant():
    rng = np.random.default_rng(0)
    att = [np.full(5, 0.2), rng.random(6), np.arange(8.0)]  # row 0: constant attention
    grad = [rng.random(5), rng.random(6), np.arange(8.0)]
    res = ImportanceResult(
        attention=att, gradient=grad, loo=[g + 1 for g in grad],
        probs=np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7]]), predicted=np.array([0, 0, 1]),
        labels=np.array([0, 1, 1]), indices=np.array([0, 1, 2]), lengths=np.array([5, 6, 8]),
    )
    table = agreement(res)
    assert np.isnan(instance_agreement(res)["tau_g"].iloc[0])
    tau1 = scipy.stats.kendalltau(att[1], grad[1])
    assert table.loc[0, "tau_g mean"] == pytest.approx(tau1.statistic)  # mean over defined taus only
    assert table.loc[0, "tau_g sig. frac."] == pytest.approx(float(tau1.pvalue <= 0.05) / 2)
    assert table.loc[1, "tau_g mean"] == pytest.approx(1.0) and table.loc[1, "tau_g sig. frac."] == 1.0
    assert table.loc[1, "tau_g_vs_loo mean"] == pytest.approx(1.0)


# ----------------------------------------------------------------------------- rationales


def test_rationale_recovery_beats_a_random_ranking(synthetic, trained):
    res = importance(trained, synthetic.test)
    table = rationale_recovery(res, synthetic.test)
    assert list(table.index) == ["attention", "gradient", "loo", "random"]
    random = table.loc["random"]
    assert random["AUC"] == 0.5 and random["precision@k"] < 0.25
    best = table.drop(index="random").max()
    assert best["precision@k"] > 0.8 > 2 * random["precision@k"]
    assert best["average precision"] > random["average precision"] + 0.4
    assert best["AUC"] > 0.9
    # the split's rationale list works as well as the Split, and k can be fixed
    pd.testing.assert_frame_equal(table, rationale_recovery(res, synthetic.test.rationales))
    at1 = rationale_recovery(res, synthetic.test, k=1)
    assert at1.loc["random", "precision@k"] == pytest.approx(random["precision@k"])


def test_rationale_scores_match_sklearn_and_the_random_expectation():
    from sklearn.metrics import average_precision_score, roc_auc_score

    rng = np.random.default_rng(1)
    lengths = rng.integers(4, 12, size=40)
    truth = [rng.random(n) < 0.3 for n in lengths]
    for t in truth:
        t[rng.integers(len(t))] = True
    scores = [np.round(rng.random(n), 1) for n in lengths]  # rounding makes ties
    res = ImportanceResult(
        attention=scores, gradient=[-s for s in scores], loo=[t.astype(float) for t in truth],
        probs=np.full((40, 2), 0.5), predicted=np.zeros(40, int), labels=np.zeros(40, int), indices=np.arange(40),
        lengths=lengths,
    )
    table = rationale_recovery(res, truth)
    has_neg = [not t.all() for t in truth]
    ap = np.mean([average_precision_score(t, s) for t, s in zip(truth, scores)])
    auc = np.mean([roc_auc_score(t, s) for t, s, ok in zip(truth, scores, has_neg) if ok])
    assert table.loc["attention", "average precision"] == pytest.approx(ap)
    assert table.loc["attention", "AUC"] == pytest.approx(auc)
    assert table.loc["loo", "precision@k"] == 1.0 and table.loc["loo", "AUC"] == 1.0
    # precision@k with k = number of true tokens, ties broken at random: check by simulation
    sims = []
    for t, s in zip(truth, scores):
        k = t.sum()
        hits = [t[np.lexsort((rng.random(len(s)), -s))[:k]].mean() for _ in range(400)]
        sims.append(np.mean(hits))
    assert table.loc["attention", "precision@k"] == pytest.approx(np.mean(sims), abs=0.01)
    # E[AP] of a random ranking: the closed form vs simulation (AP of a tie-free ranking)
    def ap_of_ranking(ranked_truth):  # (sims, n) truth in rank order
        hits = np.cumsum(ranked_truth, axis=1)
        return (hits / np.arange(1, ranked_truth.shape[1] + 1) * ranked_truth).sum(1) / ranked_truth.sum(1)

    sim_ap = np.mean([ap_of_ranking(t[rng.random((2000, len(t))).argsort(1)]).mean() for t in truth])
    assert table.loc["random", "average precision"] == pytest.approx(sim_ap, abs=0.01)


# ----------------------------------------------------------------------------- validation


def test_validation_errors(synthetic, trained):
    split, batch = synthetic.test, synthetic.test.batch([0, 1])
    with pytest.raises(ValueError, match="AttentionClassifier"):
        gradient_importance("model", batch)
    with pytest.raises(ValueError, match="Batch .* or a LongTensor"):
        gradient_importance(trained, [[2, 5, 3]])
    with pytest.raises(ValueError, match="LongTensor of shape"):
        leave_one_out(trained, batch.tokens.float())
    with pytest.raises(ValueError, match="vocabulary"):
        leave_one_out(trained, batch.tokens + 10_000)
    with pytest.raises(ValueError, match="followed only by padding"):
        leave_one_out(trained, batch.tokens[:, 1:])
    with pytest.raises(ValueError, match="at least one real token"):
        gradient_importance(trained, torch.tensor([[SOS, EOS, PAD]]))
    with pytest.raises(ValueError, match="detach_attention"):
        gradient_importance(trained, batch, detach_attention="yes")
    with pytest.raises(ValueError, match="unknown leave-one-out mode"):
        leave_one_out(trained, batch, mode="erase")
    with pytest.raises(ValueError, match="replacement"):
        leave_one_out(trained, batch, mode="replace", replacement=SOS)
    with pytest.raises(ValueError, match="max_tokens"):
        leave_one_out(trained, batch, max_tokens=0)
    with pytest.raises(ValueError, match="Split or Batch"):
        importance(trained, [batch])
    with pytest.raises(ValueError, match="empty"):
        importance(trained, split.subset([]))
    with pytest.raises(ValueError, match="max_instances"):
        importance(trained, split, max_instances=0)
    with pytest.raises(ValueError, match="chunk_size"):
        importance(trained, split, chunk_size=0)
    with pytest.raises(ValueError, match="seed"):
        importance(trained, split, seed=-1)
    with pytest.raises(ValueError, match="unknown leave-one-out mode"):
        importance(trained, split, loo_mode="erase")
    res = importance(trained, split, max_instances=4)
    with pytest.raises(ValueError, match="ImportanceResult"):
        agreement(res.attention)
    with pytest.raises(ValueError, match="no rationales"):
        rationale_recovery(res, data.load_dataset("rt-polarity", max_train=10, max_eval=10).test)
    with pytest.raises(ValueError, match="entries"):
        rationale_recovery(res, split.rationales[:2])
    with pytest.raises(ValueError, match="one entry per token"):
        rationale_recovery(res, [r[:-1] for r in split.rationales])
    with pytest.raises(ValueError, match="k must be"):
        rationale_recovery(res, split, k=0)
    with pytest.raises(ValueError, match="unknown measure"):
        res.padded("saliency")


# ----------------------------------------------------------------------------- the book's transformer

TINY_TRANSFORMER = TransformerConfig(layers=2, heads=2, head_dim=4, embed_dim=6, dropout=0.0)


def tiny_transformer(vocab_size=30, n_classes=2, seed=0, dtype=torch.float32):
    """An untrained tiny transformer whose output moves visibly when a token changes."""
    torch.manual_seed(seed)
    model = TransformerClassifier(vocab_size, dataclasses.replace(TINY_TRANSFORMER, n_classes=n_classes))
    with torch.no_grad():
        model.embedding.weight.normal_(0, 1).mul_(2.0)
        model.embedding.weight[PAD].zero_()
        model.decoder.weight.mul_(20.0)
    return model.to(dtype).eval()


def random_batch(lengths=(7, 3, 10, 5), vocab_size=30, seed=0):
    """<SOS> w_1 .. w_n <EOS> with n = lengths (real tokens), padded: words may repeat."""
    rng = np.random.default_rng(seed)
    ids = [np.concatenate([[SOS], rng.integers(4, vocab_size, n), [EOS]]) for n in lengths]
    return collate(ids, np.arange(len(lengths)) % 2)


def finite_difference_gradient(model, batch, h=1e-6):
    """Oracle (float64): d y-hat / d s at s = 0 with e_t -> (1 + s) e_t at ONE position, each sentence alone.

    That directional derivative is <d y-hat / d e_t, e_t>; central differences, one forward pass per
    (sentence, position, sign), the embedding scaled by a forward hook.
    """
    out = torch.zeros(batch.tokens.shape, dtype=torch.float64)
    for b in range(len(batch)):
        x = batch.tokens[b, : int(batch.lengths[b])][None]
        with torch.no_grad():
            probs = model(x).probs[0]
        target = 1 if model.n_classes == 2 else int(probs.argmax())
        for t in range(1, x.shape[1] - 1):
            ys = []
            for sign in (1.0, -1.0):
                def scale(module, inputs, output, t=t, sign=sign):
                    factor = torch.ones_like(output)
                    factor[:, t] += sign * h
                    return output * factor

                handle = model.embedding.register_forward_hook(scale)
                with torch.no_grad():
                    ys.append(model(x).probs[0, target])
                handle.remove()
            out[b, t] = abs(float(ys[0] - ys[1])) / (2 * h)
    return out / out.sum(-1, keepdim=True)


def table_gradient(model, batch):
    """Oracle by autograd on an embedding table: every real position gets its own row, a copy of E[x_t].

    The gradient of y-hat with respect to that row is d y-hat / d e_t of that position alone (a
    repeated word would otherwise sum its positions). One sentence at a time, through a copy of
    the model with the widened table.
    """
    out = torch.zeros(batch.tokens.shape)
    V = model.vocab_size
    for b in range(len(batch)):
        x = batch.tokens[b, : int(batch.lengths[b])]
        n = len(x)
        wide = TransformerClassifier(V + n, model.config).eval()
        state = {k: v for k, v in model.state_dict().items() if k != "embedding.weight"}
        wide.load_state_dict(state, strict=False)
        table = torch.cat([model.embedding.weight.detach(), model.embedding.weight.detach()[x]])
        with torch.no_grad():
            wide.embedding.weight.copy_(table)
        own = x.clone()
        own[1:-1] = V + torch.arange(1, n - 1)
        probs = wide(own[None]).probs[0]
        y = probs[1] if model.n_classes == 2 else probs[probs.detach().argmax()]
        (grad,) = torch.autograd.grad(y, wide.embedding.weight)
        g = (grad[V + 1 : V + n - 1] * table[V + 1 : V + n - 1]).sum(-1).abs()
        out[b, 1 : n - 1] = g / g.sum()
    return out


@pytest.mark.parametrize("n_classes", (2, 3))
def test_transformer_gradient_matches_finite_differences_and_a_table_gradient(n_classes):
    batch = random_batch()
    model = tiny_transformer(n_classes=n_classes, dtype=torch.float64)
    ours = gradient_importance(model, batch)  # padded batch; the oracles run each sentence alone
    assert ours.dtype == torch.float64
    mask = real_token_mask(batch.tokens)
    assert torch.all(ours[~mask] == 0)
    torch.testing.assert_close(ours.sum(-1), torch.ones(len(batch), dtype=torch.float64), atol=1e-9, rtol=0)
    torch.testing.assert_close(ours, finite_difference_gradient(model, batch), atol=1e-6, rtol=0)

    model32 = tiny_transformer(n_classes=n_classes)
    ours32 = gradient_importance(model32, batch)
    torch.testing.assert_close(ours32, table_gradient(model32, batch), atol=1e-5, rtol=0)
    assert (ours32[mask] - 1 / mask.sum(-1, keepdim=True).expand_as(mask)[mask]).abs().max() > 1e-2  # not uniform


def test_transformer_gradient_rejects_detaching_and_leaves_the_model_alone():
    model, batch = tiny_transformer().train(), random_batch()
    default = gradient_importance(model, batch)
    torch.testing.assert_close(gradient_importance(model, batch, detach_attention=False), default, atol=0, rtol=0)
    with pytest.raises(ValueError, match="no single one to detach"):
        gradient_importance(model, batch, detach_attention=True)
    with pytest.raises(ValueError, match="no single one to detach"):
        importance(model, batch, detach_attention=True)
    with pytest.raises(ValueError, match="detach_attention must be True or False"):
        gradient_importance(model, batch, detach_attention="no")
    leave_one_out(model, batch)
    assert model.training and all(p.grad is None for p in model.parameters())
    assert not model.embedding._forward_hooks  # the hook that makes e_t a leaf is gone


@pytest.mark.parametrize("n_classes", (2, 3))
def test_transformer_loo_equals_one_forward_per_deletion(n_classes):
    model, batch = tiny_transformer(n_classes=n_classes), random_batch()
    ref = loo_loop(model, batch)
    assert ref.max() > 1e-2  # the outputs really move
    torch.testing.assert_close(leave_one_out(model, batch), ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(leave_one_out(model, batch, max_tokens=20), ref, atol=1e-5, rtol=0)  # many chunks


def test_loo_chunks_fit_the_element_budget_of_the_model(monkeypatch):
    """A pass of leave-one-out holds at most runs.PASS_ELEMENTS elements by the model's token_cost (a
    transformer's token costs far more than a BiLSTM's); the scores do not depend on the chunks."""
    from attnlib import runs

    model, batch = tiny_transformer(), random_batch()
    ref = leave_one_out(model, batch)
    widths = []
    model.register_forward_pre_hook(lambda m, args: widths.append(tuple(args[0].shape)))
    budget = 3 * model.token_cost(int(batch.tokens.shape[1]))
    monkeypatch.setattr(runs, "PASS_ELEMENTS", budget)
    torch.testing.assert_close(leave_one_out(model, batch), ref, atol=1e-6, rtol=0)
    passes = [(rows, width) for rows, width in widths[1:]]  # the first call is y-hat(x) itself
    assert len(passes) > 1 and all(rows * model.token_cost(width) <= budget for rows, width in passes)
    assert sum(rows for rows, _ in passes) == int((batch.tokens[:, 1:] > 3).sum())  # one row per word


def test_loo_chunks_of_the_bilstm_stay_bounded_by_tokens():
    """For J&W's BiLSTM (H = 256) the element budget is exactly 65,536 tokens: its chunks are as before."""
    from attnlib import runs
    from attnlib.experiments import importance as module

    model = AttentionClassifier(50, ModelConfig(encoder="lstm", attention="tanh"))
    for width in (3, 17, 64, 1000):
        assert runs.rows_per_pass(model, width, module.MAX_TOKENS) == module.MAX_TOKENS // width


@pytest.mark.parametrize("replacement", (UNK, PAD, 17))
def test_transformer_loo_replace_equals_replacing_by_hand(replacement):
    model, batch = tiny_transformer(), random_batch()
    torch.testing.assert_close(
        leave_one_out(model, batch, mode="replace", replacement=replacement),
        loo_loop(model, batch, replace_with=replacement),
        atol=1e-5,
        rtol=0,
    )


def test_importance_runs_on_the_transformer(synthetic):
    split = synthetic.test.subset(range(12))
    model = tiny_transformer(len(synthetic.vocab))
    res = importance(model, split, chunk_size=5)
    assert len(res) == 12 and res.settings["detach_attention"] is False
    assert res.settings["model"] == model.config.name
    batch = split.batch(np.arange(12))
    with torch.no_grad():
        out = model(batch)
    np.testing.assert_allclose(res.probs, out.probs.double().cpu().numpy(), atol=1e-6)
    grad, loo = gradient_importance(model, batch), leave_one_out(model, batch)
    for i in range(12):
        real = batch.mask[i]
        cls_row = out.attention[i][real].double().cpu().numpy()  # the last layer's [CLS] row, heads averaged
        np.testing.assert_allclose(res.attention[i], cls_row / cls_row.sum(), atol=1e-6)
        assert res.attention[i].sum() == pytest.approx(1.0, abs=1e-6)
        np.testing.assert_allclose(res.gradient[i], grad[i][real].cpu().numpy(), atol=1e-6)
        np.testing.assert_allclose(res.loo[i], loo[i][real].cpu().numpy(), atol=1e-6)
    table = agreement(res)
    assert list(table.index) == [0, 1] and table["n"].sum() == 12
    replaced = importance(model, split, max_instances=6, loo_mode="replace", detach_attention=False)
    assert len(replaced) == 6 and replaced.settings["loo_mode"] == "replace"
