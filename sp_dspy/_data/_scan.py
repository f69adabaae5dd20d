"""Raw bytes to text and JSON, each problem one ``DataError`` line naming the file (and line)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._errors import DataError
from .._regular import MAX_JSON_FILE_BYTES as MAX_JSON_FILE_BYTES
from .._regular import decode_utf8 as decode_utf8
from .._regular import open_regular as open_regular
from .._regular import read_bounded as read_bounded
from .._regular import read_regular as read_regular
from .._regular import size_text

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


#: The most bytes of a dataset read whole (a SafePyramid JSON, custom or PKU JSONL, ``check --batch``).
MAX_DATASET_BYTES = 1 << 30
#: The longest line of a results file (read line by line: the file itself may be any size).
MAX_LINE_BYTES = 64 << 20


def read_regular_lines(
    path: Path, what: str, *, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, str]]:
    """Each line of ``path`` (a regular file, read line by line) with its number, as text.

    Lines end at ``\n`` only (``\r\n`` and a lone ``\r`` too, as ``read_text`` splits):
    JSON writers leave U+2028, U+2029 and U+0085 raw in strings, where ``str.splitlines``
    would cut. A line longer than ``max_line_bytes`` or not UTF-8 is one ``DataError``
    naming it; the file itself may be any size.
    """
    number = 0
    with open_regular(path, what) as handle:
        while True:
            try:
                raw = handle.readline(max_line_bytes + 1)
            except OSError as exc:
                raise DataError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
            if not raw:
                return
            number += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                raise DataError(
                    f"{path}:{number}: line longer than {size_text(max_line_bytes)}, the most a line of "
                    f"a {what} may be"
                )
            text = decode_utf8(raw, path, first_line=number).removesuffix("\n")
            if "\r" not in text:
                yield number, text
                continue
            pieces = text.removesuffix("\r").split("\r")  # "\r\n" ends the line; a lone "\r" splits it
            for offset, piece in enumerate(pieces):
                yield number + offset, piece
            number += len(pieces) - 1


def read_json_file(path: Path, what: str, *, max_bytes: int = MAX_JSON_FILE_BYTES) -> Any:
    """The JSON document in ``path``, a regular file of at most ``max_bytes`` (``what`` names it).

    Anything else is one ``DataError`` before a byte is read (see ``open_regular``).
    """
    return parse_json(decode_utf8(read_regular(path, what, max_bytes=max_bytes), path), path)
