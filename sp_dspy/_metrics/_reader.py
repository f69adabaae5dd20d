"""Read JSONL result files: per-policy records, per-rule judgments, or both kinds' lines."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .._data import gc_paused, read_regular_lines
from .._errors import DataError, validation_problem
from ._records import POLICY_KINDS, JudgmentRecord, PolicyRecord, ResultSet


def read_result_files(
    paths: Iterable[str | Path], *, skip_bad_lines: bool = False, allow_empty: bool = True
) -> ResultSet:
    """Read JSONL result files in order; later files and lines win on the same key.

    A malformed line raises ``DataError("FILE:LINE: why")``, or with ``skip_bad_lines``
    is counted in ``bad_lines``; lines of other kinds (the harness's ``summary`` lines)
    in ``ignored_lines``. ``allow_empty=False`` refuses a file with no line at all: scoring
    a user's empty prediction file as 100% excluded would hide a wrong path.

    Each file is read line by line (``read_regular_lines``: a regular file, lines of at most
    ``MAX_LINE_BYTES``), so a results file may be any size.
    """
    result = ResultSet()
    judgments: dict[tuple[str, int], JudgmentRecord] = {}
    with gc_paused():
        for path in paths:
            _read_one(Path(path), result, judgments, skip_bad_lines=skip_bad_lines, allow_empty=allow_empty)
    result.judgments = list(judgments.values())
    return result


def _read_one(
    path: Path,
    result: ResultSet,
    judgments: dict[tuple[str, int], JudgmentRecord],
    *,
    skip_bad_lines: bool,
    allow_empty: bool,
) -> None:
    result.files.append(str(path))
    if path.is_dir():
        raise DataError(f"{path}: a directory, not a result file (name the results_*.jsonl in it)")
    empty = True
    for number, line in read_regular_lines(path, "result file"):
        if not line or line.isspace():
            continue
        empty = False
        try:
            parsed = _parse_line(line)
        except ValueError as exc:
            message = f"{path}:{number}: {exc}"
            if not skip_bad_lines:
                raise DataError(message) from None
            result.bad_lines += 1
            if len(result.bad_line_messages) < 5:
                result.bad_line_messages.append(message)
            continue
        if parsed is None:
            result.ignored_lines += 1
            continue
        result.lines.append(parsed)
        if isinstance(parsed, JudgmentRecord):
            # The latest judgment per (case, rule) wins and moves to the end.
            key = (parsed.cid, parsed.rule)
            if judgments.setdefault(key, parsed) is not parsed:
                result.duplicate_judgments += 1
                del judgments[key]
                judgments[key] = parsed
        else:
            if parsed.id in result.records:
                result.replaced_records += 1
            result.records[parsed.id] = parsed
    if empty and not allow_empty:
        raise DataError(f"{path}: empty result file (no records to score)")


_validate_record = PolicyRecord.__pydantic_validator__.validate_json


def _parse_line(line: str) -> PolicyRecord | JudgmentRecord | None:
    """One JSONL line -> a record, a judgment, or ``None`` for a line of another kind.

    A line is first validated straight from JSON text as the model its text suggests (it
    contains ``"judgment"`` or not), and kept when its ``kind`` agrees; any other line
    is decoded, dispatched on ``kind`` and validated, which also words the errors.
    """
    try:
        if '"judgment"' in line:
            judgment = JudgmentRecord.model_validate_json(line)
            if "kind" in judgment.__pydantic_fields_set__:
                return judgment
        else:
            record = _validate_record(line)
            extra = record.__pydantic_extra__
            if not extra or extra.get("kind") in POLICY_KINDS:
                return record
    except ValidationError:
        pass
    try:
        raw: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise ValueError("invalid JSON: arrays and objects nested too deeply") from None
    if not isinstance(raw, dict):
        raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
    kind = raw.get("kind")
    model: type[PolicyRecord] | type[JudgmentRecord]
    if kind == "judgment":
        model = JudgmentRecord
    elif kind in POLICY_KINDS:
        model = PolicyRecord
    else:
        return None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        field, message = validation_problem(exc)
        where = raw.get("id") or raw.get("cid")
        prefix = f"record {where}: " if isinstance(where, str) else ""
        raise ValueError(f"{prefix}field {field or '(record)'}: {message}") from None
