"""The compile's log file: everything DSPy, the optimizers and their libraries say.

Optimizers log every refused or failed call with its whole example, print progress
bars and trial counters, and GEPA prints tracebacks; none of it belongs on the
terminal of a user who asked for a compile. While :func:`library_log` is active,
the loggers of those libraries write only to ``compile.log`` in the artifact
directory, and so does anything written to ``sys.stdout`` / ``sys.stderr``
(progress bars, ``print`` calls, warnings), and the traceback of whatever stopped
the compile. Opening the file is also the check that
the artifact directory is writable, made before the first LM call.
"""

from __future__ import annotations

import contextlib
import logging
import traceback
from collections.abc import Iterator
from pathlib import Path

from sp_dspy._errors import ConfigError

LOG_FILE = "compile.log"
LIBRARY_LOGGERS = ("dspy", "gepa", "optuna", "LiteLLM", "litellm", "httpx", "httpcore", "openai")


@contextlib.contextmanager
def library_log(path: Path) -> Iterator[None]:
    """Route the libraries' logs and the process's stdout/stderr to ``path`` (overwritten)."""
    try:
        handler = logging.FileHandler(path, mode="w", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"--out {path.parent}: cannot write {path.name} there ({exc.strerror or exc})"
        ) from None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    stream = handler.stream  # opened now (not delayed): stdout/stderr go to it as well
    assert stream is not None
    saved = []
    try:
        for name in LIBRARY_LOGGERS:
            logger = logging.getLogger(name)
            saved.append((logger, list(logger.handlers), logger.propagate, logger.level))
            logger.handlers = [handler]
            logger.propagate = False
            logger.setLevel(logging.INFO)
        with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
            yield
    except BaseException:
        stream.write(f"compile stopped:\n{traceback.format_exc()}")
        raise
    finally:
        for logger, handlers, propagate, level in saved:
            logger.handlers = handlers
            logger.propagate = propagate
            logger.setLevel(level)
        handler.close()
