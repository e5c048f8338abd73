"""One contract for every per-instance experiment: chunking, eval mode, Split vs Batch, bad models.

Each experiment runs through attnlib's one runner (attnlib.runs) and edits attention through
the model protocol, so the same promises hold for all of them; this file checks them together.
"""
import numpy as np
import pytest
import torch

from attnlib import counterfactual as cf
from attnlib import erasure as er
from attnlib import importance as im

N = 36  # instances per run: several chunks at chunk_size=7


def _permutation(model, x, **kw):
    r = cf.permute_attention(model, x, n_permutations=8, seed=0, **kw)
    # the permutations drawn follow the chunking (one generator over the chunks, kept so the
    # book's numbers stay as published); what the model computes does not
    return {"probs": r.probs, "max_attention": r.max_attention, "indices": r.indices}


def _adversary(model, x, **kw):
    r = cf.adversarial_attention(model, x, k=3, steps=15, seed=0, **kw)
    return {"tvd": r.tvd, "jsd": r.jsd, "candidates": r.candidates, "indices": r.indices}


def _single_weight(model, x, **kw):
    r = er.single_weight(model, x, seed=0, **kw)
    return {"jsd_top": r.jsd_top, "jsd_random": r.jsd_random, "random_token": r.random_token, "indices": r.indices}


def _ranked_removal(model, x, **kw):
    r = er.ranked_removal(model, x, seed=0, **kw)
    return {"n_removed": r.n_removed, "ranks": r.ranks, "indices": r.indices}


def _importance(model, x, **kw):
    r = im.importance(model, x, seed=0, **kw)
    return {name: np.concatenate(getattr(r, name)) for name in ("attention", "gradient", "loo")} | {"indices": r.indices}


EXPERIMENTS = {
    "permute_attention": _permutation,
    "adversarial_attention": _adversary,
    "single_weight": _single_weight,
    "ranked_removal": _ranked_removal,
    "importance": _importance,
}


def _assert_same(a: dict, b: dict, atol=2e-5, close=None, near_ties=False):
    """Equal results. ``close(x, y, atol, key)`` compares the real-valued ones (default: within
    ``atol``). ``near_ties``: on a GPU, two words whose scores tie to rounding may swap places in
    ``ranks`` (neighbours only, in at most 1% of the places)."""
    assert a.keys() == b.keys()
    for key in a:
        x, y = np.asarray(a[key]), np.asarray(b[key])
        assert x.shape == y.shape, key
        if key == "ranks" and near_ties:
            moved = x != y
            assert moved.mean() <= 0.01 and (np.abs(x - y)[moved] <= 1).all(), key
            assert ((x == -1) == (y == -1)).all(), key  # the same places are ranked
        elif key in ("indices", "random_token", "n_removed", "ranks"):
            np.testing.assert_array_equal(x, y, err_msg=key)
        elif close is not None:
            close(x, y, atol, key)
        else:
            np.testing.assert_allclose(x, y, atol=atol, rtol=0, err_msg=key)


@pytest.fixture(scope="module")
def split(tiny_dataset):
    return tiny_dataset.test.subset(np.arange(N)) if hasattr(tiny_dataset.test, "subset") else tiny_dataset.test


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_chunk_size_does_not_change_results(name, tiny_model, split, assert_search_unchunked, on_gpu):
    run = EXPERIMENTS[name]
    model = tiny_model("lstm", "tanh")
    _assert_same(run(model, split, chunk_size=7), run(model, split), close=assert_search_unchunked, near_ties=on_gpu)


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_split_and_batch_inputs_agree(name, tiny_model, split):
    run = EXPERIMENTS[name]
    model = tiny_model("cnn", "tanh")
    batch = split.batch(np.arange(len(split)))
    _assert_same(run(model, split, max_instances=20), run(model, batch, max_instances=20), atol=0)


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_eval_mode_is_restored_also_after_an_error(name, tiny_model, split, monkeypatch):
    run = EXPERIMENTS[name]
    model = tiny_model("average", "tanh")
    model.train()
    try:
        run(model, split, max_instances=10)
        assert model.training, "the caller's train mode was not restored"

        def broken(*args, **kwargs):
            assert not model.training, "the experiment must run the model in eval mode"
            raise RuntimeError("decoder failed")

        monkeypatch.setattr(model, "decode", broken)
        with pytest.raises(RuntimeError, match="decoder failed"):
            run(model, split, max_instances=10)
        assert model.training, "train mode was not restored after the error"
    finally:
        monkeypatch.undo()
        model.eval()


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_a_model_without_its_own_attention_is_rejected(name, tiny_dataset, split):
    from attnlib.models import AttentionClassifier, ModelConfig

    given = AttentionClassifier(len(tiny_dataset.vocab), ModelConfig(encoder="average", attention="given"))
    with pytest.raises(ValueError, match="given"):
        EXPERIMENTS[name](given, split, max_instances=5)
    with pytest.raises(ValueError, match="AttentionClassifier|InterventionModel"):
        EXPERIMENTS[name](torch.nn.Linear(3, 2), split, max_instances=5)


RESULTS = {
    "permute_attention": lambda m, x: cf.permute_attention(m, x, n_permutations=4, seed=0),
    "adversarial_attention": lambda m, x: cf.adversarial_attention(m, x, k=2, steps=3, seed=0),
    "single_weight": lambda m, x: er.single_weight(m, x, seed=0),
    "ranked_removal": lambda m, x: er.ranked_removal(m, x, seed=0),
    "importance": lambda m, x: im.importance(m, x, seed=0),
}
# experiments that need a second real token (to erase one and keep one, or to rank)
NEEDS_TWO = {"single_weight", "ranked_removal", "importance"}


@pytest.mark.parametrize("name", RESULTS)
def test_every_result_has_the_same_instance_fields_and_lists_what_it_left_out(name, tiny_model, tiny_dataset):
    import warnings

    from attnlib.runs import InstanceResult
    from attnlib.data import collate

    vocab, test = tiny_dataset.vocab, tiny_dataset.test
    sentences = [test.tokens[i] for i in range(6)] + [test.tokens[6][:1]]  # the last: one real token
    batch = collate([vocab.encode(s) for s in sentences], test.labels[:7], index=np.arange(10, 17))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # importance warns about the short instance
        r = RESULTS[name](tiny_model("lstm", "tanh"), batch)
    assert isinstance(r, InstanceResult)
    kept = np.arange(10, 16) if name in NEEDS_TWO else np.arange(10, 17)
    np.testing.assert_array_equal(r.indices, kept)
    np.testing.assert_array_equal(r.excluded, np.setdiff1d(np.arange(10, 17), kept))
    assert len(r) == len(kept) and r.n_excluded == 7 - len(kept)
    np.testing.assert_array_equal(r.lengths, [len(sentences[i - 10]) for i in kept])
    np.testing.assert_array_equal(r.labels, test.labels[kept - 10])
    assert r.probs.shape == (len(kept), 2)
    np.testing.assert_array_equal(r.predicted, r.probs.argmax(-1))
    np.testing.assert_allclose(r.probs.sum(-1), 1.0, atol=1e-6)
    if hasattr(r, "to_frame"):
        frame = r.to_frame()
        head = ["instance", "ranking"] if name == "ranked_removal" else ["instance"]
        assert list(frame.columns[: len(head) + 3]) == head + ["label", "predicted", "length"]
        assert set(frame["instance"]) == set(kept)


def test_the_adversarys_defaults_live_in_one_place():
    """counterfactual.ADVERSARY: every adversarial search of the book starts from it (issue 28)."""
    import inspect

    from attnlib.experiments import counterfactual, head_perturbation
    from attnlib.presentation import widgets

    settings = counterfactual.ADVERSARY
    for fn in (counterfactual.adversarial_attention, head_perturbation.adversarial_heads):
        params = inspect.signature(fn).parameters
        assert {name: params[name].default for name in ("eps", "k", "steps", "lr")} == {
            "eps": settings.eps, "k": settings.k, "steps": settings.steps, "lr": settings.lr}, fn.__name__
    params = inspect.signature(widgets.adversary_explorer).parameters
    assert params["eps"].default is None and params["k"].default is None  # None: ADVERSARY's


def test_the_audits_integrated_gradients_steps_are_the_books():
    import inspect

    from attnlib.experiments import audit, explanations

    # None: the book's steps first, more only while the completeness gap says they are needed
    assert inspect.signature(audit.audit).parameters["ig_steps"].default is None
    assert audit.IG_MAX_STEPS > explanations.IG_STEPS and audit.IG_MAX_STEPS % explanations.IG_STEPS == 0


# --- One signature for every per-instance experiment (issue 28 item 3) ---------------------------
def _per_instance_experiments():
    """Every public function of attnlib.experiments that picks instances (takes max_instances)."""
    import importlib
    import inspect
    import pkgutil

    import attnlib.experiments as package

    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"attnlib.experiments.{info.name}")
        for name in getattr(module, "__all__", []):
            fn = getattr(module, name)
            if inspect.isfunction(fn) and "max_instances" in inspect.signature(fn).parameters:
                found[f"{info.name}.{name}"] = fn
    return found


#: The audit reads the reader's own files and frames (``data``), not a split: its own contract
#: is in tests/test_audit.py.
READS_FILES = {"audit.audit"}

#: Runs a per-instance experiment on each of several models (one per training seed): the same
#: keywords as the experiment it runs, its models first (checked below).
OVER_MODELS = {"randomisation.randomisation_over_seeds": "randomisation.randomisation_test"}


def test_the_experiments_found_are_the_books():
    found = set(_per_instance_experiments())
    assert {"counterfactual.permute_attention", "counterfactual.adversarial_attention", "erasure.single_weight",
            "erasure.ranked_removal", "importance.importance", "explanations.explain", "faithfulness.faithfulness",
            "flow.relevance_by_layer", "head_perturbation.permute_heads",
            "head_perturbation.adversarial_heads"} <= found, found


@pytest.mark.parametrize("name", sorted(set(_per_instance_experiments()) - READS_FILES - set(OVER_MODELS)))
def test_every_per_instance_experiment_has_the_same_parameters(name):
    """(model, split, ..., max_instances=None, seed=0, chunk_size=None): the same names, defaults and meaning."""
    import inspect

    params = inspect.signature(_per_instance_experiments()[name]).parameters
    assert list(params)[:2] == ["model", "split"], f"{name}{inspect.signature(_per_instance_experiments()[name])}"
    forwards = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())  # e.g. explain_and_score
    for param, default in (("max_instances", None), ("seed", 0), ("chunk_size", None)):
        if param == "chunk_size" and forwards:
            continue
        assert param in params, f"{name} lacks {param}"
        assert params[param].default == default, f"{name}: {param} defaults to {params[param].default!r}"
        assert params[param].kind is inspect.Parameter.KEYWORD_ONLY, f"{name}: {param} must be keyword-only"
    if "site" in params:
        assert params["site"].default is None, f"{name}: site defaults to the model's own (None)"


@pytest.mark.parametrize("name", sorted(OVER_MODELS))
def test_an_experiment_over_models_keeps_the_keywords_of_the_one_it_runs(name):
    import inspect

    found = _per_instance_experiments()
    over, one = inspect.signature(found[name]).parameters, inspect.signature(found[OVER_MODELS[name]]).parameters
    assert list(over)[:2] == ["models", "split"]
    for param in ("methods", "max_instances", "seed", "k"):
        assert over[param].default == one[param].default and over[param].kind is inspect.Parameter.KEYWORD_ONLY


def test_the_runner_and_its_result_are_public():
    import attnlib
    from attnlib import runs

    assert attnlib.runs is runs and "InstanceResult" in runs.__all__ and "experiment" in runs.__all__
    for cls in ("PermutationResult", "AdversaryResult"):
        assert issubclass(getattr(cf, cls), runs.InstanceResult)


# --- The transformer experiments keep the same promises ------------------------------------------
from attnlib import explanations as ex  # noqa: E402
from attnlib import faithfulness as fa  # noqa: E402
from attnlib import flow as fl  # noqa: E402
from attnlib import head_perturbation as hp  # noqa: E402

TRANSFORMER_EXPERIMENTS = {
    "explain": lambda m, x, **kw: {k: np.concatenate(v) for k, v in
                                   ex.explain(m, x, seed=0, ig_steps=4, **kw).scores.items()},
    "relevance_by_layer": lambda m, x, **kw: {k: np.concatenate([np.ravel(a) for a in v]) for k, v in
                                              fl.relevance_by_layer(m, x, seed=0, **kw).scores.items()},
    "adversarial_heads": lambda m, x, **kw: hp.adversarial_heads(
        m, x, [m.sites[0], m.sites[-1]], k=2, steps=3, seed=0, **kw)[["instance", "eps_max_jsd", "kept"]]
        .to_dict("list"),
    "faithfulness": lambda m, x, **kw: fa.faithfulness(
        m, x, im.importance(m, x, seed=0, max_instances=kw.get("max_instances")), seed=0, **kw).to_frame()
        .select_dtypes("number").to_dict("list"),
}


@pytest.mark.parametrize("name", TRANSFORMER_EXPERIMENTS)
def test_transformer_experiments_do_not_depend_on_chunk_size(name, transformer, split):
    run = TRANSFORMER_EXPERIMENTS[name]
    _assert_same(run(transformer, split, max_instances=12), run(transformer, split, max_instances=12, chunk_size=5))


@pytest.mark.parametrize("name", [n for n in TRANSFORMER_EXPERIMENTS if n != "faithfulness"])
def test_transformer_experiments_take_a_split_or_a_batch(name, transformer, split):
    """(faithfulness scores by split position: with an ImportanceResult it takes the Split, tests/test_faithfulness.py)"""
    run = TRANSFORMER_EXPERIMENTS[name]
    batch = split.batch(np.arange(len(split)))
    _assert_same(run(transformer, split, max_instances=10), run(transformer, batch, max_instances=10), atol=0)
