"""Your own data: attnlib.data.load_texts, and every experiment of the book run on its result.

The data: 300 Rotten Tomatoes sentences written as a researcher's CSV would be, with other
column names (``review``, ``score``) and string labels ("great" / "other"), plus one missing
and one blank review and one repeated row.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from attnlib import data, train
from attnlib.experiments import baselines, counterfactual, erasure, importance
from attnlib.data import load_texts

N_ROWS = 300


def _reviews(n: int = N_ROWS, seed: int = 1) -> pd.DataFrame:
    texts, labels = data.sample_texts("rt-polarity", n, seed=seed)  # in source order: by label
    order = np.random.default_rng(seed).permutation(n)
    return pd.DataFrame({"review": [texts[i] for i in order], "score": np.where(labels[order] == 1, "great", "other")})


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    df = _reviews()
    df.loc[3, "review"] = None  # a missing text
    df.loc[5, "review"] = "   "  # a blank one
    return pd.concat([df, df.iloc[[10]]], ignore_index=True)  # row 10 once more


@pytest.fixture(scope="module")
def csv_path(frame, tmp_path_factory):
    path = tmp_path_factory.mktemp("own") / "food_reviews.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def food(csv_path) -> data.Dataset:
    return load_texts(csv_path, text="review", label="score", positive="great")


@pytest.fixture(scope="module")
def food_model(food):
    """An Average encoder with tanh attention, 2 epochs, outside the cache (a module fixture)."""
    return train.train_model(food, encoder="average", epochs=2, use_cache=False, progress=False)


# ------------------------------------------------------------------------------------------ loading


def test_csv_loads_under_its_name_with_the_mapping_and_the_counts(food, frame):
    assert food.name == "food_reviews"
    assert food.classes == ("other", "great")
    assert "'other' -> 0, 'great' -> 1" in food.description and "'review'" in food.description
    s = food.stats
    assert s["n_source"] == N_ROWS + 1
    assert s["n_empty"] == 2 and s["n_duplicates"] == 1
    assert s["n_kept"] == N_ROWS - 2 == sum(len(x) for x in food.splits.values())
    assert (len(food.train), len(food.dev), len(food.test)) == (238, 30, 30)  # 80/10/10, stratified
    kept = frame.dropna(subset=["review"])
    truth = dict(zip(kept["review"], kept["score"]))
    for split in food.splits.values():
        assert len(np.unique(split.labels)) == 2
        assert all(food.classes[y] == truth[t] for t, y in zip(split.texts, split.labels))
        assert all(len(ids) == len(tok) + 2 for ids, tok in zip(split.ids, split.tokens))
    # J&W's preprocessing and a vocabulary from train only
    assert all(t == t.lower() for tok in food.train.tokens for t in tok)
    train_words = {t for tok in food.train.tokens for t in tok}
    assert set(food.vocab.words) - set(data.SPECIALS) == train_words
    emb, coverage = data.glove_embeddings(food.vocab)
    assert emb.shape == (len(food.vocab), data.GLOVE_DIM) and coverage > 0.8


def test_label_order_sorted_by_default_positive_or_classes(csv_path, food):
    plain = load_texts(csv_path, text="review", label="score")
    assert plain.classes == ("great", "other")  # sorted

    def named(ds):
        return {t: ds.classes[y] for s in ds.splits.values() for t, y in zip(s.texts, s.labels)}

    assert named(plain) == named(food)
    given = load_texts(csv_path, text="review", label="score", classes=("other", "great"))
    assert given.classes == food.classes
    assert train.dataset_fingerprint(given) == train.dataset_fingerprint(food)


def test_numeric_and_boolean_labels_pass_through(frame):
    df = frame.assign(score=(frame["score"] == "great").astype(int))
    ds = load_texts(df, text="review", label="score", name="food numbers")
    assert ds.classes == ("0", "1")
    named = load_texts(df, text="review", label="score", name="food numbers", classes=("other", "great"))
    assert named.classes == ("other", "great") and (named.train.labels == ds.train.labels).all()
    flags = load_texts(df.assign(score=df["score"].astype(bool)), text="review", label="score", name="food numbers")
    assert train.dataset_fingerprint(flags) == train.dataset_fingerprint(ds)


def _write(frame: pd.DataFrame, path):
    kind = path.suffix
    if kind == ".tsv":
        frame.to_csv(path, sep="\t", index=False)
    elif kind == ".jsonl":
        path.write_text("\n".join(json.dumps(r) for r in frame.to_dict(orient="records")))
    elif kind == ".json":
        frame.to_json(path, orient="records")
    elif kind == ".parquet":
        frame.to_parquet(path)
    return path


@pytest.mark.parametrize("suffix", [".tsv", ".jsonl", ".json", ".parquet"])
def test_every_file_format_gives_the_csv_data_set(suffix, frame, food, tmp_path):
    ds = load_texts(_write(frame, tmp_path / f"food_reviews{suffix}"), text="review", label="score", positive="great")
    assert ds.name == food.name and ds.classes == food.classes and ds.stats == food.stats
    assert train.dataset_fingerprint(ds) == train.dataset_fingerprint(food)


def test_a_dataframe_and_a_hugging_face_dataset_give_the_csv_data_set(frame, food):
    df = load_texts(frame, text="review", label="score", positive="great", name="food_reviews")
    assert train.dataset_fingerprint(df) == train.dataset_fingerprint(food) and df.stats == food.stats
    import datasets  # the [online] extra, part of the [test] install

    hf = datasets.Dataset.from_pandas(frame)
    ds = load_texts(hf, text="review", label="score", positive="great", name="food_reviews")
    assert train.dataset_fingerprint(ds) == train.dataset_fingerprint(food) and ds.stats == food.stats
    # a ClassLabel column keeps its own names and order
    coded = datasets.Dataset.from_dict(
        {"review": frame["review"].astype(object).where(frame["review"].notna(), None).tolist(), "score": (frame["score"] == "great").astype(int).tolist()},
        features=datasets.Features({"review": datasets.Value("string"),
                                    "score": datasets.ClassLabel(names=["other", "great"])}),
    )
    ds = load_texts(coded, text="review", label="score", name="food_reviews")
    assert ds.classes == ("other", "great")
    assert train.dataset_fingerprint(ds) == train.dataset_fingerprint(food)


def test_given_splits_a_split_column_or_a_dict(frame):
    df = frame.dropna().reset_index(drop=True)
    df = df[df["review"].str.strip() != ""].drop_duplicates().reset_index(drop=True)
    where = np.where(np.arange(len(df)) % 5 == 0, "test", "train")
    ds = load_texts(df.assign(fold=where), text="review", label="score", split="fold", name="food folds")
    assert set(ds.test.texts) == set(df.loc[where == "test", "review"])
    assert len(ds.train) + len(ds.dev) == int((where == "train").sum())  # dev carved from train
    parts = {"train": df[where == "train"], "validation": df[where == "test"]}
    as_dict = load_texts(parts, text="review", label="score", name="food folds")
    assert set(as_dict.test.texts) == set(ds.test.texts)  # validation without test becomes test, as for SST-2


def test_length_filter_is_configurable_and_counted(frame):
    ds = load_texts(frame, text="review", label="score", name="food", min_len=10, max_len=30)
    lengths = np.concatenate([s.lengths() for s in ds.splits.values()])
    assert lengths.min() >= 10 and lengths.max() <= 30
    assert ds.stats["n_too_short"] > 0 and ds.stats["n_too_long"] > 0
    assert ds.stats["n_kept"] == N_ROWS - 2 - ds.stats["n_too_short"] - ds.stats["n_too_long"]
    with pytest.raises(ValueError, match="max_len"):
        load_texts(frame, text="review", label="score", name="food", min_len=10, max_len=5)


# ------------------------------------------------------------------------------------- bad input


def test_a_missing_column_names_the_columns_found(frame, csv_path):
    with pytest.raises(ValueError, match=r"no text column 'text'.*\['review', 'score'\]"):
        load_texts(csv_path, label="score")
    with pytest.raises(ValueError, match=r"no label column 'stars'.*\['review', 'score'\]"):
        load_texts(frame, text="review", label="stars", name="food")


def test_more_than_two_labels_is_refused_saying_binary_only(frame):
    three = frame.assign(score=np.resize(["great", "other", "awful"], len(frame)))
    with pytest.raises(ValueError, match=r"3 distinct labels \('awful', 'great', 'other'\).*binary") as err:
        load_texts(three, text="review", label="score", name="food")
    assert "permutation" in str(err.value) and "importance" in str(err.value)


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda df: df.assign(score=df["score"].where(df.index != 7)), r"missing value\(s\) \(rows \[7\]"),
        (lambda df: df.assign(score="great"), "one class only"),
        (lambda df: df.iloc[:9], "at least 10"),
        (lambda df: df.assign(review=["same words here"] * len(df)), r"no training .* n_conflicting_labels 40"),
        (lambda df: df.iloc[:12].assign(review=["same words here"] * 3 + df["review"].iloc[3:12].tolist()),
         r"7 instances left after the filters \(n_empty 2, n_duplicates 0, n_conflicting_labels 3"),
    ],
    ids=["nan-label", "one-class", "nine-rows", "all-conflicting", "eight-left"],
)
def test_bad_labels_and_too_little_data_are_clear_errors(frame, change, match):
    with pytest.raises(ValueError, match=match):
        load_texts(change(frame.iloc[:40]), text="review", label="score", name="food")


def test_a_split_with_one_class_is_an_error(frame):
    df = frame.dropna().iloc[:60].reset_index(drop=True)
    fold = np.where((df["score"] == "great") & (np.arange(len(df)) % 3 == 0), "test", "train")
    with pytest.raises(ValueError, match="test split holds .* one class only \\('great'\\)"):
        load_texts(df.assign(fold=fold), text="review", label="score", split="fold", name="food")


def test_names_positive_classes_and_sources_are_checked(frame, csv_path, tmp_path):
    with pytest.raises(ValueError, match="name="):
        load_texts(frame, text="review", label="score")
    with pytest.raises(ValueError, match="book's data sets"):
        load_texts(frame, text="review", label="score", name="IMDB")
    with pytest.raises(ValueError, match="positive='superb' is not a label"):
        load_texts(csv_path, text="review", label="score", positive="superb")
    with pytest.raises(ValueError, match=r"labels \['great'\] .* not in classes"):
        load_texts(csv_path, text="review", label="score", classes=("other", "fine"))
    with pytest.raises(ValueError, match="not both"):
        load_texts(csv_path, text="review", label="score", classes=("other", "great"), positive="great")
    with pytest.raises(ValueError, match="parquet"):
        load_texts(tmp_path / "reviews.xlsx", text="review", label="score")
    with pytest.raises(FileNotFoundError):
        load_texts(tmp_path / "absent.csv", text="review", label="score")
    with pytest.raises(ValueError, match="DataFrame"):
        load_texts([("a text", 1)], name="food")


def _unreadable_files(tmp_path):
    """(source, the error, what it must say): a reader's own files, tried as a new user would."""
    def write(name, content):
        path = tmp_path / name
        if isinstance(content, pd.DataFrame):
            content.to_parquet(path)
        else:
            path.write_bytes(content)
        return path

    folder = tmp_path / "reviews.csv"
    folder.mkdir()
    latin = "review,score\n".encode() + "caf\xe9 tr\xe8s bien,great\n".encode("latin-1") * 20
    no_texts = pd.DataFrame({"review": [""] * 30, "score": ["great", "other"] * 15})
    return [
        (write("empty.csv", b""), ValueError, r"empty\.csv is empty \(0 bytes\).*header"),
        (write("blank.csv", b"\n\n"), ValueError, r"blank\.csv holds no columns"),
        (write("latin.csv", latin), ValueError, r"latin\.csv is not UTF-8 text.*encoding="),
        (write("header.csv", b"review,score\n"), ValueError, "no rows: the label column 'score' is empty"),
        (write("no_texts.parquet", no_texts), ValueError, "no rows"),
        (write("broken.json", b"{not json"), ValueError, r"broken\.json could not be read as json"),
        (folder, IsADirectoryError, r"reviews\.csv is a folder, not a csv file"),
    ]


def test_files_that_cannot_be_read_get_an_error_naming_the_file_and_the_fix(frame, tmp_path):
    for source, error, match in [*_unreadable_files(tmp_path), (frame.iloc[:0], ValueError, "no rows")]:
        with pytest.raises(error, match=match):
            load_texts(source, text="review", label="score", name="food")


# ------------------------------------------------------------------------------------- the model cache


def test_the_model_cache_keys_on_the_content(csv_path, frame, tmp_path):
    again = load_texts(csv_path, text="review", label="score", positive="great")
    first = train.train_model(again, encoder="average", epochs=1, progress=False)
    second = train.train_model(load_texts(csv_path, text="review", label="score", positive="great"),
                               encoder="average", epochs=1, progress=False)
    assert not first.from_cache and second.from_cache and first.key == second.key
    # another CSV under the same file name (another folder) is other content: another key
    other_path = tmp_path / "other" / "food_reviews.csv"
    other_path.parent.mkdir()
    _reviews(seed=2).to_csv(other_path, index=False)
    other = load_texts(other_path, text="review", label="score", positive="great")
    assert other.name == again.name
    assert train.dataset_fingerprint(other) != train.dataset_fingerprint(again)
    third = train.train_model(other, encoder="average", epochs=1, progress=False)
    assert not third.from_cache and third.key != first.key


# ------------------------------------------------------------------------------------- every experiment


def test_training_scores_the_own_data(food, food_model):
    assert food_model.dataset == "food_reviews"
    for scores, split in ((food_model.dev, food.dev), (food_model.test, food.test)):
        assert scores["n"] == len(split) and 0 <= scores["f1"] <= 1 and 0 <= scores["roc_auc"] <= 1
    probs = train.predict_proba(food_model.model, food.test)
    assert probs.shape == (len(food.test), 2)
    np.testing.assert_allclose(probs.sum(1), 1, atol=1e-5)


def _check_instances(result, food, n):
    assert len(result) == n and result.probs.shape == (n, 2)
    np.testing.assert_allclose(result.probs.sum(1), 1, atol=1e-5)
    assert (result.labels == food.test.labels[result.indices]).all()
    assert (result.lengths == food.test.lengths()[result.indices]).all()


def test_importance_runs_on_own_data(food, food_model):
    res = importance.importance(food_model.model, food.test, max_instances=20, seed=0)
    _check_instances(res, food, 20)
    for a, g, loo, T in zip(res.attention, res.gradient, res.loo, res.lengths):
        assert len(a) == len(g) == len(loo) == T
        assert a.sum() == pytest.approx(1, abs=1e-4) and g.sum() == pytest.approx(1, abs=1e-4)
    table = importance.agreement(res)
    assert len(table) > 0 and table.notna().any().any()


def test_permutation_and_adversary_run_on_own_data(food, food_model):
    perm = counterfactual.permute_attention(food_model.model, food.test, n_permutations=10, max_instances=20)
    _check_instances(perm, food, 20)
    assert perm.all_tvd.shape == (20, 10) and ((perm.median_tvd >= 0) & (perm.median_tvd <= 1)).all()
    adv = counterfactual.adversarial_attention(food_model.model, food.test, k=2, steps=20, max_instances=10)
    _check_instances(adv, food, 10)
    assert adv.candidates.shape[:2] == (10, 2)
    np.testing.assert_allclose(adv.candidates.sum(-1), 1, atol=1e-4)
    assert ((adv.eps_max_jsd >= 0) & (adv.eps_max_jsd <= np.log(2) + 1e-6)).all()
    frac = counterfactual.fraction_very_different(adv, classes=food.classes)
    assert len(frac) > 0


def test_erasure_runs_on_own_data(food, food_model):
    single = erasure.single_weight(food_model.model, food.test, max_instances=20)
    _check_instances(single, food, 20)
    assert (single.top_weight >= single.random_weight).all()
    ranked = erasure.ranked_removal(food_model.model, food.test, max_instances=20)
    _check_instances(ranked, food, 20)
    assert ranked.flipped.shape == (20, len(erasure.RANKINGS))
    assert len(erasure.removal_summary(ranked)) == len(erasure.RANKINGS)


def test_uniform_and_seed_baselines_run_on_own_data(food):
    uni = baselines.uniform_comparison(food, ("average",), epochs=1, progress=False)
    assert list(uni.frame["attention"]) == ["trained", "uniform"]
    assert uni.frame["F1 (W&P)"].isna().all()  # no published figure for your own data
    sv = baselines.seed_variance(food, encoder="average", seeds=(1,), epochs=1, progress=False)
    assert len(sv) == len(food.test) and set(sv.per_seed["seed"]) == {1}
    assert ((sv.per_instance["jsd"] >= 0) & (sv.per_instance["tvd"] <= 1)).all()
