"""Keep API keys out of everything sp-dspy writes: result files, settings, logs, errors."""

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


def redact(text: str) -> str:
    """``text`` with every registered secret and every ``*_KEY``/``*_TOKEN``/``*_SECRET`` value masked.

    The environment is read at each call, so keys exported after import count too; the
    longest secret goes first, so a key containing another is masked whole.
    """
    found = {value for name, value in os.environ.items() if name.upper().endswith(SECRET_SUFFIXES)}
    with _lock:
        found |= _registered
    for secret in sorted((v for v in found if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


class RedactingFilter(logging.Filter):
    """Masks every known secret in a log record before any handler writes it; never drops one.

    Libraries log what they are given (an exception may echo an ``Authorization`` header).
    Message, traceback and stack are rendered once and redacted for every handler.
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

    The filter goes on every existing handler (also on non-propagating loggers and
    ``logging.lastResort``); the wrapped record factory covers those set up later.
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
