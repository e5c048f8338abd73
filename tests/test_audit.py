"""attnlib.audit: the book's battery on your own model and texts, in one call (a tiny random BERT, a 30-row CSV)."""
import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("transformers")
pytest.importorskip("captum")

from attnlib import viz  # noqa: E402
from attnlib.audit import AuditReport, audit  # noqa: E402
from attnlib.data import load_texts  # noqa: E402
from attnlib.explanations import METHODS  # noqa: E402
from attnlib.models import PretrainedClassifier  # noqa: E402

POSITIVE = ["good", "fun", "film", "story", "short", "very", "a"]
NEGATIVE = ["bad", "boring", "movie", "plot", "long", "not", "the"]


@pytest.fixture(scope="module")
def reviews_csv(tmp_path_factory):
    """30 reviews, half of words from POSITIVE (label "great"), half from NEGATIVE ("other")."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(30):
        words = POSITIVE if i % 2 else NEGATIVE
        rows.append({"review": " ".join(rng.choice(words, size=3 + i % 4)), "score": "great" if i % 2 else "other"})
    path = tmp_path_factory.mktemp("audit") / "reviews.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _check_intervals(table, metric):
    assert (table[f"{metric} low"] <= table[metric] + 1e-12).all() and (table[metric] <= table[f"{metric} high"] + 1e-12).all()


def test_audit_of_a_checkpoint_on_a_csv(tiny_bert_checkpoint, reviews_csv):
    # an encoder without a head: one is fitted on a stratified half of the 30 texts, the other half is audited
    report = audit(str(tiny_bert_checkpoint), reviews_csv, text="review", label="score", n_permutations=5,
                   ig_steps=4, progress=False)
    n_test = 15
    assert isinstance(report, AuditReport) and report.n_instances == n_test
    assert report.notes[0].startswith("the model has no classifier head") and "other 15 are audited" in report.notes[0]
    assert report.notes[1].startswith("the head was fitted on 15 texts")
    assert list(report.tables) == ["summary", "identifiability", "permutation", "faithfulness"]
    assert any(n.startswith("plausibility") for n in report.notes)
    ident = report.tables["identifiability"]
    assert len(ident) == 4 and ident["null space (share)"].between(0, 1).all()  # 2 layers x 2 heads
    perm = report.tables["permutation"]
    assert len(perm) == 4 and (perm["low"] <= perm["median TVD"] + 1e-12).all()
    assert perm["flipped (share)"].between(0, 1).all()
    faith = report.tables["faithfulness"]
    assert list(faith.index) == list(METHODS)  # rollout, flow and effective attention apply to a BERT
    for metric in ("comprehensiveness", "sufficiency"):
        _check_intervals(faith, metric)
        assert faith[f"{metric} rank"].str.fullmatch(r"\d+=?").all()
    summary = report.tables["summary"]
    assert summary.loc["accuracy", "n"] == n_test and 0 <= summary.loc["accuracy", "mean"] <= 1
    # every line's interval is over the audited instances, a mean over heads included
    null = summary.loc["sentences whose head has a null space (share; mean over heads)"]
    assert null["n"] == n_test and null["mean"] == pytest.approx(ident["null space (share)"].mean())
    tvd = summary.loc["output change when a head is permuted (median TVD; mean over heads)"]
    assert tvd["n"] == n_test and tvd["mean"] == pytest.approx(perm["median TVD"].mean())
    shown = report.readable("faithfulness")
    assert list(shown.columns) == ["comprehensiveness (higher is better)", "sufficiency (lower is better)"]
    assert shown.iloc[0, 0].count("[") == 1 and shown.iloc[0, 0].endswith(")")
    assert report.readable("summary").columns[0] == "mean [95% interval]"
    with pytest.raises(ValueError, match="no table"):
        report.readable("plausibility")
    fig = viz.plot_audit(report, title="tiny BERT")
    labels = [ax.get_ylabel() for ax in fig.axes] + [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any(t.startswith("median TVD under permutation\n(scale 0 to ") for t in labels)
    assert any(t.startswith("raw vs effective attention (mean r)") for t in labels)  # a colour bar, or a value
    matplotlib.pyplot.close(fig)


def test_audit_of_a_book_model_on_its_split_reports_plausibility(tiny_model, tiny_dataset):
    model = tiny_model("average", "tanh", epochs=3)
    report = audit(model, tiny_dataset.test, max_instances=20, n_permutations=5, ig_steps=4, progress=False)
    assert list(report.tables) == ["summary", "permutation", "faithfulness", "plausibility"]
    assert any(n.startswith("identifiability") for n in report.notes)  # one layer, no heads to trace
    assert len(report.tables["permutation"]) == 1  # J&W's one site
    plaus = report.tables["plausibility"]
    assert set(plaus.index) == {"attention", "gradient × input", "integrated gradients", "leave-one-out", "random"}
    _check_intervals(plaus, "average precision")
    # the trained model finds the markers: attention beats a random ranking beyond noise
    assert plaus.loc["attention", "average precision low"] > plaus.loc["random", "average precision high"]


def test_audit_errors_say_what_to_do(tiny_model, tiny_dataset, reviews_csv, tiny_bert_checkpoint):
    model = tiny_model("average", "tanh", epochs=3)
    with pytest.raises(ValueError, match="reads its own vocabulary"):
        audit(model, reviews_csv, text="review", label="score")
    clf = PretrainedClassifier(tiny_bert_checkpoint)
    batch = clf.encode_texts(["the movie is good", "a boring plot"], [1, 0])
    with pytest.raises(ValueError, match="no training split"):
        audit(clf, batch, fit_head=True)
    with pytest.raises(ValueError, match="token-level access"):
        audit(object(), batch)
    with pytest.raises(ValueError, match="n_permutations"):
        audit(clf, batch, n_permutations=0)


def _flat_report(tvd, r):
    """A report whose permutation TVDs are ``tvd`` and whose raw-vs-effective r are ``r`` (per head)."""
    n = len(tvd)
    index = pd.MultiIndex.from_tuples([(0, h) for h in range(n)], names=["layer", "head"])
    tables = {"permutation": pd.DataFrame({"median TVD": tvd, "low": tvd, "high": tvd, "flipped (share)": 0.0},
                                          index=index)}
    if r is not None:
        tables["identifiability"] = pd.DataFrame({"raw vs effective r (mean)": r}, index=index)
    faith = {}
    for m, v in (("attention", 0.2), ("random", 0.1)):
        faith[m] = {"comprehensiveness": v, "comprehensiveness low": v - 0.05, "comprehensiveness high": v + 0.05,
                    "comprehensiveness rank": "1=", "sufficiency": v, "sufficiency low": v - 0.05,
                    "sufficiency high": v + 0.05, "sufficiency rank": "1="}
    tables["faithfulness"] = pd.DataFrame.from_dict(faith, orient="index")
    return AuditReport(model="m", n_instances=10, tables=tables, notes=[], settings={})


def test_the_audit_figure_writes_a_value_where_a_heatmap_would_be_flat():
    from attnlib.presentation.viz.part4 import AUDIT_TVD_FLOOR

    fig = viz.plot_audit(_flat_report([1e-5, 2e-5, 3e-5, 4e-5], [1.0] * 4))
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any("every one of the 4 heads: 1" in t for t in texts)  # r = 1 everywhere: a value, no blank heatmap
    images = [im for ax in fig.axes for im in ax.get_images()]
    assert len(images) == 1 and images[0].get_clim() == (0.0, AUDIT_TVD_FLOOR)  # tiny TVDs stay pale
    bars = [ax.get_ylabel() for ax in fig.axes if "scale" in ax.get_ylabel()]
    assert bars and "scale 0 to 0.01" in bars[0]
    matplotlib.pyplot.close(fig)
    one = viz.plot_audit(_flat_report([0.3], None))  # J&W's one site: a value, not a 1x1 heatmap
    assert not [im for ax in one.axes for im in ax.get_images()]
    assert any("the one attention: 0.3" in t.get_text() for ax in one.axes for t in ax.texts)
    matplotlib.pyplot.close(one)


_HOST = r"""
import hashlib, json, os, random, sys
import numpy as np
import torch
from threadpoolctl import threadpool_info

torch.set_num_threads(3)  # the host's own choices
torch.manual_seed(123), np.random.seed(123), random.seed(123)


def digest(obj):
    return hashlib.sha256(repr(obj).encode()).hexdigest()[:12]


def state():
    return {"environment": dict(os.environ), "torch threads": torch.get_num_threads(),
            "oneDNN": bool(torch.backends.mkldnn.enabled), "ATen": torch.backends.cpu.get_cpu_capability(),
            "deterministic": torch.are_deterministic_algorithms_enabled(), "dtype": str(torch.get_default_dtype()),
            "grad": torch.is_grad_enabled(), "BLAS threads": {i["filepath"]: i["num_threads"] for i in threadpool_info()},
            "numpy errors": np.geterr(), "numpy print": repr(np.get_printoptions()),
            "torch generator": digest(torch.random.get_rng_state().tolist()),
            "numpy generator": digest(np.random.get_state()[1].tolist()), "random": digest(random.getstate())}


before = state()
import attnlib
from attnlib.audit import audit

report = audit(sys.argv[1], sys.argv[2], text="review", label="score", n_permutations=2, ig_steps=4,
               max_instances=8, progress=False)
after = state()
# a library loaded since (SciPy's BLAS) has its own pool: those already there must keep their threads
after["BLAS threads"] = {path: n for path, n in after["BLAS threads"].items() if path in before["BLAS threads"]}
changed = {k: [before[k], after[k]] for k in before if before[k] != after[k] and k != "environment"}
env = {k: [before["environment"].get(k), after["environment"].get(k)]
       for k in {*before["environment"], *after["environment"]}
       if before["environment"].get(k) != after["environment"].get(k)}
print(json.dumps({"changed": changed, "environment": env, "pinned": attnlib.cpu.status().pinned,
                  "audited": report.n_instances}))
"""


def test_importing_attnlib_and_auditing_leaves_the_hosts_settings_alone(tiny_bert_checkpoint, reviews_csv):
    """Issue 52: a practitioner's script that imports attnlib and audits a model (a head fitted, so the
    training path runs too) keeps its torch and numpy settings, its environment and its random generators;
    the book's pins come only with ``import attnlib.reproducible``."""
    import json
    import subprocess
    import sys

    from test_cpu import fresh_env

    out = subprocess.run([sys.executable, "-c", _HOST, str(tiny_bert_checkpoint), str(reviews_csv)],
                         capture_output=True, text=True, timeout=600, env=fresh_env())
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["audited"] > 0 and seen["pinned"] is False
    assert seen["changed"] == {} and seen["environment"] == {}, seen
