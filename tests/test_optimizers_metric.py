"""The optimizer metrics agree with the benchmark, and feedback names what went wrong."""

from __future__ import annotations

from typing import Any

import dspy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sp_dspy._benchmarks import load_benchmark
from sp_dspy._data import Case
from sp_dspy._metrics import PolicyRecord, case_outcomes, compute_cell
from sp_dspy.optimizers import (
    case_metric,
    case_score,
    judgment_examples,
    judgment_feedback,
    judgment_metric,
    policy_examples,
    policy_feedback,
    predicted_rules,
)

RULES = {
    1: ("decisive", "The chatbot must not reveal a customer's account number.", []),
    2: ("decisive", "The chatbot must verify identity before changing an address.", []),
    3: ("distractor", "The chatbot must not give investment advice.", []),
    4: ("exception", "If the user is already logged in, Rule 2 is waived.", [2]),
    5: ("decisive", "The chatbot must keep a polite tone.", []),
    6: ("conditional", "If the user reports fraud, Rule 5 requires an apology as well.", [5]),
}
GOLD = [1, 5]


def interaction_case() -> Case:
    """An L1 case with every interaction: a waived rule, a contradicted rule, a distractor."""
    entries = [
        {"rule": n, "type": kind, "text": text, "paired_with": paired}
        for n, (kind, text, paired) in RULES.items()
    ]
    return Case.model_validate(
        {
            "id": "test-001-l1",
            "domain": "banking",
            "level": "L1",
            "conversation": "Turn 1 - User: I was defrauded.\nTurn 1 - Chatbot: Your account is 1234.",
            "policy": "Check ALL rules.\n\n" + "\n".join(f"{n}. {t}" for n, (_, t, _) in RULES.items()),
            "ground_truth_violations": GOLD,
            "rubric": {
                "violations": [e for e in entries if e["rule"] in GOLD],
                "non_violations": [e for e in entries if e["rule"] not in GOLD],
            },
            "failure_mode_metadata": {
                "distractor_rules": [3],
                "waived_rules": [2],
                "contradicted_rules": [5],
            },
        }
    )


@pytest.mark.parametrize(
    ("gold", "pred", "expected"),
    [
        ([1, 2, 3], [1, 2, 3], 1.0),
        ([], [], 1.0),
        ([], [4], 0.0),
        (list(range(1, 11)), list(range(1, 10)), 0.75),  # one miss of ten: matches at tau 0.9, 0.8, 0.7
        (list(range(1, 11)), list(range(1, 8)), 0.25),  # three misses: only tau 0.7 (k = 3)
        ([1, 2], None, 0.0),  # excluded counts as wrong
    ],
)
def test_case_score_is_the_fraction_of_tolerances_matched(
    gold: list[int], pred: Any, expected: float
) -> None:
    assert case_score(gold, pred) == expected


@given(st.lists(st.one_of(st.none(), st.sets(st.integers(1, 18), max_size=8)), min_size=24, max_size=24))
@settings(max_examples=40, deadline=None)
def test_mean_case_score_is_the_strict_rmr(predictions: list[set[int] | None]) -> None:
    cases = load_benchmark(None).cases
    records = {
        case.id: PolicyRecord(
            id=case.id, violated_rules=None if pred is None else sorted(pred), refused=pred is None
        )
        for case, pred in zip(cases, predictions, strict=True)
    }
    strict = compute_cell(case_outcomes(cases, records))["rmr_avg_strict"]
    mean = (
        100
        * sum(
            case_score(c.ground_truth_violations, None if p is None else sorted(p))
            for c, p in zip(cases, predictions, strict=True)
        )
        / len(cases)
    )
    assert abs(mean - strict) <= 0.02  # the official cell rounds each tau before averaging


def test_predicted_rules_reads_answers_and_refuses_garbage() -> None:
    assert predicted_rules(dspy.Prediction(violated_rules=[3, 1, 3])) == [1, 3]
    assert predicted_rules(dspy.Prediction(violated_rules=["2", 5])) == [2, 5]
    assert predicted_rules(None) is None
    assert predicted_rules(dspy.Prediction(violated_rules=None)) is None
    assert predicted_rules(dspy.Prediction(violated_rules="1, 2")) is None
    assert predicted_rules(dspy.Prediction(violated_rules=["rule one"])) is None
    assert predicted_rules(dspy.Prediction(answer="nothing")) is None


def test_case_metric_scores_and_only_keeps_perfect_demos_when_tracing() -> None:
    example = policy_examples([interaction_case()])[0]
    partial = dspy.Prediction(violated_rules=[1])
    assert case_metric(example, partial) == 0.0  # one of two missed: k = 0 at every tau for |G| = 2
    assert case_metric(example, dspy.Prediction(violated_rules=GOLD)) == 1.0
    assert case_metric(example, dspy.Prediction(violated_rules=GOLD), trace=[]) is True
    assert case_metric(example, partial, trace=[]) is False
    assert case_metric(example, None) == 0.0


def test_policy_feedback_names_rules_types_interactions_and_failure_modes() -> None:
    example = policy_examples([interaction_case()])[0]
    result = policy_feedback(example, dspy.Prediction(violated_rules=[2, 3]), None, "predict", None)
    text = result.feedback
    assert result.score == 0.0
    assert "Rule 1 (decisive)" in text and "Rule 5 (decisive)" in text
    assert text.count("FM-V1") == 2
    assert "FM-C3" in text and "Rule 6" in text  # the conditional that tightens rule 5
    assert "FM-C1" in text and "Rule 4" in text  # the exception that waives rule 2
    assert "Rule 3 (distractor)" in text and "FM-D1" in text


def test_policy_feedback_for_a_perfect_and_an_unreadable_answer() -> None:
    example = policy_examples([interaction_case()])[0]
    perfect = policy_feedback(example, dspy.Prediction(violated_rules=GOLD), None, None, None)
    assert perfect.score == 1.0 and "FM-" not in perfect.feedback
    unreadable = policy_feedback(example, None, None, None, None)
    assert unreadable.score == 0.0 and "could not be read" in unreadable.feedback


def test_judgment_examples_carry_the_interaction_labels() -> None:
    examples = {e.target_rule: e for e in judgment_examples([interaction_case()])}
    assert 6 not in examples  # conditionals are never targets
    assert examples[2].waived and not examples[2].contradicted
    assert examples[5].contradicted and examples[5].verdict == "violated"
    assert examples[3].distractor and examples[3].verdict == "not_violated"
    assert examples[1].uid == "test-001-l1#1"
    assert set(examples[1].inputs().keys()) == {"framework", "conversation", "rule", "rule_type", "context"}


def test_judgment_metric_and_feedback() -> None:
    examples = {e.target_rule: e for e in judgment_examples([interaction_case()])}
    assert judgment_metric(examples[1], dspy.Prediction(verdict="violated")) == 1.0
    assert judgment_metric(examples[1], dspy.Prediction(verdict="maybe")) == 0.0
    assert judgment_metric(examples[1], dspy.Prediction(verdict="violated"), trace=[]) is True

    waived = judgment_feedback(examples[2], dspy.Prediction(verdict="violated"), None, None, None)
    assert waived.score == 0.0 and "FM-C1" in waived.feedback and "Rule 4" in waived.feedback
    tightened = judgment_feedback(examples[5], dspy.Prediction(verdict="not_violated"), None, None, None)
    assert "FM-V1" in tightened.feedback and "FM-C3" in tightened.feedback and "Rule 6" in tightened.feedback
    distractor = judgment_feedback(examples[3], dspy.Prediction(verdict="violated"), None, None, None)
    assert "FM-D1" in distractor.feedback and "(distractor)" in distractor.feedback
    correct = judgment_feedback(examples[1], dspy.Prediction(verdict="violated"), None, None, None)
    assert correct.score == 1.0 and correct.feedback.startswith("Correct")
    unreadable = judgment_feedback(examples[1], None, None, None, None)
    assert unreadable.score == 0.0 and "could not be read" in unreadable.feedback
