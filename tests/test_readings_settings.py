"""The readings that name a chapter's settings and sizes for its prose (issue 52: every glued value goes
through a readings function): each returns its chapter's names with the values given, and says so on bad input."""
from types import SimpleNamespace

import numpy as np
import pytest

from attnlib.presentation.readings import ch01, ch02, ch03, ch05, ch07, ch09, ch11, ch13, ch14, ch15


def test_ch01_training_and_own_data():
    lstm = SimpleNamespace(best_epoch=np.int64(4), test={"f1": 0.81, "accuracy": 0.8}, dev={"roc_auc": 0.88})
    got = ch01.training(lstm, n_seeds=3, epochs=8)
    assert got == {"ch01_lstm_epoch": 4, "ch01_epochs": 8, "ch01_n_seeds": 3, "ch01_lstm_f1": 0.81,
                   "ch01_lstm_acc": 0.8, "ch01_lstm_dev_auc": 0.88}
    assert type(got["ch01_lstm_epoch"]) is int
    own = ch01.own_data(n_rows=30, stats={"n_empty": 1, "n_too_short": 2, "n_kept": 27},
                        scores={"f1": 0.7, "roc_auc": 0.75}, n_permuted=27, median_tvd=[0.1, 0.3, 0.2])
    assert own["ch01_own_median_tvd"] == pytest.approx(0.2) and own["ch01_own_kept"] == 27


def test_ch02_example_far_apart_agreement_and_speed():
    p, q = np.array([0.7, 0.2, 0.1]), np.array([0.1, 0.2, 0.7])
    got = ch02.example(p, q, tau=-1.0, p_value=0.33)
    assert got["ch02_ex_tvd"] == pytest.approx(0.6) and got["ch02_ln2"] == pytest.approx(np.log(2))
    assert 0 < got["ch02_ex_jsd"] < np.log(2)
    far = ch02.far_apart(np.array([0.1, 0.5, 0.6]), np.array([0.2, 0.8, 0.7]))
    assert far == {"ch02_frac_049": pytest.approx(2 / 3), "ch02_min_tvd_049": 0.7}
    with pytest.raises(ValueError, match="no pair"):
        ch02.far_apart(np.array([0.1]), np.array([0.2]))
    tau, pv = np.array([0.5, np.nan]), np.array([0.1, np.nan])
    same = ch02.agreement(tau, pv, np.array([[0.5, 0.1], [np.nan, np.nan]]))
    assert same == {"ch02_agree": "agree to within 1e-9", "ch02_nan_rows": "both leave the same 1 constant rows undefined"}
    off = ch02.agreement(tau, pv, np.array([[0.6, 0.1], [0.2, 0.3]]))
    assert off["ch02_agree"].startswith("do NOT") and off["ch02_nan_rows"] == "ours leaves 1 rows undefined, SciPy 0"
    assert ch02.speed(2.0, 0.5) == {"ch02_ratio": 4.0}
    with pytest.raises(ValueError, match="positive"):
        ch02.speed(1.0, 0.0)


def test_ch03_instance_names_the_top_token_and_the_first_tokens_share():
    tokens = ["<SOS>", "good", "film"]
    same = ch03.instance({"attention": [0.1, 0.8, 0.1], "gradient": [0, 2, 1], "leave-one-out": [0.0, 0.5, 0.1]}, tokens)
    assert same["ch03_inst_top"] == "all three put their largest weight on *good*"
    assert same["ch03_inst_first"] == "*<SOS>*" and same["ch03_inst_att0"] == pytest.approx(0.1)
    split = ch03.instance({"attention": [0.1, 0.8, 0.1], "gradient": [0, 1, 2], "leave-one-out": [0.0, 0.0, 0.0]}, tokens)
    assert "gradient puts its largest weight on *film*" in split["ch03_inst_top"] and split["ch03_inst_loo0"] == 0.0


def test_the_settings_of_chapters_5_7_9_13_14_and_15():
    assert ch05.budget(np.int64(200)) == {"ch05_steps": 200}
    assert ch07.setup(base_seed=0, seeds=[1, 2, 3], bases=[0, 1]) == {
        "ch07_base_seed": 0, "ch07_n_models": 3, "ch07_models": "1, 2, 3", "ch07_bases_text": "0, 1", "ch07_n_bases_set": 2}
    assert ch09.lambdas(adversary_lambda=0.1, wp_range=(0.001, 0.2)) == {"ch09_wp_lam": "0.1", "ch09_wp_range": "0.001 to 0.2"}
    assert ch09.guide_lambda(0.02, wp_scale=2.0) == {"ch09_lam": "0.02", "ch09_lam_wp": "0.01"}
    assert ch09.long_train(1600) == {"ch09_long_train": "1,600"}
    profile = SimpleNamespace(transformer=(2, 4, 16), lstm_epochs=3, transformer_epochs=6)
    paper = SimpleNamespace(transformer=(4, 4, 32), lstm_epochs=5)
    got = ch13.setup(profile, paper, n_train=900)
    assert got["ch13_tf_shape"] == "2 × 4 × 16" and got["ch13_paper_tf_shape"] == "4 × 4 × 32"
    assert ch13.n_lambdas([0, 0.1, 1]) == {"ch13_n_lams": 3}
    sets = {"synthetic": [1, 2, 3], "rt-polarity": [1, 2]}
    assert ch14.setup(n_train=4000, sets=sets) == {"ch14_syn_train": "4,000", "ch14_seeds": 3, "ch14_models": 5}
    assert ch15.synthetic_task({"min_len": 8, "max_len": 20, "negation": 0.3}) == {
        "ch15_syn_lengths": "8–20", "ch15_negation_pct": "30%"}
    assert ch15.ig_steps(32) == {"ch15_ig_steps": 32} and ch15.epochs(6) == {"ch15_tf_epochs": 6}
    assert ch15.n_scored(np.int64(100)) == {"ch15_n": 100} and ch15.n_deceived(50) == {"ch15_n_dec": 50}


def test_ch11_recipe_sizes_and_the_worked_alternative():
    assert ch11.recipe(lr=3e-4, n_seeds=3) == {"ch11_lr": "0.0003", "ch11_n_seeds": 3}
    assert ch11.imdb_length(np.int64(128)) == {"ch11_imdb_tokens": 128}
    sizes = ch11.sizes(over="40%", n_rt=100, n_imdb=50, n_probe=400, epochs=6, minilm_f1="0.80 [0.75, 0.85]")
    assert sizes["ch11_over_dv"] == "40%" and sizes["ch11_f1_minilm"] == "0.80 [0.75, 0.85]"
    alt = SimpleNamespace(jsd=np.array([[0.1, 0.3, 9.0]]), output_scale=np.array([2.5]), null_dim=np.array([4]))
    summary = {"head output: max |Ã T|": "1e-7", "model: |change in p(positive)|": "2e-8"}
    got = ch11.alternative(summary, alt, n=2, row_jsd=[0.1, 0.2, 0.4], layer=0, head=3)
    assert got["ch11_alt_jsd"] == pytest.approx(0.2) and got["ch11_alt_jsd_max"] == pytest.approx(0.3)  # n = 2 tokens
    assert (got["ch11_alt_layer"], got["ch11_alt_head"], got["ch11_alt_dim"]) == (1, 4, 4)
    assert got["ch11_alt_median"] == pytest.approx(0.2) and ch11.long_sentences(7) == {"ch11_long_n": 7}
