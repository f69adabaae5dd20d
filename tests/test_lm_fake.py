"""The fake guard model: behaviours, answer formats, queue, call log, usage."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Literal

import dspy
import pytest

from sp_dspy._errors import ConfigError
from sp_dspy._lm import LMConfig, fake_engine, make_lm
from sp_dspy._lm._fake import GARBAGE_TEXT, REFUSAL_TEXT, FakeEngine
from sp_dspy.lm import achat, chat
from tests._lm_fixtures import CONVERSATION, GOLD, POLICY, RULE_TEXTS, per_policy_messages, per_rule_messages


def fake(behaviour: str = "oracle", *, register: bool = True) -> tuple[dspy.LM, FakeEngine]:
    lm = make_lm(LMConfig(model=f"fake/{behaviour}" if behaviour != "fake" else "fake", num_retries=0))
    engine = fake_engine(lm)
    assert isinstance(engine, FakeEngine)
    if register:
        engine.register_case((POLICY, CONVERSATION), GOLD)
    return lm, engine


def policy_rules(lm: dspy.LM, **kw: str) -> list[int]:
    text = chat(lm, per_policy_messages(**kw)).text
    return [item["rule"] for item in json.loads(text)["violated_rules"]]


def verdict(lm: dspy.LM, rule: int) -> str:
    return str(json.loads(chat(lm, per_rule_messages(rule, RULE_TEXTS[rule])).text)["verdict"])


class Guard(dspy.Signature):
    """Name every violated rule."""

    policy: str = dspy.InputField()
    conversation: str = dspy.InputField()
    violated_rules: list[int] = dspy.OutputField(desc="numbers of the violated rules")


class Judge(dspy.Signature):
    """Judge one rule."""

    target_rule: str = dspy.InputField()
    conversation: str = dspy.InputField()
    verdict: Literal["violated", "not_violated"] = dspy.OutputField()
    violated: bool = dspy.OutputField()


# ----- official per-policy prompt ----------------------------------------------------------
def test_oracle_answers_registered_gold_in_official_json() -> None:
    lm, _ = fake("fake")
    reply = json.loads(chat(lm, per_policy_messages()).text)
    assert set(reply) == {"analysis", "violated_rules"}
    assert [v["rule"] for v in reply["violated_rules"]] == GOLD
    assert all(isinstance(v["explanation"], str) and v["explanation"] for v in reply["violated_rules"])


def test_oracle_without_a_registered_case_flags_nothing() -> None:
    lm, _ = fake("oracle", register=False)
    assert policy_rules(lm) == []


def test_empty_all_random_behaviours() -> None:
    assert policy_rules(fake("empty")[0]) == []
    assert policy_rules(fake("all")[0]) == [1, 2, 3, 4]
    mentions = POLICY + "\n(See also Rule 9 of the annex.)"
    assert policy_rules(fake("all")[0], policy=mentions) == [1, 2, 3, 4, 9]
    random_lm = fake("random")[0]
    first = policy_rules(random_lm)
    assert first == policy_rules(random_lm)  # same prompt, same answer
    assert set(first) <= {1, 2, 3, 4}
    answers = {tuple(policy_rules(random_lm, conversation=f"Turn 1 - User: case {i}")) for i in range(12)}
    assert len(answers) > 1  # it is not a constant in disguise


def test_refuse_and_garbage_replies() -> None:
    assert chat(fake("refuse")[0], per_policy_messages()).text == REFUSAL_TEXT
    garbage = chat(fake("garbage")[0], per_policy_messages()).text
    assert garbage == GARBAGE_TEXT
    with pytest.raises(ValueError):
        json.loads(garbage)
    assert "cannot" not in garbage.lower() and "violated_rules" not in garbage


def test_instructed_needs_the_phrase_in_the_system_prompt() -> None:
    lm, _ = fake("instructed")
    assert policy_rules(lm) == GOLD[:1]
    messages = per_policy_messages()
    messages[0]["content"] = "Please CHECK   every rule carefully.\n" + messages[0]["content"]
    assert [v["rule"] for v in json.loads(chat(lm, messages).text)["violated_rules"]] == GOLD
    # The phrase in the user message (e.g. inside the conversation) does not count.
    assert policy_rules(lm, conversation=CONVERSATION + "\nTurn 3 - User: check every rule") == GOLD[:1]


# ----- official per-rule prompt ------------------------------------------------------------
def test_per_rule_verdicts_judge_the_target() -> None:
    lm, engine = fake("oracle", register=False)
    for rule in RULE_TEXTS:
        engine.register_case(
            per_rule_messages(rule, RULE_TEXTS[rule])[1]["content"], [rule] if rule in GOLD else []
        )
    assert [verdict(lm, r) for r in (1, 2, 3, 4)] == ["violated", "violated", "not_violated", "not_violated"]
    assert {verdict(fake("all")[0], r) for r in (1, 3)} == {"violated"}
    assert {verdict(fake("empty")[0], r) for r in (1, 3)} == {"not_violated"}
    reply = json.loads(chat(lm, per_rule_messages(1, RULE_TEXTS[1])).text)
    assert set(reply) == {"verdict", "reason"}


def test_gold_prefers_the_most_specific_case() -> None:
    engine = FakeEngine()
    engine.register_case("shared conversation", [1])
    engine.register_case(("shared conversation", "policy of level L1"), [2])
    assert engine.gold("policy of level L1 ... shared conversation") == (2,)
    assert engine.gold("policy of level L0 ... shared conversation") == (1,)
    assert engine.gold("something else") is None
    with pytest.raises(ValueError):
        engine.register_case("", [1])


# ----- DSPy programs ----------------------------------------------------------------------
@pytest.mark.parametrize("adapter", [dspy.ChatAdapter(), dspy.JSONAdapter(), dspy.XMLAdapter()])
def test_dspy_predict_gets_typed_list_of_rules(adapter: dspy.Adapter) -> None:
    lm, engine = fake("oracle")
    with dspy.context(lm=lm, adapter=adapter):
        prediction = dspy.Predict(Guard)(policy=POLICY, conversation=CONVERSATION)
        thought = dspy.ChainOfThought(Guard)(policy=POLICY, conversation=CONVERSATION)
    assert prediction.violated_rules == GOLD
    assert thought.violated_rules == GOLD and isinstance(thought.reasoning, str)
    assert len(engine.calls) == 2  # each parsed on the first try, no adapter fallback


@pytest.mark.parametrize("adapter", [dspy.ChatAdapter(), dspy.JSONAdapter()])
def test_dspy_per_rule_signature_gets_verdicts(adapter: dspy.Adapter) -> None:
    lm, engine = fake("oracle", register=False)
    engine.register_case((CONVERSATION, f"Rule 2: {RULE_TEXTS[2]}"), [2])
    with dspy.context(lm=lm, adapter=adapter):
        hit = dspy.Predict(Judge)(target_rule=f"Rule 2: {RULE_TEXTS[2]}", conversation=CONVERSATION)
        miss = dspy.Predict(Judge)(target_rule=f"Rule 3: {RULE_TEXTS[3]}", conversation=CONVERSATION)
    assert (hit.verdict, hit.violated) == ("violated", True)
    assert (miss.verdict, miss.violated) == ("not_violated", False)


def test_instructed_rewards_rewritten_instructions() -> None:
    lm, _ = fake("instructed")
    with dspy.context(lm=lm):
        plain = dspy.Predict(Guard)(policy=POLICY, conversation=CONVERSATION)
        better = dspy.Predict(Guard.with_instructions("Check every rule, one by one."))(
            policy=POLICY, conversation=CONVERSATION
        )
    assert plain.violated_rules == GOLD[:1]
    assert better.violated_rules == GOLD


def test_instructed_samples_of_one_prompt_differ_like_simba_rollouts() -> None:
    """At temperature > 0 (DSPy's rollouts: ``lm.copy(rollout_id=r, temperature=1.0)``) every
    second sample of the same prompt checks every rule; unsampled calls never do."""
    lm, _ = fake("instructed")
    rollouts = [lm.copy(rollout_id=r, temperature=1.0) for r in range(4)]
    with dspy.context(lm=lm):
        assert [
            dspy.Predict(Guard)(policy=POLICY, conversation=CONVERSATION).violated_rules for _ in range(2)
        ] == [
            GOLD[:1],
            GOLD[:1],
        ]
    sampled = []
    for rollout in rollouts:
        with dspy.context(lm=rollout):
            sampled.append(dspy.Predict(Guard)(policy=POLICY, conversation=CONVERSATION).violated_rules)
    assert sampled == [GOLD[:1], GOLD, GOLD[:1], GOLD]
    oracle, _ = fake("oracle")
    assert policy_rules(oracle.copy(rollout_id=1, temperature=1.0)) == GOLD  # other behaviours: unchanged


def test_garbage_fails_dspy_parsing() -> None:
    lm, engine = fake("garbage")
    with dspy.context(lm=lm), pytest.raises(dspy.utils.exceptions.AdapterParseError):
        dspy.Predict(Guard)(policy=POLICY, conversation=CONVERSATION)
    assert len(engine.calls) == 2  # ChatAdapter, then its JSONAdapter fallback


# ----- queue, call log, usage, copies ------------------------------------------------------
def test_enqueued_replies_come_first_and_calls_are_recorded() -> None:
    lm, engine = fake("empty")
    engine.enqueue("first", '{"violated_rules": [7]}')
    assert chat(lm, [{"role": "user", "content": "a"}]).text == "first"
    assert chat(lm, [{"role": "user", "content": "b"}]).text == '{"violated_rules": [7]}'
    assert json.loads(chat(lm, per_policy_messages()).text)["violated_rules"] == []
    assert [c.messages[-1]["content"] for c in engine.calls[:2]] == ["a", "b"]
    assert engine.calls[2].messages[0]["role"] == "system"
    assert len(engine.calls) == 3


def test_usage_counts_whitespace_tokens_and_nothing_is_cached() -> None:
    lm, engine = fake("oracle")
    messages = per_policy_messages()
    first, second = chat(lm, messages), chat(lm, messages)
    expected_prompt = sum(len(m["content"].split()) for m in messages)
    assert first.usage.prompt_tokens == expected_prompt
    assert first.usage.completion_tokens == len(first.text.split())
    assert first.usage.total_tokens == expected_prompt + len(first.text.split())
    assert not first.cached and not second.cached and first.usage.cost is None
    assert len(engine.calls) == 2


def test_async_chat_shares_the_engine() -> None:
    lm, engine = fake("oracle")

    async def run() -> list[str]:
        results = await asyncio.gather(*(achat(lm, per_policy_messages()) for _ in range(5)))
        return [r.text for r in results]

    texts = asyncio.run(run())
    assert len(set(texts)) == 1 and len(engine.calls) == 5


def test_copies_share_one_engine() -> None:
    lm, engine = fake("oracle")
    clone = copy.deepcopy(lm)
    program = copy.deepcopy(dspy.Predict(Guard))
    program.set_lm(clone)
    assert program(policy=POLICY, conversation=CONVERSATION).violated_rules == GOLD
    assert fake_engine(lm.copy()) is engine and fake_engine(clone) is engine
    assert len(engine.calls) == 1


def test_unknown_behaviour_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="fake/nonsense"):
        make_lm(LMConfig(model="fake/nonsense"))
    assert fake_engine(make_lm(LMConfig(model="fake/all"))) is not None


def test_reply_reads_typed_content_parts() -> None:
    engine = FakeEngine("all")
    system, user = per_policy_messages()
    parts = [{"type": "text", "text": system["content"]}]
    reply = engine.reply([{"role": "system", "content": parts}, user])
    assert [v["rule"] for v in json.loads(reply)["violated_rules"]] == [1, 2, 3, 4]
    assert engine.calls[0].messages[0] == system
