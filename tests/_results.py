"""Result lines as written: what tests check a run's JSONL file against."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Each complete line of a results file as its JSON object (none when the file does not exist)."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.endswith("\n"):
                yield json.loads(line)
