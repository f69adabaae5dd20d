"""Load and validate a SafePyramid benchmark file into ``Case`` objects.

Every bad input gets one line naming the file, the case id and the field; with
``lenient=True`` bad cases are skipped and counted instead. A file in the current
schema is validated straight from its bytes; anything else (legacy spellings, errors,
skips) goes through the careful path, which normalises each case and words the error.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr, TypeAdapter, ValidationError, computed_field

from .._errors import DataError, validation_problem
from ._gc import gc_paused
from ._legacy import _FM_KEYS, normalise_case
from ._scan import (
    MAX_DATASET_BYTES,
    decode_utf8,
    json_head,
    open_regular,
    parse_json,
    read_bounded,
    rule_line_numbers,
)
from ._schema import Case


class _Document(BaseModel):
    """The published layout, ``{"metadata": ..., "data": [case, ...]}``, for the fast path."""

    model_config = ConfigDict(extra="allow")

    data: list[Case]


_CASE_LIST: TypeAdapter[list[Case]] = TypeAdapter(list[Case])


class Benchmark(BaseModel):
    """Validated cases plus where they came from (for manifests and split files).

    ``content_hash`` (sha256 of the file) is computed on first access, by reading the
    file again: only commands that record it pay for it. A file changed since loading
    is a ``DataError``, since its hash would not describe the cases.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    cases: list[Case]
    source: str
    skipped: int = 0
    skipped_reasons: list[str] = []
    benchmark: str = "safepyramid"
    _content_hash: str | None = PrivateAttr(default=None)
    _hash_source: tuple[Path, int, int] | None = PrivateAttr(default=None)

    def __init__(
        self,
        *,
        content_hash: str | None = None,
        hash_source: tuple[Path, int, int] | None = None,
        **data: Any,
    ) -> None:
        """``content_hash``, or ``hash_source`` = (file, size, mtime in ns) to hash it on demand."""
        if content_hash is None and hash_source is None:
            raise TypeError("Benchmark needs content_hash or hash_source")
        super().__init__(**data)
        self._content_hash = content_hash
        self._hash_source = None if content_hash is not None else hash_source

    @computed_field  # type: ignore[prop-decorator]
    @property
    def content_hash(self) -> str:
        """sha256 (hex) of the dataset bytes that were loaded."""
        if self._content_hash is None:
            assert self._hash_source is not None
            path, size, mtime_ns = self._hash_source
            try:
                with open_regular(path, "dataset") as handle:
                    stat = os.fstat(handle.fileno())
                    blob = handle.read(size + 1)
            except OSError as exc:
                raise DataError(f"{path}: cannot re-read to hash it: {exc.strerror or exc}") from None
            if (stat.st_size, stat.st_mtime_ns, len(blob)) != (size, mtime_ns, size):
                raise DataError(f"{path}: changed since it was loaded; load it again to record its hash")
            self._content_hash = hashlib.sha256(blob).hexdigest()
        return self._content_hash

    def by_id(self) -> dict[str, Case]:
        return {case.id: case for case in self.cases}


def load_file(path: Path, *, lenient: bool = False) -> Benchmark:
    """Parse and validate one benchmark JSON file (object with ``data`` or bare list)."""
    with open_regular(path, "dataset") as handle:
        stat = os.fstat(handle.fileno())
        raw_bytes = read_bounded(handle, path, "dataset", max_bytes=MAX_DATASET_BYTES)
    with gc_paused():
        fast = _fast_cases(raw_bytes)
        reasons: list[str] = []
        if fast is not None:
            cases = fast
        else:
            text = decode_utf8(raw_bytes, path)
            items = _case_list(parse_json(text, path), path)
            cases, reasons = validate_cases(items, path=path, text=text, lenient=lenient)
        if not cases and not reasons:  # a run or a score over no case says nothing
            raise DataError(f"{path}: no cases (the file's list of cases is empty)")
        return Benchmark(
            cases=cases,
            source=str(path),
            hash_source=(path, stat.st_size, stat.st_mtime_ns),
            skipped=len(reasons),
            skipped_reasons=reasons,
        )


def _fast_cases(raw_bytes: bytes) -> list[Case] | None:
    """Cases validated straight from JSON, or None when the careful path must decide.

    Cases come back only when the careful path would return the same ones: no legacy
    spelling, unique ids, every consistency check passing. Any doubt returns None, so
    error messages and ``--lenient`` skips stay the careful path's.
    """
    head = json_head(raw_bytes)
    try:
        if head == b"[":
            cases = _CASE_LIST.validate_json(raw_bytes)
        elif head == b"{":
            cases = _Document.model_validate_json(raw_bytes).data
        else:
            return None
    except ValueError:  # pydantic's ValidationError, invalid JSON included
        return None
    seen: set[str] = set()
    for case in cases:
        if not case.id or case.id in seen or _needs_normalising(case):
            return None
        seen.add(case.id)
        try:
            check_consistency(case)
        except DataError:
            return None
    return cases


def _needs_normalising(case: Case) -> bool:
    """Whether ``normalise_case`` would have moved something (see ``_legacy``).

    The other legacy spellings (``user_prompt`` alone, a null ``framework``, a missing
    id) fail validation of the current schema and never reach this check.
    """
    top = case.model_extra or {}
    rubric = case.rubric.model_extra or {}
    block = case.failure_mode_metadata.model_extra or {}
    return (
        any(key in top or key in rubric for key in _FM_KEYS)
        or "failure_mode_metadata" in rubric
        or "conditional_violations" in block
    )


def _case_list(document: Any, path: Path) -> list[Any]:
    if isinstance(document, list):
        return document
    if isinstance(document, dict) and isinstance(document.get("data"), list):
        return list(document["data"])
    raise DataError(f"{path}: expected a JSON list of cases or an object with a 'data' list")


def validate_cases(
    items: list[Any], *, path: Path, text: str = "", lenient: bool = False
) -> tuple[list[Case], list[str]]:
    """Validate raw case dicts; returns the good cases and the reasons for skipped ones."""
    cases: list[Case] = []
    reasons: list[str] = []
    seen: set[str] = set()
    for position, item in enumerate(items):
        try:
            case = _validate_one(item, position, path, text, seen)
        except DataError as error:
            if not lenient:
                raise
            reasons.append(str(error))
            continue
        seen.add(case.id)
        cases.append(case)
    return cases, reasons


def _validate_one(item: Any, position: int, path: Path, text: str, seen: set[str]) -> Case:
    if not isinstance(item, dict):
        raise DataError(f"{path}: case #{position}: expected an object, got {type(item).__name__}")
    normalised = normalise_case(item, position)
    case_id = str(normalised["id"])
    try:
        case = Case.model_validate(normalised)
        if case.id in seen:
            raise DataError("field id: duplicate case id")
        check_unicode(case)
        check_consistency(case)
    except ValidationError as exc:
        field, message = validation_problem(exc)
        raise DataError(f"{_where(path, text, case_id)}: field {field or '(case)'}: {message}") from None
    except DataError as exc:
        raise DataError(f"{_where(path, text, case_id)}: {exc}") from None
    return case


def check_unicode(case: Case) -> None:
    """Refuse a text holding a lone surrogate (an unpaired ``\\ud800`` escape in the JSON).

    Python's JSON parser lets one through, and nothing could write it back out as UTF-8
    (a result record, a request to the LM).
    """
    texts = [(name, getattr(case, name)) for name in _TEXT_FIELDS]
    for part in ("violations", "non_violations"):
        entries = getattr(case.rubric, part)
        texts += [(f"rubric.{part}.{index}.text", entry.text) for index, entry in enumerate(entries)]
    for name, value in texts:
        if isinstance(value, str) and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise DataError(
                    f"field {name}: unpaired surrogate \\u{ord(value[exc.start]):04x} at character "
                    f"{exc.start} (not a Unicode character)"
                ) from None


_TEXT_FIELDS = ("id", "domain", "conversation", "policy", "framework", "benchmark", "group")


def check_consistency(case: Case) -> None:
    """Cross-field checks the schema alone cannot express (the caller adds where)."""
    if not case.conversation.strip():
        raise DataError("field conversation: empty (there is nothing to check)")
    entries = (*case.rubric.violations, *case.rubric.non_violations)
    rubric_rules = {entry.rule for entry in entries}
    if len(rubric_rules) != len(entries):
        twice = sorted(number for number, count in Counter(e.rule for e in entries).items() if count > 1)
        raise DataError(f"field rubric: rule(s) {twice} listed more than once")
    policy_numbers = rule_line_numbers(case.policy)
    if len(set(policy_numbers)) != len(policy_numbers):
        twice = sorted(number for number, count in Counter(policy_numbers).items() if count > 1)
        raise DataError(f"field policy: rule number(s) {twice} used for more than one rule")
    if rubric_rules:
        missing_gt = sorted(set(case.ground_truth_violations) - rubric_rules)
        if missing_gt:
            raise DataError(f"field ground_truth_violations: rule(s) {missing_gt} not in the rubric")
        not_in_policy = sorted(rubric_rules - set(policy_numbers))
        if not_in_policy:
            raise DataError(f"field rubric: rule(s) {not_in_policy} do not appear in the policy text")


def _where(path: Path, text: str, case_id: str) -> str:
    """``FILE:LINE: case ID`` for an error; the line is searched only when an error happens."""
    at = text.find(json.dumps(case_id)) if text else -1
    line = "" if at < 0 else f":{text.count(chr(10), 0, at) + 1}"
    shown = case_id.encode("utf-8", "backslashreplace").decode("utf-8")  # a lone surrogate, escaped
    return f"{path}{line}: case {shown}"
