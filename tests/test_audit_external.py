"""The audit scores explanations computed elsewhere on its own yardsticks (issue 53): captum's own
IntegratedGradients, run outside attnlib and passed in as arrays, lands where attnlib's integrated
gradients does; bad arrays get errors that say what does not fit."""
import numpy as np
import pytest
import torch

pytest.importorskip("captum")

from captum.attr import IntegratedGradients  # noqa: E402

from attnlib.audit import audit  # noqa: E402
from attnlib.models.protocol import word_mask  # noqa: E402

STEPS = 16


@pytest.fixture(scope="module")
def model(tiny_model):
    return tiny_model("lstm", "tanh", 2)


def _captum_ig(model, split) -> list:
    """captum's IntegratedGradients on the token embeddings, one text at a time: from the zero embedding at
    every word (the start and end tokens keep theirs), Gauss-Legendre steps, for the predicted class; one
    |sum over the embedding| per position, [SOS] and [EOS] included."""
    out = []
    for i in range(len(split)):
        ids = split.batch([i]).tokens
        words = word_mask(ids, model.pad_id)
        embedded = model.embed_tokens(ids).detach()
        baseline = embedded.masked_fill(words[..., None], 0.0)
        with torch.no_grad():
            target = int(model(ids).probs.argmax(-1))
        ig = IntegratedGradients(lambda e: model.forward_embedded(ids.expand(e.shape[0], -1), e).probs)
        attr = ig.attribute(embedded, baselines=baseline, target=target, n_steps=STEPS, method="gausslegendre")
        out.append(attr.sum(-1)[0].abs().detach().numpy())
    return out


def test_captums_integrated_gradients_passed_in_scores_as_attnlibs_does(model, tiny_dataset):
    split = tiny_dataset.test
    theirs = _captum_ig(model, split)
    report = audit(model, split, max_instances=20, n_permutations=2, ig_steps=STEPS, progress=False,
                   methods=["attention", "integrated gradients", "random"], explanations={"captum IG": theirs})
    result = report.explanations
    assert result.methods[-1] == "captum IG"
    for ours, external in zip(result.scores["integrated gradients"], result.scores["captum IG"]):
        np.testing.assert_allclose(ours, external / external.sum(), atol=1e-5)  # ours are shares of the words
    faith = report.tables["faithfulness"]
    for metric in ("comprehensiveness", "sufficiency"):
        assert faith.loc["captum IG", metric] == pytest.approx(faith.loc["integrated gradients", metric], abs=1e-6)
    # words only (no start and end tokens) is the same explanation
    words_only = [t[1:-1] for t in theirs]
    again = audit(model, split, max_instances=20, n_permutations=2, ig_steps=STEPS, progress=False,
                  methods=["attention"], explanations={"captum IG": words_only})
    for a, b in zip(again.explanations.scores["captum IG"], result.scores["captum IG"]):
        np.testing.assert_array_equal(a, b)


def test_external_explanations_that_do_not_fit_are_refused(model, tiny_dataset):
    split = tiny_dataset.test
    good = [np.ones(len(ids)) for ids in split.ids]  # one per position, start and end included

    def run(explanations):
        return audit(model, split, max_instances=8, n_permutations=2, ig_steps=4, progress=False,
                     methods=["attention"], explanations=explanations)

    with pytest.raises(ValueError, match="has 3 arrays, but the audit reads"):
        run({"mine": good[:3]})
    with pytest.raises(ValueError, match="NaN or infinite"):
        run({"mine": [np.full(len(g), np.nan) for g in good]})
    with pytest.raises(ValueError, match=r"one score per token \(1-D\)"):
        run({"mine": [np.ones((len(g), 2)) for g in good]})
    with pytest.raises(ValueError, match="word pieces .* score the tokens the model's own tokenizer makes"):
        run({"mine": [np.ones(len(g) + 5) for g in good]})
    with pytest.raises(ValueError, match="name of a built-in method"):
        run({"attention": good})
    with pytest.raises(ValueError, match="must be a dict"):
        run([good])
