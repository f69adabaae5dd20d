"""Where keys sit in a YAML file, so a config error can name its line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ._errors import ConfigError, DataError
from ._regular import decode_utf8, read_regular


def read_yaml_text(path: Path, what: str) -> tuple[Any, str]:
    """The YAML document in ``path`` (``None`` when empty) and its text: every settings file's one reader.

    Each problem is one ``ConfigError`` line naming the file (and line); callers check the shape.
    """
    if not path.exists():
        raise ConfigError(f"{path}: no such file")
    try:
        text = decode_utf8(read_regular(path, what), path)
    except DataError as exc:  # a settings file, not data: the same line, as a ConfigError
        raise ConfigError(str(exc)) from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid YAML: nested too deeply") from None
    return document, text


def read_yaml_mapping(path: Path, what: str, expected: str) -> dict[str, Any]:
    """The mapping a settings file holds; anything else is ``{path}: expected {expected}``.

    A file given on purpose that sets nothing (empty, only comments, ``{}``) is refused: it is
    more likely the wrong file than a wish for every default.
    """
    document, _ = read_yaml_text(path, what)
    if document is None or document == {}:
        raise ConfigError(f"{path}: empty {what} (it sets nothing)")
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: expected {expected}")
    return document


def read_yaml_file(path: Path, what: str) -> tuple[Any, dict[str, int]]:
    """The YAML document in ``path`` (``None`` when empty) and the line of each top-level key."""
    document, text = read_yaml_text(path, what)
    return document, key_lines(text)


def key_lines(text: str, *, under: str | None = None) -> dict[str, int]:
    """Line (1-based) of each top-level key, or of each key in the mapping at ``under``; else empty."""
    return {key: lines[0] for key, lines in all_key_lines(text, under=under).items()}


def repeated_key(text: str, *, under: str | None = None) -> tuple[str, int, int] | None:
    """The first key given twice (a YAML loader keeps its last value), with its first two lines; else None."""
    for key, lines in all_key_lines(text, under=under).items():
        if len(lines) > 1:
            return key, lines[0], lines[1]
    return None


def all_key_lines(text: str, *, under: str | None = None) -> dict[str, list[int]]:
    """Every line (1-based) each key stands on, as ``key_lines`` finds them."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    if not isinstance(root, yaml.MappingNode):
        return {}
    node = root
    if under is not None:
        found = [value for key, value in root.value if key.value == under]
        if not found or not isinstance(found[0], yaml.MappingNode):
            return {}
        node = found[0]
    lines: dict[str, list[int]] = {}
    for key, _ in node.value:
        lines.setdefault(str(key.value), []).append(key.start_mark.line + 1)
    return lines
