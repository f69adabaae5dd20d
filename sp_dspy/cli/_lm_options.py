"""LM flags shared by eval, compile, ablate and check, and how they become ``LMConfig``s.

``--lm`` takes a model string, a configured name, ``fake[/behaviour]`` or ``local`` (the
embedded llama.cpp model); flags given on the command line override the configured settings.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from .._errors import ConfigError, validation_problem
from .._lm import LMConfig, load_configured_models, resolve_model_config
from .._serve import ensure_local_server

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


def _setting(flag: str, help: str, shown: str = "the model's, else the provider's") -> Any:
    """An LM flag whose absence keeps the configured model's setting (the default says so)."""
    return typer.Option(flag, help=help, show_default=shown)


Lm = Annotated[
    str | None,
    typer.Option("--lm", help="Model string, configured model name, fake\\[/behaviour] or local."),
]
Models = Annotated[
    str | None, typer.Option("--models", help="Comma-separated configured model names, run in turn.")
]
ModelsConfig = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="Models YAML added on top of the package's configs/models.yaml and ~/.config/sp-dspy/models.yaml.",
    ),
]
ApiBase = Annotated[
    str | None, _setting("--api-base", "OpenAI-compatible endpoint(s); comma-separate replicas of one model.")
]
ApiKeyEnv = Annotated[
    str | None,
    _setting(
        "--api-key-env",
        "Environment variable holding the API key.",
        "the model's, else the provider's usual one",
    ),
]
Temperature = Annotated[float | None, _setting("--temperature", "Sampling temperature.")]
MaxTokens = Annotated[int | None, _setting("--max-tokens", "Completion token limit per call.")]
ReasoningEffort = Annotated[
    str | None, _setting("--reasoning-effort", "Reasoning effort for reasoning models.", "the model's")
]
Timeout = Annotated[float | None, _setting("--timeout", "Seconds per request.", "the model's, else 120")]
NumRetries = Annotated[
    int | None, _setting("--num-retries", "Retries of transient errors.", "the model's, else 3")
]
RateLimitTimeout = Annotated[
    float | None,
    _setting(
        "--rate-limit-timeout",
        "Seconds one call may keep meeting rate limits (429, overloaded) before it ends as an error.",
        "the model's, else 1800",
    ),
]
NoAdaptive = Annotated[
    bool,
    typer.Option(
        "--no-adaptive",
        help="Keep --concurrency calls in flight instead of adapting to the endpoint's rate limits.",
    ),
]
Rpm = Annotated[
    int | None,
    _setting(
        "--rpm", "The account's requests per minute for this model (--dry-run's wall time).", "the model's"
    ),
]
Tpm = Annotated[
    int | None,
    _setting(
        "--tpm", "The account's tokens per minute for this model (--dry-run's wall time).", "the model's"
    ),
]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the response cache.")]
JsonSchema = Annotated[
    bool, typer.Option("--json-schema", help="Send a JSON-schema response_format (self-hosted servers).")
]
Transport = Annotated[
    str | None,
    _setting(
        "--transport",
        "The LM's engine: auto (sp-dspy's HTTP engine where the provider has a profile), "
        "direct (that engine, or an error) or dspy (DSPy's own engine: LiteLLM or its native clients).",
        "the model's, else auto",
    ),
]


@dataclass(frozen=True)
class LmFlags:
    """The per-call LM flags of eval, ablate and check; a command takes them with ``with_flag_groups``."""

    api_base: ApiBase = None
    api_key_env: ApiKeyEnv = None
    temperature: Temperature = None
    max_tokens: MaxTokens = None
    reasoning_effort: ReasoningEffort = None
    timeout: Timeout = None
    num_retries: NumRetries = None
    rate_limit_timeout: RateLimitTimeout = None
    no_adaptive: NoAdaptive = False
    rpm: Rpm = None
    tpm: Tpm = None
    no_cache: NoCache = False
    json_schema: JsonSchema = False
    transport: Transport = None

    def overrides(self) -> dict[str, Any]:
        """The ``LMConfig`` fields these flags set (``None``: keep the model's)."""
        flags = ("no_cache", "no_adaptive")
        changes = {field.name: getattr(self, field.name) for field in fields(self) if field.name not in flags}
        return {
            **changes,
            "cache": False if self.no_cache else None,
            "adaptive": False if self.no_adaptive else None,
            "json_schema": self.json_schema or None,
        }


def lm_configs(
    lm: str | None,
    models: str | None,
    config_file: Path | None,
    *,
    default: str,
    flag: str = "--lm",
    **overrides: Any,
) -> list[LMConfig]:
    """The model configs a command runs, in order, with CLI overrides applied.

    Every model is resolved and validated before any runs, so ``--models a,b`` fails on
    ``b`` before ``a`` runs. ``flag`` named ``lm`` (``--lm``, ``--prompt-lm``): errors name it.
    """
    configured = load_configured_models(config_file)
    if lm and models:
        raise ConfigError("give either --lm or --models, not both")
    if lm is not None and not lm.strip():  # not the default model: an unset variable, likely
        raise ConfigError(f"{flag} {lm!r}: empty model name (give a model string or a configured name)")
    if models is not None:
        names = [name.strip() for name in models.split(",") if name.strip()]
        if not names:
            raise ConfigError(f"--models {models!r}: no model name (give comma-separated configured names)")
    else:
        names = [lm or default]
    spec_flag = "--models" if models is not None else flag
    changes = {key: value for key, value in overrides.items() if value is not None}
    resolved = []
    for name in names:
        if name == LOCAL and LOCAL not in configured:
            base: dict[str, Any] = {"model": "openai/local", "name": LOCAL, **LOCAL_SETTINGS}
        else:
            base = resolve_model_config(name, configured, flag=spec_flag).model_dump()
        resolved.append(_validated({**base, **changes}, name, changed=changes))
    return resolved


def _validated(settings: dict[str, Any], name: str, *, changed: Collection[str] = ()) -> LMConfig:
    """``settings`` as an ``LMConfig``; an error names the flag when a flag set the field."""
    try:
        return LMConfig.model_validate(settings)
    except ValidationError as exc:
        field, message = validation_problem(exc)
        if field in changed:
            raise ConfigError(f"--{field.replace('_', '-')}: {message}") from None
        raise ConfigError(f"model {name!r}: field {field}: {message}") from None


def is_local(config: LMConfig) -> bool:
    return config.name == LOCAL


def context_window(config: LMConfig) -> int | None:
    """The prompt tokens the model accepts, where known: the embedded server's ``n_ctx``, else
    LiteLLM's model map (None for models it does not know)."""
    # Deferred as the server and the LM layer are everywhere here: --help loads neither.
    if is_local(config):
        from .._serve import local_context_window

        return local_context_window()
    from .._pricing import context_window as mapped

    return mapped(config)


@contextmanager
def lm_session(config: LMConfig) -> Iterator[LMConfig]:
    """The config to use while the command runs; ``local`` starts (or reuses) llama.cpp.

    A server this command started is stopped when the block ends, also on Ctrl-C or
    an error; one that ``sp-dspy serve`` runs is left running.
    """
    if not is_local(config):
        yield config
        return

    with ensure_local_server() as handle:
        settings = {**config.model_dump(), "model": handle.lm_model, "api_base": handle.api_base}
        yield _validated(settings, LOCAL)
