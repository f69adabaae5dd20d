"""Keep API keys out of everything sp-dspy writes: result files, settings, logs, errors.

Anything that writes text passes it through :func:`redact`, which masks every known
secret: values registered with :func:`register_secret` (``make_lm`` registers the key
it reads) and values of environment variables named ``*_KEY``, ``*_TOKEN`` or
``*_SECRET`` (read at call time, so keys exported after import count too).
:func:`install_log_redaction` does the same for every log line.
"""

from __future__ import annotations

import logging
import os
import threading

MASK = "***"
SECRET_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET")
# Shorter values cannot be real credentials, and masking "1" or "on" everywhere would mangle output.
MIN_SECRET_LENGTH = 6

_lock = threading.Lock()
_registered: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember ``value`` as a secret so :func:`redact` masks it from now on."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _registered.add(value)


def secret_values() -> list[str]:
    """Every known secret, longest first (so a key containing another is masked whole)."""
    found = {value for name, value in os.environ.items() if name.upper().endswith(SECRET_SUFFIXES)}
    with _lock:
        found |= _registered
    return sorted((v for v in found if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True)


def redact(text: str) -> str:
    """``text`` with every known secret value replaced by ``***``."""
    for secret in secret_values():
        text = text.replace(secret, MASK)
    return text


class RedactingFilter(logging.Filter):
    """Masks every known secret in a log record before any handler writes it; never drops one.

    Libraries log what they are given (DSPy logs each failed example's exception, which
    may echo an ``Authorization`` header). The record's message with its arguments, its
    traceback and its stack are rendered once and redacted, so every formatter and
    handler writes the same masked line.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, _REDACTED, False):
            return True
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: the handler reports it as logging does
            return True
        masked = redact(message)
        if masked != message or record.args:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        setattr(record, _REDACTED, True)
        return True


_REDACTED = "sp_dspy_redacted"
_filter = RedactingFilter()
_installed = False


def install_log_redaction() -> None:
    """Make every log line this process writes go through :class:`RedactingFilter`; idempotent.

    The filter goes on every handler that exists now (also the ones DSPy and LiteLLM put
    on their non-propagating loggers, and ``logging.lastResort``), and the record factory
    is wrapped so records of loggers and handlers set up later are redacted as they are made.
    """
    global _installed
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    handlers = [h for lg in loggers if isinstance(lg, logging.Logger) for h in lg.handlers]
    if logging.lastResort is not None:
        handlers.append(logging.lastResort)
    for handler in handlers:
        if _filter not in handler.filters:
            handler.addFilter(_filter)
    with _lock:
        if _installed:
            return
        _installed = True
    make_record = logging.getLogRecordFactory()

    def redacted_record(*args: object, **kwargs: object) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        _filter.filter(record)
        return record

    logging.setLogRecordFactory(redacted_record)
