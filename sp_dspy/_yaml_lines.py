"""Where keys sit in a YAML file, so a config error can name its line."""

from __future__ import annotations


def key_lines(text: str, *, under: str | None = None) -> dict[str, int]:
    """Line (1-based) of each top-level key, or of each key in the mapping at ``under``.

    Empty when the text is not YAML or not shaped that way: line numbers only decorate
    an error message, and the loader words the real problem itself.
    """
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
    return {str(key.value): key.start_mark.line + 1 for key, _ in node.value}
