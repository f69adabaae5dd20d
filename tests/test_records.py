"""Reading, merging and de-duplicating result files; judgments back to case sets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sp_dspy._data._schema import Case
from sp_dspy._errors import DataError
from sp_dspy._metrics import (
    JudgmentRecord,
    PolicyRecord,
    read_result_files,
    resolve_records,
)
from sp_dspy._metrics._per_rule import judgment_pass
from sp_dspy.metrics import Usage
from tests._factories import raw_case

FIXTURES = Path(__file__).parent / "fixtures" / "metrics"


def make_case(cid: str, gt: list[int], level: str = "L0") -> Case:
    return Case.model_validate(raw_case(cid, level=level, gt=gt))


def write_lines(path: Path, lines: list[object]) -> Path:
    path.write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8"
    )
    return path


def test_reads_reference_harness_lines() -> None:
    results = read_result_files([FIXTURES / "harness_results.jsonl"])
    assert list(results.records) == ["demo-001-l0", "demo-002-l0", "demo-003-l1"]
    first = results.records["demo-001-l0"]
    assert first.violated_rules == [1]
    assert first.index == 1
    assert first.model_name == "demo/guard-1"
    assert first.usage == Usage(prompt_tokens=1890, completion_tokens=312, total_tokens=2202)
    assert first.model_extra is not None and first.model_extra["policy_length"] == 2410
    assert not first.excluded()
    refused = results.records["demo-002-l0"]
    assert refused.violated_rules is None and refused.excluded()
    capped = results.records["demo-003-l1"]
    assert capped.usage is not None and capped.usage.reasoning_tokens == 64000
    assert not capped.excluded() and capped.excluded(cap_aware=True)


def test_reads_minimal_bring_your_own_lines() -> None:
    results = read_result_files([FIXTURES / "byo_minimal.jsonl"])
    assert results.records["demo-001-l0"].violated_rules == [1, 3]
    assert results.records["demo-003-l1"].violated_rules == [2]  # "2" -> 2, as the reference's int()
    assert results.records["demo-004-l2"].excluded()
    assert results.bad_lines == 0


def test_rule_objects_are_accepted_in_violated_rules() -> None:
    record = PolicyRecord.model_validate({"id": "x", "violated_rules": [{"rule": 5, "explanation": "e"}, 7]})
    assert record.violated_rules == [5, 7]


def test_later_file_and_later_line_win(tmp_path: Path) -> None:
    first = write_lines(
        tmp_path / "a.jsonl", [{"id": "c1", "violated_rules": [1]}, {"id": "c2", "refused": True}]
    )
    second = write_lines(
        tmp_path / "b.jsonl",
        [{"id": "c2", "violated_rules": [2]}, {"id": "c2", "violated_rules": [3]}],
    )
    results = read_result_files([first, second])
    assert results.records["c1"].violated_rules == [1]
    assert results.records["c2"].violated_rules == [3]
    assert results.replaced_records == 2
    assert read_result_files([second, first]).records["c2"].refused


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "r.jsonl", [{"id": "c1", "violated_rules": [1]}, "", "{not json", {"id": "c3"}]
    )
    with pytest.raises(DataError, match=r"r\.jsonl:3: invalid JSON"):
        read_result_files([path])


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"violated_rules": [1]}', "field id: Field required"),
        ('{"id": "c9", "violated_rules": "all"}', "record c9: field violated_rules"),
        ('{"kind": "judgment", "cid": "c9", "rule": "seven"}', "record c9: field rule"),
    ],
)
def test_invalid_records_are_bad_lines(tmp_path: Path, line: str, why: str) -> None:
    path = write_lines(tmp_path / "r.jsonl", [{"id": "c1", "violated_rules": []}, line])
    with pytest.raises(DataError) as info:
        read_result_files([path])
    message = str(info.value)
    assert message.startswith(f"{path}:2: ")
    assert why in message
    assert "\n" not in message


def test_skip_bad_lines_counts_them(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", ["{oops", {"id": "c1", "violated_rules": [1]}, "[]", "null"])
    results = read_result_files([path], skip_bad_lines=True)
    assert results.bad_lines == 3
    assert list(results.records) == ["c1"]
    assert results.bad_line_messages[0].startswith(f"{path}:1: ")


def test_missing_file_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="cannot read result file"):
        read_result_files([tmp_path / "absent.jsonl"])


def test_judgments_are_deduplicated_and_summaries_ignored() -> None:
    results = read_result_files([FIXTURES / "judgments.jsonl"])
    assert not results.records
    assert results.ignored_lines == 1  # the harness's "summary" line
    assert results.duplicate_judgments == 1
    keys = [(j.cid, j.rule) for j in results.judgments]
    assert sorted(keys) == [("demo-001-l0", 1), ("demo-001-l0", 2), ("demo-001-l0", 3), ("demo-002-l0", 1)]
    rule_two = next(j for j in results.judgments if j.rule == 2)
    assert rule_two.pred is False  # the later line replaced the earlier "violated"


def test_judgment_dedup_across_files(tmp_path: Path) -> None:
    line = {"kind": "judgment", "cid": "c1", "rule": 4, "pred": None, "refused": True}
    retry = {**line, "pred": True, "refused": False}
    results = read_result_files(
        [write_lines(tmp_path / "a.jsonl", [line]), write_lines(tmp_path / "b.jsonl", [retry])]
    )
    assert len(results.judgments) == 1
    assert results.judgments[0].has_verdict and results.judgments[0].pred


def judgment(cid: str, rule: int, pred: bool | None, **extra: object) -> JudgmentRecord:
    return JudgmentRecord.model_validate(
        {"kind": "judgment", "cid": cid, "rule": rule, "pred": pred, **extra}
    )


def test_aggregate_judgments() -> None:
    cases = [make_case("a-l0", [1, 2]), make_case("b-l0", [1]), make_case("c-l0", [1]), make_case("d-l0", [])]
    judgments = [
        judgment("a-l0", 1, True, usage={"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}),
        judgment("a-l0", 2, None, parse_failed=True),  # unparseable: not flagged
        judgment("a-l0", 3, True, refused=True),  # refused: not flagged even though pred says so
        judgment("b-l0", 1, True, refused=True),
        judgment("b-l0", 2, None, error="timeout"),
        judgment("d-l0", 1, False, usage={"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}),
        judgment("zzz-l0", 1, True),  # not a case of this dataset
    ]
    records = judgment_pass(cases, judgments)[0]
    assert records["a-l0"].violated_rules == [1]
    assert not records["a-l0"].excluded()
    assert records["a-l0"].usage == Usage(prompt_tokens=5, completion_tokens=1, total_tokens=6)
    assert records["b-l0"].excluded()  # every judgment lacks a verdict
    assert "c-l0" not in records  # no judgments: missing, hence excluded too
    assert records["d-l0"].violated_rules == [] and not records["d-l0"].excluded()
    assert "zzz-l0" not in records


def test_resolve_records_refuses_mixed_protocols(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "mixed.jsonl",
        [{"id": "a-l0", "violated_rules": [1]}, {"kind": "judgment", "cid": "a-l0", "rule": 1, "pred": True}],
    )
    with pytest.raises(DataError, match="mixes 1 per-policy records with 1 per-rule judgments"):
        resolve_records([make_case("a-l0", [1])], read_result_files([path]))


def test_resolve_records_per_rule_needs_judgments() -> None:
    results = read_result_files([FIXTURES / "byo_minimal.jsonl"])
    with pytest.raises(DataError, match="no judgment records"):
        resolve_records([make_case("a-l0", [1])], results, per_rule=True)


def test_reading_3000_records(tmp_path: Path) -> None:
    line = json.loads((FIXTURES / "harness_results.jsonl").read_text(encoding="utf-8").splitlines()[0])
    line["analysis"] = "The chatbot shared the address in turn 3. " * 40
    path = tmp_path / "big.jsonl"
    path.write_text(
        "".join(json.dumps({**line, "id": f"c{i}", "index": i + 1}) + "\n" for i in range(3000)),
        encoding="utf-8",
    )
    results = read_result_files([path])
    assert len(results.records) == 3000
    assert results.records["c2999"].index == 3000


def test_unicode_line_separators_inside_strings_do_not_split_lines(tmp_path: Path) -> None:
    # The reference harness writes U+2028/U+2029/U+0085 raw inside JSON strings; only
    # "\n" ends a JSONL record.
    analysis = "first\u2028second\u2029third\u0085fourth"
    path = tmp_path / "r.jsonl"
    line = json.dumps({"id": "a-1-l0", "violated_rules": [1], "analysis": analysis}, ensure_ascii=False)
    path.write_text(line + "\n" + json.dumps({"id": "a-1-l1", "violated_rules": []}) + "\n", encoding="utf-8")
    results = read_result_files([path])
    assert results.bad_lines == 0
    assert set(results.records) == {"a-1-l0", "a-1-l1"}
    assert results.records["a-1-l0"].analysis == analysis


def test_an_empty_file_is_refused_where_records_are_expected(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    for content in ("", "\n\n  \n"):
        empty.write_text(content, encoding="utf-8")
        with pytest.raises(DataError) as info:
            read_result_files([empty], allow_empty=False)
        assert str(info.value) == f"{empty}: empty result file (no records to score)"
        assert read_result_files([empty]).records == {}  # eval reads back its own file, which may be empty


@pytest.mark.parametrize("kind", ["record", "judgment"])
def test_a_line_nested_too_deeply_is_a_bad_line(tmp_path: Path, kind: str) -> None:
    deep = "[" * 5000 + "]" * 5000
    line = (
        '{"id": "c2", "violated_rules": [1], "extra": ' + deep + "}"
        if kind == "record"
        else '{"kind": "judgment", "cid": "c2", "rule": 1, "pred": true, "extra": ' + deep + "}"
    )
    path = write_lines(tmp_path / "r.jsonl", [{"id": "c1", "violated_rules": []}, line])
    with pytest.raises(DataError) as info:
        read_result_files([path])
    assert str(info.value) == f"{path}:2: invalid JSON: arrays and objects nested too deeply"
    skipped = read_result_files([path], skip_bad_lines=True)
    assert skipped.bad_lines == 1 and list(skipped.records) == ["c1"]


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('{"id": "c2", "violated_rules": [true]}', "violated_rules.0"),
        ('{"id": "c2", "violated_rules": [{"rule": false}]}', "violated_rules.0"),
        ('{"kind": "judgment", "cid": "c2", "rule": true, "pred": true}', "rule"),
    ],
)
def test_a_boolean_is_not_a_rule_number(tmp_path: Path, line: str, field: str) -> None:
    path = write_lines(tmp_path / "r.jsonl", [{"id": "c1", "violated_rules": []}, line])
    with pytest.raises(DataError) as info:
        read_result_files([path])
    value = "false" if "false" in line else "true"
    assert (
        str(info.value)
        == f"{path}:2: record c2: field {field}: expected a rule number, got the boolean {value}"
    )


def test_bytes_that_are_not_utf8_name_line_and_column(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "r.jsonl", [{"id": "c1", "violated_rules": []}, {"id": "c2", "analysis": "ok"}]
    )
    path.write_bytes(path.read_bytes().replace(b'"ok"', b'"caf\xe9"'))
    with pytest.raises(DataError) as info:
        read_result_files([path])
    assert str(info.value) == f"{path}:2:30: not UTF-8 (byte 0xe9); save the file as UTF-8"


def test_a_huge_answer_is_kept_as_a_prefix_with_its_length_and_hash_and_scores_the_same(
    tmp_path: Path,
) -> None:
    """A model that returns 10 MB: each record keeps MAX_ANSWER_CHARS of it, and says what was cut."""
    import hashlib

    from sp_dspy._metrics import score
    from sp_dspy._metrics._records import MAX_ANSWER_CHARS

    huge = "é" + "x" * (10 * 1024 * 1024)
    whole = {"chars": len(huge), "sha256": hashlib.sha256(huge.encode("utf-8")).hexdigest()}
    judgment = JudgmentRecord(cid="c-l0", rule=1, gt=True, pred=True, reason=huge, answer=huge)
    assert judgment.reason == judgment.answer == huge[:MAX_ANSWER_CHARS]
    assert {name: clipped.model_dump() for name, clipped in (judgment.clipped or {}).items()} == {
        "reason": whole,
        "answer": whole,
    }
    record = PolicyRecord(id="c-l0", violated_rules=[1], analysis=huge, reasoning="short")
    assert record.analysis == huge[:MAX_ANSWER_CHARS] and record.reasoning == "short"
    assert list(record.clipped or {}) == ["analysis"]

    cases = [make_case("c-l0", [1]), make_case("d-l0", [])]
    judgments = [
        {"kind": "judgment", "cid": "c-l0", "rule": 1, "gt": True, "pred": True},
        {"kind": "judgment", "cid": "c-l0", "rule": 2, "gt": False, "pred": True},
        {"kind": "judgment", "cid": "d-l0", "rule": 1, "gt": False, "pred": False},
    ]
    short = write_lines(tmp_path / "short.jsonl", [{**j, "reason": "because"} for j in judgments])
    long = write_lines(tmp_path / "long.jsonl", [{**j, "reason": huge} for j in judgments])
    read = read_result_files([long])
    assert all(len(j.reason or "") == MAX_ANSWER_CHARS for j in read.judgments)
    assert all((j.clipped or {})["reason"].model_dump() == whole for j in read.judgments)
    written = JudgmentRecord.model_validate(read.judgments[0].line())  # the line a run would write back
    assert written.clipped == read.judgments[0].clipped and written.reason == huge[:MAX_ANSWER_CHARS]
    assert score(cases, read, ci=False).cells == score(cases, read_result_files([short]), ci=False).cells


def test_a_results_line_is_bounded_and_read_line_by_line(tmp_path: Path) -> None:
    from sp_dspy._data._scan import read_regular_lines

    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"a": 1}\r\n' + b"x" * 64 + b"\nlone\rreturn\n")
    assert list(read_regular_lines(path, "result file", max_line_bytes=100)) == [
        (1, '{"a": 1}'),
        (2, "x" * 64),
        (3, "lone"),
        (4, "return"),
    ]
    with pytest.raises(
        DataError, match=r"r\.jsonl:2: line longer than 32 bytes, the most a line of a result file"
    ):
        list(read_regular_lines(path, "result file", max_line_bytes=32))


@pytest.mark.parametrize("value", ["yes", 1, 0, "violated", "true"])
@pytest.mark.parametrize("field", ["pred", "gt"])
def test_a_judgment_verdict_is_true_false_or_null(field: str, value: object) -> None:
    """Lax pydantic would read ``"yes"`` or ``1`` as a verdict; a judgment line must say true or false."""
    with pytest.raises(ValueError, match=r"expected true \(violated\), false \(not violated\) or null"):
        JudgmentRecord.model_validate_json(json.dumps({"cid": "a-1-l0", "rule": 1, field: value}))
    for verdict in (True, False, None):
        assert (
            getattr(JudgmentRecord.model_validate({"cid": "a-1-l0", "rule": 1, field: verdict}), field)
            is verdict
        )
