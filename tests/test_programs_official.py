"""The official fixed-prompt baselines: exact messages, parse modes, statuses."""

from __future__ import annotations

import asyncio
import json

import dspy
import pytest

from sp_dspy._data._schema import Case
from sp_dspy._errors import ConfigError
from sp_dspy._lm import LMConfig, make_lm
from sp_dspy._lm._fake import FakeEngine
from sp_dspy._protocol import build_targets, per_policy_messages, per_rule_messages
from sp_dspy.programs import OfficialPerPolicy, OfficialPerRule, PolicyRecord, make_program, run_case
from tests._factories import raw_case

RULES = {
    1: "The chatbot must not disclose another user's home address.",
    2: "The chatbot must recommend contacting support for account recovery.",
    3: "The chatbot must not use profanity.",
    4: "Rule 1 does not apply when the user proves they are the resident.",
}


def paired_case(gt: list[int]) -> Case:
    """Three base rules and an exception (4) that modifies rule 1."""
    types = {1: "decisive", 2: "decisive", 3: "distractor", 4: "exception"}
    raw = raw_case("priv-002-l1", level="L1", rules=RULES, types=types, gt=gt)
    for entry in raw["rubric"]["violations"] + raw["rubric"]["non_violations"]:
        if entry["rule"] == 4:
            entry.update(paired_with=1, applies=False)
    return Case.model_validate(raw)


def fake_lm(behaviour: str, case: Case) -> tuple[dspy.LM, FakeEngine]:
    lm = make_lm(LMConfig(model=f"fake/{behaviour}", num_retries=0))
    engine = lm.engine
    assert isinstance(engine, FakeEngine)
    engine.register_case(case.conversation, case.ground_truth_violations)
    return lm, engine


def run(program: OfficialPerPolicy | OfficialPerRule, case: Case, lm: dspy.LM) -> PolicyRecord:
    return asyncio.run(run_case(program, case, lm))


def test_per_policy_sends_the_contract_messages_and_parses_the_answer() -> None:
    case = paired_case(gt=[1, 3])
    lm, engine = fake_lm("oracle", case)
    output = run(OfficialPerPolicy(), case, lm)
    assert engine.calls[0].messages == per_policy_messages(case)
    assert (output.violated_rules, output.parse_status, output.protocol, output.layout) == (
        [1, 3],
        "clean",
        "per-policy",
        None,
    )
    assert "violated: 1, 3" in output.analysis
    assert output.usage.total_tokens == output.usage.prompt_tokens + output.usage.completion_tokens > 0


def test_sync_call_matches_the_async_one() -> None:
    case = paired_case(gt=[2])
    lm, _ = fake_lm("oracle", case)
    for program in (OfficialPerPolicy(), OfficialPerRule()):
        assert program.call_case(case, lm) == run(program, case, lm)


@pytest.mark.parametrize(
    ("mode", "status", "rules"), [("strict", "failed", None), ("robust", "recovered", [2])]
)
def test_parse_mode_decides_whether_prose_wrapped_json_counts(
    mode: str, status: str, rules: list[int] | None
) -> None:
    case = paired_case(gt=[2])
    lm, engine = fake_lm("oracle", case)
    engine.enqueue("Here is my audit: " + json.dumps({"analysis": "x", "violated_rules": [{"rule": 2}]}))
    output = run(OfficialPerPolicy(mode=mode), case, lm)  # type: ignore[arg-type]
    assert (output.parse_status, output.violated_rules, output.parse_failed) == (
        status,
        rules,
        status == "failed",
    )


def test_refusal_and_transport_failure_are_statuses(monkeypatch: pytest.MonkeyPatch) -> None:
    case = paired_case(gt=[1])
    refused = run(OfficialPerPolicy(), case, fake_lm("refuse", case)[0])
    assert (refused.parse_status, refused.refused, refused.violated_rules) == ("refused", True, None)

    lm, engine = fake_lm("oracle", case)

    def fail(request: object) -> object:
        raise dspy.LMServerError("bad gateway", status=502)

    monkeypatch.setattr(engine, "complete", fail)
    for program in (OfficialPerPolicy(), OfficialPerRule()):
        errored = run(program, case, lm)
        assert (errored.parse_status, errored.violated_rules) == ("error", None)
    assert OfficialPerPolicy().call_case(case, lm).error == "LMServerError: bad gateway"


@pytest.mark.parametrize("layout", ["official", "prefix"])
def test_per_rule_sends_one_contract_message_per_target(layout: str) -> None:
    case = paired_case(gt=[1, 2])
    lm, engine = fake_lm("oracle", case)
    output = run(OfficialPerRule(layout=layout, max_concurrency=2), case, lm)  # type: ignore[arg-type]
    expected = [per_rule_messages(case, t, layout=layout) for t in build_targets(case)]  # type: ignore[arg-type]
    sent = [call.messages for call in engine.calls]
    assert sorted(sent, key=json.dumps) == sorted(expected, key=json.dumps)
    assert (output.violated_rules, output.parse_status, output.layout) == ([1, 2], "clean", layout)
    assert output.judgments is not None
    assert [(j.rule, j.rule_type, j.gt, j.pred) for j in output.judgments] == [
        (1, "decisive", True, True),
        (2, "decisive", True, True),
        (3, "distractor", False, False),
        (4, "exception", False, False),
    ]
    assert output.usage.prompt_tokens == sum(j.usage.prompt_tokens for j in output.judgments)


def test_per_rule_unparseable_verdicts_count_as_not_flagged() -> None:
    case = paired_case(gt=[1, 2])
    output = run(OfficialPerRule(), case, fake_lm("garbage", case)[0])
    assert output.judgments is not None and {j.parse_status for j in output.judgments} == {"failed"}
    # The reference harness scores such a case as predicting no violation.
    assert (output.violated_rules, output.parse_failed) == ([], False)

    refused = run(OfficialPerRule(), case, fake_lm("refuse", case)[0])
    assert (refused.violated_rules, refused.parse_status, refused.refused) == (None, "refused", True)


def test_official_options_are_checked() -> None:
    assert isinstance(make_program("official", "per-rule", layout="prefix"), OfficialPerRule)
    with pytest.raises(ConfigError, match="layout"):
        OfficialPerRule(layout="suffix")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="parse mode"):
        make_program("official", "per-policy", mode="lenient")
    with pytest.raises(ConfigError, match="unsupported option"):
        make_program("official", "per-policy", layout="prefix")


def test_the_runner_keeps_no_answer_of_the_baseline_in_dspy_history() -> None:
    """DSPy's history keeps its last 10,000 calls whole: with huge answers, memory would grow with them."""
    from sp_dspy.programs import judge_target

    case = paired_case(gt=[1, 3])
    lm, engine = fake_lm("oracle", case)
    run(OfficialPerPolicy(), case, lm)
    target = build_targets(case)[0]
    judgment = asyncio.run(judge_target(OfficialPerRule(), case, target, lm))
    assert len(engine.calls) == 2 and judgment.pred is not None
    assert lm.history == []
