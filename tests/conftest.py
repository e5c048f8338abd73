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
