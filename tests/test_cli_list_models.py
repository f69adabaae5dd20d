"""``sp-dspy list-models`` lists configured and built-in models, never a key."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sp_dspy._errors import ConfigError
from sp_dspy.cli import _list_models


def _app() -> typer.Typer:
    app = typer.Typer()
    _list_models.register(app)

    @app.callback()
    def _group() -> None:
        pass

    return app


def test_lists_configured_models_with_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-never-printed")
    models = tmp_path / "models.yaml"
    models.write_text(
        "models:\n"
        "  mine:\n    model: openai/gpt-5-mini\n    api_key_env: MY_KEY\n    temperature: 0\n"
        "  box:\n    model: hosted_vllm/Qwen/Qwen3-8B\n    api_base: http://127.0.0.1:8000/v1\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(_app(), ["list-models", "--config", str(models)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "mine" in result.output and "openai/gpt-5-mini" in result.output and "MY_KEY" in result.output
    assert "temperature=0.0" in result.output
    assert "http://127.0.0.1:8000/v1" in result.output
    assert "local" in result.output and "fake" in result.output
    assert "sk-never-printed" not in result.output


def test_missing_config_is_a_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(_app(), ["list-models", "--config", str(tmp_path / "nope.yaml")])
    assert isinstance(result.exception, ConfigError)
    assert "nope.yaml: no such file" in str(result.exception)
