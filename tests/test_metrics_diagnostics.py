"""Failure modes and error attribution on hand-built cases (contract section 2)."""

from __future__ import annotations

from sp_dspy._data._schema import Case
from sp_dspy._metrics import PolicyRecord, case_outcomes, classify_failure
from sp_dspy._metrics._official import error_attribution, failure_modes
from tests._factories import raw_case

# Rule 1 is tightened into violation by conditional 5; rule 2 is waived by exception 4;
# rule 3 is a distractor; rule 6 is a plain decisive violation.
RULES = {n: f"Rule number {n} applies." for n in range(1, 7)}
TYPES = {1: "decisive", 2: "decisive", 3: "distractor", 4: "exception", 5: "conditional", 6: "decisive"}
METADATA = {"distractor_rules": [3], "waived_rules": [2], "contradicted_rules": [1]}


def make_case(cid: str, gt: list[int], level: str) -> Case:
    extra = {"failure_mode_metadata": METADATA}
    return Case.model_validate(raw_case(cid, level=level, rules=RULES, gt=gt, types=TYPES, extra=extra))


CASES = [
    make_case("x-l1", [1, 6], "L1"),
    make_case("y-l1", [1, 6], "L1"),
    make_case("z-l1", [1, 6], "L1"),
    make_case("w-l1", [1, 4], "L1"),
    make_case("r-l1", [1, 6], "L1"),
    make_case("q-l0", [1], "L0"),
]
RECORDS = {
    record.id: record
    for record in map(
        PolicyRecord.model_validate,
        [
            {"id": "x-l1", "violated_rules": [2, 3]},  # FP 2 (waived), 3 (distractor); FN 1 (contradicted), 6
            {"id": "y-l1", "violated_rules": [1, 6]},  # exact
            {"id": "z-l1", "violated_rules": [1, 5, 6]},  # FP 5 (a conditional-typed rule)
            {"id": "w-l1", "violated_rules": [1]},  # FN 4 (an exception-typed rule)
            {"id": "r-l1", "violated_rules": [2], "refused": True},  # excluded: nothing to diagnose
            {"id": "q-l0", "violated_rules": [2, 3]},  # L0: waived metadata must not yield FM-C1
        ],
    )
}
OUTCOMES = case_outcomes(CASES, RECORDS)


def test_classify_failure_per_case() -> None:
    modes = {case.id: classify_failure(case, o) for case, o in zip(CASES, OUTCOMES, strict=True)}
    assert modes == {
        "x-l1": ["FM-V1", "FM-D1", "FM-C1", "FM-C3"],
        "y-l1": [],
        "z-l1": [],  # fails exact match but fits no mode
        "w-l1": ["FM-V1"],
        "r-l1": [],
        "q-l0": ["FM-V1", "FM-D1"],
    }


def test_failure_modes_are_percentages_of_all_level_cases() -> None:
    report = failure_modes(CASES, OUTCOMES)
    # L1 has 5 cases (the refused one included in the denominator); 3 scored ones fail.
    assert report["L1"] == {
        "total": 5,
        "failed": 3,
        "FM-V1": {"count": 2, "pct": 40.0},
        "FM-D1": {"count": 1, "pct": 20.0},
        "FM-C1": {"count": 1, "pct": 20.0},
        "FM-C3": {"count": 1, "pct": 20.0},
    }
    assert report["L0"] == {
        "total": 1,
        "failed": 1,
        "FM-V1": {"count": 1, "pct": 100.0},
        "FM-D1": {"count": 1, "pct": 100.0},
    }
    assert report["L2"]["total"] == 0
    assert report["L2"]["FM-V1"] == {"count": 0, "pct": None}


def test_error_attribution_by_rule_type() -> None:
    report = error_attribution(CASES, OUTCOMES)
    assert report["L1"] == {
        "fp": {"decisive": 0, "distractor": 1, "exception": 1, "conditional": 1},
        "fn": {"decisive": 1, "distractor": 0, "exception": 1, "conditional": 1},
    }
    # Attribution ignores the level (as the reference does): at L0 the FP on waived rule 2
    # is "exception" and the FN on contradicted rule 1 is "conditional".
    assert report["L0"] == {
        "fp": {"decisive": 0, "distractor": 1, "exception": 1, "conditional": 0},
        "fn": {"decisive": 0, "distractor": 0, "exception": 0, "conditional": 1},
    }
    assert report["ALL"]["fp"] == {"decisive": 0, "distractor": 2, "exception": 2, "conditional": 1}
    assert report["ALL"]["fn"] == {"decisive": 1, "distractor": 0, "exception": 1, "conditional": 2}
    assert report["L2"]["fp"] == {"decisive": 0, "distractor": 0, "exception": 0, "conditional": 0}


def test_rule_outside_the_rubric_counts_as_decisive() -> None:
    case = make_case("o-l0", [1], "L0")
    outcome = case_outcomes([case], {"o-l0": PolicyRecord(id="o-l0", violated_rules=[1, 99])})
    assert error_attribution([case], outcome)["L0"]["fp"]["decisive"] == 1
