"""attnlib.audit on the reader's own fine-tuned classifier, as they use it: its own head (pooling,
num_labels), its own tokenizer on the raw texts, every text; and the mismatches a user makes,
each an attnlib error that names the fix (issue 49)."""
import hashlib

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("transformers")
pytest.importorskip("captum")

import torch  # noqa: E402

from attnlib import audit as audit_module  # noqa: E402
from attnlib.audit import audit  # noqa: E402
from attnlib.data import read_texts  # noqa: E402
from attnlib.models import PretrainedClassifier  # noqa: E402
from attnlib.models.pretrained import fine_tune_head  # noqa: E402

#: raw texts a book tokenizer would rewrite (case, digits, punctuation, clitics, accents, spacing)
RAW = ["Great movie, 5 stars.", "Don't watch it -- BORING!!", "a  café film; 10/10", "the plot was not good",
       "Very FUN story", "bad actor, bad film", "short and fun", "long... very long", "is it good? no.",
       "The 2nd act was great"]


def _save_classifier(folder, source, num_labels, seed=0):
    """A tiny random BertForSequenceClassification with the tiny BERT's tokenizer, saved to ``folder``."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(source)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=24, initializer_range=0.5,
                        num_labels=num_labels, attn_implementation="eager",
                        id2label={k: f"class{k}" for k in range(num_labels)},
                        label2id={f"class{k}": k for k in range(num_labels)})
    BertForSequenceClassification(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def classifier2(tiny_bert_checkpoint, tmp_path_factory):
    return _save_classifier(tmp_path_factory.mktemp("clf2"), tiny_bert_checkpoint, 2)


@pytest.fixture(scope="module")
def classifier3(tiny_bert_checkpoint, tmp_path_factory):
    return _save_classifier(tmp_path_factory.mktemp("clf3"), tiny_bert_checkpoint, 3, seed=1)


def _frame(n_classes, n=len(RAW)):
    return pd.DataFrame({"text": RAW[:n], "label": [f"class{i % n_classes}" for i in range(n)]})


def _own_probabilities(folder, texts):
    """The checkpoint's own softmax on the raw texts, as its user computes it."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        return torch.softmax(model(**tokenizer(texts, padding=True, return_tensors="pt")).logits, -1).numpy()


def _digest(folder) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()


def test_a_classifier_checkpoint_is_audited_with_its_own_head_on_every_raw_text(classifier2):
    before = _digest(classifier2)
    report = audit(str(classifier2), _frame(2), n_permutations=2, ig_steps=4, progress=False)
    assert report.n_instances == len(RAW)  # every text: no head was fitted, nothing held out
    assert report.notes[0].startswith("the checkpoint's own head (BertForSequenceClassification, 2 labels: "
                                      "class0, class1)")
    expl = report.explanations
    own = _own_probabilities(classifier2, RAW)
    np.testing.assert_allclose(expl.probs, own[np.asarray(expl.indices)], atol=1e-6, rtol=0)
    assert _digest(classifier2) == before  # the folder is read, never written


def test_a_loaded_classifier_is_audited_as_it_is_and_its_head_is_not_touched(classifier2):
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(classifier2, attn_implementation="eager").eval()
    head = {k: v.clone() for k, v in model.state_dict().items() if k.startswith("classifier.")}
    report = audit(model, _frame(2), n_permutations=2, ig_steps=4, progress=False)
    after = model.state_dict()
    assert head and all(torch.equal(after[k], v) for k, v in head.items())
    own = _own_probabilities(classifier2, RAW)
    np.testing.assert_allclose(report.explanations.probs, own[np.asarray(report.explanations.indices)], atol=1e-6)


def test_a_three_label_checkpoint_is_audited_on_three_classes(classifier3):
    report = audit(str(classifier3), _frame(3), n_permutations=2, ig_steps=4, progress=False)
    assert report.n_instances == len(RAW) and report.explanations.probs.shape == (len(RAW), 3)
    labels = np.asarray([i % 3 for i in range(len(RAW))])
    assert np.array_equal(np.asarray(report.explanations.labels), labels[np.asarray(report.explanations.indices)])
    own = _own_probabilities(classifier3, RAW)
    np.testing.assert_allclose(report.explanations.probs, own[np.asarray(report.explanations.indices)], atol=1e-6)
    assert report.tables["faithfulness"]["comprehensiveness"].notna().all()


def test_the_texts_reach_the_tokenizer_byte_for_byte(classifier2):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    seen = []

    class Recording:
        def __init__(self, inner):
            self.inner = inner

        def __call__(self, texts, *args, **kwargs):
            seen.extend(texts)
            return self.inner(texts, *args, **kwargs)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    model = AutoModelForSequenceClassification.from_pretrained(classifier2, attn_implementation="eager").eval()
    tokenizer = Recording(AutoTokenizer.from_pretrained(classifier2))
    audit(model, _frame(2), tokenizer=tokenizer, n_permutations=2, ig_steps=4, progress=False)
    assert seen and set(seen) == set(RAW)
    assert all(t.encode() in {r.encode() for r in RAW} for t in seen)


def test_read_texts_keeps_the_texts_and_counts_the_missing():
    frame = pd.DataFrame({"text": ["Great, 5 stars.", None, "  ", "Don't!"], "label": ["a", "b", "b", "c"]})
    raw = read_texts(frame)
    assert raw.texts == ("Great, 5 stars.", "Don't!") and raw.labels == ("a", "c")
    assert raw.n_missing == 2 and raw.n_rows == 4
    with pytest.raises(ValueError, match="no label"):
        read_texts(pd.DataFrame({"text": ["x", "y"], "label": ["a", None]}))


def test_missing_texts_and_cropped_texts_are_said_in_the_notes(classifier2):
    frame = _frame(2)
    frame.loc[len(frame)] = [np.nan, "class0"]
    frame.loc[len(frame)] = ["good film " * 30, "class1"]  # 61 pieces with [CLS] and [SEP]: over 24 positions
    with pytest.raises(ValueError, match="max_tokens"):
        audit(str(classifier2), frame, n_permutations=2, ig_steps=4, progress=False)
    report = audit(str(classifier2), frame, max_tokens=20, n_permutations=2, ig_steps=4, progress=False)
    assert "1 of the 12 rows had no text (missing or blank) and were dropped" in report.notes
    cropped = [n for n in report.notes if "cropped" in n]
    assert cropped and cropped[0].startswith("1 of 11 texts were longer than max_tokens = 20") and "at most 42" in cropped[0]
    assert report.n_instances == 11


def test_mismatches_are_attnlib_errors_that_name_the_fix(classifier2, classifier3, tiny_bert_checkpoint, tmp_path):
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    with pytest.raises(ValueError, match="has 3 classes.*holds 2"):
        audit(str(classifier3), _frame(2), progress=False)
    with pytest.raises(ValueError, match="n_classes=3 disagrees"):
        PretrainedClassifier(classifier2, n_classes=3)
    fitted3 = PretrainedClassifier(tiny_bert_checkpoint, n_classes=3)
    with pytest.raises(ValueError, match="has 3 classes.*n_classes=2"):
        audit(fitted3, _frame(2), progress=False)
    mlm = tmp_path / "mlm"
    BertForMaskedLM(BertConfig(vocab_size=25, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=32)).save_pretrained(mlm)
    AutoTokenizer.from_pretrained(tiny_bert_checkpoint).save_pretrained(mlm)
    with pytest.raises(ValueError, match="BertForMaskedLM checkpoint, not a sequence classifier.*head=\"fit\""):
        audit(str(mlm), _frame(2), progress=False)
    assert PretrainedClassifier(mlm, head="fit").config.head == "fitted"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="is empty, and lacks config.json"):
        PretrainedClassifier(empty)
    only_tokenizer = tmp_path / "tok"
    AutoTokenizer.from_pretrained(tiny_bert_checkpoint).save_pretrained(only_tokenizer)
    with pytest.raises(ValueError, match="lacks config.json .*; the weights"):
        PretrainedClassifier(only_tokenizer)
    only_config = tmp_path / "config"
    only_config.mkdir()
    (only_config / "config.json").write_text((classifier2 / "config.json").read_text())
    with pytest.raises(ValueError, match="lacks the weights"):
        PretrainedClassifier(only_config)
    with pytest.raises(ValueError, match="hub id: attnlib never fetches"):
        audit("bert-base-uncased", _frame(2), progress=False)
    with pytest.raises(ValueError, match="own classifier head"):
        audit(str(classifier2), _frame(2), fit_head=True, progress=False)
    with pytest.raises(ValueError, match="own classifier head"):
        PretrainedClassifier(classifier2).fit_head(["good", "bad"], [1, 0])


def test_an_accuracy_has_wilson_interval_and_no_interval_is_printed_from_equal_values():
    columns = audit_module._accuracy_columns(np.ones(20))
    assert columns["mean"] == 1.0 and columns["high"] == 1.0 and 0.83 < columns["low"] < 0.85  # Wilson, n = 20
    flat = audit_module._interval_columns(np.full(20, 0.75), seed=0)
    assert flat["mean"] == 0.75 and np.isnan(flat["low"]) and np.isnan(flat["high"])
    assert np.isnan(audit_module._interval_columns(np.array([0.067]), seed=0)["low"])
    spread = audit_module._interval_columns(np.linspace(0, 1, 20), seed=0)
    assert spread["low"] < 0.5 < spread["high"]


def test_integrated_gradients_steps_rise_until_the_gap_is_small_or_the_cap(classifier2, monkeypatch):
    report = audit(str(classifier2), _frame(2), n_permutations=2, progress=False)
    said = [n for n in report.notes if n.startswith("integrated gradients at ")]
    assert len(said) == 1 and "completeness gap median" in said[0]
    assert report.settings["ig_steps"] >= 16
    monkeypatch.setattr(audit_module, "IG_TOLERANCE", -1.0)  # no gap is small enough: up to the cap, flagged
    monkeypatch.setattr(audit_module, "IG_MAX_STEPS", 64)
    capped = audit(str(classifier2), _frame(2), n_permutations=2, progress=False)
    assert capped.settings["ig_steps"] == 64
    assert any("unconverged on more than 10% of the texts" in n for n in capped.notes)


def test_fine_tune_head_saves_a_classifier_a_user_loads_back(tiny_bert_checkpoint, tmp_path):
    texts = ["good fun film", "bad boring movie", "very good story", "not good plot", "fun short film",
             "long boring plot"] * 3
    labels = np.array([1, 0, 1, 0, 1, 0] * 3)
    folder = tmp_path / "mine"
    info = fine_tune_head(folder, texts, labels, base=tiny_bert_checkpoint, classes=["neg", "pos"], progress=False)
    assert info["n"] == 18 and info["classes"] == ("neg", "pos") and info["train_accuracy"] > 0.5
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left
    model = PretrainedClassifier(folder)
    assert model.config.head == "checkpoint" and model.config.labels == ("neg", "pos")
    own = _own_probabilities(folder, texts)
    with torch.no_grad():
        ours = model(model.encode_texts(texts)).probs.numpy()
    np.testing.assert_allclose(ours, own, atol=1e-6)
    assert (ours.argmax(1) == labels).mean() == info["train_accuracy"]
    again = fine_tune_head(folder, texts, labels, base=tiny_bert_checkpoint, progress=False)  # replaces it
    assert again["classes"] == ("0", "1") and PretrainedClassifier(folder).config.labels == ("0", "1")
    with pytest.raises(ValueError, match="two classes"):
        fine_tune_head(tmp_path / "x", texts, np.zeros(len(texts), int), base=tiny_bert_checkpoint)


def test_word_scores_sum_each_words_pieces(classifier2):
    from transformers import AutoTokenizer

    report = audit(str(classifier2), _frame(2), n_permutations=2, ig_steps=4, progress=False)
    tokenizer = AutoTokenizer.from_pretrained(classifier2)
    for row in range(report.n_instances):
        text = RAW[int(report.explanations.indices[row])]
        words = report.word_scores(row)
        pieces = tokenizer(text)["input_ids"][1:-1]
        assert len(words) <= len(pieces) and all(w in text for w in words.index)  # the words as written
        for method in report.explanations.methods:  # the sum over pieces is the sum over words
            assert words[method].sum() == pytest.approx(float(np.sum(report.explanations.scores[method][row])))
    with pytest.raises(ValueError, match="row must be"):
        report.word_scores(report.n_instances)
