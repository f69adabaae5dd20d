"""Model settings: one validated record per model, loaded from YAML.

A config names a model as DSPy/LiteLLM do (``openai/gpt-5.5``, ``fake/oracle``) plus the
settings that change results or cost. It never holds a key (``api_key_env`` names the
variable), so config files can be committed and results record settings safely.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from .._errors import ConfigError, validation_problem
from .._redact import redact
from .._user_dirs import default_config_dir
from .._yaml_lines import key_lines, read_yaml_text, repeated_key

Transport = Literal["auto", "dspy", "direct"]
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
_KEY_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "x-goog-api-key"})
_RESERVED_BODY_FIELDS = frozenset({"model", "messages", "system", "stream"})
_URL_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
MODELS_FILE_NAME = "models.yaml"
#: Settings checked by a predicate: ``field -> (allowed(value), message when not)``. A key pasted
#: into ``api_key_env`` is never echoed: the message does not show the value.
_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "api_key_env": (
        lambda v: bool(_ENV_NAME.match(v)),
        "must name an environment variable (e.g. OPENAI_API_KEY), not hold a key",
    ),
    "temperature": (lambda v: 0 <= v <= 2, "must be between 0 and 2"),
    "max_tokens": (lambda v: v >= 1, "must be a positive number of tokens"),
    "reasoning_effort": (lambda v: v in REASONING_EFFORTS, f"must be one of {', '.join(REASONING_EFFORTS)}"),
    "timeout": (lambda v: v > 0, "must be a positive number of seconds"),
    "num_retries": (lambda v: v >= 0, "must be 0 or more"),
    "rate_limit_timeout": (lambda v: v >= 0, "must be 0 or more seconds"),
    "rpm": (lambda v: v >= 1, "must be a positive number of requests per minute"),
    "tpm": (lambda v: v >= 1, "must be a positive number of tokens per minute"),
}


#: LM settings that change answers: a resumed run or ablation must keep them. Transport settings
#: (endpoint, key variable, timeout, retries, cache) may change between a run and its resumption.
ANSWER_SETTINGS = ("model", "name", "temperature", "max_tokens", "reasoning_effort", "json_schema")


class LMConfig(BaseModel):
    """How to reach one model and how to sample from it.

    ``api_base`` may list replicas of one model, comma-separated. ``transport``: ``direct`` is
    sp-dspy's HTTP engine (requests as the reference harness sends them), ``dspy`` DSPy's own,
    ``auto`` the direct one wherever the provider has a profile and there is one endpoint.
    ``extra_body`` is merged into every body last, ``extra_headers`` sent with every request
    (never a key), ``thinking`` is Anthropic's setting (``{"type": "adaptive"}``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    timeout: float | None = 120
    num_retries: int = 3
    #: Seconds one call may spend rate-limited (429, "overloaded") before it ends as an error.
    rate_limit_timeout: float = 1800
    #: Adapt the calls in flight to the endpoint's rate limits (off: the caller's concurrency, pinned).
    adaptive: bool = True
    #: The account's known limits (requests, tokens per minute): ``--dry-run`` estimates wall time.
    rpm: int | None = None
    tpm: int | None = None
    cache: bool = True
    json_schema: bool = False
    transport: Transport = "auto"
    extra_body: dict[str, Any] | None = None
    extra_headers: dict[str, str] | None = None
    thinking: dict[str, Any] | None = None
    name: str | None = None

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        value = value.strip()
        if not value or value.startswith("/") or value.endswith("/"):
            raise ValueError("must be a model string such as 'openai/gpt-5.5' or 'fake/oracle'")
        return value

    @field_validator("api_base")
    @classmethod
    def _api_base(cls, value: str | None) -> str | None:
        for part in [] if value is None else value.split(","):
            if not part.strip().startswith(("http://", "https://")):
                raise ValueError(f"endpoint {redact(part.strip())!r} must start with http:// or https://")
        return value

    @field_validator("extra_headers")
    @classmethod
    def _extra_headers(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for name in value or {}:
            if name.lower() in _KEY_HEADERS:
                raise ValueError(f"header {name!r} carries a key: name its variable in api_key_env instead")
        return value

    @field_validator("extra_body")
    @classmethod
    def _extra_body(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        reserved = sorted(set(value or {}) & _RESERVED_BODY_FIELDS)
        if reserved:
            raise ValueError(f"{', '.join(reserved)} cannot be set here (sp-dspy sends them)")
        return value

    @field_validator(
        "api_key_env", "temperature", "max_tokens", "reasoning_effort", "timeout", "num_retries",
        "rate_limit_timeout", "rpm", "tpm",
    )  # fmt: skip
    @classmethod
    def _checked(cls, value: Any, info: ValidationInfo) -> Any:
        allowed, message = _CHECKS[info.field_name or ""]
        if value is not None and not allowed(value):
            raise ValueError(message)
        return value

    @property
    def api_bases(self) -> list[str]:
        """The endpoints of ``api_base`` in order (empty when none is set)."""
        return [] if self.api_base is None else [part.strip() for part in self.api_base.split(",")]

    @property
    def provider(self) -> str:
        """The provider prefix of ``model`` (``openai`` for ``openai/gpt-5.5``), or ``""``."""
        head, sep, _ = self.model.partition("/")
        return head if sep else ""

    @property
    def is_fake(self) -> bool:
        """Whether this config selects the in-process fake engine (``fake`` or ``fake/...``)."""
        return self.model == "fake" or self.model.startswith("fake/")

    def short_name(self) -> str:
        """Last ``/``-part of ``model``, made safe for file names (``gpt-5.5``)."""
        last = self.model.rstrip("/").rsplit("/", 1)[-1]
        return _UNSAFE_FILE_CHARS.sub("_", last).strip("._") or "model"

    def display_name(self) -> str:
        """The configured ``name``, else :meth:`short_name`."""
        return self.name or self.short_name()

    def command_flags(self) -> str:
        """How a command line names this LM: ``--lm NAME`` (a configured or the embedded model), else
        ``--lm MODEL`` with the endpoint and key-variable flags that reach it (never a secret)."""
        if self.name:
            return f"--lm {self.name}"
        flags = [f"--lm {self.model}"]
        if self.api_base:
            flags.append(f"--api-base {','.join(display_endpoint(url) for url in self.api_bases)}")
        if self.api_key_env:
            flags.append(f"--api-key-env {self.api_key_env}")
        return " ".join(flags)

    def public_dict(self) -> dict[str, Any]:
        """Settings safe to write next to results: no secrets, no URL credentials."""
        return {key: _public(value) for key, value in self.model_dump().items()}


def display_endpoint(url: str) -> str:
    """An endpoint as results may show it: no ``user:password@``, no known secret."""
    return redact(_URL_USERINFO.sub("***@", url.strip().rstrip("/")))


def _public(value: Any) -> Any:
    """``value`` with URL credentials and known secrets masked, nested values included."""
    if isinstance(value, str):
        return redact(_URL_USERINFO.sub("***@", value))
    if isinstance(value, dict):
        return {key: _public(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_public(item) for item in value]
    return value


def _describe(exc: ValidationError) -> str:
    field, message = validation_problem(exc)
    more = exc.error_count() - 1
    return f"field '{field or 'entry'}': {message}" + (f" (and {more} more)" if more else "")


def load_model_configs(path: str | Path) -> dict[str, LMConfig]:
    """Read ``{models: {name: {model: ..., ...} or a model string}}`` from a YAML file (``name``
    defaults to the key); a ConfigError names the file, line, model and field that is wrong."""
    path = Path(path)
    data, text = read_yaml_text(path, "model configs")
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, dict):
        raise ConfigError(f"{path}: expected a mapping 'models: {{name: {{model: ...}}}}' at the top level")
    repeated = repeated_key(text, under="models")
    if repeated is not None:
        name, first, second = repeated
        raise ConfigError(f"{path}:{second}: model '{name}' is defined twice (first on line {first})")
    lines = key_lines(text, under="models")
    configs: dict[str, LMConfig] = {}
    for name, entry in models.items():
        where = f"{path}:{lines[str(name)]}" if str(name) in lines else str(path)
        if isinstance(entry, str):
            entry = {"model": entry}
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: model '{name}': expected a mapping of settings or a model string")
        try:
            configs[str(name)] = LMConfig.model_validate({"name": str(name), **entry})
        except ValidationError as exc:
            raise ConfigError(f"{where}: model '{name}': {redact(_describe(exc))}") from None
    return configs


def bundled_models_file() -> Path:
    """The models file installed with the package (``sp_dspy/configs/models.yaml``)."""
    return Path(str(resources.files("sp_dspy").joinpath("configs", MODELS_FILE_NAME)))


def user_models_file() -> Path:
    """The user's own models file: ``~/.config/sp-dspy/models.yaml`` (``$XDG_CONFIG_HOME`` honoured)."""
    return default_config_dir() / MODELS_FILE_NAME


def models_files(config_file: Path | None = None) -> list[Path]:
    """The models files that apply, in order: the package's and the user's when they exist
    (so a name works from any directory), then ``--config``, which must exist."""
    files = [path for path in (bundled_models_file(), user_models_file()) if path.is_file()]
    if config_file is not None:
        if not config_file.is_file():
            raise ConfigError(f"--config {config_file}: no such file")
        files.append(config_file)
    return files


def load_configured_models(config_file: Path | None = None) -> dict[str, LMConfig]:
    """Every configured model by name: :func:`models_files` in order, a later entry replacing an earlier one."""
    configs: dict[str, LMConfig] = {}
    for path in models_files(config_file):
        configs.update(load_model_configs(path))
    return configs


def resolve_model_config(
    spec: str, configs: dict[str, LMConfig] | None = None, *, flag: str = "--lm"
) -> LMConfig:
    """The config ``spec`` (typed after ``flag``, which errors name) names: a configured name
    (``gpt-5.5``) or any model string with a provider prefix (``openai/gpt-4o-mini``, ``fake/all``)."""
    configs = configs or {}
    if spec in configs:
        return configs[spec]
    if "/" in spec or spec == "fake":
        try:
            return LMConfig(model=spec)
        except ValidationError as exc:
            raise ConfigError(f"{flag} {spec!r}: {_describe(exc)}") from None
    known = ", ".join(sorted(configs)) or "none configured"
    raise ConfigError(
        f"{flag} {spec!r}: not a configured model name ({known}) and not a provider/model string"
    )
