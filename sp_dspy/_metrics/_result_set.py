"""``ResultSet``: what ``read_result_files`` returns, merged and de-duplicated."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ._records import JudgmentRecord, PolicyRecord


class ResultSet:
    """Everything read from one or more result files: per-policy records and judgments.

    ``records`` maps a case id to its latest record; ``judgments`` holds the latest
    judgment per (case, rule) in file order. ``bad_lines`` counts skipped malformed
    lines (the first messages are kept), ``ignored_lines`` lines of other kinds.
    In memory only: nothing serialises a result set.
    """

    def __init__(
        self,
        *,
        records: Mapping[str, PolicyRecord] | None = None,
        judgments: Iterable[JudgmentRecord] = (),
    ) -> None:
        self.files: list[str] = []
        self.records: dict[str, PolicyRecord] = dict(records or {})
        self.judgments: list[JudgmentRecord] = list(judgments)
        self.bad_lines = 0
        self.bad_line_messages: list[str] = []
        self.ignored_lines = 0
        self.replaced_records = 0
        self.duplicate_judgments = 0

    @property
    def has_judgments(self) -> bool:
        return bool(self.judgments)

    def result_ids(self) -> set[str]:
        """Every case id the files mention, records and judgments alike."""
        return set(self.records) | {judgment.cid for judgment in self.judgments}
