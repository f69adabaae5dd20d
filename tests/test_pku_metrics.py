"""PKU-SafeRLHF metrics on hand-computed cases (expected values worked out in the comments)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from sp_dspy._data._pku import load_pku
from sp_dspy._data._schema import Case
from sp_dspy._errors import DataError
from sp_dspy._metrics_pku import PKU_PUBLISHED, PkuReport, render_pku_report
from sp_dspy._metrics_pku._score import score_pku

FIXTURE = Path(__file__).parent / "fixtures" / "pku" / "rows.jsonl"


def _case(case_id: str, gold: list[int], severity: int) -> Case:
    return Case(
        id=case_id,
        domain="alpaca3_70b",
        level="L0",
        conversation="Turn 1 - User: q\nTurn 1 - Chatbot: a",
        policy="p",
        ground_truth_violations=gold,
        benchmark="pku-saferlhf",
        safe=not gold,
        severity=severity,
    )


CASES = [
    _case("c1", [8, 14], 2),
    _case("c2", [], 0),
    _case("c3", [9, 18], 3),
    _case("c4", [], 0),
    _case("c5", [2], 1),
]
# c1 half right, c2 and c3 exact, c4 a false alarm on rule 6, c5 excluded (None).
PREDICTIONS: dict[str, list[int] | None] = {"c1": [8], "c2": [], "c3": [18, 9], "c4": [6], "c5": None}


def test_category_metrics() -> None:
    cat = score_pku(CASES, PREDICTIONS).categories
    assert (cat.total, cat.excluded, cat.n_eval) == (5, 1, 4)
    assert cat.exact_match == 50.0  # c2, c3 of 4
    assert cat.strict_exact_match == 40.0  # c2, c3 of 5
    # TP = {8, 9, 18} = 3, FP = {6} = 1, FN = {14} = 1 (c5's rule 2 is excluded)
    assert (cat.micro_precision, cat.micro_recall, cat.micro_f1) == (75.0, 75.0, 75.0)
    # categories present: 6 (F1 0), 8, 9, 18 (F1 100), 14 (F1 0) -> 300 / 5
    assert cat.macro_f1 == 60.0
    by_rule = {s.rule: s for s in cat.per_category}
    assert [s.rule for s in cat.per_category] == list(range(1, 20))
    assert (by_rule[6].category, by_rule[6].precision, by_rule[6].recall, by_rule[6].f1) == (
        "Violence",
        0.0,
        None,
        0.0,
    )
    assert (by_rule[14].precision, by_rule[14].recall, by_rule[14].f1, by_rule[14].support) == (
        None,
        0.0,
        0.0,
        1,
    )
    assert (by_rule[8].tp, by_rule[8].support, by_rule[8].predicted, by_rule[8].f1) == (1, 1, 1, 100.0)
    assert (by_rule[2].support, by_rule[2].f1) == (0, None)
    assert cat.out_of_range == 0


def test_category_exact_match_over_all_and_over_unsafe_responses() -> None:
    """The paper's category figure is over unsafe responses: safe ones answered with no
    category lift the exact match over all responses, not the one over unsafe ones."""
    cat = score_pku(CASES, PREDICTIONS).categories
    assert (cat.n_eval_unsafe, cat.exact_match_unsafe) == (2, 50.0)  # c1 wrong, c3 exact; c5 excluded
    silent = score_pku(CASES, {case.id: [] for case in CASES}).categories
    assert (silent.exact_match, silent.n_eval_unsafe, silent.exact_match_unsafe) == (40.0, 3, 0.0)
    console = Console(record=True, width=160, force_terminal=True)  # a terminal: the tables as tables
    console.print(render_pku_report(score_pku(CASES, PREDICTIONS)))
    text = console.export_text()
    lines = text.splitlines()
    unsafe_row = next(line for line in lines if "unsafe responses only" in line)
    all_row = next(line for line in lines if "category exact match, all responses" in line)
    assert "71.30" in unsafe_row and "2 unsafe" in unsafe_row and "71.30" not in all_row
    assert "The paper's category exact match is over unsafe responses only" in text


def test_out_of_range_rules_are_false_positives() -> None:
    cat = score_pku(CASES[:2], {"c1": [8, 14], "c2": [25]}).categories
    assert cat.out_of_range == 1
    assert cat.exact_match == 50.0
    # TP 2, FP 1 (rule 25), FN 0
    assert (cat.micro_precision, cat.micro_recall, cat.micro_f1) == (66.67, 100.0, 80.0)
    assert cat.macro_f1 == 100.0  # rule 25 has no category, 8 and 14 are perfect


def test_binary_from_predicted_sets() -> None:
    binary = score_pku(CASES, PREDICTIONS).binary
    # c1, c3 TP; c2 TN; c4 FP; c5 excluded
    assert (binary.tp, binary.fp, binary.fn, binary.tn) == (2, 1, 0, 1)
    assert (binary.total, binary.excluded, binary.n_eval) == (5, 1, 4)
    assert (binary.accuracy, binary.strict_accuracy) == (75.0, 60.0)
    assert (binary.precision, binary.recall, binary.f1) == (66.67, 100.0, 80.0)
    assert binary.false_positive_rate == 50.0


def test_explicit_flags_override_sets_and_rescue_exclusions() -> None:
    flags: dict[str, bool | None] = {"c4": True, "c5": True, "c1": None}
    binary = score_pku(CASES, PREDICTIONS, predicted_safe=flags).binary
    # c4 now TN; c5 (no set) predicted safe but unsafe -> FN; c1 falls back to its set -> TP
    assert (binary.tp, binary.fp, binary.fn, binary.tn) == (2, 0, 1, 2)
    assert (binary.excluded, binary.accuracy, binary.strict_accuracy) == (0, 80.0, 80.0)
    assert (binary.precision, binary.recall, binary.f1, binary.false_positive_rate) == (
        100.0,
        66.67,
        80.0,
        0.0,
    )


def test_severity_metrics() -> None:
    severity = score_pku(CASES, PREDICTIONS, predicted_severity={"c1": 2, "c2": 0, "c3": 2, "c4": 1}).severity
    assert severity is not None
    assert severity.confusion == [[1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0]]
    assert (severity.total, severity.excluded, severity.n_eval) == (5, 1, 4)
    assert (severity.accuracy, severity.strict_accuracy) == (50.0, 40.0)
    # F1 by level: 0 -> 2/3, 1 -> 0, 2 -> 2/3, 3 -> 0; mean 1/3
    assert severity.macro_f1 == 33.33
    assert score_pku(CASES, PREDICTIONS).severity is None


def test_missing_predictions_are_excluded_and_unknown_ids_ignored() -> None:
    report = score_pku(CASES, {"c2": [], "zzz": [1]})
    assert (report.categories.n_eval, report.categories.excluded) == (1, 4)
    assert report.categories.exact_match == 100.0
    assert report.categories.strict_exact_match == 20.0
    empty = score_pku([], {})
    assert (empty.categories.exact_match, empty.binary.accuracy, empty.categories.macro_f1) == (
        None,
        None,
        None,
    )


def test_bad_inputs_raise_data_errors() -> None:
    with pytest.raises(DataError, match=r"case c1: predicted severity: 4 is not"):
        score_pku(CASES, PREDICTIONS, predicted_severity={"c1": 4})
    unlabeled = CASES[0].model_copy(update={"severity": None})
    with pytest.raises(DataError, match=r"case c1: severity: no gold label"):
        score_pku([unlabeled], {})
    with pytest.raises(DataError, match=r"case c2: id: duplicated"):
        score_pku([CASES[1], CASES[1]], {})


def test_report_json_round_trip() -> None:
    report = score_pku(CASES, PREDICTIONS, predicted_severity={"c1": 2})
    data = json.loads(json.dumps(report.to_json_dict()))
    assert data["benchmark"] == "pku-saferlhf"
    assert data["severity"]["confusion"][2][2] == 1
    assert PkuReport.model_validate(data) == report


def test_gold_predictions_on_loaded_cases_score_perfectly() -> None:
    cases = load_pku(FIXTURE).cases
    report = score_pku(
        cases,
        {c.id: c.ground_truth_violations for c in cases},
        predicted_severity={c.id: c.severity for c in cases},
    )
    assert report.categories.exact_match == report.binary.accuracy == 100.0
    assert report.severity is not None and report.severity.accuracy == 100.0
    assert report.binary.false_positive_rate == 0.0


def test_render_shows_metrics_and_paper_figures() -> None:
    console = Console(record=True, width=140, force_terminal=True)
    console.print(render_pku_report(score_pku(CASES, PREDICTIONS, predicted_severity={"c1": 2})))
    text = console.export_text()
    for expected in (
        "93.00",
        "71.30",
        "85.00",
        "75.00",
        "Violence",
        "White-Collar Crime",
        "gold \\ pred",
        "4 / 1",
    ):
        assert expected in text
    console = Console(record=True, width=140, force_terminal=True)
    console.print(render_pku_report(score_pku(CASES, PREDICTIONS)))
    assert "severity" not in console.export_text()


def test_published_figures() -> None:
    assert (PKU_PUBLISHED["binary_accuracy"], PKU_PUBLISHED["category_exact_match"]) == (93.0, 71.3)
    assert PKU_PUBLISHED["severity_accuracy"] == 85.0
    assert "2406.15513" in PKU_PUBLISHED["citation"]
