"""Score result files on PKU-SafeRLHF, with the records resolved as ``sp-dspy score`` does.

Besides ``violated_rules`` a record may carry a safe flag (``predicted_safe``, else a
``predicted_label`` of ``"safe"``/``"unsafe"``) and ``predicted_severity`` (0-3). An
excluded record predicts nothing, not even a flag or a severity.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sp_dspy._data._schema import Case
from sp_dspy._errors import DataError
from sp_dspy._metrics import PolicyRecord, ResultSet, resolve_records
from sp_dspy._metrics_pku._report import PkuReport
from sp_dspy._metrics_pku._score import score_pku

_LABELS = {"safe": True, "unsafe": False}


def _safe_flag(record: PolicyRecord) -> bool | None:
    extra = record.model_extra or {}
    flag = extra.get("predicted_safe")
    if flag is not None:
        if not isinstance(flag, bool):
            raise DataError(f"record {record.id}: predicted_safe: expected true or false, got {flag!r:.40}")
        return flag
    label = (record.predicted_label or "").strip().lower()
    return _LABELS.get(label)


def _severity(record: PolicyRecord) -> int | None:
    value: Any = (record.model_extra or {}).get("predicted_severity")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise DataError(f"record {record.id}: predicted_severity: expected an integer 0-3, got {value!r:.40}")
    return value


def score_pku_results(
    cases: Sequence[Case], results: ResultSet, *, cap_aware: bool = False, per_rule: bool = False
) -> PkuReport:
    """The PKU report of ``results`` on ``cases``; the severity section only when some record predicts one."""
    records = resolve_records(cases, results, per_rule=per_rule)
    sets: dict[str, list[int] | None] = {}
    flags: dict[str, bool | None] = {}
    severities: dict[str, int | None] = {}
    for case in cases:
        record = records.get(case.id)
        if record is None or record.excluded(cap_aware=cap_aware):
            continue
        sets[case.id] = record.violated_rules
        flags[case.id] = _safe_flag(record)
        severities[case.id] = _severity(record)
    predicts_severity = any(level is not None for level in severities.values())
    return score_pku(
        cases, sets, predicted_safe=flags, predicted_severity=severities if predicts_severity else None
    )
