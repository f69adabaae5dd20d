"""Every test runs offline with its own user paths (cache, Hub cache, state files)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_user_paths(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """Point every user-level path at a fresh directory and forbid Hub access."""
    home = tmp_path_factory.mktemp("user")
    monkeypatch.setenv("SP_DSPY_CACHE_DIR", str(home / "cache"))
    monkeypatch.setenv("HF_HOME", str(home / "hf"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))  # no ~/.config/sp-dspy/models.yaml
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("DSPY_CACHEDIR", str(home / "dspy"))
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    yield home


@pytest.fixture
def restore_dspy_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Undo the process-wide response cache a test installs (``sp-dspy eval``, ``configure_cache``).

    Modules whose tests run the CLI or build LMs in-process use it (``usefixtures`` in
    their ``pytestmark``); DSPy is imported only then.
    """
    import sp_dspy._lm._cache as cache_module
    from sp_dspy._lm import import_dspy

    dspy = import_dspy()
    monkeypatch.setattr(dspy, "cache", vars(dspy).get("cache"), raising=False)
    monkeypatch.setattr(cache_module, "_configured", cache_module._configured)
    yield


@pytest.fixture
def isolated_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, restore_dspy_cache: None) -> Iterator[None]:
    """For in-process CLI runs: work in ``tmp_path`` (no ``configs/models.yaml`` picked up
    from the checkout), no ``RUN_ID`` from the environment, DSPy's cache restored."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RUN_ID", raising=False)
    yield
