"""``compile.log``: where the optimizer libraries' loggers, progress bars and prints go while a compile
runs, written so that a failed write (a full disk) never raises inside them."""

from __future__ import annotations

import contextlib
import io
import logging
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO, cast

from sp_dspy._errors import ConfigError, OutputError
from sp_dspy._redact import RedactingFilter, RedactingWriter

#: The loggers of the libraries a compile runs, sent to ``compile.log``.
LIBRARY_LOGGERS = ("dspy", "gepa", "optuna", "LiteLLM", "litellm", "httpx", "httpcore", "openai")


class LogStream(io.TextIOBase):
    """``compile.log`` as the libraries write it (their loggers, progress bars, prints): a write
    that fails (a full disk) never raises in them.

    A library thread that raised there could leave a lock held (tqdm's ``refresh`` does), and
    the compile would hang at exit joining its threads. So the first failure is kept
    (``failure``), ``on_failure`` is called once (the compile halts its LM calls), later output
    is dropped, and :meth:`check` turns the failure into one ``OutputError`` line. Line-buffered:
    a stopped compile's log ends with its last line.
    """

    encoding = "utf-8"  # what the libraries write through (a progress bar picks its characters by it)

    def __init__(self, path: Path, on_failure: Callable[[], None] = lambda: None) -> None:
        super().__init__()
        self.path = path
        self.failure: OSError | None = None
        self._on_failure = on_failure
        self._lock = threading.Lock()
        try:
            self._file: TextIO | None = open(path, "w", encoding="utf-8", buffering=1)  # noqa: SIM115
        except OSError as exc:
            raise ConfigError(
                f"--out {path.parent}: cannot write {path.name} there ({exc.strerror or exc})"
            ) from None

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def _guarded(self, operation: Callable[[TextIO], object]) -> None:
        with self._lock:
            if self._file is None or self.failure is not None:
                return
            try:
                operation(self._file)
            except OSError as exc:
                self.failure = exc
            else:
                return
        self._on_failure()

    def write(self, text: str) -> int:
        self._guarded(lambda file: file.write(text))
        return len(text)

    def flush(self) -> None:
        self._guarded(lambda file: file.flush())

    def close(self) -> None:
        """Close the file (a thread still writing afterwards is ignored); a failed flush is kept."""
        self._guarded(lambda file: file.close())
        with self._lock:
            if self._file is not None and not self._file.closed:
                with contextlib.suppress(OSError):  # after a failed write: close, whatever it holds
                    self._file.close()
            self._file = None
        super().close()

    def check(self) -> None:
        """Raise the one line that stops a compile whose log could not be written."""
        self.flush()
        if self.failure is not None:
            raise OutputError(
                f"--out {self.path.parent}: cannot write {self.path.name} "
                f"({self.failure.strerror or self.failure}); the compile stopped and saved no artifact: "
                "free space (or fix the cause), then rerun the same command "
                "(finished calls come from the response cache)"
            )


@contextlib.contextmanager
def library_log(path: Path, on_failure: Callable[[], None] = lambda: None) -> Iterator[LogStream]:
    """Route the libraries' logs, stdout/stderr and a stopping traceback to ``path`` (overwritten).

    None of the optimizers' progress bars and logged refusals belong on the user's terminal.
    Opening the file also checks, before the first LM call, that the directory is writable.
    A write that fails calls ``on_failure`` and, when the block ends, raises one ``OutputError``
    in place of whatever the block raised (an interrupt excepted); a failure after the block's
    work (the final flush) is left in the stream's ``failure`` for the caller.
    """
    stream = LogStream(path, on_failure)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())  # also when sp-dspy is used as a library, not the CLI
    printed = RedactingWriter(cast(TextIO, stream))  # printed text passes no log filter (write and flush)
    saved = []
    try:
        for name in LIBRARY_LOGGERS:
            logger = logging.getLogger(name)
            saved.append((logger, list(logger.handlers), logger.propagate, logger.level))
            logger.handlers = [handler]
            logger.propagate = False
            logger.setLevel(logging.INFO)
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            yield stream
    except Exception:
        printed.write(f"compile stopped:\n{traceback.format_exc()}")
        stream.check()
        raise
    except BaseException:
        printed.write(f"compile stopped:\n{traceback.format_exc()}")
        raise
    finally:
        for logger, handlers, propagate, level in saved:
            logger.handlers = handlers
            logger.propagate = propagate
            logger.setLevel(level)
        handler.close()
        stream.close()
