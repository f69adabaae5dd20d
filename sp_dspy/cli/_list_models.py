"""``sp-dspy list-models``: the models ``--lm NAME`` / ``--models`` can name, and how they are set."""

from __future__ import annotations

import typer

from .._lm import BEHAVIOURS, load_configured_models, models_files
from .._table import FitTable
from . import _lm_options as lmo
from ._console import console


def register(app: typer.Typer) -> None:
    app.command("list-models")(list_models_command)


#: The settings a model entry may set that change what is sent, shown when set.
SHOWN_SETTINGS = (
    "temperature", "max_tokens", "reasoning_effort", "thinking", "extra_body", "extra_headers",
    "timeout", "json_schema", "transport",
)  # fmt: skip


def list_models_command(config: lmo.ModelsConfig = None) -> None:
    """List configured models (configs/models.yaml, ~/.config/sp-dspy, --config) and the built-in ones."""
    files = models_files(config)
    caption = "from " + ", then ".join(map(str, files)) if files else None
    table = FitTable("name", "model", "api_base", "key from", "settings", title="Models", caption=caption)
    for name, cfg in load_configured_models(config).items():
        settings = {
            key: value
            for key, value in cfg.public_dict().items()
            if key in SHOWN_SETTINGS and value is not None and value is not False and value != "auto"
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
