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
"""

from __future__ import annotations

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
