"""What a guard service serves and how (``sp-dspy serve --guard``'s flags as one object); no secrets:
the bearer token is named by the environment variable that holds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._budget import BudgetCaps
from .._errors import ConfigError, validation_problem
from ._limits import ServiceLimits

#: The guard service's port unless ``--port`` (``port``) says otherwise.
DEFAULT_GUARD_PORT = 8080

#: The flags whose names are not their field's (the others: ``max_in_flight`` is ``--max-in-flight``).
_FLAG_OF_FIELD = {
    "max_tokens": "--max-total-tokens",
    "max_body_bytes": "--max-body-kb",
    "request_timeout_s": "--request-timeout",
}


class GuardServiceConfig(BaseModel):
    """Everything ``serve_guard`` needs but the LM: the guard, its default policy, where it listens,
    who may call it, its per-request limits and its budget for the process."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: A compiled artifact directory, a program name (official, dspy, dspy-cot) or a guard model's format.
    guard: str
    #: per-policy or per-rule; None: per-policy, or the artifact's (checked when the guard loads).
    protocol: str | None = None
    #: The official baseline's parser, strict or robust (checked when the guard loads).
    parser: str = "strict"
    #: The policy of requests that send none: a file of numbered rules, one per line.
    policy: Path | None = None
    #: Beyond loopback only with ``auth_token_env``.
    host: str = "127.0.0.1"
    #: 0: a free port (the URL ``on_ready`` gets says which).
    port: int = Field(default=DEFAULT_GUARD_PORT, ge=0, le=65535)
    #: The environment variable holding the bearer token every endpoint but ``/healthz`` requires.
    auth_token_env: str | None = None
    limits: ServiceLimits = Field(default_factory=ServiceLimits)
    caps: BudgetCaps = Field(default_factory=BudgetCaps)  # for the process, across every request
    #: What a check judges unless its request says otherwise: the whole conversation or its last turn.
    scope: Literal["conversation", "last-turn"] = "conversation"
    #: The gateway routes' answer when the guard gives no verdict.
    on_error: Literal["block", "allow"] = "block"


def build_guard_service_config(flags: dict[str, Any]) -> GuardServiceConfig:
    """The config ``flags`` (fields, ``limits`` and ``caps`` as mappings) describe; a flag left out or
    None keeps its default. An error is one ``ConfigError`` line naming the flag of the bad field."""
    settings = {key: _given(value) if isinstance(value, dict) else value for key, value in flags.items()}
    try:
        return GuardServiceConfig.model_validate(
            {key: value for key, value in settings.items() if value is not None}
        )
    except ValidationError as exc:
        field, message = validation_problem(exc)
        name = field.rpartition(".")[2]
        raise ConfigError(f"{_FLAG_OF_FIELD.get(name, '--' + name.replace('_', '-'))}: {message}") from None


def _given(section: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in section.items() if value is not None}
