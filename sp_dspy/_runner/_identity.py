"""The one check that a resumed job is the job it continues, for every command (eval, ablate,
experiment): each states its identity, a mapping of the settings that decide what it sends, and
the saved identity is compared with the new one field by field; the first field that differs is
named, with both values. What may change on resume (caps, concurrency, batch) is left out of an
identity; settings an older version did not record are not compared.
"""

from __future__ import annotations

from typing import Any

from .._errors import ConfigError


def flatten(document: Any, prefix: str = "") -> dict[str, Any]:
    """``{"data": {"level": 1}}`` as ``{"data.level": 1}``."""
    if not isinstance(document, dict):
        return {prefix: document}
    flat: dict[str, Any] = {}
    for key, value in document.items():
        flat.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def first_difference(
    old: dict[str, Any], new: dict[str, Any], *, dotted: bool = True
) -> tuple[str, Any, Any] | None:
    """(field, old value, new value) of the first field that differs, or None; ``dotted``: nested
    mappings compared field by field (``data.level``), else each top-level value as a whole."""
    flat_old, flat_new = (flatten(old), flatten(new)) if dotted else (old, new)
    for key in [*flat_old, *(k for k in flat_new if k not in flat_old)]:
        if flat_old.get(key) != flat_new.get(key):
            return key, flat_old.get(key), flat_new.get(key)
    return None


def refuse_changed(old: dict[str, Any], new: dict[str, Any], *, where: str, mixes: str = "report") -> None:
    """``ConfigError`` naming the first field in which ``new`` (this resumption) differs from ``old``
    (the identity saved in ``where``); ``mixes``: what two setups would be mixed in."""
    found = first_difference(old, new)
    if found is not None:
        field, was, now = found
        raise ConfigError(
            f"--resume: {where} ran with {field}={was!r}, this run asks for {now!r};"
            f" resuming would mix two setups in one {mixes} (use another --out)"
        )
