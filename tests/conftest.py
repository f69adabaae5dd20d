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
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("DSPY_CACHEDIR", str(home / "dspy"))
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    yield home
