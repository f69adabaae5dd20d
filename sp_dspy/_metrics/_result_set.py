"""``ResultSet``: what ``read_result_files`` returns, with judgments kept as checked rows.

A per-rule run of the benchmark is ~68k judgment lines. Building a pydantic
``JudgmentRecord`` for each costs about 3 µs, more than parsing the line; ``score``
reads five fields of each. So the reader keeps a judgment as the plain dict its line
parses to (a *row*) once ``judgment_row`` has checked that every field
``JudgmentRecord`` declares has exactly the type the model would keep unchanged.
``ResultSet.judgments`` builds the records from the rows, once, for the callers
that want model objects (reports, ``compare``); ``judgment_pass`` walks the rows.

A judgment line that fails the check (an error object, a rule number written as
a string, a bad field) goes through pydantic as before and is stored as the row its
record dumps to, so both routes give equal records and the same errors.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from pydantic import TypeAdapter

from ._records import JudgmentRecord, PolicyRecord

#: A judgment as a dict with ``JudgmentRecord``'s field names (extras kept).
JudgmentRow = dict[str, Any]

_cid = operator.itemgetter("cid")
_OPTIONAL_STR = ("level", "rule_type", "error", "error_class")
_OPTIONAL_BOOL = ("gt", "pred", "refused", "parse_failed")
_USAGE_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens", "reasoning_tokens")


def judgment_row(line: str) -> JudgmentRow | None:
    """``line`` as a row if it is a judgment the model would take as it is, else None.

    Accepted: a JSON object with ``"kind": "judgment"``, a string ``cid``, an
    integer ``rule``, and every other declared field absent, ``null`` or of its
    declared type (``usage``: an object whose token counts are integers or
    ``null``, which ``sum_usage`` reads as ``Usage`` would). Anything
    else, including what pydantic would coerce, is for ``JudgmentRecord`` to judge.
    """
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(row) is not dict or row.get("kind") != "judgment":
        return None
    get = row.get
    if type(get("cid")) is not str or type(get("rule")) is not int:
        return None
    for key in _OPTIONAL_STR:
        value = get(key)
        if value is not None and type(value) is not str:
            return None
    for key in _OPTIONAL_BOOL:
        value = get(key)
        if value is not None and type(value) is not bool:
            return None
    usage = get("usage")
    if usage is not None and not _plain_usage(usage):
        return None
    return row


def _plain_usage(usage: object) -> bool:
    if type(usage) is not dict:
        return False
    for key in _USAGE_COUNTS:
        value = usage.get(key)
        if value is not None and type(value) is not int:
            return False
    return True


def record_row(judgment: JudgmentRecord) -> JudgmentRow:
    """The row that validates back to ``judgment`` (the fields it was given, extras kept)."""
    return judgment.model_dump(exclude_unset=True)


@functools.cache
def _judgment_list() -> TypeAdapter[list[JudgmentRecord]]:
    return TypeAdapter(list[JudgmentRecord])


class ResultSet:
    """Everything read from one or more result files, merged and de-duplicated.

    ``judgment_rows`` are the judgments as rows (see the module docstring), in file
    order after de-duplication; ``judgments`` are the same as ``JudgmentRecord``
    objects, built on first use. In memory only: nothing serialises a result set.
    """

    def __init__(
        self,
        *,
        records: Mapping[str, PolicyRecord] | None = None,
        judgments: Iterable[JudgmentRecord] = (),
    ) -> None:
        self.files: list[str] = []
        self.records: dict[str, PolicyRecord] = dict(records or {})
        given = list(judgments)
        self._rows: list[JudgmentRow] = [record_row(j) for j in given]
        self._judgments: list[JudgmentRecord] | None = given
        self.bad_lines = 0
        self.bad_line_messages: list[str] = []
        self.ignored_lines = 0
        self.replaced_records = 0
        self.duplicate_judgments = 0

    @property
    def judgment_rows(self) -> list[JudgmentRow]:
        return self._rows

    def set_judgment_rows(self, rows: list[JudgmentRow]) -> None:
        """Replace the judgments (the reader's last step); records are rebuilt on demand."""
        self._rows = rows
        self._judgments = None

    @property
    def judgments(self) -> list[JudgmentRecord]:
        """The judgments as records (validated from the rows on first access)."""
        if self._judgments is None:
            self._judgments = _judgment_list().validate_python(self._rows)
        return self._judgments

    @property
    def has_judgments(self) -> bool:
        return bool(self._rows)

    def result_ids(self) -> set[str]:
        """Every case id the files mention, records and judgments alike."""
        return set(self.records) | set(map(_cid, self._rows))
