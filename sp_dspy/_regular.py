"""Reading a regular file, bounded: the one way sp-dspy opens a file it reads (a foundation: every
layer may use it, the manifest of a run included; ``_data`` builds its JSON and text readers on it)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from ._errors import DataError

#: The most bytes a settings-sized file may hold (``read_json_file``'s default): far above any
#: artifact, split file, manifest, plan, config, policy or conversation.
MAX_JSON_FILE_BYTES = 64 << 20


def decode_utf8(raw_bytes: bytes, path: Path, *, first_line: int = 1) -> str:
    """The file's text; bytes that are not UTF-8 are an error naming their line and column.

    ``first_line``: the line ``raw_bytes`` starts on (a reader going line by line).
    Never replacement characters: they would silently change what the guard is shown.
    """
    try:
        return raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw_bytes.count(b"\n", 0, exc.start) + first_line
        column = exc.start - raw_bytes.rfind(b"\n", 0, exc.start)
        raise DataError(
            f"{path}:{line}:{column}: not UTF-8 (byte 0x{raw_bytes[exc.start]:02x}); save the file as UTF-8"
        ) from None


def open_regular(path: Path, what: str) -> BinaryIO:
    """``path`` open for reading, when it is a regular file: every file sp-dspy reads opens here.

    Anything else is one ``DataError`` (``what`` names the file) before a byte is read: a
    FIFO would block, a device (``/dev/zero``) fill memory. The check goes through the open
    handle, so a path swapped meanwhile cannot slip past.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once, to be refused
    except OSError as exc:
        raise DataError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else None
            raise DataError(f"{path}: {what} is {kind or 'a device or socket'}, not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def size_text(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit % (1 << 20) == 0 else f"{limit} bytes"


def read_regular(path: Path, what: str, *, max_bytes: int = MAX_JSON_FILE_BYTES) -> bytes:
    """The bytes of ``path``, a regular file of at most ``max_bytes``; else one ``DataError``."""
    with open_regular(path, what) as handle:
        return read_bounded(handle, path, what, max_bytes=max_bytes)


def read_text(path: Path, what: str) -> str:
    """The text of the file ``what`` names (a flag such as ``--policy``), read as every file is (a regular
    file of at most ``MAX_JSON_FILE_BYTES``); a missing one is one ``DataError`` naming both."""
    if not path.exists():
        raise DataError(f"{what} {path}: no such file")
    return decode_utf8(read_regular(path, f"{what} file"), path)


def read_bounded(handle: BinaryIO, path: Path, what: str, *, max_bytes: int) -> bytes:
    """The rest of ``handle`` (``path``, opened by ``open_regular``), at most ``max_bytes``; else ``DataError``."""
    try:
        raw = handle.read(max_bytes + 1)
    except OSError as exc:
        raise DataError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if len(raw) > max_bytes:
        raise DataError(f"{path}: {what} is larger than {size_text(max_bytes)}, the most it may be")
    return raw
