"""Optimizer settings: one pydantic model per optimizer, read from YAML, overridden by ``--set``.

Models forbid extra keys, so a typo is an error naming the file and line, not an ignored setting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sp_dspy.errors import ConfigError, validation_problem
from sp_dspy.files import read_yaml_file

DEFAULT_OPTIMIZERS_FILE = Path(str(resources.files("sp_dspy").joinpath("configs", "optimizers.yaml")))

S = TypeVar("S", bound="OptimizerSettings")


class OptimizerSettings(BaseModel):
    """Settings every recipe shares."""

    model_config = ConfigDict(extra="forbid")

    num_threads: int = Field(default=8, ge=1, description="Program calls run in parallel during evaluation.")


def _describe(exc: ValidationError) -> str:
    field, message = validation_problem(exc)
    return f"field '{field or 'settings'}': {message}"


def read_settings_file(path: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """The file's ``{optimizer: {key: value}}`` mapping and the line of each section."""
    data, lines = read_yaml_file(path, "optimizer settings")
    data = data or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of optimizer names to settings")
    return data, lines


def parse_overrides(pairs: Sequence[str]) -> dict[str, Any]:
    """``["breadth=3", "auto=null"]`` -> ``{"breadth": 3, "auto": None}`` (values read as YAML)."""
    overrides: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {pair!r}: expected KEY=VALUE, e.g. --set breadth=3")
        try:
            overrides[key.strip()] = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            raise ConfigError(f"--set {pair!r}: the value is not valid YAML") from None
    return overrides


def load_settings(
    name: str, model: type[S], *, path: Path | None = None, overrides: Mapping[str, Any] | None = None
) -> S:
    """``model`` filled from ``path``'s ``name`` section (default: the package's file), then ``overrides``.

    A bad file, key or value is a ``ConfigError`` naming the file and line, or ``--set``.
    """
    data, lines = read_settings_file(path or DEFAULT_OPTIMIZERS_FILE)
    if path is not None and name not in data:  # a file given on purpose: it must set this optimizer
        has = ", ".join(map(str, data)) or "no section"
        raise ConfigError(f"{path}: no section for optimizer '{name}' (the file has: {has})")
    path = path or DEFAULT_OPTIMIZERS_FILE
    section = data.get(name) or {}
    if not isinstance(section, dict):
        raise ConfigError(f"{path}:{lines.get(name, 1)}: section '{name}' must be a mapping of settings")
    where = f"{path}:{lines[name]}" if name in lines else str(path)
    try:
        settings = model.model_validate(section)
    except ValidationError as exc:
        raise ConfigError(f"{where}: optimizer '{name}': {_describe(exc)}") from None
    if overrides:
        try:
            settings = model.model_validate({**settings.model_dump(), **overrides})
        except ValidationError as exc:
            raise ConfigError(f"--set: optimizer '{name}': {_describe(exc)}") from None
    return settings
