"""Keep API keys out of everything sp-dspy writes: result files, settings, logs, errors, model answers.

Two kinds of secret are masked. Every ``*_KEY``/``*_TOKEN``/``*_SECRET`` value in the
environment is masked where it appears whole. A key this process sends (``register_secret``:
the LM layer registers each key it resolves) is masked also in part: any run of at least
:data:`MIN_FRAGMENT_LENGTH` of its characters, so a key that a library cut short (a
validation message, a truncated answer) loses its tail too.
"""

from __future__ import annotations

import functools
import io
import logging
import os
import re
import threading
from collections.abc import Iterable
from typing import Any, TextIO

MASK = "***"
SECRET_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET")
# Shorter values cannot be real credentials, and masking "1" or "on" everywhere would mangle output.
MIN_SECRET_LENGTH = 6
#: The shortest part of a registered key that is masked on its own. Twelve characters of a
#: random key are never ordinary text, and a cut key keeps at least its prefix to this length.
MIN_FRAGMENT_LENGTH = 12

_lock = threading.Lock()
_registered: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember ``value`` as a secret so :func:`redact` masks it, and any long part of it, from now on."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _registered.add(value)


def redact(text: str) -> str:
    """``text`` with every secret masked: registered keys whole or in part, environment secrets whole.

    The environment is read at each call, so keys exported after import count too; the
    longest secret goes first, so a key containing another is masked whole.
    """
    return _current().mask(text)


def redact_data(value: Any) -> Any:
    """``value`` (parsed JSON: dicts, lists, strings) with every string in it, keys included,
    redacted as :func:`redact` does: a model answer as it enters sp-dspy, before anything
    caches, parses or records it (a server may echo the request's key into any field)."""
    return _current().mask_data(value)


def redact_outputs(outputs: list[Any]) -> None:
    """Mask, in place, every string in a list of model outputs (strings, or dicts of them as
    DSPy gives text with reasoning): DSPy hands one list to the caller, its history and its
    callbacks, so masking that list masks the answer wherever DSPy keeps it."""
    masker = _current()
    for index, item in enumerate(outputs):
        if isinstance(item, dict):  # kept, not copied: DSPy's dicts also answer attribute access
            for key, value in item.items():
                masked = masker.mask_data(value)
                if masked != value:
                    item[key] = masked
        else:
            masked = masker.mask_data(item)
            if masked != item:
                outputs[index] = masked


def _current() -> _Masker:
    """The masker of the secrets known now (environment read at this call, registered keys)."""
    found = frozenset(
        value
        for name, value in os.environ.items()
        if name.upper().endswith(SECRET_SUFFIXES) and len(value) >= MIN_SECRET_LENGTH
    )
    with _lock:
        registered = frozenset(_registered)
    return _masker(found | registered, registered)


class _Masker:
    """Masks one set of secrets: whole values by ``str.replace``, parts of long registered keys
    through one compiled pattern over the keys' characters.

    The pattern finds runs of characters that occur in some key (ordinary words rarely reach
    :data:`MIN_FRAGMENT_LENGTH`); inside a run, every window of that length that is part of a
    key is masked, overlapping windows as one. Cost: one regex scan plus a set lookup per
    character of the (rare) long runs.
    """

    def __init__(self, whole: Iterable[str], fragmented: Iterable[str]) -> None:
        self.whole = sorted(whole, key=len, reverse=True)
        keys = [key for key in fragmented if len(key) >= MIN_FRAGMENT_LENGTH]
        n = MIN_FRAGMENT_LENGTH
        self.windows = frozenset(key[i : i + n] for key in keys for i in range(len(key) - n + 1))
        chars = "".join(sorted(set("".join(keys))))
        self.runs = re.compile(f"[{re.escape(chars)}]{{{n},}}") if keys else None

    def mask(self, text: str) -> str:
        for secret in self.whole:
            if secret in text:
                text = text.replace(secret, MASK)
        if self.runs is None:
            return text
        pieces: list[str] = []
        done = 0
        for run in self.runs.finditer(text):
            for start, end in self._spans(run.group(), run.start()):
                pieces += [text[done:start], MASK]
                done = end
        return "".join([*pieces, text[done:]]) if pieces else text

    def mask_data(self, value: Any) -> Any:
        """:meth:`mask` applied to every string in nested dicts and lists."""
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, dict):
            return {self.mask_data(key): self.mask_data(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.mask_data(item) for item in value]
        return value

    def _spans(self, run: str, offset: int) -> Iterable[tuple[int, int]]:
        """The spans (in the text) of ``run`` that are parts of a key, overlapping windows merged."""
        n = MIN_FRAGMENT_LENGTH
        start = end = -1
        for i in range(len(run) - n + 1):
            if run[i : i + n] in self.windows:
                if i > end:
                    if end >= 0:
                        yield offset + start, offset + end
                    start = i
                end = i + n
        if end >= 0:
            yield offset + start, offset + end


@functools.lru_cache(maxsize=16)
def _masker(whole: frozenset[str], fragmented: frozenset[str]) -> _Masker:
    """The masker of one set of secrets, built once (the set changes when a key is registered)."""
    return _Masker(whole, fragmented)


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


class RedactingWriter(io.TextIOBase):
    """A text stream that writes to ``target`` what :func:`redact` leaves of each write: where
    ``print`` output and progress bars go to a file (``compile.log``), past any log filter."""

    def __init__(self, target: TextIO) -> None:
        self.target = target

    def write(self, text: str) -> int:
        self.target.write(redact(text))
        return len(text)

    def flush(self) -> None:
        self.target.flush()

    def writable(self) -> bool:
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
