"""sp-dspy's error types, public: what a guard program raises for a bad input or setting.

Every one is a :class:`SpDspyError`, which the CLI prints as its one line and exits 2:
:class:`DataError` for malformed data (a case, a rubric, a result file),
:class:`ConfigError` for a wrong setting (a file, a flag, an environment variable).
:func:`validation_problem` is pydantic's first error as ``(field, message)``, for that one line.
"""

from sp_dspy._errors import ConfigError, DataError, SpDspyError, validation_problem

__all__ = ["ConfigError", "DataError", "SpDspyError", "validation_problem"]
