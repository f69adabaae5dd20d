"""Keep API keys out of everything sp-dspy writes: result files, settings, logs, errors.

Keys only ever come from the environment (see ``LMConfig.api_key_env``), but they can
still leak through the back door: a provider error that echoes the ``Authorization``
header, a repr of a client object, a settings dump. Rather than trusting every code
path, anything that writes text passes it through :func:`redact`, which replaces every
secret value known to the process with ``***``.

A value is secret when it is registered with :func:`register_secret` (``make_lm`` does
this for the key it reads) or when it is the value of an environment variable whose
name ends with ``_KEY``, ``_TOKEN`` or ``_SECRET`` (read at call time, so keys exported
after import are covered too).

Log lines are covered by :func:`install_log_redaction`: a ``logging.Filter`` on every
handler, so no library's log output (DSPy's, LiteLLM's) can print a key either.
"""

from __future__ import annotations

import logging
import os
import threading

MASK = "***"
SECRET_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET")
# Shorter values are not masked: replacing "1" or "on" everywhere would mangle output
# and such values cannot be real credentials anyway.
MIN_SECRET_LENGTH = 6

_lock = threading.Lock()
_registered: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember ``value`` as a secret so :func:`redact` masks it from now on."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _registered.add(value)


def is_secret_env_name(name: str) -> bool:
    """Whether an environment variable's *name* marks its value as a secret."""
    return name.upper().endswith(SECRET_SUFFIXES)


def secret_values() -> list[str]:
    """Every known secret, longest first (so a key containing another is masked whole)."""
    found = {value for name, value in os.environ.items() if is_secret_env_name(name) and value}
    with _lock:
        found |= _registered
    return sorted((v for v in found if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True)


def redact(text: str) -> str:
    """``text`` with every known secret value replaced by ``***``."""
    for secret in secret_values():
        if secret in text:
            text = text.replace(secret, MASK)
    return text


class RedactingFilter(logging.Filter):
    """A logging filter that masks every known secret in a record before any handler writes it.

    Libraries log what they are given: DSPy's parallelizer logs each failed example's
    exception text, and a server that echoes the request (``Authorization`` header
    included) puts the key in it. The filter renders the record's message with its
    arguments, its exception traceback and its stack once, redacts them, and leaves
    the record carrying only the redacted text, so any formatter and any handler
    (terminal or file) write the same masked line. It never drops a record.
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
    """Make every log line this process writes go through :class:`RedactingFilter`.

    The filter is added to every handler that exists now (the root logger's, the
    ones DSPy and LiteLLM attach to their own non-propagating loggers, and
    ``logging.lastResort``), and the log-record factory is wrapped so that records
    created later (by loggers or handlers set up after this call, e.g. LiteLLM's on
    its first import) are redacted as they are made. Idempotent; the CLI calls it
    at start-up.
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
