"""``sp-dspy list-models``: the models ``--lm NAME`` / ``--models`` can name, and how they are set."""

from __future__ import annotations

from pathlib import Path

import typer

from . import _lm_options as lmo
from ._console import console


def register(app: typer.Typer) -> None:
    app.command("list-models")(list_models_command)


def list_models_command(config: lmo.ModelsConfig = None) -> None:
    """List configured models (configs/models.yaml or --config) and the built-in ones."""
    from .._errors import ConfigError
    from .._lm import BEHAVIOURS, load_model_configs
    from .._table import FitTable

    path: Path | None = config or (lmo.DEFAULT_MODELS_FILE if lmo.DEFAULT_MODELS_FILE.exists() else None)
    if config is not None and not config.exists():
        raise ConfigError(f"--config: {config}: no such file")
    configured = load_model_configs(path) if path is not None else {}
    table = FitTable(title=f"Models in {path}" if path else "No models file (configs/models.yaml) here")
    for column in ("name", "model", "api_base", "key from", "settings"):
        table.add_column(column)
    for name, cfg in configured.items():
        settings = {
            key: value
            for key, value in cfg.public_dict().items()
            if key in ("temperature", "max_tokens", "reasoning_effort", "timeout", "json_schema", "transport")
            and value is not None
            and value is not False
            and value != "auto"
        }
        table.add_row(
            name,
            cfg.model,
            cfg.api_base or "-",
            cfg.api_key_env or "provider default",
            ", ".join(f"{k}={v}" for k, v in settings.items()) or "-",
        )
    console.print(table)
    console.print(
        "Built in: [bold]local[/bold] (embedded SmolLM2-135M on llama.cpp, started on demand), "
        f"[bold]fake[/bold]\\[/{'|'.join(BEHAVIOURS)}] (offline deterministic fake). "
        "Any dspy/litellm model string also works, e.g. --lm openai/gpt-5-mini.",
        highlight=False,
    )
