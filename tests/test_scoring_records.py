"""``ScoringRecord``: the scorer's view of a result line agrees with ``PolicyRecord`` on every line.

``scoring_record`` must answer only for lines ``PolicyRecord`` accepts unchanged, and
then give the same id, rule set and exclusion (with and without cap-aware mode); on
every other line it steps aside, and ``read_scoring_results`` reads the line as
``read_result_files`` does, errors and skips included.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sp_dspy._data import load_scoring_cases, sample_path
from sp_dspy._errors import DataError
from sp_dspy._metrics import (
    CAP_THRESHOLD,
    PolicyRecord,
    ScoringRecord,
    read_result_files,
    read_scoring_results,
    score,
)
from sp_dspy._metrics._result_set import judgment_row
from sp_dspy._metrics._scoring_records import scoring_judgment_row, scoring_record

FIXTURES = Path(__file__).parent / "fixtures" / "metrics"

HARNESS_LINE = {
    "id": "c-1-l0",
    "index": 1,
    "predicted_label": "unsafe",
    "confidence": None,
    "analysis": 'Turn 3 shares the "address"\u2028 and \\ more.',
    "final": '{"analysis": "...", "violated_rules": [{"rule": 1}]}',
    "refused": False,
    "parse_failed": False,
    "model_name": "demo/guard-1",
    "timestamp": "2026-05-01T10:00:00",
    "violated_rules": [1, 4],
    "usage": {"prompt_tokens": 1890, "completion_tokens": 312, "total_tokens": 2202, "cost": 0.1},
    "structured_scores": {"rule_match": True, "refused": False, "parse_failed": False},
}


def _view(record: PolicyRecord | ScoringRecord) -> tuple[Any, ...]:
    """What the scorer reads of a record."""
    return (
        record.id,
        record.violated_rules,
        record.excluded(),
        record.excluded(cap_aware=True),
    )


def _agree(line: str) -> ScoringRecord | None:
    """``scoring_record(line)``, after checking it agrees with ``PolicyRecord`` on the line."""
    slim = scoring_record(line)
    if slim is not None:
        full = PolicyRecord.model_validate_json(line)  # must accept what the slim path accepted
        assert _view(slim) == _view(full), line
    return slim


def _with(**changes: Any) -> str:
    line = {**HARNESS_LINE, **changes}
    return json.dumps({k: v for k, v in line.items() if v is not _DROP}, ensure_ascii=False)


_DROP = object()


@pytest.mark.parametrize(
    "line",
    [
        _with(),
        _with(refused=None, parse_failed=None),  # the harness's null flags
        _with(refused=True, violated_rules=None),
        _with(refused=True),
        _with(parse_failed=True),
        _with(error="timeout", error_class="Timeout"),
        _with(error=""),
        _with(usage={"prompt_tokens": None, "completion_tokens": CAP_THRESHOLD, "total_tokens": None}),
        _with(usage={"completion_tokens": None, "reasoning_tokens": 12}),
        _with(usage=None),
        _with(structured_scores={"refused": True}),
        _with(structured_scores={"parse_failed": 1}),
        _with(structured_scores=[1, 2]),
        _with(kind="policy"),
        _with(kind=None),
        _with(analysis=None),
        _with(analysis=_DROP, final=_DROP, usage=_DROP, structured_scores=_DROP),
        '{"id": "c-1-l0", "violated_rules": [1, 3]}',
        '{"id": "a", "id": "c-1-l0", "violated_rules": [1], "violated_rules": [2]}',  # the last wins
    ],
)
def test_lines_the_scorer_reads_itself_agree_with_policy_record(line: str) -> None:
    assert _agree(line) is not None


@pytest.mark.parametrize(
    "line",
    [
        _with(violated_rules=["2"]),  # pydantic's lax mode turns it into 2
        _with(violated_rules=[1.0]),
        _with(violated_rules=[{"rule": 5, "explanation": "x"}]),
        _with(refused=0),
        _with(error={"type": "timeout"}),  # an error object, kept as its JSON text
        _with(index="1"),
        _with(usage={"completion_tokens": "70000"}),
        _with(usage=[1]),
        _with(analysis=5),
        _with(analysis={"text": "x"}),
        _with(kind="summary"),  # skipped and counted by the reader
        _with(kind="judgment"),
        _with(kind=["policy"]),
        _with(id=7),
        _with(id=_DROP),
        _with(confidence=float("nan")),
        "[1, 2]",
        '{"id": "c-1-l0", "violated_rules": [1]',
        '{"id": "c-1-l0"} trailing',
        "",
    ],
)
def test_lines_with_any_doubt_are_left_to_policy_record(line: str) -> None:
    assert scoring_record(line) is None


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 70_000) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)
_fields = {
    "index": st.none() | st.integers(0, 9) | st.text(max_size=2),
    "violated_rules": st.none() | st.lists(st.integers(0, 20) | st.text("0123", max_size=2), max_size=4),
    "refused": st.none() | st.booleans() | st.integers(0, 1),
    "parse_failed": st.none() | st.booleans() | st.text(max_size=3),
    "error": st.none() | st.text(max_size=4) | _json_values,
    "analysis": st.none() | st.text(max_size=20) | st.integers(),
    "model_name": st.none() | st.text(max_size=4) | st.integers(),
    "usage": st.none()
    | st.fixed_dictionaries(
        {},
        optional={
            "prompt_tokens": st.none() | st.integers(0, 10),
            "completion_tokens": st.none() | st.integers(0, 2 * CAP_THRESHOLD) | st.text("12", max_size=2),
            "reasoning_tokens": st.none() | st.integers(0, 10),
            "cost": _json_values,
        },
    )
    | _json_values,
    "structured_scores": _json_values,
    "kind": st.sampled_from([None, "policy", "record", "case", "summary", "judgment"]),
}


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({"id": st.text(max_size=6) | st.just(7)}, optional=_fields))
def test_any_line_is_read_alike_by_both_paths(fields: dict[str, Any]) -> None:
    line = json.dumps(fields, ensure_ascii=False)
    try:
        _agree(line)
    except ValidationError:
        pytest.fail(f"the slim path accepted a line PolicyRecord rejects: {line}")


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_read_scoring_results_reads_files_as_read_result_files_does(tmp_path: Path) -> None:
    first = _write(
        tmp_path / "a.jsonl",
        [
            _with(id="c-1-l0"),
            _with(id="c-2-l0", violated_rules=["2"]),  # the full reader's line
            '{"kind": "summary", "n": 3}',
            _with(id="c-3-l1", error={"type": "timeout"}),
            "not json",
        ],
    )
    second = _write(tmp_path / "b.jsonl", [_with(id="c-1-l0", violated_rules=[9]), ""])
    full = read_result_files([first, second], skip_bad_lines=True)
    slim = read_scoring_results([first, second], skip_bad_lines=True)
    assert list(slim.records) == list(full.records) == ["c-1-l0", "c-2-l0", "c-3-l1"]
    assert [_view(r) for r in slim.records.values()] == [_view(r) for r in full.records.values()]
    assert isinstance(slim.records["c-1-l0"], ScoringRecord) and slim.records["c-1-l0"].violated_rules == [9]
    assert isinstance(slim.records["c-2-l0"], PolicyRecord)
    counts = ("bad_lines", "bad_line_messages", "ignored_lines", "replaced_records", "files")
    assert [getattr(slim, name) for name in counts] == [getattr(full, name) for name in counts]
    assert slim.bad_lines == 1 and slim.ignored_lines == 1 and slim.replaced_records == 1
    with pytest.raises(DataError, match=r"a\.jsonl:5: invalid JSON"):
        read_scoring_results([first])


@pytest.mark.parametrize("cap_aware", [False, True])
def test_a_report_from_scoring_records_is_the_report_from_policy_records(
    tmp_path: Path, cap_aware: bool
) -> None:
    cases = load_scoring_cases(sample_path(), cache=False).cases
    harness = json.loads((FIXTURES / "harness_results.jsonl").read_text(encoding="utf-8").splitlines()[0])
    lines = [
        json.dumps(
            {
                **harness,
                "id": case.id,
                "violated_rules": case.ground_truth_violations[: 1 + i % 3] + ([99] if i % 4 == 0 else []),
                "refused": i % 7 == 3,
                "usage": {"completion_tokens": CAP_THRESHOLD if i % 5 == 1 else 10},
            }
        )
        for i, case in enumerate(cases)
    ]
    path = _write(tmp_path / "results.jsonl", lines)
    full, slim = read_result_files([path]), read_scoring_results([path])
    assert all(isinstance(r, ScoringRecord) for r in slim.records.values())
    options: dict[str, Any] = {"cap_aware": cap_aware, "n_boot": 200, "seed": 3}
    assert score(cases, slim, **options).to_json_dict() == score(cases, full, **options).to_json_dict()


_JUDGMENT_FIELDS = (
    "kind",
    "cid",
    "rule",
    "level",
    "rule_type",
    "gt",
    "pred",
    "refused",
    "parse_failed",
    "error",
)
_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens", "reasoning_tokens")


def _judgment_view(row: dict[str, Any]) -> tuple[Any, ...]:
    """The declared fields of a judgment row (absent = None), usage as its token counts."""
    usage = row.get("usage")
    counts = None if usage is None else tuple(usage.get(key) for key in _COUNTS)
    return (*(row.get(key) for key in _JUDGMENT_FIELDS), row.get("error_class"), counts)


_judgment_fields = {
    "level": st.none() | st.sampled_from(["L0", "L2"]) | st.integers(0, 2),
    "rule_type": st.none() | st.sampled_from(["decisive", "exception"]) | st.booleans(),
    "gt": st.none() | st.booleans() | st.integers(0, 1),
    "pred": st.none() | st.booleans() | st.text("tf", max_size=1),
    "refused": st.none() | st.booleans(),
    "parse_failed": st.none() | st.booleans() | st.integers(0, 1),
    "error": st.none() | st.text(max_size=4) | _json_values,
    "error_class": st.none() | st.text(max_size=4) | st.integers(),
    "usage": st.none()
    | st.fixed_dictionaries(
        {},
        optional={
            "prompt_tokens": st.none() | st.integers(0, 9) | st.text("1", max_size=1),
            "cost": _json_values,
        },
    )
    | _json_values,
    "raw_label": _json_values,
}


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "kind": st.sampled_from(["judgment", "judgment", "summary"]),
            "cid": st.text(max_size=5) | st.just(3),
            "rule": st.integers(0, 30) | st.just(True) | st.text("12", max_size=2),
        },
        optional=_judgment_fields,
    )
)
def test_a_judgment_line_is_read_alike_by_both_paths(fields: dict[str, Any]) -> None:
    line = json.dumps(fields, ensure_ascii=False)
    slim = scoring_judgment_row(line)
    if slim is not None:
        full = judgment_row(line)
        assert full is not None, line
        assert _judgment_view(slim) == _judgment_view(full), line


def test_a_per_rule_report_from_scoring_rows_is_the_report_from_full_rows(tmp_path: Path) -> None:
    cases = load_scoring_cases(sample_path(), cache=False).cases
    lines = [
        json.dumps(
            {
                "kind": "judgment",
                "cid": case.id,
                "rule": rule,
                "rule_type": kind if i % 3 else None,
                "gt": rule in case.ground_truth_violations,
                "pred": (rule + i) % 3 == 0 if i % 11 else None,
                "refused": i % 13 == 5,
                "raw_label": "unsafe",
                **({"usage": {"prompt_tokens": 5, "completion_tokens": None}} if i % 2 else {}),
            }
        )
        for i, case in enumerate(cases)
        for rule, kind in case.rule_types.items()
    ]
    lines += [lines[0].replace('"refused": false', '"refused": true'), '{"kind": "summary", "n": 1}']
    path = _write(tmp_path / "judgments.jsonl", lines)
    full, slim = read_result_files([path]), read_scoring_results([path])
    assert [_judgment_view(r) for r in slim.judgment_rows] == [_judgment_view(r) for r in full.judgment_rows]
    assert (
        (slim.duplicate_judgments, slim.ignored_lines)
        == (full.duplicate_judgments, full.ignored_lines)
        == (1, 1)
    )
    options: dict[str, Any] = {"per_rule": True, "n_boot": 200}
    assert score(cases, slim, **options).to_json_dict() == score(cases, full, **options).to_json_dict()


_JUDGMENT = {
    "kind": "judgment",
    "cid": "c-1-l0",
    "rule": 3,
    "rule_type": "decisive",
    "gt": True,
    "pred": False,
}


@pytest.mark.parametrize(
    "changes",
    [
        {"pred": "true"},
        {"gt": 1},
        {"refused": 0},
        {"rule": "3"},
        {"rule": True},
        {"rule": 3.0},
        {"cid": 3},
        {"level": 2},
        {"error": {"type": "timeout"}},
        {"usage": {"completion_tokens": "9"}},
        {"usage": [9]},
        {"kind": "summary"},
    ],
)
def test_judgment_lines_with_any_doubt_are_left_to_judgment_row(changes: dict[str, Any]) -> None:
    line = json.dumps({**_JUDGMENT, **changes})
    assert scoring_judgment_row(line) is None
    assert scoring_judgment_row(json.dumps(_JUDGMENT)) is not None
