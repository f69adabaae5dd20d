"""LM flags shared by eval, compile, ablate and check, and how they become ``LMConfig``s.

``--lm`` takes a model string (``openai/gpt-5.5``, ``hosted_vllm/Qwen3-8B``), a name from
``--config`` (default ``configs/models.yaml`` when present), ``fake[/behaviour]`` or
``local`` (the embedded llama.cpp model). Flags given on the command line override
the configured settings.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from .._lm import LMConfig

DEFAULT_MODELS_FILE = Path("configs/models.yaml")
LOCAL = "local"
# The embedded server has one slot; more requests in flight only queue there.
LOCAL_CONCURRENCY = 2
# The embedded model is tiny: greedy decoding, JSON-schema constrained output, short answers.
LOCAL_SETTINGS: dict[str, Any] = {
    "temperature": 0.0,
    "max_tokens": 384,
    "json_schema": True,
    "timeout": 600,
    "num_retries": 1,
}

Lm = Annotated[
    str | None,
    typer.Option("--lm", help="Model string, configured model name, fake\\[/behaviour] or local."),
]
Models = Annotated[
    str | None, typer.Option("--models", help="Comma-separated configured model names, run in turn.")
]
ModelsConfig = Annotated[
    Path | None, typer.Option("--config", help="Models YAML (default: configs/models.yaml if present).")
]
ApiBase = Annotated[
    str | None,
    typer.Option("--api-base", help="OpenAI-compatible endpoint(s); comma-separate replicas of one model."),
]
ApiKeyEnv = Annotated[
    str | None, typer.Option("--api-key-env", help="Environment variable holding the API key.")
]
Temperature = Annotated[float | None, typer.Option("--temperature", help="Sampling temperature.")]
MaxTokens = Annotated[int | None, typer.Option("--max-tokens", help="Completion token limit per call.")]
ReasoningEffort = Annotated[
    str | None, typer.Option("--reasoning-effort", help="Reasoning effort for reasoning models.")
]
Timeout = Annotated[float | None, typer.Option("--timeout", help="Seconds per request.")]
NumRetries = Annotated[int | None, typer.Option("--num-retries", help="Retries of transient errors.")]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the response cache.")]
JsonSchema = Annotated[
    bool,
    typer.Option("--json-schema", help="Send a JSON-schema response_format (self-hosted servers)."),
]
Transport = Annotated[
    str | None,
    typer.Option(
        "--transport",
        help="How official-baseline calls reach one OpenAI-compatible --api-base: auto (default), "
        "direct (sp-dspy's lean HTTP client) or dspy (DSPy's engine).",
        show_default=False,
    ),
]


def lm_configs(
    lm: str | None,
    models: str | None,
    config_file: Path | None,
    *,
    default: str,
    **overrides: Any,
) -> list[LMConfig]:
    """The model configs a command runs, in order, with CLI overrides applied."""
    from .._errors import ConfigError
    from .._lm import load_model_configs, resolve_model_config

    path = config_file or (DEFAULT_MODELS_FILE if DEFAULT_MODELS_FILE.exists() else None)
    if config_file is not None and not config_file.exists():
        raise ConfigError(f"--config: {config_file}: no such file")
    configured = load_model_configs(path) if path is not None else {}
    if lm and models:
        raise ConfigError("give either --lm or --models, not both")
    names = [name.strip() for name in models.split(",") if name.strip()] if models else [lm or default]
    changes = {key: value for key, value in overrides.items() if value is not None}
    resolved = []
    for name in names:
        if name == LOCAL and LOCAL not in configured:
            base: dict[str, Any] = {"model": "openai/local", "name": LOCAL, **LOCAL_SETTINGS}
        else:
            base = resolve_model_config(name, configured).model_dump()
        resolved.append(_validated({**base, **changes}, name))
    return resolved


def _validated(settings: dict[str, Any], name: str) -> LMConfig:
    from pydantic import ValidationError

    from .._errors import ConfigError
    from .._lm import LMConfig

    try:
        return LMConfig.model_validate(settings)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(
            f"model {name!r}: field {'.'.join(map(str, first['loc']))}: {first['msg']}"
        ) from None


def is_local(config: LMConfig) -> bool:
    return config.name == LOCAL


@contextmanager
def lm_session(config: LMConfig) -> Iterator[LMConfig]:
    """The config to use while the command runs; ``local`` starts (or reuses) llama.cpp.

    A server this command started is stopped when the block ends, also on Ctrl-C or
    an error; one that ``sp-dspy serve`` runs is left running.
    """
    if not is_local(config):
        yield config
        return
    from .._serve import ensure_local_server

    with ensure_local_server() as handle:
        settings = {**config.model_dump(), "model": handle.lm_model, "api_base": handle.api_base}
        yield _validated(settings, LOCAL)
