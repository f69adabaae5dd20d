"""Reading judgment lines: records as pydantic builds them, errors where they are, one pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sp_dspy._data._schema import Case
from sp_dspy._errors import DataError
from sp_dspy._metrics import JudgmentRecord, ResultSet, read_result_files
from sp_dspy._metrics._per_rule import judgment_pass
from sp_dspy.metrics import Usage
from tests._factories import raw_case

BASE = {"kind": "judgment", "cid": "a-l0", "rule": 2}

#: Judgment lines in their plain form.
PLAIN = [
    BASE,
    {**BASE, "level": "L0", "rule_type": "decisive", "gt": True, "pred": False, "refused": False},
    {**BASE, "pred": None, "refused": None, "parse_failed": None, "error": None, "error_class": None},
    {**BASE, "pred": True, "error": "", "n_bundled": 2, "raw_label": "unsafe", "source": "label"},
    {**BASE, "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}},
    {**BASE, "usage": {"prompt_tokens": None, "reasoning_tokens": None, "cost": 0.25}},
    {**BASE, "usage": None, "level": None, "gt": None},
]

#: Lines the model accepts after coercing or converting something.
COERCED = [
    {**BASE, "rule": "2"},
    {**BASE, "refused": 0},
    {**BASE, "error": {"code": 500}},
    {**BASE, "usage": {"prompt_tokens": "7"}},
    {**BASE, "rule": 2**70},  # past orjson's 64 bits
]

#: Lines that are no valid judgment at all.
INVALID = [
    {"kind": "judgment", "rule": 2},
    {**BASE, "cid": 5},
    {**BASE, "pred": "maybe"},
    {**BASE, "usage": [1, 2]},
    {**BASE, "rule": True},  # a boolean is no rule number (pydantic alone would read rule 1)
    {**BASE, "pred": "true"},  # a verdict is true, false or null (pydantic alone would read these)
    {**BASE, "gt": 1},
]


def test_judgment_lines_read_to_the_records_pydantic_builds(tmp_path: Path) -> None:
    lines = [{**line, "cid": f"c{i}-l0"} for i, line in enumerate(PLAIN + COERCED)]
    lines.append({**lines[1], "pred": True})  # judges c1's rule again: replaces it
    path = tmp_path / "judgments.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    results = read_result_files([path])
    expected = [JudgmentRecord.model_validate_json(json.dumps(line)) for line in lines]
    expected = [expected[0], *expected[2:]]
    assert results.judgments == expected
    for got, want in zip(results.judgments, expected, strict=True):
        assert got.model_fields_set == want.model_fields_set
        assert got.model_extra == want.model_extra
    assert results.duplicate_judgments == 1


@pytest.mark.parametrize("line", INVALID)
def test_invalid_judgment_lines_keep_their_error(tmp_path: Path, line: dict[str, object]) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.jsonl:1: record a-l0: field|bad\.jsonl:1: field"):
        read_result_files([path])


def test_one_pass_gives_records_and_counts() -> None:
    cases = [Case.model_validate(raw_case(cid, gt=[1, 2])) for cid in ("a-l0", "b-l0")]
    records = [
        JudgmentRecord.model_validate(line)
        for line in [
            {**BASE, "rule": 1, "pred": True, "usage": {"prompt_tokens": 4, "total_tokens": 4}},
            {**BASE, "rule": 2, "pred": None, "parse_failed": True, "usage": {"reasoning_tokens": 3}},
            {**BASE, "rule": 3, "pred": True, "error": "timeout"},
            {**BASE, "cid": "b-l0", "rule": 1, "pred": None, "refused": True},
            {**BASE, "cid": "zzz-l0", "rule": 1, "pred": True},
        ]
    ]
    case_records, counts = judgment_pass(cases, records)
    assert case_records["a-l0"].violated_rules == [1]
    assert case_records["a-l0"].usage == Usage(prompt_tokens=4, total_tokens=4, reasoning_tokens=3)
    assert case_records["b-l0"].excluded()
    assert sum(counts.values()) == 4


def test_result_set_built_from_judgments() -> None:
    given = [JudgmentRecord.model_validate({**BASE, "pred": True, "extra_field": 1})]
    results = ResultSet(judgments=given)
    assert results.has_judgments and results.result_ids() == {"a-l0"}
    assert results.judgments == given
