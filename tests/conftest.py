"""Shared test set-up: the book's pinned kernels, and every test gets a private, empty model cache."""
import attnlib.reproducible  # noqa: F401  (first, as in the chapters: the tests check the book's numbers)
import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (and in CI): a failure is reproducible,
# never a flake. Run with --hypothesis-profile=explore for fresh random examples.
settings.register_profile("default", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile("default")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path / "attnlib-cache"))
    yield


# ----------------------------------------------------------------------------- chunking on a GPU
#: How far a result may move when only the chunk size changes, on a GPU. On the CPU attnlib pins
#: the kernels, so the tests' own (tight) tolerances hold. cuBLAS and cuDNN pick their kernels by
#: batch shape, so another chunk size rounds differently: one-pass results moved by at most 5.4e-5
#: on an H200 (2026-11-27).
GPU_CHUNK_ATOL = 5e-4
#: An iterative search (the adversary's 60 to 300 Adam steps) can carry that rounding down another
#: path for an instance: on the H200, 1 of 64 instances (its JSD, and 17 of 13,440 candidate
#: weights) moved by up to 0.012. So on a GPU at most this share of a search's values may lie
#: beyond GPU_CHUNK_ATOL.
GPU_SEARCH_DRIFT_SHARE = 0.05


@pytest.fixture(scope="session")
def on_gpu() -> bool:
    """Whether attnlib's models run on CUDA in this session (``attnlib.get_device()``)."""
    from attnlib import get_device

    return get_device().type == "cuda"


@pytest.fixture(scope="session")
def chunk_atol(on_gpu):
    """``chunk_atol(cpu_atol)``: the tolerance for "chunking changes nothing but rounding" here."""
    return lambda cpu_atol: max(cpu_atol, GPU_CHUNK_ATOL) if on_gpu else cpu_atol


@pytest.fixture(scope="session")
def assert_search_unchunked(on_gpu):
    """``assert_search_unchunked(chunked, whole, cpu_atol, name)`` for a search's results: within
    ``cpu_atol`` on the CPU; on a GPU within GPU_CHUNK_ATOL but for GPU_SEARCH_DRIFT_SHARE of them."""
    import numpy as np

    def check(actual, desired, cpu_atol, name=""):
        actual, desired = np.asarray(actual), np.asarray(desired)
        if not on_gpu:
            np.testing.assert_allclose(actual, desired, atol=cpu_atol, rtol=0, err_msg=name)
            return
        assert actual.shape == desired.shape, name
        beyond = np.abs(actual - desired) > max(cpu_atol, GPU_CHUNK_ATOL)
        assert beyond.mean() <= GPU_SEARCH_DRIFT_SHARE, f"{name}: {beyond.sum()} of {beyond.size} moved"

    return check


# ----------------------------------------------------------------------------- shared tiny data and models
@pytest.fixture(scope="session")
def tiny_dataset():
    """The synthetic marker task, small: 300 training and 100 dev/test sentences (seed 0)."""
    from attnlib import data

    return data.load_dataset("synthetic", max_train=300, max_eval=100, seed=0)


@pytest.fixture(scope="session")
def tiny_model(tiny_dataset):
    """A factory: ``tiny_model(encoder="lstm", attention="tanh", epochs=2)``, trained once per session.

    Trained with ``use_cache=False`` (a session fixture runs outside the per-test private cache);
    returned in eval mode. Tests that change a model's mode must restore it.
    """
    from attnlib import train

    made = {}

    def make(encoder: str = "lstm", attention: str = "tanh", epochs: int = 2):
        key = (encoder, attention, epochs)
        if key not in made:
            result = train.train_model(tiny_dataset, encoder=encoder, attention=attention, epochs=epochs,
                                       use_cache=False, progress=False)
            made[key] = result.model.eval()
        return made[key]

    return make


@pytest.fixture(scope="module")
def lstm(tiny_model):
    """J&W's tanh BiLSTM on the tiny task, 2 epochs (shared by the explanation and faithfulness tests)."""
    return tiny_model("lstm", "tanh", 2)


@pytest.fixture(scope="module")
def transformer(tiny_dataset):
    """The small transformer, untrained (seed 0): 2 layers x 2 heads, head_dim 4, width 8, in eval mode."""
    import torch

    from attnlib.models import TransformerClassifier, TransformerConfig

    torch.manual_seed(0)
    config = TransformerConfig(layers=2, heads=2, head_dim=4, embed_dim=8, dropout=0.0)
    return TransformerClassifier(len(tiny_dataset.vocab), config).eval()


#: The word pieces of :func:`tiny_bert_checkpoint`'s vocabulary (after [PAD] [UNK] [CLS] [SEP] [MASK]).
TINY_BERT_WORDS = ["good", "bad", "movie", "film", "the", "a", "is", "was", "very", "plot", "actor", "boring", "fun",
                   "and", "not", "story", "long", "short", "##s", "##ly"]


@pytest.fixture(scope="session")
def tiny_bert_checkpoint(tmp_path_factory):
    """A tiny random BERT (2 layers x 2 heads, d_model 16) and its WordPiece tokenizer, saved to a local directory.

    The one tiny pretrained checkpoint of the tests (tests/test_pretrained.py, tests/test_audit.py): loaded
    through PretrainedClassifier exactly as MiniLM is, with no network.
    """
    pytest.importorskip("transformers")
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    path = tmp_path_factory.mktemp("tiny-bert")
    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *TINY_BERT_WORDS]) + "\n")
    BertTokenizer(vocab=str(path / "vocab.txt")).save_pretrained(path)  # transformers 5: vocab=, not vocab_file=
    torch.manual_seed(0)
    config = BertConfig(vocab_size=5 + len(TINY_BERT_WORDS), hidden_size=16, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=24,
                        initializer_range=0.2, attn_implementation="eager")
    BertModel(config).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def scaled_transformer():
    """A factory: a tiny random book transformer (2 layers x 2 heads, d_model 8, eval mode) with every
    weight scaled up by 3 so every part of a layer matters, and three sentences of 7, 5 and 9 tokens
    (<SOS> ... <EOS>, padded): ``(model, tokens, lengths)``, made afresh for each caller."""

    def make():
        import torch

        from attnlib.data import PAD
        from attnlib.models import TransformerConfig

        torch.manual_seed(0)
        model = TransformerConfig(layers=2, heads=2, head_dim=4, embed_dim=8, dropout=0.0).build(30).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(3.0)
        lengths = torch.tensor([7, 5, 9])
        tokens = torch.randint(4, 30, (3, 9), generator=torch.Generator().manual_seed(1))
        tokens[torch.arange(9)[None, :] >= lengths[:, None]] = PAD
        tokens[:, 0] = 2
        tokens[torch.arange(3), lengths - 1] = 3
        return model, tokens, lengths

    return make
