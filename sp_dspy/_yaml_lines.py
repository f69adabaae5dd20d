"""Where keys sit in a YAML file, so a config error can name its line."""

from __future__ import annotations


def key_lines(text: str, *, under: str | None = None) -> dict[str, int]:
    """Line (1-based) of each top-level key, or of each key in the mapping at ``under``.

    Empty when the text is not YAML or not shaped that way: line numbers only decorate
    an error message, and the loader words the real problem itself.
    """
    return {key: lines[0] for key, lines in all_key_lines(text, under=under).items()}


def repeated_key(text: str, *, under: str | None = None) -> tuple[str, int, int] | None:
    """The first key given twice (in the mapping at ``under``), with its first two lines; else None.

    A YAML loader keeps the last value of a repeated key without a word, so a second
    entry meant as another model would silently replace the first.
    """
    for key, lines in all_key_lines(text, under=under).items():
        if len(lines) > 1:
            return key, lines[0], lines[1]
    return None


def all_key_lines(text: str, *, under: str | None = None) -> dict[str, list[int]]:
    """Every line (1-based) each key stands on, as ``key_lines`` finds them."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    if not isinstance(root, yaml.MappingNode):
        return {}
    node: yaml.Node = root
    if under is not None:
        found = [value for key, value in root.value if key.value == under]
        if not found or not isinstance(found[0], yaml.MappingNode):
            return {}
        node = found[0]
    assert isinstance(node, yaml.MappingNode)
    lines: dict[str, list[int]] = {}
    for key, _ in node.value:
        lines.setdefault(str(key.value), []).append(key.start_mark.line + 1)
    return lines
