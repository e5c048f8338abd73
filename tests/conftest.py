"""Shared test set-up: every test gets a private, empty model cache."""
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
