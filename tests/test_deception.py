"""Tests for Pruthi et al.'s deception task: load_deception, append_sentence, Split.remove_tokens, attnlib.deception."""
from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnlib.data import (
    DECEPTION_SEPARATOR,
    EOS,
    SOS,
    SPECIALS,
    Split,
    Vocabulary,
    append_sentence,
    load_dataset,
    load_deception,
    tokenize,
)
from attnlib.deception import (
    DeceiverModel,
    attention_mass,
    deception_table,
    impermissible_penalty,
    restricted_config,
    train_deceiver,
)
from attnlib.models import Encoded, ModelConfig, Output, TransformerConfig
from attnlib.train import TRANSFORMER_TRAIN, TrainConfig, train_model

SEP = DECEPTION_SEPARATOR
TINY = ModelConfig(encoder="lstm", attention="tanh", hidden=16)
FAST = TrainConfig(epochs=1, lr=1e-2)  # one epoch of 10 batches: enough for the penalty to show


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def full():
    return load_deception()


@pytest.fixture(scope="module")
def small():
    return load_deception(max_train=300, max_eval=100)


def _sep_index(tokens) -> int:
    return tokens.index(SEP)


# ---------------------------------------------------------------------------------------------- the data
def test_separator_is_no_special_and_never_a_token_of_any_text():
    assert SEP not in SPECIALS
    assert tokenize(f"good {SEP} bad") == ["good", "|", "|", "|", "bad"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(list("ab|!?.-<>' ") + [SEP, "<br />"]), min_size=1, max_size=30).map("".join))
def test_tokenize_never_produces_the_separator(text):
    try:
        toks = tokenize(text)
    except ValueError:
        return  # blank or tags only
    assert SEP not in toks


def test_append_sentence():
    toks, mask = append_sentence(["a", "good", "film"], ["the", "river"])
    assert toks == ["a", "good", "film", SEP, "the", "river"]
    assert mask.dtype == bool and mask.tolist() == [True, True, True, False, False, False]
    toks, mask = append_sentence(("x",), ["y"], separator="<s>")
    assert toks == ["x", "<s>", "y"] and mask.tolist() == [True, False, False]


@pytest.mark.parametrize(
    "first, second, sep, match",
    [
        ([], ["a"], SEP, "empty"),
        (["a"], [], SEP, "empty"),
        ("a b", ["a"], SEP, "list of token"),
        (["a"], "b", SEP, "list of token"),
        (["a", 3], ["b"], SEP, "str tokens"),
        (["a", SEP], ["b"], SEP, "occurs inside"),
        (["a"], ["b"], "", "non-empty str"),
    ],
)
def test_append_sentence_errors(first, second, sep, match):
    with pytest.raises(ValueError, match=match):
        append_sentence(first, second, sep)


def test_instances_rationales_and_separator(full):
    assert full.name == "rt-polarity + IMDB sentence" and full.has_rationales
    assert "SST" in full.substitute_note and "Wikipedia" in full.substitute_note
    for split in full.splits.values():
        for text, toks, ids, rat in zip(split.texts, split.tokens, split.ids, split.rationales):
            assert toks.count(SEP) == 1 and text.count(f" {SEP} ") == 1
            k = _sep_index(toks)
            assert rat.dtype == bool and len(rat) == len(toks) == len(ids) - 2
            assert rat.tolist() == [i < k for i in range(len(toks))]  # True exactly on the rt sentence
            assert k >= 5 and 5 <= len(toks) - k - 1 <= 30  # rt's length filter; the distractor's length
    b = full.test.batch(range(8))
    assert b.rationale.shape == b.tokens.shape and not (b.rationale & ~b.mask).any()
    assert (b.tokens == full.vocab.stoi[SEP]).sum(-1).tolist() == [1] * 8


def test_sizes_balance_and_stats(full):
    assert (len(full.train), len(full.dev), len(full.test)) == (6731, 842, 842)  # as load_dataset("rt-polarity")
    for split in full.splits.values():
        assert abs(split.labels.mean() - 0.5) < 0.01  # stratified: balance kept
    s = full.stats
    assert s["n_distractor_reuses"] == 0 and s["n_distractor_pool"] > 100_000
    assert s["n_too_short"] > 0 and s["vocab_size"] == len(full.vocab)
    distractors = {tuple(t[_sep_index(t) + 1:]) for sp in full.splits.values() for t in sp.tokens}
    assert len(distractors) == sum(map(len, full.splits.values()))  # no two instances share one


def test_the_rt_part_is_load_datasets_split(small):
    rt = load_dataset("rt-polarity", max_train=300, max_eval=100)
    for name in ("train", "dev", "test"):
        ours, theirs = small[name], rt[name]
        assert [t[: _sep_index(t)] for t in ours.tokens] == theirs.tokens
        assert (ours.labels == theirs.labels).all()
        assert all(text.startswith(t) for text, t in zip(ours.texts, theirs.texts))


def test_seeded_reproducible_and_seeds_differ(small):
    again = load_deception(max_train=300, max_eval=100)
    assert again.vocab == small.vocab
    for a, b in zip(small.splits.values(), again.splits.values()):
        assert a.tokens == b.tokens and a.texts == b.texts and (a.labels == b.labels).all()
        assert all((x == y).all() for x, y in zip(a.ids, b.ids))
    other = load_deception(seed=1, max_train=300, max_eval=100)
    assert other.train.tokens != small.train.tokens


def test_a_sentence_keeps_its_distractor_whatever_the_subsample(full, small):
    pair = {tuple(t[: _sep_index(t)]): t[_sep_index(t):] for sp in full.splits.values() for t in sp.tokens}
    for t in small.train.tokens:
        assert pair[tuple(t[: _sep_index(t)])] == t[_sep_index(t):]


def test_distractor_tokens_range():
    ds = load_deception(max_train=50, max_eval=20, distractor_tokens=(8, 9))
    assert all(8 <= len(t) - _sep_index(t) - 1 <= 9 for t in ds.train.tokens)
    assert ds.config["distractor_tokens"] == (8, 9)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"base": "imdb"}, "rt-polarity"),
        ({"base": "nope"}, "unknown data set"),
        ({"distractor_tokens": (10, 5)}, "min <= max"),
        ({"distractor_tokens": (0, 5)}, "distractor_tokens"),
        ({"distractor_tokens": 5}, "pair"),
        ({"distractor_tokens": (5000, 6000)}, "no IMDB sentence"),
        ({"seed": -1}, "seed"),
        ({"max_train": 0}, "max_train"),
    ],
)
def test_load_deception_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        load_deception(**kwargs)


# ---------------------------------------------------------------------------------------------- remove_tokens
_instances = st.lists(
    st.lists(st.tuples(st.sampled_from(["a", "b", "c", "dd"]), st.booleans(), st.booleans(),
                       st.floats(0.1, 5.0)), min_size=1, max_size=8).filter(lambda xs: not all(x[1] for x in xs)),
    min_size=1, max_size=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_instances)
def test_remove_tokens_properties(instances):
    tokens = [[x[0] for x in inst] for inst in instances]
    masks = [np.array([x[1] for x in inst]) for inst in instances]
    rationales = [np.array([x[2] for x in inst]) for inst in instances]
    weights = [np.array([x[3] for x in inst]) for inst in instances]
    attention = [(w / w.sum()).astype(np.float32) for w in weights]
    vocab = Vocabulary.from_documents(tokens[:-1] or tokens)  # some words unknown
    split = Split("s", [" ".join(t) for t in tokens], tokens, vocab.encode_many(tokens), np.arange(len(tokens)) % 2,
                  rationales, attention)
    out = split.remove_tokens(masks)
    assert (out.lengths() == split.lengths() - np.array([m.sum() for m in masks])).all()
    assert out.texts == split.texts and (out.labels == split.labels).all()
    for i, m in enumerate(masks):
        assert out.tokens[i] == [t for t, drop in zip(tokens[i], m) if not drop]
        assert out.ids[i][0] == SOS and out.ids[i][-1] == EOS and len(out.ids[i]) == len(out.tokens[i]) + 2
        assert out.ids[i][1:-1].tolist() == split.ids[i][1:-1][~m].tolist()
        assert out.rationales[i].tolist() == rationales[i][~m].tolist()
        kept = weights[i][~m]
        np.testing.assert_allclose(out.attention[i], kept / kept.sum(), rtol=1e-5)
    out.batch(range(len(out)))  # still collates


def test_remove_tokens_on_the_deception_task(small):
    out = small.test.remove_tokens(small.test.rationales)
    for before, after, rat in zip(small.test.tokens, out.tokens, out.rationales):
        assert after == before[_sep_index(before):] and after[0] == SEP and not rat.any()


def test_remove_tokens_errors(small):
    split = small.dev
    with pytest.raises(ValueError, match="one mask per instance"):
        split.remove_tokens(split.rationales[:-1])
    with pytest.raises(ValueError, match="mask of instance 0 has"):
        split.remove_tokens([r[:-1] for r in split.rationales])
    with pytest.raises(ValueError, match=f"leave 2 of the {len(split)} instances"):
        split.remove_tokens([np.ones(len(r), bool) if i < 2 else r for i, r in enumerate(split.rationales)])
    with pytest.raises(ValueError, match="boolean"):
        split.remove_tokens([r * 2 for r in split.rationales])
    ints = split.remove_tokens([r.astype(int) for r in split.rationales])
    assert ints.tokens == split.remove_tokens(split.rationales).tokens


# ---------------------------------------------------------------------------------------------- penalty
def _batch(seed=0, b=5, t=9):
    """Random attention rows (0 on padding) and masks with at least one impermissible real token."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, t + 1, size=b)
    real = np.arange(t)[None, :] < lengths[:, None]
    w = rng.random((b, t)) * real
    alpha = w / w.sum(-1, keepdims=True)
    mask = (rng.random((b, t)) < 0.4) & real
    mask[np.arange(b), rng.integers(0, lengths)] = True
    return alpha, mask


def test_mass_and_penalty_match_numpy():
    alpha, mask = _batch()
    a, m = torch.tensor(alpha), torch.tensor(mask)
    mass = (alpha * mask).sum(-1)
    np.testing.assert_allclose(attention_mass(a, m).numpy(), mass, rtol=1e-12)
    for lam in (0.1, 1.0, 3.0):
        expected = np.mean(-lam * np.log(1 - mass))
        assert impermissible_penalty(a, m, lam).item() == pytest.approx(expected, rel=1e-9)
    assert impermissible_penalty(a, m, 0.0).item() == 0.0
    assert impermissible_penalty(a.float(), m, 1.0).dtype == torch.float32


def test_penalty_gradient_is_finite_when_the_mass_nears_1():
    logits = torch.tensor([[30.0, 30.0, 0.0, -40.0], [5.0, -1e9, -1e9, -1e9], [0.0, 0.0, 0.0, 0.0]],
                          dtype=torch.float32, requires_grad=True)
    mask = torch.tensor([[True, True, False, False], [True, False, False, False], [True, False, False, False]])
    alpha = torch.softmax(logits, -1)  # row 0: mass 1 - 2e-13; row 1: mass exactly 1
    value = impermissible_penalty(alpha, mask, 1.0)
    value.backward()
    assert torch.isfinite(value) and value.item() <= np.log(1e10) + 1e-3
    assert torch.isfinite(logits.grad).all() and logits.grad.abs().sum() > 0


def test_penalty_gradcheck():
    alpha, mask = _batch(1, b=3, t=5)
    logits = torch.tensor(np.log(np.where(alpha > 0, alpha, 1e-30)), requires_grad=True)
    m = torch.tensor(mask)
    torch.autograd.gradcheck(lambda x: impermissible_penalty(torch.softmax(x, -1), m, 0.7), (logits,))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 4), st.floats(0.01, 3.0))
def test_per_head_penalty_is_r_mean_and_never_below_the_head_average(seed, heads, lam):
    """R_mean (their code: torch.mean over instances and heads of log(1 - alpha_h^T m)), and Jensen."""
    rng = np.random.default_rng(seed)
    b, t = 5, 9
    lengths = rng.integers(2, t + 1, size=b)
    real = np.arange(t)[None, :] < lengths[:, None]
    w = rng.random((b, heads, t)) * real[:, None, :]
    alpha = w / w.sum(-1, keepdims=True)  # (B, H, T): every head's row on the same real tokens
    mask = (rng.random((b, t)) < 0.4) & real
    mask[np.arange(b), rng.integers(0, lengths)] = True
    a, m = torch.tensor(alpha), torch.tensor(mask)
    rest = np.maximum((alpha * ~mask[:, None]).sum(-1), 1e-10)  # 1 - alpha_h^T m, (B, H), clamped as documented
    got = impermissible_penalty(a, m, lam).item()
    assert got == pytest.approx(np.mean(-lam * np.log(rest)), rel=1e-9)
    assert got >= impermissible_penalty(a.mean(1), m, lam).item() - 1e-12  # stricter than the head average



@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([torch.float32, torch.float64]))
def test_a_bilstm_row_as_one_head_gives_the_same_penalty_and_gradient_bits(seed, dtype):
    """The deceiver penalises ``out.head_attention`` for every model: a BiLSTM's (B, 1, T) is its
    (B, T) row as one head, and must train the same bits as penalising the row itself."""
    g = torch.Generator().manual_seed(seed)
    b, t = int(torch.randint(1, 33, (1,), generator=g)), int(torch.randint(2, 50, (1,), generator=g))
    logits = torch.randn(b, t, generator=g, dtype=dtype)
    mask = torch.rand(b, t, generator=g) < 0.4
    mask[:, 0] = True
    rows, as_heads = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    tokens = torch.full((b, t), 5)
    out = Output(probs=torch.ones(b, 2) / 2, logits=torch.zeros(b, 1), attention=torch.softmax(as_heads, -1),
                 encoded=Encoded(hidden=torch.zeros(b, t, 1), mask=tokens > 0, embedded=torch.zeros(b, t, 1),
                                 lengths=torch.full((b,), t)))
    assert out.head_attention.shape == (b, 1, t)
    row = impermissible_penalty(torch.softmax(rows, -1), mask, 0.7, check=False)
    head = impermissible_penalty(out.head_attention, mask, 0.7, check=False)
    row.backward()
    head.backward()
    assert torch.equal(row, head) and torch.equal(rows.grad, as_heads.grad)

@pytest.mark.parametrize("lam", [-0.1, float("nan"), float("inf"), "1", True])
def test_penalty_rejects_bad_lambda(lam):
    alpha, mask = _batch()
    with pytest.raises(ValueError, match="lam"):
        impermissible_penalty(torch.tensor(alpha), torch.tensor(mask), lam)


def test_penalty_and_mass_input_errors():
    alpha, mask = _batch()
    a, m = torch.tensor(alpha), torch.tensor(mask)
    empty = m.clone()
    empty[2] = False
    with pytest.raises(ValueError, match="1 row"):
        impermissible_penalty(a, empty, 1.0)
    assert attention_mass(a, empty)[2].item() == 0.0  # a mass of 0 is fine
    with pytest.raises(ValueError, match="shape"):
        attention_mass(a, m[:, :-1])
    with pytest.raises(ValueError, match="boolean"):
        attention_mass(a, m.long())
    with pytest.raises(ValueError, match="2-d"):
        attention_mass(alpha, m)
    with pytest.raises(ValueError, match="sum to 1"):
        impermissible_penalty(a * 2, m, 1.0)
    assert impermissible_penalty(a * 2, m, 1.0, check=False).isfinite()


# ---------------------------------------------------------------------------------------------- training
def test_penalty_hides_attention_and_lambda_0_is_train_model(small, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path / "cache"))
    plain = train_deceiver(small, TINY, lam=0.0, train_config=FAST, use_cache=False, progress=False)
    hidden = train_deceiver(small, TINY, lam=1.0, train_config=FAST, use_cache=False, progress=False)
    assert isinstance(hidden, DeceiverModel) and hidden.lam == 1.0 and not hidden.from_cache
    assert plain.mass["dev"] > 0.4 and hidden.mass["dev"] < plain.mass["dev"] - 0.2
    assert hidden.history[0]["dev_impermissible_mass"] == pytest.approx(hidden.mass["dev"])
    reference = train_model(small, TINY, train_config=FAST, use_cache=False, progress=False)
    ours, theirs = plain.model.state_dict(), reference.model.state_dict()
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)
    assert plain.test == reference.test

    table = deception_table({"λ=0": plain, "λ=1": hidden.model}, small.test)
    assert list(table.index) == ["λ=0", "λ=1"] and table.index.name == "model"
    assert list(table.columns) == ["accuracy", "impermissible attention (%)", "impermissible tokens (%)", "n",
                                   "correct", "mass"]
    assert table.loc["λ=1", "impermissible attention (%)"] == pytest.approx(100 * hidden.mass["test"])
    assert table.loc["λ=0", "accuracy"] == pytest.approx(plain.test["accuracy"])
    assert (table["n"] == len(small.test)).all()
    for name in table.index:  # the per-instance values behind both means, for intervals
        assert table.at[name, "correct"].mean() == table.loc[name, "accuracy"]
        assert table.at[name, "mass"].mean() == pytest.approx(table.loc[name, "impermissible attention (%)"])
        assert len(table.at[name, "mass"]) == len(small.test)
    assert len(pd.concat([table, table])) == 4  # a reader may stack two tables
    removed = deception_table({"λ=1": hidden}, small.test.remove_tokens(small.test.rationales))
    assert removed.loc["λ=1", "impermissible attention (%)"] == 0.0


def test_cached_and_keyed_by_lambda(small, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path / "cache"))
    first = train_deceiver(small, TINY, lam=0.1, train_config=FAST, progress=False)
    again = train_deceiver(small, TINY, lam=0.1, train_config=FAST, progress=False)
    other = train_deceiver(small, TINY, lam=0.1, epochs=2, train_config=FAST, progress=False)
    assert not first.from_cache and again.from_cache and again.mass == first.mass and again.lam == 0.1
    assert other.key != first.key and not other.from_cache
    assert train_deceiver.__module__ == "attnlib.experiments.deception"
    assert first.key != train_deceiver(small, TINY, lam=0.2, train_config=FAST, progress=False).key
    summary = first.summary()
    assert summary["lambda"] == 0.1 and summary["test impermissible attention (%)"] == pytest.approx(
        100 * first.mass["test"])


def test_transformer_deceiver(small):
    config = TransformerConfig(layers=1, heads=2, head_dim=8)
    result = train_deceiver(small, config, lam=1.0, train_config=FAST, use_cache=False, progress=False)
    assert result.train_config == FAST and 0.0 <= result.mass["test"] <= 1.0
    # Pruthi et al.'s restricted attention, by default, at the data set's separator
    assert result.config == restricted_config(config, small)
    assert result.config.segment_separator == small.vocab.stoi[DECEPTION_SEPARATOR]
    assert result.model.config.segment_separator == result.config.segment_separator
    # one layer: only [CLS]'s row reaches the output, and [CLS] sees every token either way
    unrestricted = train_deceiver(small, config, lam=1.0, train_config=FAST, restricted=False, use_cache=False,
                                  progress=False)
    assert unrestricted.config == config
    batch = small.test.batch(np.arange(8))
    assert torch.equal(unrestricted.model(batch).probs, result.model(batch).probs)
    # two layers: the first keeps the segments apart, so the models part
    two = TransformerConfig(layers=2, heads=2, head_dim=8)
    kept, mixed = (train_deceiver(small, two, lam=1.0, train_config=FAST, restricted=r, use_cache=False,
                                  progress=False) for r in (True, False))
    assert not torch.equal(kept.model(batch).probs, mixed.model(batch).probs)
    default = train_deceiver(small, config, lam=0.0, epochs=1, use_cache=False, progress=False)
    assert default.train_config == TrainConfig(**{**asdict(TRANSFORMER_TRAIN), "epochs": 1})


def test_the_restricted_first_segment_is_exactly_the_impermissible_tokens(small):
    """No unmarked token shares the impermissible tokens' segment, so none can carry them past
    the penalty (the separator opens the second segment, as Pruthi et al.'s [SEP] does)."""
    model = restricted_config(TransformerConfig(layers=1, heads=2, head_dim=8), small).build(len(small.vocab))
    batch = small.test.batch(np.arange(32))
    visible = model.visibility(batch.tokens, batch.tokens != 0)[:, 0]  # (B, T, T)
    marked = batch.rationale
    seen = marked[:, None, :].expand_as(visible)  # each impermissible word sees exactly the others
    assert marked.any() and torch.equal(visible[marked], seen[marked])


def test_train_deceiver_errors(small):
    plain = load_dataset("rt-polarity", max_train=60, max_eval=20)
    with pytest.raises(ValueError, match="no rationales"):
        train_deceiver(plain, TINY, lam=1.0, use_cache=False)
    with pytest.raises(ValueError, match="lam"):
        train_deceiver(small, TINY, lam=-1.0, use_cache=False)
    with pytest.raises(ValueError, match="learned attention"):
        train_deceiver(small, ModelConfig(attention="uniform"), lam=1.0, use_cache=False)
    with pytest.raises(ValueError, match="given"):
        train_deceiver(small, ModelConfig(attention="given"), lam=0.0, use_cache=False)
    with pytest.raises(ValueError, match="ModelConfig"):
        train_deceiver(small, "lstm", lam=1.0, use_cache=False)
    with pytest.raises(ValueError, match="TrainConfig"):
        train_deceiver(small, TINY, lam=1.0, train_config={"epochs": 1}, use_cache=False)
    with pytest.raises(ValueError, match="epochs"):
        train_deceiver(small, TINY, lam=1.0, epochs=0, use_cache=False)
    with pytest.raises(ValueError, match="TransformerConfig"):
        train_deceiver(small, TINY, lam=1.0, restricted=True, use_cache=False)
    with pytest.raises(ValueError, match="restricted must be"):
        train_deceiver(small, TransformerConfig(layers=1), lam=1.0, restricted="yes", use_cache=False)
    with pytest.raises(ValueError, match="no separator"):
        restricted_config(TransformerConfig(layers=1), plain)
    with pytest.raises(ValueError, match="non-empty dict"):
        deception_table({}, small.test)
    with pytest.raises(ValueError, match="no rationales"):
        deception_table({"m": torch.nn.Linear(2, 2)}, plain.test)
