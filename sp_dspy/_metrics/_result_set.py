"""``ResultSet``: what ``read_result_files`` returns, merged and de-duplicated."""

from __future__ import annotations

from dataclasses import dataclass, field

from ._records import JudgmentRecord, PolicyRecord


@dataclass
class ResultSet:
    """Everything read from one or more result files: per-policy records and judgments.

    ``records`` maps a case id to its latest record; ``judgments`` holds the latest
    judgment per (case, rule) in file order. ``bad_lines`` counts skipped malformed
    lines (the first messages are kept), ``ignored_lines`` lines of other kinds.
    """

    records: dict[str, PolicyRecord] = field(default_factory=dict)
    judgments: list[JudgmentRecord] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    bad_lines: int = 0
    bad_line_messages: list[str] = field(default_factory=list)
    ignored_lines: int = 0
    replaced_records: int = 0
    duplicate_judgments: int = 0

    @property
    def has_judgments(self) -> bool:
        return bool(self.judgments)

    def result_ids(self) -> set[str]:
        """Every case id the files mention, records and judgments alike."""
        return set(self.records) | {judgment.cid for judgment in self.judgments}
