"""Raw bytes to text and JSON, each problem one ``DataError`` line naming the file (and line)."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from .._errors import DataError

_LEADING_SPACE = re.compile(rb"\s*")
# A rule line ``N. text``, anchored on "\n" so the regex engine skips to line starts;
# the first line gets its own match rather than copying the policy to prepend a newline.
_RULE_LINE = re.compile(r"\n\s*(\d+)\.(?=\s)")
_FIRST_RULE = re.compile(r"\s*(\d+)\.(?=\s)")


def rule_line_numbers(policy: str) -> list[int]:
    """The number of each ``N.`` rule line of a policy, in order (a number used twice is listed twice)."""
    found = list(map(int, _RULE_LINE.findall(policy)))
    first = _FIRST_RULE.match(policy)
    if first is not None and "\n" not in policy[: first.start(1)]:  # else _RULE_LINE found it
        found.insert(0, int(first.group(1)))
    return found


def json_head(raw_bytes: bytes) -> bytes:
    """The first non-space byte of a JSON document (``b"["``, ``b"{"``...), or ``b""``."""
    start = _LEADING_SPACE.match(raw_bytes)
    return raw_bytes[start.end() : start.end() + 1] if start else b""


def read_bytes(path: Path) -> bytes:
    """The bytes of ``path``; a file that cannot be read is one ``DataError`` line."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or type(exc).__name__})") from None


def decode_utf8(raw_bytes: bytes, path: Path) -> str:
    """The file's text; bytes that are not UTF-8 are an error naming their line and column.

    Never replacement characters: they would silently change what the guard is shown.
    """
    try:
        return raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw_bytes.count(b"\n", 0, exc.start) + 1
        column = exc.start - raw_bytes.rfind(b"\n", 0, exc.start)
        raise DataError(
            f"{path}:{line}:{column}: not UTF-8 (byte 0x{raw_bytes[exc.start]:02x}); save the file as UTF-8"
        ) from None


#: Nesting reported for JSON too deep for Python's parser (about 1,000 levels).
NESTING_REPORTED = 500
_NESTING_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{\]}]')


def parse_json(text: str, path: Path) -> Any:
    """``json.loads(text)``; invalid or too deeply nested JSON is one ``DataError`` naming the line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except RecursionError:
        at = _nesting_exceeded_at(text, NESTING_REPORTED)
        where = "" if at is None else f":{text.count(chr(10), 0, at) + 1}"
        raise DataError(
            f"{path}{where}: invalid JSON: arrays and objects nested more than {NESTING_REPORTED} levels deep"
        ) from None


def json_object_line(line: str, where: str) -> dict[str, Any]:
    """One JSON-lines line as an object; anything else is one ``DataError`` naming ``where`` (``FILE:LINE``)."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: invalid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise DataError(f"{where}: invalid JSON: arrays and objects nested too deeply") from None
    if not isinstance(value, dict):
        raise DataError(f"{where}: expected a JSON object per line, got {type(value).__name__}")
    return value


def _nesting_exceeded_at(text: str, limit: int) -> int | None:
    """Where ``[`` and ``{`` (outside strings) first nest deeper than ``limit``, or None."""
    depth = 0
    for token in _NESTING_TOKEN.finditer(text):
        char = token.group()
        if char in "[{":
            depth += 1
            if depth > limit:
                return token.start()
        elif char in "]}":
            depth -= 1
    return None


#: The most bytes ``read_json_file`` reads: far above any artifact or split file.
MAX_JSON_FILE_BYTES = 64 << 20


def read_json_file(path: Path, what: str, *, max_bytes: int = MAX_JSON_FILE_BYTES) -> Any:
    """The JSON document in ``path``, a regular file of at most ``max_bytes`` (``what`` names it).

    Anything else is one ``DataError`` before a byte is read (a FIFO would block, a device
    fill memory); the check goes through the open handle, so a swapped path cannot slip past.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else None
                raise DataError(f"{path}: {what} is {kind or 'a device or socket'}, not a regular file")
            with os.fdopen(os.dup(fd), "rb") as handle:
                raw = handle.read(max_bytes + 1)
        finally:
            os.close(fd)
    except OSError as exc:
        raise DataError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if len(raw) > max_bytes:
        limit = f"{max_bytes >> 20} MiB" if max_bytes % (1 << 20) == 0 else f"{max_bytes} bytes"
        raise DataError(f"{path}: {what} is larger than {limit}, the most it may be")
    return parse_json(decode_utf8(raw, path), path)
