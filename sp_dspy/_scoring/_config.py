"""What the configs of the jobs that read recorded results (``score``, ``compare``, ``report``/``view``,
``export``) share: the bootstrap count's check, and a bad value said as one line naming its flag."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ValidationError

from .._errors import ConfigError, validation_problem


def _non_negative(value: int) -> int:
    if value < 0:
        raise ValueError(f"must be >= 0, got {value}")
    return value


#: ``--n-boot``: bootstrap resamples for the 95% intervals (0: none).
NBoot = Annotated[int, AfterValidator(_non_negative)]

ConfigT = TypeVar("ConfigT", bound=BaseModel)


def config_from_flags(
    model: type[ConfigT],
    settings: dict[str, Any],
    *,
    arguments: Mapping[str, str] | None = None,
    sections: Mapping[str, str] | None = None,
) -> ConfigT:
    """``settings`` (the flags' values by field name) as a ``model``; a bad value is one ``ConfigError``
    naming its flag: the command's argument a field stands for (``arguments``: ``{"files": "RESULTS"}``),
    else ``--`` and the field's name, after its section's flag prefix (``sections``: ``{"mlflow": "mlflow-"}``).
    """
    try:
        return model.model_validate(settings)
    except ValidationError as exc:
        name, message = validation_problem(exc)
        top, last = name.partition(".")[0], name.rpartition(".")[2]
        flag = (arguments or {}).get(top) or "--" + (sections or {}).get(top, "") + last.replace("_", "-")
        raise ConfigError(f"{flag}: {message}") from None
