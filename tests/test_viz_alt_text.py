"""Each figure's alt text (viz.describe) says what its data show, after the axes: viz.summarise."""
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from attnlib import viz, widgets  # noqa: E402
from attnlib.presentation.viz import words  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def said(fig) -> str:
    """The figure's description, and the figure closed."""
    text = viz.describe(fig)
    plt.close(fig)
    return text


# ----------------------------------------------------------------------------- the helper
def test_summarise_adds_to_the_made_description_and_a_given_one_wins():
    fig, ax = plt.subplots()
    ax.plot([1, 2], [0.2, 0.4], label="flow")
    ax.set(xlabel="layer", ylabel="r")
    ax.legend()
    viz.summarise(fig, "  flow:\n0.2 at layer 1 to 0.4 at layer 2. ")
    assert viz.describe(fig) == ("A figure of one panel. x: layer; y: r. Legend: flow. "
                                 "flow: 0.2 at layer 1 to 0.4 at layer 2.")
    fig.suptitle("set afterwards")  # the made part is made when shown: a later title is in it
    assert viz.describe(fig).startswith("set afterwards. A figure of one panel.")
    viz.summarise(fig, "replaced.")  # a summary of the whole figure replaces the one before
    assert viz.describe(fig).endswith("Legend: flow. replaced.")
    for bad in ("", "   ", None, 3):
        with pytest.raises(ValueError, match="summary"):
            viz.summarise(fig, bad)
    assert viz.describe(fig, "Two lines.") == "Two lines." and viz.describe(fig) == "Two lines."


def test_summaries_of_panels_drawn_into_the_callers_figure_stand_side_by_side():
    fig, (left, right) = plt.subplots(1, 2, figsize=(6.4, 3))
    viz.plot_training_history({"m": [{"epoch": 1, "dev_roc_auc": 0.5}, {"epoch": 2, "dev_roc_auc": 0.61}]}, ax=left)
    viz.plot_tau_distributions({"a": [0.1, 0.3, np.nan]}, ax=right)
    text = said(fig)
    assert text.startswith("A figure of 2 panels.")
    assert text.endswith("dev roc auc: m 0.5 at epoch 1 to 0.61 at epoch 2. Kendall tau: a median 0.2, n = 2.")


def test_a_summary_is_cut_at_a_word_to_its_length():
    fig, _ = plt.subplots()
    viz.summarise(fig, "word " * 100)
    summary = viz.describe(fig).removeprefix("A figure of one panel. ")
    assert len(summary) <= viz.core.SUMMARY_CHARS and summary.endswith("word …")


# ----------------------------------------------------------------------------- Part I and the shared figures
def test_attention_heatmap_names_the_heaviest_words():
    text = said(viz.attention_heatmap([["a", "good", "film"], ["so", "bad"]], [[0.1, 0.6, 0.3], [0.2, 0.8]]))
    assert text.startswith("Words shaded by attention weight: a good film so bad.")
    assert text.endswith("Heaviest word per row: 'good' (0.6), 'bad' (0.8).")
    text = said(viz.attention_heatmap([["a", "good", "film", "x"]], [[0.1, 0.6, 0.3, np.nan]]))
    assert text.endswith("Heaviest words: 'good' (0.6), 'film' (0.3), 'a' (0.1).")  # NaN skipped
    text = said(viz.attention_heatmap([["a", "b"]], [[np.nan, np.nan]]))
    assert text.endswith("Heaviest words: n/a.")
    rows = [["w"]] * 8
    text = said(viz.attention_heatmap(rows, [[0.5]] * 8))
    assert text.endswith("Heaviest word per row: " + "'w' (0.5), " * 6 + "….")  # at most 6, then "…"


def test_compare_heatmap_names_each_rows_heaviest_word_as_drawn():
    text = said(viz.compare_heatmap(["a", "good", "film"], {"attention (p = 0.9)": [0.1, 0.6, 0.3],
                                                             "gradient": [-2.0, 1.0, 1.0]}))
    assert "Words shaded by attention weight:" in text  # the made part
    # |gradient| scaled to sum 1: 'a' has 0.5; a row's parenthesis is left out of its name
    assert text.endswith("Heaviest word per row (each row scaled to sum 1): attention 'good' (0.6); "
                         "gradient 'a' (0.5).")


def test_matrix_heatmaps_name_the_most_attended_key_and_the_extreme_cells():
    A = np.array([[0.1, 0.9, 0.0], [0.2, 0.7, 0.1], [0.3, 0.3, 0.4]])
    text = said(viz.matrix_heatmaps({"A": A, "Ã": A - A.T}, ["x", "y", "z"], diverging=["Ã"]))
    assert text.startswith("A figure of 2 panels. A: x: key; y: query.")
    assert text.endswith("A: most attended key 'y' (mean 0.63), largest 0.9 (query 'x', key 'y'); "
                         "Ã: from -0.7 (query 'y', key 'x') to 0.7 (query 'x', key 'y').")
    text = said(viz.matrix_heatmaps({"ablated": np.zeros((2, 2)), "B": np.full((2, 2), np.nan)}, ["a", "b"]))
    assert text.endswith("ablated: all 0; B: n/a.")


def test_measures_figure_gives_the_three_scores_and_the_heaviest_token_of_each():
    text = said(viz.measures_figure([0.1, 0.1, 0.5, 0.3], [0.0, 0.0, 0.3, 0.7], list("ATGC")))
    assert "A figure of 2 panels." in text and "Legend: p, q." in text
    assert text.endswith("TVD(p,q) 0.4, JSD(p,q) 0.12, Kendall tau_b 0.6. Heaviest: p 'G' (0.5), q 'C' (0.7).")


def test_training_history_and_metric_relation_summaries():
    hist = {"lstm": [{"epoch": e, "dev_roc_auc": v} for e, v in enumerate([0.5, 0.91, 0.88], 1)]}
    text = said(viz.plot_training_history(hist, best={"lstm": 2}))
    assert text.endswith("dev roc auc: lstm 0.5 at epoch 1 to 0.88 at epoch 3 (peak 0.91 at epoch 2), kept epoch 2.")
    text = said(viz.plot_metric_relation([0, 1, 2, 3, np.nan], [0, 1, 2, 4, 5], xlabel="a", ylabel="b"))
    assert text == "A figure of one panel. x: a; y: b. 4 points, Pearson r = 0.98; x from 0 to 3, y from 0 to 4."


def test_jsd_vs_tvd_counts_the_pairs_above_the_threshold():
    tvd = np.linspace(0, 1, 50)
    text = said(viz.plot_jsd_vs_tvd(tvd, 0.6 * tvd, title="t"))
    assert text.startswith("A figure of one panel. t: x: TVD(p, q); y: JSD(p, q).")
    assert text.endswith("50 pairs, Pearson r = 1; TVD from 0 to 1, JSD from 0 to 0.6; 18% of them above JSD = 0.49.")


# ----------------------------------------------------------------------------- Part II
def _violin_frame(scale=1.0):
    values = np.array([0.01, 0.03, 0.02, 0.2, 0.4, np.nan])
    bins = pd.cut([0.1, 0.2, 0.2, 0.6, 0.7, 0.7], [0, 0.5, 1.0], right=False)
    return pd.DataFrame({"value": scale * values, "bin": bins, "predicted": [0, 1, 0, 1, 0, 1]})


def test_violin_panels_give_each_groups_median_and_n():
    text = said(viz.plot_violin_panels({"lstm": _violin_frame()}, ylabel="TVD"))
    assert text.startswith("A figure of one panel. lstm: x: bin; y: TVD.")
    assert text.endswith("TVD per bin: [0.0, 0.5) median 0.02, n = 3; [0.5, 1.0) median 0.3, n = 2.")
    text = said(viz.plot_violin_panels({"lstm": _violin_frame(), "cnn": _violin_frame(2.0)}, ylabel="TVD"))
    assert text.endswith("TVD: lstm: median 0.03, n = 5, highest median 0.3 in bin [0.5, 1.0); "
                         "cnn: median 0.06, n = 5, highest median 0.6 in bin [0.5, 1.0).")


def test_tau_distributions_give_each_comparisons_median_and_n():
    text = said(viz.plot_tau_distributions({"attention vs gradient": [0.1, 0.3, np.nan], "b": [np.nan]}))
    assert "Legend: attention vs gradient (mean 0.20), b." in text
    assert text.endswith("Kendall tau: attention vs gradient median 0.2, n = 2; b n = 0.")


class _Adversary:
    indices = np.array([0, 1])
    best = np.array([0, 0])
    tvd = np.array([[0.01], [0.02]])
    attention = [np.array([0.2, 0.8]), np.array([0.6, 0.3, 0.1])]
    best_attention = [np.array([0.9, 0.1]), np.array([0.1, 0.1, 0.8])]
    probs = np.array([[0.1, 0.9], [0.8, 0.2]])
    eps_max_jsd = np.array([0.5, 0.6])
    eps = 0.01

    def __len__(self):
        return 2


class _Split:
    tokens = [["so", "bad"], ["a", "fine", "film"]]


def test_adversary_heatmap_pairs_the_original_and_adversarial_heaviest_words():
    text = said(viz.adversary_heatmap(_Adversary(), _Split()))
    assert "original attention: p(positive) = 0.90" in text  # the row titles are in the made part
    assert text.endswith("Heaviest word, original → adversarial: 'bad' (0.8) → 'so' (0.9); "
                         "'a' (0.6) → 'film' (0.8).")


class _Permutation:
    indices = np.array([1])
    probs = np.array([[0.3, 0.7]])
    max_attention = np.array([0.6])
    all_tvd = np.array([[0.01, 0.02, 0.03, 0.5, np.nan]])
    median_tvd = np.array([0.025])


def test_permutation_figure_names_the_heaviest_words_and_the_output_change():
    attention = [None, np.array([0.6, 0.3, 0.1])]
    text = said(viz.permutation_figure(_Permutation(), _Split(), 0, attention, name="lstm"))
    assert "x: output change (TVD) under each of 5 permutations" in text
    assert text.endswith("Heaviest words: 'a' (0.6), 'fine' (0.3), 'film' (0.1). "
                         "Output change (TVD) over 5 permutations: median 0.025, largest 0.5.")


# ----------------------------------------------------------------------------- Part III
def test_part_3_line_and_bar_figures():
    table = pd.DataFrame({"dataset": ["sst", "sst"], "encoder": ["lstm", "lstm"], "attention": ["trained", "uniform"],
                          "F1": [0.812, 0.795], "F1 (W&P)": [0.83, np.nan]})
    assert said(viz.plot_uniform_comparison(table)).endswith(
        "Test F1, trained vs uniform attention: sst lstm 0.812 vs 0.795.")
    sweep = pd.DataFrame({"lambda": [1.0, 1e-3, 1e-2], "mean_jsd": [0.69, 0.2, 0.5], "mean_tvd": [0.1, 0.05, 0.08]})
    assert said(viz.plot_lambda_sweep(sweep, points={"seeds": (0.25, 0.06)}, highlight=0.01)).endswith(
        "Adversaries from λ = 0.001 to 1: mean JSD 0.2 to 0.69, mean TVD 0.05 to 0.1. seeds: JSD 0.25, TVD 0.06.")
    guides = pd.DataFrame({"test f1": [0.78, 0.793, 0.73], "published f1": [0.812, 0.817, np.nan]},
                          index=["uniform", "trained MLP", "oracle"])
    assert said(viz.plot_guides(guides)).endswith(
        "test F1 per guide: uniform 0.78 (the baseline); trained MLP 0.793; oracle 0.73.")
    frame = pd.DataFrame({"model": ["m"] * 3, "length": [150, 5, 50], "p(positive)": [0.6, 0.97, 0.8], "sd": 0.01,
                          "attention on marker": [0.01, 0.8, 0.1]})
    assert said(viz.plot_dilution(frame)).endswith(
        "From T = 5 to 150: m: p(positive) 0.97 to 0.6, attention on the marker 0.8 to 0.01.")
    rows = {"Average + tanh: p(positive) = 0.97": [0.1, 0.7, 0.2], "LSTM": [0.5, 0.2, 0.3]}
    assert said(viz.plot_needle_attention(rows, 1)).endswith(
        "Attention on the marker: Average + tanh, p(positive) = 0.97: 0.7 (rank 1 of 3); LSTM: 0.2 (rank 3 of 3).")


def test_flip_curves_and_single_weight_summaries():
    text = said(viz.plot_flip_curves({"m": {"attention": np.array([0.1, 0.5, np.nan, 1.0]),
                                            "random": np.array([np.nan, np.nan])}}))
    assert "Legend: attention (never: 25%), random (never: 100%)." in text
    assert text.endswith("Decisions flipped by the end: attention 75% flipped, median 0.5 erased; random 0% flipped.")

    class Single:
        top_weight = np.array([0.9, 0.8, 0.7, 0.6])
        random_weight = np.array([0.1, 0.1, 0.1, 0.1])
        jsd_difference = np.array([0.2, -0.01, 0.05, np.nan])

    text = said(viz.plot_single_weight({"lstm": Single(), "cnn": Single()}))
    assert text.startswith("A figure of 2 panels. lstm: x: top weight − random weight; y: Δ JSD (top − random).")
    assert text.endswith("lstm: 3 sentences, Δ JSD above 0 for 67%, from -0.01 to 0.2; "
                         "cnn: 3 sentences, Δ JSD above 0 for 67%, from -0.01 to 0.2.")


# ----------------------------------------------------------------------------- Part IV
def test_identifiability_figures_summaries():
    frame = pd.DataFrame({"length": [4, 10, 20, 30], "d_v": 8, "layer": [0, 0, 1, 1], "null_dim": [0, 2, 12, 22],
                          "correlation": [1.0, 0.9, 0.6, 0.5], "raw [SEP]": [0.2, 0.3, 0.5, 0.6],
                          "effective [SEP]": [0.1, 0.1, 0.2, 0.2]})
    assert said(viz.plot_null_space({"a": frame})).endswith(
        "a: 4 (sentence, head) pairs, lengths 4 to 30, a null space in 75% (largest 22).")
    assert said(viz.plot_group_mass(frame, ["[SEP]"])).endswith(
        "From layer 1 to 2, mean mass on [SEP]: raw 0.25 to 0.55, effective 0.1 to 0.2.")
    assert said(viz.plot_correlation_by_length({"m": frame}, bins=[2, 8, 16, 41])).endswith(
        "Mean r: m 1 at 2-7 tokens to 0.55 at 16-40 tokens.")
    table = pd.DataFrame({"linear/cosine": [1.0, 0.93, np.nan], "MLP": [np.nan] * 3}, index=[0, 1, 2])
    assert said(viz.plot_token_identity(table, chance=0.1)).endswith(
        "Share identified: linear/cosine 1 at layer 0 to 0.93 at layer 1; MLP n/a; chance 0.1.")


@pytest.mark.filterwarnings("ignore:All-NaN slice")  # the all-NaN panel's colour scale
def test_head_grid_names_its_extreme_heads_without_the_all_rows():
    grid = pd.DataFrame([[0.8, 0.7, 0.6], [0.9, 0.5, 0.4], [np.nan, np.nan, 0.3]],
                        index=["layer 0", "layer 1", "all layers"], columns=["head 0", "head 1", "all heads"])
    text = said(viz.plot_head_grid({"accuracy": grid, "empty": grid * np.nan}))
    assert text.startswith("A figure of 2 panels. accuracy. empty. Colour: accuracy, empty.")
    assert text.endswith("accuracy: lowest 0.5 (layer 1, head 1), highest 0.9 (layer 1, head 0); empty: n/a.")


def test_heads_figures_summaries():
    curve = pd.DataFrame({"fraction": [0, 0.5, 1.0], "accuracy": [0.8, 0.7, 0.5]})
    assert said(viz.plot_pruning_curve({"importance": curve}, reference={"Michel: BERT": 0.4})).endswith(
        "Accuracy by share of heads pruned: importance 0.8 at 0% to 0.5 at 100%.")
    sweep = pd.DataFrame({"layer": [0, 0, 1, 1], "alpha": [0.9, 0.1, 0.1, 0.9], "jsd": [0.01, 0.3, 0.2, 0.02],
                          "accuracy": [0.75, 0.6, 0.7, 0.76]})
    assert said(viz.plot_adversarial_keys(sweep)).endswith(
        "Accuracy from the smallest to the largest alpha: keys of layer 0: 0.6 at JSD 0.3 to 0.75 at JSD 0.01; "
        "keys of layer 1: 0.7 at JSD 0.2 to 0.76 at JSD 0.02.")
    shares = pd.DataFrame({"attention": [0.6, 0.012], "gradient": [0.7, np.nan]}, index=["λ = 0", "λ = 1"])
    assert said(viz.plot_explanation_mass(shares, reference=0.55)).endswith(
        "Share on the marked tokens: λ = 0: attention 0.6, gradient 0.7; λ = 1: attention 0.012, gradient n/a. "
        "Uniform weights: 0.55.")


def test_rollout_figures_summaries():
    text = said(viz.plot_relevance_by_layer(["a", "b", "c"], {"raw": [[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]],
                                                              "flow": np.eye(3)[:2]}))
    assert text.startswith("A figure of 2 panels. raw. flow. Colour: relevance (this panel's scale).")
    assert text.endswith("Heaviest word after layer 1 and after layer 2: raw 'b' (0.5) → 'c' (0.8); "
                         "flow 'a' (1) → 'b' (1).")
    table = pd.DataFrame({"measure": ["loo"] * 6 + ["grad"] * 2, "method": ["rollout"] * 3 + ["flow"] * 3 + ["raw"] * 2,
                          "layer": [1, 2, 3] * 2 + [1, 2], "mean": [0.1, 0.5, 0.2, 0.3, 0.3, 0.4, 0.23, 0.22],
                          "sd": 0.1})
    text = said(viz.plot_layer_correlations(table, measures={"loo": "blank-out", "grad": "gradient"}))
    assert text.endswith("Mean rho: blank-out, rollout 0.1 at layer 1 to 0.2 at layer 3 (peak 0.5 at layer 2); "
                         "blank-out, flow 0.3 at layer 1 to 0.4 at layer 3; gradient, raw 0.23 at layer 1 to 0.22 "
                         "at layer 2.")


def _faithfulness_by_fraction():
    from attnlib.experiments.faithfulness import METRICS

    index = pd.MultiIndex.from_product([["attention", "leave-one-out"], [0.01, 0.1, 0.5]],
                                       names=["measure", "fraction"])
    return pd.DataFrame({METRICS["comprehensiveness"].label: [0.1, 0.2, 0.3, 0.2, 0.4, 0.6],
                         METRICS["sufficiency"].label: [0.3, 0.2, 0.1, 0.4, 0.3, np.nan], "n": 5}, index=index)


def test_chapter_15_figures_summaries():
    text = said(viz.plot_erasure_curves({"BiLSTM": _faithfulness_by_fraction()}))
    assert "BiLSTM: comprehensiveness" in text
    assert text.endswith("Best AOPC (the mean over the fractions): BiLSTM comprehensiveness: leave-one-out (0.4); "
                         "BiLSTM sufficiency: attention (0.2).")
    frame = pd.DataFrame({"attention": [0.3, 0.2, 0.1], "gradient × input": [0.5, 0.6, np.nan]},
                         index=pd.Index(["short", "middle", "long"], name="length (words)"))
    text = said(viz.plot_by_length({"one": frame}, ylabel="AP"))
    assert text.endswith("AP: one: highest gradient × input 0.5 in short to 0.6 in middle, lowest attention 0.3 in "
                         "short to 0.1 in long.")


def test_audit_figure_names_the_strongest_head_and_the_best_explanations():
    from types import SimpleNamespace

    heads = pd.MultiIndex.from_product([[0, 1], [0, 1]], names=["layer", "head"])
    faith = pd.DataFrame({"comprehensiveness": [0.3, 0.1], "comprehensiveness low": [0.2, 0.0],
                          "comprehensiveness high": [0.4, 0.2], "comprehensiveness rank": ["1", "2"],
                          "sufficiency": [0.2, 0.05], "sufficiency low": [0.1, 0.0], "sufficiency high": [0.3, 0.1],
                          "sufficiency rank": ["2", "1"]}, index=["attention", "gradient × input"])
    report = SimpleNamespace(tables={
        "permutation": pd.DataFrame({"median TVD": [0.0, 0.01, 0.2, 0.05]}, index=heads),
        "identifiability": pd.DataFrame({"raw vs effective r (mean)": [0.9, 0.8, 0.5, 0.7]}, index=heads),
        "faithfulness": faith})
    text = said(viz.plot_audit(report, title="tiny"))
    assert text.startswith("tiny. A figure of 4 panels.")
    assert text.endswith("median TVD under permutation: largest 0.2 (layer 2, head 1); raw vs effective attention "
                         "(mean r): largest 0.9 (layer 1, head 1), smallest 0.5; best comprehensiveness: attention "
                         "(0.3); best sufficiency: gradient × input (0.05).")


# ----------------------------------------------------------------------------- the widgets' figures
def _tiny_transformer():
    import torch

    from attnlib.models import TransformerClassifier, TransformerConfig

    torch.manual_seed(0)
    return TransformerClassifier(30, TransformerConfig(layers=2, heads=2, head_dim=3, embed_dim=6, dropout=0.0)).eval()


def test_widget_figures_say_what_their_matrices_show():
    from attnlib import data

    model = _tiny_transformer()
    rng = np.random.default_rng(0)
    ids = [np.concatenate([[data.SOS], rng.integers(4, 30, n - 2), [data.EOS]]) for n in (9, 6)]
    trace = model.trace(data.collate(ids, [0, 1]))
    tokens = [[f"w{i}" for i in range(int(n))] for n in trace.lengths]
    text = said(widgets.null_space_figure(trace, tokens, 0, 1, 1, 1.0))
    assert "A figure of 3 panels." in text  # the grid's fourth place is hidden, not a panel
    A = trace.attentions[0, 1, 1, :9, :9].cpu().numpy()
    i, j = np.unravel_index(A.argmax(), A.shape)
    assert f"A: most attended key 'w{A.mean(0).argmax()}' (mean {words.number(A.mean(0).max())}), largest " \
           f"{words.number(A.max())} (query 'w{i}', key 'w{j}')" in text
    assert re.search(r"A' − A: from -[0-9.e-]+ \(query 'w\d', key 'w\d'\) to [0-9.e-]+ \(query", text)

    split = data.Split(name="test", texts=["a b c", "d e"], tokens=[["a", "b", "c"], ["d", "e"]],
                       ids=[np.array([data.SOS, 5, 6, 7, data.EOS]), np.array([data.SOS, 8, 9, data.EOS])],
                       labels=np.array([0, 1]))
    text = said(widgets.head_figure(model, split, 1, 1, 0, "ablate"))
    assert re.search(r"the head's attention: most attended key '[^']+' \(mean [0-9.]+\), largest [0-9.]+ "
                     r"\(query '[^']+', key '[^']+'\); ablated: all 0\.$", text)
