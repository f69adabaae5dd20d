"""Read JSONL result files: per-policy records, per-rule judgments, or both kinds' lines.

Merging follows retry semantics (see ``_records``): a later file or line replaces an
earlier record with the same id, and a judgment replaces an earlier one for the same
(case, rule). A malformed line is ``FILE:LINE: why``, or is counted and skipped.

Speed: each line goes from JSON text straight to its pydantic model (pydantic's own
parser, no intermediate ``json.loads`` dict), with the cyclic garbage collector paused
while the records pile up; a line that fails that fast path is re-read by
``_parse_line``, which decides exactly as before and words the error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Discriminator, Tag, TypeAdapter, ValidationError

from .._data._loader import gc_paused
from .._errors import DataError
from ._records import JudgmentRecord, PolicyRecord, ResultSet

#: ``kind`` values read as per-policy records; any other kind (the harness's ``summary``
#: lines, manifests) carries no prediction and is skipped and counted.
_POLICY_KINDS = (None, "policy", "record", "case")


def read_result_files(paths: Iterable[str | Path], *, skip_bad_lines: bool = False) -> ResultSet:
    """Read JSONL result files in order; later files and lines win on the same key.

    A malformed line raises ``DataError("FILE:LINE: why")``; with ``skip_bad_lines``
    it is counted in ``bad_lines`` instead (the first messages are kept). Lines whose
    ``kind`` is neither a record nor a judgment (e.g. the harness's ``summary`` lines)
    are counted in ``ignored_lines``.

    Lines end at ``\n`` only (``\r\n`` works too): JSON writers with
    ``ensure_ascii=False``, the reference harness among them, leave U+2028, U+2029 and
    U+0085 raw inside strings, where ``str.splitlines`` would cut a record in two.
    """
    result = ResultSet()
    judgments: dict[tuple[str, int], JudgmentRecord] = {}
    with gc_paused():
        for path in paths:
            _read_one(Path(path), result, judgments, skip_bad_lines=skip_bad_lines)
    result.judgments = list(judgments.values())
    return result


def _read_one(
    path: Path, result: ResultSet, judgments: dict[tuple[str, int], JudgmentRecord], *, skip_bad_lines: bool
) -> None:
    result.files.append(str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read result file: {exc}") from None
    for number, line in enumerate(text.split("\n"), start=1):
        if not line or line.isspace():
            continue
        try:
            parsed = _fast_line(line)
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
            key = (parsed.cid, parsed.rule)
            if key in judgments:
                result.duplicate_judgments += 1
                del judgments[key]  # re-insert so the order follows the latest line
            judgments[key] = parsed
        else:
            if parsed.id in result.records:
                result.replaced_records += 1
            result.records[parsed.id] = parsed


class _Skipped(BaseModel):
    """A line of another kind (the harness's ``summary`` lines): read, then dropped."""

    model_config = ConfigDict(extra="ignore")


def _line_kind(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else None
    return "judgment" if kind == "judgment" else "record" if kind in _POLICY_KINDS else "other"


#: One line straight from JSON text to its model, dispatched on ``kind``: about twice
#: as fast as ``json.loads`` + ``model_validate`` on a 68k-line judgment file. Any
#: failure (a non-object line, a bad field, JSON that pydantic's parser refuses) is
#: re-read by ``_parse_line``, which accepts exactly what it always did and words the
#: error.
_LINE: TypeAdapter[JudgmentRecord | PolicyRecord | _Skipped] = TypeAdapter(
    Annotated[
        Annotated[JudgmentRecord, Tag("judgment")]
        | Annotated[PolicyRecord, Tag("record")]
        | Annotated[_Skipped, Tag("other")],
        Discriminator(_line_kind),
    ]
)


def _fast_line(line: str) -> PolicyRecord | JudgmentRecord | None:
    """``_LINE`` with a shortcut for judgments, the bulk of a per-rule file.

    Dispatching through the discriminator makes pydantic build a dict for it: a third
    of the cost. A line that validates as a judgment *and* states ``kind`` (which the
    ``Literal`` then pins to ``"judgment"``) is what the discriminator would pick.
    """
    if '"judgment"' in line:
        try:
            judgment = JudgmentRecord.model_validate_json(line)
        except ValidationError:
            pass
        else:
            if "kind" in judgment.model_fields_set:
                return judgment
    parsed = _LINE.validate_json(line)
    return None if isinstance(parsed, _Skipped) else parsed


def _parse_line(line: str) -> PolicyRecord | JudgmentRecord | None:
    """One JSONL line -> a record, a judgment, or ``None`` for a line to skip."""
    try:
        raw: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
    kind = raw.get("kind")
    model: type[PolicyRecord] | type[JudgmentRecord]
    if kind == "judgment":
        model = JudgmentRecord
    elif kind in _POLICY_KINDS:
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
        raise ValueError(f"{prefix}field {field}: {first['msg']}") from None
