"""Read JSONL result files: per-policy records, per-rule judgments, or both kinds' lines.

Merging follows retry semantics (see ``_records``): a later file or line replaces an
earlier record with the same id, and a judgment replaces an earlier one for the same
(case, rule). A malformed line is ``FILE:LINE: why``, or is counted and skipped.

Every line goes from JSON text straight to its pydantic model; a line that fails
there is re-read by ``_parse_line``, which decides the same way and words the error.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Discriminator, Tag, TypeAdapter, ValidationError

from .._data._gc import gc_paused
from .._data._scan import decode_utf8
from .._errors import DataError
from ._records import POLICY_KINDS, JudgmentRecord, PolicyRecord
from ._result_set import ResultSet


def read_result_files(
    paths: Iterable[str | Path], *, skip_bad_lines: bool = False, allow_empty: bool = True
) -> ResultSet:
    """Read JSONL result files in order; later files and lines win on the same key.

    A malformed line raises ``DataError("FILE:LINE: why")``; with ``skip_bad_lines``
    it is counted in ``bad_lines`` instead (the first messages are kept). Lines whose
    ``kind`` is neither a record nor a judgment (e.g. the harness's ``summary`` lines)
    are counted in ``ignored_lines``. ``allow_empty=False`` refuses a file with no
    line at all (``FILE: empty result file``): what ``score`` reads is a user's
    prediction file, and scoring nothing as 100% excluded would hide a wrong path;
    ``eval`` reads back its own file, which may be empty.

    Lines end at ``\n`` only (``\r\n`` works too): JSON writers with
    ``ensure_ascii=False``, the reference harness among them, leave U+2028, U+2029 and
    U+0085 raw inside strings, where ``str.splitlines`` would cut a record in two.
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
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read result file: {exc}") from None
    text = decode_utf8(raw, path)
    if "\r" in text:  # what ``read_text`` does, at a fraction of its cost on plain "\n" files
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if not allow_empty and all(not line or line.isspace() for line in lines):
        raise DataError(f"{path}: empty result file (no records to score)")
    for number, line in enumerate(lines, start=1):
        if not line or line.isspace():
            continue
        judgment_like = '"judgment"' in line
        try:
            parsed = _fast_line(line, judgment_like=judgment_like)
        except ValidationError:
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
        elif isinstance(parsed, JudgmentRecord):
            _add_judgment(parsed, judgments, result)
        else:
            _add_record(parsed, result)


def _add_record(record: PolicyRecord, result: ResultSet) -> None:
    """Keep the latest record per case id (a later file or line replaces it)."""
    if record.id in result.records:
        result.replaced_records += 1
    result.records[record.id] = record


def _add_judgment(
    judgment: JudgmentRecord, judgments: dict[tuple[str, int], JudgmentRecord], result: ResultSet
) -> None:
    """Keep the latest judgment per (case, rule), ordered by the line it came from.

    A later line that judged the same (case, rule) again wins and moves to the end.
    """
    key = (judgment.cid, judgment.rule)
    if judgments.setdefault(key, judgment) is not judgment:
        result.duplicate_judgments += 1
        del judgments[key]
        judgments[key] = judgment


class _Skipped(BaseModel):
    """A line of another kind (the harness's ``summary`` lines): read, then dropped."""

    model_config = ConfigDict(extra="ignore")


def _line_kind(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else None
    return "judgment" if kind == "judgment" else "record" if kind in POLICY_KINDS else "other"


@functools.cache
def _any_line() -> TypeAdapter[JudgmentRecord | PolicyRecord | _Skipped]:
    """One line straight from JSON text to its model, dispatched on ``kind``.

    Any failure (a non-object line, a bad field, JSON pydantic's parser refuses) is
    re-read by ``_parse_line``, which words the error. Built on first use: most files
    never need it (see ``_fast_line``).
    """
    return TypeAdapter(
        Annotated[
            Annotated[JudgmentRecord, Tag("judgment")]
            | Annotated[PolicyRecord, Tag("record")]
            | Annotated[_Skipped, Tag("other")],
            Discriminator(_line_kind),
        ]
    )


_validate_record = PolicyRecord.__pydantic_validator__.validate_json


def _fast_line(line: str, *, judgment_like: bool) -> PolicyRecord | JudgmentRecord | None:
    """``_any_line()``, with a shortcut for each kind of line a result file is made of.

    The discriminator makes pydantic build a Python dict of the whole line first. So a
    line is first validated as the model its text suggests (``judgment_like``: it
    contains ``"judgment"``), and kept only when the discriminator would pick the same:
    a judgment stating ``kind``, or a record whose ``kind`` is absent or a policy kind.
    """
    try:
        if judgment_like:
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
    parsed = _any_line().validate_json(line)
    return None if isinstance(parsed, _Skipped) else parsed


def _parse_line(line: str) -> PolicyRecord | JudgmentRecord | None:
    """One JSONL line -> a record, a judgment, or ``None`` for a line to skip."""
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
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(record)"
        where = raw.get("id") or raw.get("cid")
        prefix = f"record {where}: " if isinstance(where, str) else ""
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ValueError(f"{prefix}field {field}: {message}") from None
