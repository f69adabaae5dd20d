"""Per-rule judgment diagnostics and per-rule scoring (contract section 5)."""

from __future__ import annotations

from sp_dspy._data._schema import Case
from sp_dspy._metrics import JudgmentRecord, ResultSet, score
from tests._factories import raw_case

RULES = {n: f"Rule number {n} applies." for n in range(1, 4)}
CASES = [
    Case.model_validate(
        raw_case(
            "a-l0", level="L0", rules=RULES, gt=[1], types={1: "decisive", 2: "decisive", 3: "distractor"}
        )
    ),
    Case.model_validate(
        raw_case(
            "b-l1", level="L1", rules=RULES, gt=[1, 2], types={1: "decisive", 2: "exception", 3: "distractor"}
        )
    ),
]


def j(cid: str, rule: int, pred: bool | None, **extra: object) -> JudgmentRecord:
    return JudgmentRecord.model_validate(
        {"kind": "judgment", "cid": cid, "rule": rule, "pred": pred, **extra}
    )


JUDGMENTS = [
    j("a-l0", 1, True, rule_type="decisive"),  # TP
    j("a-l0", 2, True, rule_type="decisive", gt=True),  # FP: the dataset, not the file's gt, decides
    j("a-l0", 3, None, rule_type="distractor", refused=True),  # TN in the confusion, wrong for accuracy
    j("b-l1", 1, False),  # FN; rule types of b come from the rubric
    j("b-l1", 2, True),  # TP (exception)
    j("b-l1", 3, False),  # TN
    j("other-l0", 1, True),  # not in the dataset: ignored
]


def test_diagnostics_by_level_and_type() -> None:
    report = score(CASES, ResultSet(judgments=JUDGMENTS), ci=False).per_rule
    assert report is not None
    l0 = report["L0"]
    assert {k: v for k, v in l0.items() if k != "by_rule_type"} == {
        "n_judgments": 3,
        "n_violated_gt": 1,
        "n_not_violated_gt": 2,
        "n_without_verdict": 1,
        "accuracy": 33.33,  # only rule 1 is right; the refusal counts as wrong
        "precision": 50.0,  # 1 / (1 + 1)
        "recall": 100.0,
        "f1": 66.67,  # 2 * .5 * 1 / 1.5
        "tp": 1,
        "fp": 1,
        "fn": 0,
        "tn": 1,
        "per_rule_refusal_rate": 33.33,
    }
    assert list(l0["by_rule_type"]) == ["decisive", "distractor"]
    assert l0["by_rule_type"]["decisive"]["accuracy"] == 50.0
    assert l0["by_rule_type"]["distractor"]["accuracy"] == 0.0
    assert l0["by_rule_type"]["distractor"]["per_rule_refusal_rate"] == 100.0

    l1 = report["L1"]
    assert (l1["accuracy"], l1["precision"], l1["recall"], l1["f1"]) == (66.67, 100.0, 50.0, 66.67)
    assert list(l1["by_rule_type"]) == ["decisive", "distractor", "exception"]
    assert l1["by_rule_type"]["exception"]["tp"] == 1
    assert l1["by_rule_type"]["decisive"]["fn"] == 1
    assert l1["by_rule_type"]["decisive"]["precision"] == 0.0  # no positive prediction: 0, not an error

    every = report["ALL"]
    assert (every["tp"], every["fp"], every["fn"], every["tn"]) == (2, 1, 1, 2)
    assert (every["accuracy"], every["precision"], every["recall"]) == (50.0, 66.67, 66.67)
    assert every["per_rule_refusal_rate"] == 16.67
    assert report["L2"]["n_judgments"] == 0 and report["L2"]["by_rule_type"] == {}


def test_score_aggregates_judgments_to_case_metrics() -> None:
    report = score(CASES, ResultSet(judgments=JUDGMENTS), ci=False)
    assert report.mode == "per_rule"
    assert report.cells["L0"]["rmr_exact"] == 0.0  # predicted {1, 2} against {1}
    assert report.cells["L1"]["rmr_exact"] == 0.0  # predicted {2} against {1, 2}
    assert report.cells["ALL"]["rdr"] == 50.0  # (1 + 1) / (2 + 2)
    assert report.cells["ALL"]["per_rule_refusal_rate"] == 16.67
    assert report.per_rule is not None and report.per_rule["ALL"]["n_judgments"] == 6
    assert report.unknown_ids.count == 1 and report.unknown_ids.examples == ["other-l0"]
    document = report.to_json_dict()
    assert document["per_rule"]["L0"]["tp"] == 1
    assert document["L0"]["per_rule_refusal_rate"] == 33.33


def test_all_judgments_refused_excludes_the_case() -> None:
    judgments = [j("a-l0", 1, None, refused=True), j("a-l0", 2, None, parse_failed=True), j("b-l1", 1, True)]
    report = score(CASES, ResultSet(judgments=judgments), ci=False)
    assert report.cells["L0"]["excluded"] == 1
    assert report.cells["L1"]["n_eval"] == 1
    assert report.cells["L0"]["per_rule_refusal_rate"] == 100.0
