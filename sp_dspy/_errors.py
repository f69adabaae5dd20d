"""One error type for every bad input, so the CLI can print one line and exit 2.

Messages name *where* (file, line, case id, field) and *what* is wrong, never secrets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class SpDspyError(Exception):
    """A user-facing error: its ``str`` is the one line the CLI prints."""

    exit_code: int = 2


class DataError(SpDspyError):
    """The benchmark data or a result file is malformed."""


class ConfigError(SpDspyError):
    """A configuration file, flag or environment setting is wrong."""


class OutputError(SpDspyError):
    """An output location (results, manifest, cache, artifact) cannot be written."""


def validation_problem(exc: ValidationError, *, skip: int = 0) -> tuple[str, str]:
    """The first problem pydantic found, as (dotted field path, message) for one error line.

    ``skip`` drops leading path parts the caller names itself; the message loses pydantic's
    ``Value error, `` prefix, which says nothing to a user.
    """
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"][skip:])
    return field, str(first["msg"]).removeprefix("Value error, ")
