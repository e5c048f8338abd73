"""Shared test set-up: every test gets a private, empty model cache."""
import pytest


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path / "attnlib-cache"))
    yield
