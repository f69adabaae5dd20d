"""Where an input came from (an argument or a file), so every error message can point at it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """An input's name (``policy``, ``conversation``) and, when read from one, its file."""

    name: str
    path: str | None = None

    def whole(self) -> str:
        """The input as a whole: ``policy`` or ``rules.txt``."""
        return self.path or self.name

    def line(self, number: int) -> str:
        """One line of a text input: ``conversation line 3`` or ``chat.txt:3``."""
        return f"{self.path}:{number}" if self.path else f"{self.name} line {number}"

    def item(self, index: int, field: str | None = None) -> str:
        """One element of a list input: ``conversation[2].role`` or ``chat.json: [2].role``."""
        where = f"[{index}]" + (f".{field}" if field else "")
        return f"{self.path}: {where}" if self.path else f"{self.name}{where}"
