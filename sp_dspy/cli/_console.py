"""The CLI's rich consoles: results on stdout, diagnostics and errors on stderr."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from .._errors import ConfigError

if TYPE_CHECKING:
    from .._scoring import Note

console = Console()
err_console = Console(stderr=True)

#: C0 and C1 control characters but tab and newline (a lone carriage return too), and DEL.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` (a model's answer, a dataset's text) safe to print: each control character as ``\\xNN``.

    An answer holding ESC, NUL or an OSC sequence would otherwise reach the terminal and act
    on it (clear the screen after the verdict, retitle the window); rich passes them through.
    Tab and newline stay, and so does a CRLF line end (as a newline).
    """
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


def warn(message: str, *, on: Console | None = None) -> None:
    """One plain line on stderr, or ``on`` a console of it (no rich markup: paths and ids may contain brackets)."""
    (on or err_console).print(f"warning: {visible(message)}", markup=False, highlight=False, soft_wrap=True)


def say_note(note: Note) -> None:
    """A note said while recorded data loads, on stderr (no markup: paths may contain brackets): a
    detail dim, a caveat one line however long."""
    err_console.print(
        note.text,
        style="dim" if note.detail else None,
        markup=False,
        highlight=False,
        soft_wrap=not note.detail,
    )


def check_target(path: Path | str | None, option: str) -> None:
    """Refuse, before any work, an output file whose folder does not exist (or is not a folder):
    a report computed for minutes must not be lost at the write."""
    if path is None or str(path) == "-":
        return
    folder = Path(path).expanduser().parent
    if not folder.is_dir():
        what = "is not a directory" if folder.exists() else "does not exist"
        raise ConfigError(f"{option} {path}: the directory {folder} {what} (create it first)")


def write_json_report(json_out: str, document: str) -> Path:
    """Write a ``--json`` document to its file (not ``-``); a failure is one ``ConfigError`` line."""
    target = Path(json_out)
    try:
        target.write_text(document + "\n", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--json {target}: cannot write: {exc.strerror or exc}") from None
    return target
