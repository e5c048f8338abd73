"""attnlib.viz, attnlib.widgets and attnlib.exercises: figures draw, widgets build, checkers judge."""
import functools
import json
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from attnlib import exercises, viz, widgets  # noqa: E402
from attnlib.metrics import jsd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _close_figures():
    """Every figure a test leaves open must read well in the book's column (viz.unreadable)."""
    yield
    try:
        problems = {n: viz.unreadable(plt.figure(n)) for n in plt.get_fignums()}
        problems = {n: p for n, p in problems.items() if p}
        assert not problems, f"figures that would not read well on the page: {problems}"
    finally:
        plt.close("all")


def test_fit_column_narrows_wide_figures_and_raises_small_text():
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for ax in axes:
        ax.plot([0, 1], [0, 1])
        ax.set_title("panel", fontsize=10)
    axes[0].text(0.5, 0.5, "n=12", fontsize=5)
    assert len(viz.unreadable(fig)) == 2
    assert viz.fit_column(fig) is fig and viz.unreadable(fig) == []
    assert viz.COLUMN_INCHES - 0.1 < fig.get_size_inches()[0] <= viz.COLUMN_INCHES
    assert fig.get_size_inches()[1] == pytest.approx(3.4)  # the height is kept
    assert axes[0].texts[0].get_fontsize() == viz.MIN_FONT_PT
    # a figure the caller made and passed as ax= keeps its size
    fig2, ax2 = plt.subplots(figsize=(9, 3))
    viz.plot_training_history({"m": [{"epoch": 1, "dev_roc_auc": 0.5}, {"epoch": 2, "dev_roc_auc": 0.6}]}, ax=ax2)
    assert fig2.get_size_inches()[0] == pytest.approx(9)
    plt.close(fig2)


def test_colour_bars_say_what_the_colour_means():
    fig = viz.attention_heatmap([["a", "b"]], [[0.2, 0.8]])
    bars = [ax for ax in fig.axes if ax is not fig.axes[0]]
    assert bars and bars[0].get_ylabel() == "attention weight"
    fig = viz.matrix_heatmaps({"A": np.eye(3) / 3, "diff": np.eye(3) - 0.5}, ["x", "y", "z"], diverging=("diff",))
    labels = [ax.get_ylabel() for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert labels == ["attention weight (square-root scale)", "signed weight (0 at white)"]


def test_attention_heatmap_draws_every_token_and_wraps():
    words = ["the", "film", "is", "a", "gorgeous", "mess"] * 12
    fig = viz.attention_heatmap([words, ["awful"]], [np.linspace(0, 1, len(words)), [1.0]], titles=["a", "b"])
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count("gorgeous") == 12 and "awful" in texts and "a" in texts
    ys = {round(t.get_position()[1], 3) for t in fig.axes[0].texts if t.get_text() == "the"}
    assert len(ys) > 1  # long sentence wrapped onto several lines


@pytest.mark.parametrize(
    "sentences, weights, message",
    [([["a", "b"]], [[0.5]], "2 tokens but 1 weights"), ([["a"]], [[1.0], [1.0]], "1 sentences but 2")],
)
def test_attention_heatmap_validates(sentences, weights, message):
    with pytest.raises(ValueError, match=message):
        viz.attention_heatmap(sentences, weights)


def test_measures_figure_reports_the_metrics():
    fig = viz.measures_figure([0.1, 0.1, 0.5, 0.3], [0.0, 0.0, 0.3, 0.7], list("ATGC"))
    labels = " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
    assert "0.400" in labels  # TVD
    assert f"{jsd([0.1, 0.1, 0.5, 0.3], [0.0, 0.0, 0.3, 0.7]):.3f}" in labels
    assert "0.600" in labels  # tau_b


def test_training_history_and_relation_plots():
    hist = {"m": [{"epoch": 1, "dev_roc_auc": 0.7}, {"epoch": 2, "dev_roc_auc": 0.8}]}
    fig = viz.plot_training_history(hist, best={"m": 2})
    assert len(fig.axes[0].lines) == 2
    fig.canvas.draw()
    ticks = [t for t in fig.axes[0].get_xticks() if 1 <= t <= 2]
    assert ticks and all(float(t).is_integer() for t in ticks)  # no epoch 1.5
    fig = viz.plot_metric_relation(np.random.rand(20), np.random.rand(20), xlabel="x", ylabel="y", line=lambda x: x)
    assert fig.axes[0].get_xlabel() == "x"


def test_widgets_build_and_tempered_keeps_order():
    w = widgets.measures_explorer([0.2, 0.8], [0.5, 0.5], ["a", "b"])
    assert len(w.children) == 3
    # every explorer first says that its controls need a running kernel (static pages look live)
    assert "running notebook" in w.children[0].value and widgets.KERNEL_NOTE in w.children[0].value
    w = widgets.temperature_explorer([0.1, 0.2, 0.7], ["a", "b", "c"])
    assert w.children[1].value == 1.0
    p = np.array([0.1, 0.0, 0.6, 0.3])
    q = widgets.tempered(p, 0.5)
    assert np.isclose(q.sum(), 1) and q[1] == 0 and np.argsort(q[[0, 2, 3]]).tolist() == np.argsort(p[[0, 2, 3]]).tolist()
    with pytest.raises(ValueError):
        widgets.tempered(p, 0)
    with pytest.raises(ValueError):
        widgets.measures_explorer([0.5, 0.5], [1.0], ["a", "b"])


def _reference_tvd(p, q):
    return 0.5 * np.abs(np.asarray(p) - np.asarray(q)).sum(-1)


def test_checkers_accept_right_and_reject_wrong_answers():
    assert exercises.check_tvd(_reference_tvd)
    assert not exercises.check_tvd(lambda p, q: np.abs(np.asarray(p) - np.asarray(q)).sum(-1))  # forgot 1/2

    def starter(p, q):
        raise NotImplementedError

    verdict = exercises.check_jsd(starter)
    assert not verdict and "not implemented yet" in repr(verdict)
    assert "correct on all" in repr(exercises.check_tvd(_reference_tvd))
    assert not exercises.check_jsd(lambda p, q: np.log(2) * _reference_tvd(p, q))
    assert exercises.check_jsd(lambda p, q: jsd(p, q))


def test_tau_checker_catches_tau_a():
    def tau_a(x, y):
        x, y = np.asarray(x), np.asarray(y)
        i, j = np.triu_indices(len(x), 1)
        return float(np.sum(np.sign(x[i] - x[j]) * np.sign(y[i] - y[j])) / len(i))

    assert not exercises.check_kendall_tau(tau_a)  # ignores ties: wrong on the tied cases


def test_model_checkers():
    def softmax_right(scores, mask):
        s = scores.masked_fill(~mask, float("-inf"))
        return torch.softmax(s, -1).masked_fill(~mask, 0.0)

    def softmax_naive(scores, mask):  # overflows on large scores
        e = torch.exp(scores) * mask
        return e / e.sum(-1, keepdim=True)

    assert exercises.check_masked_softmax(softmax_right)
    assert not exercises.check_masked_softmax(softmax_naive)
    assert exercises.check_context(lambda h, a: (a.unsqueeze(-1) * h).sum(1))
    assert not exercises.check_context(lambda h, a: h.mean(1))


def test_every_chapter_installs_from_the_configured_repository():
    """The repository URL lives in _config.yml; each chapter's first cell is tools/install_cells.py's for it."""
    sys.path.insert(0, str(ROOT / "tools"))
    import install_cells

    config = (ROOT / "_config.yml").read_text()
    url = re.search(r"^repository:\s*\n(?:\s+#.*\n)*\s+url:\s*(\S+)", config, re.M).group(1)
    assert install_cells.repository_url() == url
    cell = install_cells.install_cell(url)
    assert f'REPOSITORY = "{url}"' in cell and '%pip install -q "attnlib[run] @ git+{REPOSITORY}"' in cell
    chapters = sorted((ROOT / "chapters").glob("[0-9]*.ipynb"))
    assert chapters
    stale = [p.name for p in install_cells.stale(url)]
    assert not stale, f"run tools/install_cells.py: the install cell differs in {stale}"
    for path in chapters:
        nb = json.loads(path.read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert not code[0].get("outputs"), f"{path.name}: the install cell has outputs"
        tags = [c.get("metadata", {}).get("tags", []) for c in code]
        assert any("parameters" in t for t in tags), f"{path.name}: no papermill 'parameters' cell"


def test_prose_fills_glued_names_as_an_f_string_would():
    from attnlib.presentation.glue import glue, glued, prose

    glue("t_frac", 0.42513, display=False)
    glue("t_words", "*too*, *n't*", display=False)
    glue("t_n", 1234, display=False)
    text = prose("{t_frac:.2f} of {t_n:,} (*{t_words}*); {{braces}} and {t_frac:.0%}")
    assert text == f"{0.42513:.2f} of {1234:,} (**too*, *n't**); {{braces}} and {0.42513:.0%}"
    assert glued()["t_n"] == 1234
    # math and code spans keep their braces; keyword values override glued ones
    assert prose(r"$\\hat{x}_{i}$ `{t_n}` {t_n}", t_n=7) == r"$\\hat{x}_{i}$ `{t_n}` 7"


def test_prose_is_markdown_whose_plain_text_is_the_paragraph():
    """Every front end renders the Markdown; nbval compares text/plain, so the paragraph itself."""
    from IPython.core.formatters import format_display_data

    from attnlib.presentation.glue import Prose, prose

    out = prose("\n**Reading it.** The BiLSTM reaches 0.8.\n")
    assert isinstance(out, Prose) and out == "**Reading it.** The BiLSTM reaches 0.8."
    bundle, _ = format_display_data(out)
    assert bundle == {"text/plain": str(out), "text/markdown": str(out)}
    assert repr(out) == str(out)


def test_prose_and_glue_errors_say_what_to_do():
    from attnlib.presentation.glue import glue, prose

    with pytest.raises(KeyError, match="run the cells above"):
        prose("{t_never_glued:.2f}")
    glue("t_word", "above", display=False)
    with pytest.raises(ValueError, match="t_word"):
        prose("{t_word:.2f}")
    with pytest.raises(TypeError, match="str"):
        prose(0.5)
    for bad in ("", "two words", "1st", None):
        with pytest.raises(ValueError, match="identifier"):
            glue(bad, 1)
    with pytest.raises(ValueError, match="display"):
        glue("t_ok", 1, display="no")


@settings(max_examples=60, deadline=None)
@given(
    value=st.floats(allow_nan=False, allow_infinity=False, width=64),
    spec=st.sampled_from(["", ".3f", ".2%", "g", ".1e", ",.2f"]),
    before=st.text(alphabet=st.characters(blacklist_characters="{}$`"), max_size=20),
)
def test_prose_field_equals_format(value, spec, before):
    from attnlib.presentation.glue import prose

    field = "{v" + (":" + spec if spec else "") + "}"
    expected = format(value, spec)
    if spec.endswith("%") and 0 < value < 1 and float(expected[:-1]) in (0.0, 100.0):
        expected = "<0.01%" if float(expected[:-1]) == 0 else ">99.99%"  # a share is never rounded to 0% or 100%
    assert prose(before + field, v=value) == (before + expected).strip("\n")


#: The widest code line a rendered chapter shows without clipping (house style).
CODE_WIDTH = 88


def test_chapter_code_lines_fit_the_page():
    """No code line of a chapter is wider than the rendered page (88 characters)."""
    chapters = sorted((ROOT / "chapters").glob("*.ipynb"))
    assert chapters
    wide = [
        f"{path.name} cell {i}: {len(line)} characters: {line.strip()[:60]}"
        for path in chapters
        for i, cell in enumerate(json.loads(path.read_text())["cells"])
        if cell["cell_type"] == "code"
        for line in "".join(cell["source"]).splitlines()
        if len(line) > CODE_WIDTH
    ]
    assert not wide, "code lines wider than {} characters:\n".format(CODE_WIDTH) + "\n".join(wide)


def test_violins_by_bin_handles_groups_and_empty_bins():
    import pandas as pd

    rng = np.random.default_rng(0)
    ma = rng.uniform(0, 0.7, 200)  # nothing in the top bin
    frame = pd.DataFrame({
        "tvd": rng.exponential(0.05, 200),
        "bin": pd.cut(ma, [0, 0.25, 0.5, 0.75, 1.0], right=False),
        "predicted": rng.integers(0, 2, 200),
    })
    fig = viz.plot_violins_by_bin(frame, value="tvd", reference=0.1, reference_label="ref")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(c) for c in frame["bin"].cat.categories]
    assert "n=0" in [t.get_text() for t in ax.texts]


def test_tau_distributions_legend_reports_means():
    fig = viz.plot_tau_distributions({"a": [0.1, 0.3, np.nan], "b": [0.5, 0.7]})
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["a (mean 0.20)", "b (mean 0.60)"]


def test_chapter_3_to_5_checkers_judge_reference_and_wrong_answers():
    from attnlib.metrics import jsd as jsd_

    def loo_loop(model, tokens):  # one forward per deletion: the definition
        base = model(tokens[None]).probs[0]
        out = []
        for t in range(1, len(tokens) - 1):
            x = torch.cat([tokens[:t], tokens[t + 1 :]])[None]
            out.append(0.5 * (model(x).probs[0] - base).abs().sum().item())
        return np.array(out)

    def loo_unk(model, tokens):  # replacement is not deletion
        base = model(tokens[None]).probs[0]
        out = []
        for t in range(1, len(tokens) - 1):
            x = tokens.clone()
            x[t] = 1
            out.append(0.5 * (model(x[None]).probs[0] - base).abs().sum().item())
        return np.array(out)

    assert exercises.check_leave_one_out(loo_loop)
    assert not exercises.check_leave_one_out(loo_unk)

    def permute(alpha, mask, g):
        out = alpha.clone()
        idx = mask.nonzero().squeeze(1)
        out[idx] = alpha[idx[torch.randperm(len(idx), generator=g)]]
        return out

    def permute_everything(alpha, mask, g):
        return alpha[torch.randperm(len(alpha), generator=g)]

    assert exercises.check_permutation(permute)
    assert not exercises.check_permutation(permute_everything)
    assert not exercises.check_permutation(lambda a, m, g: a)

    def eps_max(tvd, jsd, eps):
        return np.max(np.where(tvd <= eps, jsd, 0.0), axis=1)

    assert exercises.check_eps_max_jsd(eps_max)
    assert not exercises.check_eps_max_jsd(lambda tvd, jsd, eps: jsd.max(1))  # ignores eps

    def pairwise(c):
        i, j = np.triu_indices(len(c), 1)
        return float(np.mean(jsd_(c[i], c[j])))

    assert exercises.check_pairwise_jsd(pairwise)
    assert not exercises.check_pairwise_jsd(lambda c: float(jsd_(c[0], c[-1])))


def test_chapter_6_and_7_checkers_judge_reference_and_wrong_answers():
    assert exercises.check_uniform_attention(lambda m: m.float() / m.float().sum(-1, keepdim=True))
    assert not exercises.check_uniform_attention(lambda m: torch.full(m.shape, 1.0 / m.shape[1]))  # counts padding

    def f1(y, p):
        pred = p > 0.5
        tp = np.sum(pred & (y == 1))
        return 0.0 if tp == 0 else 2 * tp / (pred.sum() + np.sum(y == 1))

    assert exercises.check_f1(f1)
    assert not exercises.check_f1(lambda y, p: float(np.mean((p > 0.5) == y)))  # accuracy is not F1

    assert exercises.check_median_jsd_over_seeds(lambda s, b: np.median(jsd(s, np.broadcast_to(b, s.shape)), axis=0))
    assert not exercises.check_median_jsd_over_seeds(lambda s, b: np.mean(jsd(s, np.broadcast_to(b, s.shape)), axis=0))

    assert exercises.check_noise_floor_fraction(lambda a, s: float(np.mean(a > s)))
    assert not exercises.check_noise_floor_fraction(lambda a, s: float(np.mean(a >= s)))  # ties count


def _kl(a, b, mask):
    la = torch.log(torch.where(mask, a, torch.ones_like(a)))
    lb = torch.log(torch.where(mask, b, torch.ones_like(b)))
    return torch.where(mask, a * (la - lb), torch.zeros_like(a)).sum(-1)


def test_chapter_8_checkers_catch_nan_and_the_swapped_kl():
    assert exercises.check_masked_kl(_kl)
    assert not exercises.check_masked_kl(lambda a, b, m: _kl(b, a, m))  # KL(b || a): the swapped order
    naive = exercises.check_masked_kl(lambda a, b, m: (a * torch.log(a / b)).sum(-1))  # 0 log 0/0 on padding
    assert not naive and "off" in naive.message

    def loss(pa, pb, a, b, mask, lam):
        return 0.5 * (pa - pb).abs().sum(-1) - lam * _kl(a, b, mask)

    assert exercises.check_adversarial_loss(loss)
    assert not exercises.check_adversarial_loss(lambda pa, pb, a, b, m, lam: 0.5 * (pa - pb).abs().sum(-1) + lam * _kl(a, b, m))
    assert "not implemented" in exercises.check_adversarial_loss(lambda *a: (_ for _ in ()).throw(NotImplementedError())).message


def test_chapter_9_checkers():
    def context(hidden, given):
        alpha = torch.zeros(hidden.shape[:2], dtype=hidden.dtype)
        for i, w in enumerate(given):
            alpha[i, : len(w)] = torch.as_tensor(w)
        return torch.einsum("bt,bth->bh", alpha, hidden)

    assert exercises.check_guided_context(context)
    assert not exercises.check_guided_context(lambda h, g: h.mean(1))  # uniform, padding included

    def gain(frame):
        import pandas as pd

        wide = frame.pivot(index="seed", columns="guide", values="f1")
        d = wide.sub(wide["uniform"], axis=0)
        return pd.DataFrame({"mean gain": d.mean(), "sd gain": d.std()})

    def gain_of_means(frame):  # ignores the pairing by seed only in sd
        import pandas as pd

        g = frame.groupby("guide").f1
        return pd.DataFrame({"mean gain": g.mean() - g.mean()["uniform"], "sd gain": g.std()})

    assert exercises.check_guide_gain(gain)
    assert not exercises.check_guide_gain(gain_of_means)
    assert "columns" in exercises.check_guide_gain(lambda f: f).message


def test_chapter_10_checkers():
    from attnlib.erasure import erased_attention

    assert exercises.check_erase(lambda *a: erased_attention(*a))
    imported = exercises.check_erase(erased_attention)  # attnlib's own function is not an answer
    assert not imported and "imported, not written" in imported.message

    def no_renormalise(a, mask, remove):
        return a.masked_fill(remove, 0.0)

    assert not exercises.check_erase(no_renormalise)

    def fraction(flips, lengths):
        first = flips.argmax(-1) + 1.0
        return np.where(flips.any(-1), first / lengths, np.nan)

    assert exercises.check_first_flip_fraction(fraction)
    assert not exercises.check_first_flip_fraction(lambda f, n: (f.argmax(-1) + 1.0) / n)  # never-flipped is not 1/n
    assert not exercises.check_first_flip_fraction(lambda f, n: np.where(f.any(-1), f.argmax(-1) / n, np.nan))  # off by one


def test_lambda_sweep_plot_rings_the_chosen_lambda_and_rejects_unknown():
    import pandas as pd

    frame = pd.DataFrame({"lambda": [1e-3, 1e-2, 1.0], "mean_jsd": [0.2, 0.5, 0.69], "mean_tvd": [0.05, 0.08, 0.1]})
    fig = viz.plot_lambda_sweep(frame, points={"seeds": (0.25, 0.06), "uniform": (0.3, 0.1)}, highlight=0.01)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert labels == ["adversaries (one per lambda)", "seeds", "uniform", "shown: λ = 0.01"]
    with pytest.raises(ValueError, match="no lambda 0.5"):
        viz.plot_lambda_sweep(frame, highlight=0.5)


def test_lambda_labels_that_would_overlap_share_one():
    import pandas as pd

    # chapter 8's run: λ = 0.01 and 1 at the same JSD, 0.01 apart in TVD on an axis to 0.39
    frame = pd.DataFrame({"lambda": [1e-3, 1e-2, 0.1, 1.0], "mean_jsd": [0.38, 0.690, 0.690, 0.690],
                          "mean_tvd": [0.115, 0.139, 0.290, 0.129]})
    fig = viz.plot_lambda_sweep(frame)
    texts = sorted(t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("λ"))
    assert texts == ["λ = 0.001", "λ = 0.01, 1", "λ = 0.1"]


def test_plot_guides_marks_gain_and_paper():
    import pandas as pd

    frame = pd.DataFrame({"test f1": [0.78, 0.79, 0.73], "test f1 sd": [0.01, 0.0, 0.02],
                          "published f1": [0.812, 0.817, np.nan]}, index=["uniform", "trained MLP", "oracle"])
    fig = viz.plot_guides(frame, title="t")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["uniform", "trained MLP", "oracle"]
    colours = [matplotlib.colors.to_hex(b.get_facecolor()) for b in ax.patches]
    assert colours == ["#bbbbbb", "#2ca02c", "#d62728"]  # baseline, better than uniform, worse
    assert ax.get_legend_handles_labels()[1] == ["W&P 2019, Table 3"]
    with pytest.raises(ValueError, match="metric 'test auc'"):
        viz.plot_guides(frame, metric="test auc")


def test_flip_curves_reach_the_flipped_share():
    fractions = np.array([0.1, 0.5, np.nan, 1.0])
    fig = viz.plot_flip_curves({"m": {"attention": fractions, "random": np.array([np.nan, np.nan])}})
    lines = fig.axes[0].get_lines()
    assert lines[0].get_ydata()[-1] == pytest.approx(0.75) and lines[0].get_ydata()[0] == 0
    assert np.all(lines[1].get_ydata() == 0)
    assert fig.axes[0].get_legend_handles_labels()[1] == ["attention (never: 25%)", "random (never: 100%)"]
    with pytest.raises(ValueError, match="at least one"):
        viz.plot_flip_curves({})


def test_identifiability_exercises_accept_the_solutions_and_reject_near_misses():
    def null_dim(T):
        s = np.linalg.svd(T, compute_uv=False)
        return T.shape[0] - int((s > 100 * np.finfo(T.dtype).eps * s.max()).sum())

    def effective(A, T):
        U, s, _ = np.linalg.svd(T, full_matrices=False)
        r = int((s > 100 * np.finfo(T.dtype).eps * s.max()).sum())
        return A @ U[:, :r] @ U[:, :r].T

    assert exercises.check_null_dim(null_dim)
    assert not exercises.check_null_dim(lambda T: max(T.shape[0] - T.shape[1], 0))  # rank-deficient T has more
    assert exercises.check_effective_attention(effective)
    assert not exercises.check_effective_attention(lambda A, T: A)  # nothing projected away
    assert not exercises.check_effective_attention(
        lambda A, T: A @ np.linalg.svd(T, full_matrices=False)[0] @ np.linalg.svd(T, full_matrices=False)[0].T)  # no rank cut


def test_identifiability_figures():
    import matplotlib.pyplot as plt
    import pandas as pd

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"length": rng.integers(3, 40, 200), "d_v": 8, "layer": rng.integers(0, 3, 200)})
    frame["null_dim"] = np.maximum(frame["length"] - 8, 0)
    frame["correlation"] = np.where(frame["length"] <= 8, 1.0, rng.uniform(0.3, 0.9, 200))
    for k in ("raw", "effective"):
        frame[f"{k} [SEP]"] = rng.uniform(0, 0.5, 200)
    fig = viz.plot_null_space({"a": frame, "b": frame})
    assert len(fig.axes) == 2 and any("= 8" in label for label in fig.axes[1].get_legend_handles_labels()[1])
    fig2 = viz.plot_group_mass(frame, ["[SEP]"], reference={"paper": ([1, 2], [0.5, 0.5])})
    assert len(fig2.axes[0].get_lines()) >= 3
    fig3 = viz.plot_correlation_by_length({"m": frame}, bins=[2, 8, 16, 41], reference={"Brunner": ([128], [(0.4, 0.55)])})
    assert fig3.axes[0].get_ylabel().startswith("Pearson")
    A = rng.dirichlet(np.ones(4), size=4)
    fig4 = viz.matrix_heatmaps({"A": A, "A + Ã": A, "Ã": A - A.T}, list("abcd"), diverging=["Ã"])
    # three panels and their colour bars, two a row (a fourth, empty place hidden)
    assert len([ax for ax in fig4.axes if ax.get_visible()]) == 6
    with pytest.raises(ValueError, match="expected"):
        viz.matrix_heatmaps({"A": A}, list("abc"))
    table = pd.DataFrame({"linear/cosine": [1.0, 0.9, 0.8]}, index=[0, 1, 2])
    fig5 = viz.plot_token_identity(table, reference={"Brunner": ([2], [0.9])}, chance=0.1)
    assert fig5.axes[0].get_ylim()[1] > 1
    plt.close("all")


def test_null_space_figure_and_explorer_keep_the_head_output():
    import matplotlib.pyplot as plt
    import re

    import torch

    from attnlib import data
    from attnlib.models import TransformerClassifier, TransformerConfig

    torch.manual_seed(0)
    model = TransformerClassifier(30, TransformerConfig(layers=2, heads=2, head_dim=3, embed_dim=6, dropout=0.0))
    rng = np.random.default_rng(0)
    ids = [np.concatenate([[data.SOS], rng.integers(4, 30, n - 2), [data.EOS]]) for n in (9, 6)]
    tr = model.trace(data.collate(ids, [0, 1]))
    tokens = [[f"w{i}" for i in range(int(n))] for n in tr.lengths]
    fig = widgets.null_space_figure(tr, tokens, 0, 1, 1, 1.0)
    title = fig._suptitle.get_text()
    change, scale, jsd = (float(x) for x in re.findall(r"= ([0-9.e+-]+)", title)[:3])
    assert change < 1e-5 * max(scale, 1) and jsd > 0.01  # the output stays, the attention moves
    assert widgets.null_space_figure(tr, tokens, 0, 1, 1, 0.0)._suptitle.get_text().endswith("= 0.000")
    w = widgets.null_space_explorer(tr, tokens, layer=1, head=0)
    assert len(w.children) == 4
    layer, head, step = w.children[2].children  # counted from 1, as the figure's title counts them
    assert (layer.description, layer.min, layer.max, layer.value) == ("layer", 1, tr.n_layers, 2)
    assert (head.description, head.min, head.value) == ("head", 1, 1)
    assert w.children[2].layout.flex_flow == "row wrap"  # a phone wraps the controls
    assert w.children[1].layout.max_width == "100%"  # the sentence menu never wider than its box
    assert all(c.layout.width == "100%" and c.layout.max_width for c in (layer, head, step))  # a usable track
    with pytest.raises(ValueError, match="step"):
        widgets.null_space_figure(tr, tokens, 0, 0, 0, 2.0)
    with pytest.raises(ValueError, match="tokens"):
        widgets.null_space_figure(tr, [t[:-1] for t in tokens], 0, 0, 0)
    plt.close("all")


def test_chapter_12_and_13_checkers_judge_reference_and_wrong_answers():
    from attnlib import metrics

    def head_tvd(model, tokens, site, sources):
        with torch.no_grad():
            base = model(tokens).probs
            new = model(tokens, edits={site: lambda a, m: a.gather(-1, sources)}).probs
        return metrics.tvd(base, new)

    assert exercises.check_head_permutation(head_tvd)
    # permuting the keys' axis the wrong way round (the query axis) is caught
    assert not exercises.check_head_permutation(
        lambda model, tokens, site, sources: head_tvd(model, tokens, site, sources.transpose(1, 2)))

    def importance(A, G):
        s = np.abs((A * G).sum((-1, -2))).mean(0)
        return s / np.linalg.norm(s, axis=1, keepdims=True)

    assert exercises.check_head_importance(importance)
    # the absolute value taken after the mean (Michel's code, per batch) is a different score
    assert not exercises.check_head_importance(
        lambda A, G: (lambda s: s / np.linalg.norm(s, axis=1, keepdims=True))(np.abs((A * G).sum((-1, -2)).mean(0))))

    def mass(a, m):
        return (a * m).sum(-1)

    assert exercises.check_attention_mass(mass)
    assert not exercises.check_attention_mass(lambda a, m: (a * ~m).sum(-1))
    assert exercises.check_impermissible_penalty(
        lambda a, m, lam: (-lam * torch.log((1 - mass(a, m)).clamp_min(1e-10))).mean())
    assert not exercises.check_impermissible_penalty(lambda a, m, lam: (-lam * torch.log(1 - mass(a, m))).mean())
    assert not exercises.check_impermissible_penalty(lambda a, m, lam: (-lam * torch.log(mass(a, m))).mean())


def test_deception_figures_and_explorer():
    import pandas as pd

    from attnlib import data
    from attnlib.models import TransformerConfig

    torch.manual_seed(0)
    ds = data.load_deception(max_train=40, max_eval=10)
    models = {"transformer": {lam: TransformerConfig(layers=1, heads=2, head_dim=4, embed_dim=50).build(len(ds.vocab))
                              for lam in (0.0, 1.0)}}
    fig = widgets.deception_figure(models, ds.test, 0)
    assert fig.axes
    with pytest.raises(ValueError, match="family"):
        widgets.deception_figure(models, ds.test, 0, family="lstm")
    assert widgets.deception_explorer(models, ds.test, [0, 1]) is not None
    shares = pd.DataFrame({"attention": [0.6, 0.01], "gradient": [0.7, np.nan]}, index=["λ = 0", "λ = 1"])
    assert viz.plot_explanation_mass(shares, reference=0.55).axes


# ------------------------------------------------------------------ Chapter 14: rollout and flow
def _augmented(attention, residual):
    T = attention.shape[-1]
    a = residual * torch.eye(T, dtype=attention.dtype) + (1 - residual) * attention.mean(0)
    return a / a.sum(-1, keepdim=True)


def test_rollout_checkers_accept_the_solution_and_reject_near_misses():
    def rollout_right(attentions):
        out = None
        for layer in attentions:
            a = _augmented(layer, 0.5)
            out = a if out is None else a @ out
        return out

    def rollout_reversed(attentions):  # the product in the wrong order
        out = None
        for layer in attentions:
            a = _augmented(layer, 0.5)
            out = a if out is None else out @ a
        return out

    assert exercises.check_augmented_attention(_augmented)
    assert not exercises.check_augmented_attention(lambda a, r: a.mean(0))  # no residual
    assert not exercises.check_augmented_attention(lambda a, r: r * torch.eye(a.shape[-1]) + (1 - r) * a.mean(0)
                                                   if r == 0.5 else _augmented(a, 0.5))  # ignores r
    assert exercises.check_rollout(rollout_right)
    assert not exercises.check_rollout(rollout_reversed)
    assert "not implemented" in repr(exercises.check_rollout(lambda a: (_ for _ in ()).throw(NotImplementedError)))


def test_relevance_figures_and_the_rollout_widget(tiny_dataset):
    import matplotlib.pyplot as plt
    import pandas as pd

    from attnlib.models import TransformerClassifier, TransformerConfig

    tokens = ["a", "b", "c"]
    fig = viz.plot_relevance_by_layer(tokens, {"raw": np.full((2, 3), 1 / 3), "flow": np.eye(3)[:2]})
    assert len(fig.axes) == 4 and fig.axes[0].get_yticklabels()[0].get_text() == "layer 1"  # two panels, two bars
    plt.close(fig)
    with pytest.raises(ValueError, match="expected"):
        viz.plot_relevance_by_layer(tokens, {"raw": np.ones((2, 4))})
    table = pd.DataFrame({"measure": ["loo"] * 4, "method": ["rollout", "rollout", "flow", "flow"],
                          "layer": [1, 2, 1, 2], "mean": [0.1, 0.2, 0.3, 0.4], "sd": [0.1] * 4})
    fig = viz.plot_layer_correlations(table, measures={"loo": "blank-out"})
    assert fig.axes[0].get_title() == "blank-out" and len(fig.axes[0].lines) == 3  # two methods and y = 0
    plt.close(fig)
    torch.manual_seed(0)
    model = TransformerClassifier(len(tiny_dataset.vocab), TransformerConfig(layers=2, heads=2, head_dim=4,
                                                                             embed_dim=6, dropout=0.0)).eval()
    fig = widgets.rollout_figure(model, tiny_dataset.test, 3, residual=0.3)
    assert len(fig.axes) == 6 and "r = 0.3" in fig.texts[0].get_text()  # three panels and their colour bars
    plt.close(fig)
    box = widgets.rollout_explorer(model, tiny_dataset.test, [0, 3])
    assert len(box.children) == 4
    with pytest.raises(ValueError, match="index"):
        widgets.rollout_figure(model, tiny_dataset.test, len(tiny_dataset.test))


def test_chapter_15_checkers():
    import math

    def erasure(predict, words, scores, fraction, *, stable=True, ceil=True):
        n = len(words)
        k = min(n, max(1, math.ceil(round(fraction * n, 9)) if ceil else int(fraction * n)))
        order = np.argsort(-np.asarray(scores), kind="stable" if stable else "quicksort")[:k]
        top = np.zeros(n, dtype=bool)
        top[order] = True
        full = predict(words)
        j = int(full.argmax())
        without = predict([w for w, t in zip(words, top) if not t])
        alone = predict([w for w, t in zip(words, top) if t])
        return full[j] - without[j], full[j] - alone[j]

    assert exercises.check_erasure_one_instance(erasure)
    assert not exercises.check_erasure_one_instance(functools.partial(erasure, ceil=False))  # k = floor
    swapped = exercises.check_erasure_one_instance(lambda *a: erasure(*a)[::-1])
    assert not swapped and "off" in repr(swapped)
    assert exercises.check_aopc(lambda v: np.asarray(v).mean(-1))
    assert not exercises.check_aopc(lambda v: np.trapezoid(v, [0.01, 0.05, 0.1, 0.2, 0.5], axis=-1))
    assert not exercises.check_aopc(lambda v: np.asarray(v).mean())  # one number for every curve


def test_figures_that_compare_methods_tell_them_apart_without_colour():
    import pandas as pd
    from matplotlib.colors import to_hex

    from attnlib.presentation.viz.core import HATCHES, SAFE_COLOURS

    shares = pd.DataFrame({"attention": [0.1, 0.2], "gradient": [0.3, 0.4], "leave-one-out": [0.5, 0.6],
                           "rollout": [0.2, 0.1]}, index=["BiLSTM", "transformer"])
    fig = viz.plot_explanation_mass(shares, reference=0.2)
    bars = [p for p in fig.axes[0].patches]
    assert len({b.get_hatch() for b in bars}) == 4  # a hatch per explanation
    assert {to_hex(b.get_facecolor()).upper() for b in bars} <= set(SAFE_COLOURS)
    assert "#D62728" not in {to_hex(b.get_facecolor()).upper() for b in bars}  # no red beside a green
    assert len(set(HATCHES)) == len(HATCHES) == len(SAFE_COLOURS)
    plt.close(fig)
