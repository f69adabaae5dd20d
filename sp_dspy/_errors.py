"""One error type for every bad input, so the CLI can print one line and exit 2.

Messages name *where* (file, line, case id, field) and *what* is wrong, never secrets.
"""

from __future__ import annotations


class SpDspyError(Exception):
    """A user-facing error: its ``str`` is the one line the CLI prints."""

    exit_code: int = 2


class DataError(SpDspyError):
    """The benchmark data or a result file is malformed."""


class ConfigError(SpDspyError):
    """A configuration file, flag or environment setting is wrong."""


class OutputError(SpDspyError):
    """An output location (results, manifest, cache, artifact) cannot be written."""
