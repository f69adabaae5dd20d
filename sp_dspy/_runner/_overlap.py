"""Refuse to score a compiled artifact on the cases it was compiled on.

An artifact saw its train cases and was selected on its dev cases (both listed in its
``manifest.json``); an evaluated case among them, or sharing their conversation (the
L0/L1/L2 versions), overlaps. ``--allow-overlap`` accepts it knowingly.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ValidationError

from .._data import Case, conversation_id
from .._errors import ConfigError, DataError

SHOWN = 3


class _ArtifactSplit(BaseModel):
    """The part of an artifact manifest's ``split`` record this check reads."""

    train: list[str]
    dev: list[str]


def artifact_split(artifact_dir: Path) -> _ArtifactSplit | None:
    """The train and dev ids recorded in the artifact's manifest; ``None`` when it records none."""
    path = artifact_dir / "manifest.json"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise DataError(f"{path}: cannot read the artifact manifest ({type(exc).__name__})") from None
    split = document.get("split") if isinstance(document, dict) else None
    if split is None:
        return None
    try:
        return _ArtifactSplit.model_validate(split)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise DataError(f"{path}: field 'split.{where}': {first['msg']}") from None


def check_no_overlap(artifact_dir: Path, cases: list[Case]) -> None:
    """Raise a one-line ``ConfigError`` naming the evaluated cases the artifact was compiled on."""
    split = artifact_split(artifact_dir)
    if split is None:
        return
    part_of = {case_id: part for part in ("dev", "train") for case_id in getattr(split, part)}
    group_of = {conversation_id(case_id): part for case_id, part in part_of.items()}
    clashes: list[str] = []
    for case in cases:
        if case.id in part_of:
            clashes.append(f"{case.id} (in {part_of[case.id]})")
        elif case.conversation_id in group_of:
            clashes.append(
                f"{case.id} (conversation {case.conversation_id} in {group_of[case.conversation_id]})"
            )
    if clashes:
        shown = ", ".join(clashes[:SHOWN]) + (
            f" and {len(clashes) - SHOWN} more" if len(clashes) > SHOWN else ""
        )
        raise ConfigError(
            f"--program {artifact_dir}: {len(clashes)} of the {len(cases)} case(s) to evaluate overlap the "
            f"artifact's train/dev split: {shown}; evaluate on --split {artifact_dir / 'splits.json'}:test, "
            "or pass --allow-overlap to score them anyway"
        )
