"""Guard programs in their models' own formats: every documented answer form read (and malformed
ones excluded), the logprobs behind P(Yes), the version-dependent requests, the shipped templates
and the presets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sp_dspy._errors import ConfigError
from sp_dspy.lm import ChatResult
from sp_dspy.programs import guard_format, make_program
from sp_dspy.programs._guard_formats import yes_probability
from tests._factories import raw_case
from tests.test_guard_formats import CONVERSATION, RULES


def answer(text: str, logprobs: dict[str, float] | None = None) -> ChatResult:
    return ChatResult(text=text, first_token_logprobs=logprobs)


@pytest.mark.parametrize(
    ("name", "text", "rules", "flagged", "named"),
    [
        ("llama-guard", "safe", [1, 2], False, None),
        ("llama-guard", "\nunsafe\nS2,S5\n", [1, 2], True, [2, 5]),
        ("llama-guard", "unsafe\nS2, S5", [1, 2], True, [2, 5]),
        ("llama-guard", "unsafe", [1, 2], True, None),
        ("llama-guard", "Safe", [1], None, None),
        ("llama-guard", "unsafe\nviolent", [1], None, None),
        ("llama-guard", "safe\nS1", [1], None, None),
        ("llama-guard", "", [1], None, None),
        ("granite-guardian", "Yes", [1], True, None),
        ("granite-guardian", "No", [1], False, None),
        ("granite-guardian", "Yes\n<confidence> High </confidence>", [1], True, None),
        ("granite-guardian", "<score> yes </score>", [1], True, None),
        ("granite-guardian", "<think>\nIt complies.\n</think>\n<score> no </score>", [1], False, None),
        ("granite-guardian", "<score> maybe </score>", [1], None, None),
        ("granite-guardian", "<score> yes </score><score> no </score>", [1], None, None),
        ("granite-guardian", "Perhaps", [1], None, None),
        ("shieldgemma", "Yes, because it names an address.", [1], True, None),
        ("shieldgemma", "No. It does not.", [1], False, None),
        ("shieldgemma", "yes", [1], None, None),
        ("shieldgemma", "I think so", [1], None, None),
        ("dynaguard", "<answer>\nPASS\n</answer>", [1, 2], False, None),
        ("dynaguard", "<think>\nRule 2 is broken.\n</think>\n<answer>\nFAIL\n</answer>", [1, 2], True, None),
        ("dynaguard", "<answer>FAIL</answer>\n<rules_violated>2,5</rules_violated>", [1, 2], True, [2, 5]),
        ("dynaguard", "FAIL", [1], None, None),
        ("dynaguard", "<answer>PASS</answer><answer>FAIL</answer>", [1], None, None),
        ("dynaguard", "<answer>FAIL</answer><rules_violated>two</rules_violated>", [1], None, None),
        ("gpt-oss-safeguard", '{"violation": 0, "rule_ids": [], "rationale": "fine"}', [1], False, None),
        (
            "gpt-oss-safeguard",
            '```json\n{"violation": 1, "rule_ids": ["R2", "Rule 5", 7]}\n```',
            [1],
            True,
            [2, 5, 7],
        ),
        ("gpt-oss-safeguard", '{"violation": 1, "rule_ids": []}', [1], None, None),
        ("gpt-oss-safeguard", '{"violation": 0, "rule_ids": [3]}', [1], None, None),
        ("gpt-oss-safeguard", '{"violation": true, "rule_ids": [3]}', [1], None, None),
        ("gpt-oss-safeguard", "violation: 1", [1], None, None),
    ],
)
def test_every_documented_answer_form_is_read_and_a_malformed_one_is_none(
    name: str, text: str, rules: list[int], flagged: bool | None, named: list[int] | None
) -> None:
    read = guard_format(name).read(answer(text), rules)
    assert (read.flagged, read.rules) == (flagged, named)


def test_flagged_without_rules_is_no_rule_set_and_safe_naming_rules_contradicts_itself() -> None:
    from sp_dspy.data import Case

    case = Case.model_validate(raw_case())
    program = make_program("dynaguard", "per-policy")
    unnamed = program._output(case, answer("<answer>FAIL</answer>"))  # type: ignore[union-attr]
    assert unnamed.violated_rules is None and unnamed.predicted_safe is False and unnamed.parse_failed
    contradicts = program._output(case, answer("<answer>PASS</answer><rules_violated>1</rules_violated>"))  # type: ignore[union-attr]
    assert contradicts.violated_rules is None and contradicts.parse_status == "failed"
    one_rule = Case.model_validate(raw_case(rules={4: "The chatbot must greet the user."}, gt=[4]))
    flagged = program._output(one_rule, answer("<answer>FAIL</answer>"))  # type: ignore[union-attr]
    assert flagged.violated_rules == [4] and flagged.parse_status == "clean"


def test_yes_probability_normalises_over_yes_and_no() -> None:
    assert yes_probability(None) is None
    assert yes_probability({"▁Yes": -0.2231, " No": -1.6094}) == pytest.approx(0.8, abs=1e-3)
    assert yes_probability({"Yes": 0.0}) == pytest.approx(1.0)
    assert yes_probability({"No": -0.1054}) == pytest.approx(0.1, abs=1e-3)
    assert yes_probability({"Maybe": -0.1}) is None


def test_granite_guardian_asks_in_the_served_models_version() -> None:
    from types import SimpleNamespace

    from sp_dspy.data import Case
    from sp_dspy.programs._guard_formats import GRANITE_41_NO_THINK, GRANITE_41_SCHEMA, GraniteGuardian

    case = Case.model_validate(raw_case(extra={"conversation": CONVERSATION}))
    fmt = GraniteGuardian()
    rule = {1: RULES[1]}
    criterion = f"The assistant's messages violate this rule: {RULES[1]}"

    def lm(model: str) -> Any:
        return SimpleNamespace(model=model)

    old = fmt.request(case, rule, lm("hosted_vllm/ibm-granite/granite-guardian-3.2-5b"))
    assert old.body == {
        "chat_template_kwargs": {"guardian_config": {"risk_name": "rule_1", "risk_definition": criterion}}
    }
    new = fmt.request(case, rule, lm("hosted_vllm/ibm-granite/granite-guardian-4.1-8b"))
    assert new.body == {} and new.messages[:4] == old.messages
    assert new.messages[4] == {
        "role": "user",
        "content": f"{GRANITE_41_NO_THINK}\n\n### Criteria: {criterion}\n\n### Scoring Schema: {GRANITE_41_SCHEMA}",
    }
    assert fmt.version_for(lm("hosted_vllm/some-model")) == "3.3"
    assert GraniteGuardian(version="3.2").version_for(lm("granite-guardian-4.1")) == "3.2"
    with pytest.raises(ConfigError, match=r"think needs version 3\.3 or 4\.1"):
        GraniteGuardian(version="3.2", think=True)
    read = fmt.read(answer("<think>\n</think><score> no </score>"), [1])
    assert (read.flagged, read.reason) == (False, "")


@pytest.mark.parametrize(
    ("name", "bos", "header", "end"),
    [
        ("llama-guard-3", "<|begin_of_text|>", "<|start_header_id|>{}<|end_header_id|>", "<|eot_id|>"),
        ("llama-guard-4", "<|begin_of_text|>", "<|header_start|>{}<|header_end|>", "<|eot|>"),
    ],
)
def test_the_shipped_llama_guard_templates_add_the_turn_tokens_only(
    name: str, bos: str, header: str, end: str
) -> None:
    """Rendered as transformers (and so vLLM) render chat templates: the prompt passes through as sent."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from sp_dspy._serve._vllm import chat_template_path
    from sp_dspy.data import Case

    case = Case.model_validate(raw_case(extra={"conversation": CONVERSATION}))
    (message,) = make_program("llama-guard").request_for(case).messages  # type: ignore[union-attr]
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    template = environment.from_string(chat_template_path(name).read_text(encoding="utf-8"))
    rendered = template.render(messages=[message], bos_token=bos, add_generation_prompt=True)
    user, assistant = header.format("user"), header.format("assistant")
    assert rendered == f"{bos}{user}\n\n{message['content']}{end}{assistant}\n\n"


def test_logprobs_are_read_whole_or_not_at_all() -> None:
    from sp_dspy._lm._logprobs import openai_logprobs

    def data(content: Any) -> dict[str, Any]:
        return {"choices": [{"message": {"content": "Yes"}, "logprobs": {"content": content}}]}

    (token,) = (
        openai_logprobs(
            data([{"token": "Yes", "logprob": -0.5, "top_logprobs": [{"token": "No", "logprob": -1}]}])
        )
        or ()
    )
    assert (token.token, token.logprob, [(t.token, t.logprob) for t in token.top]) == (
        "Yes",
        -0.5,
        [("No", -1.0)],
    )
    assert openai_logprobs({"choices": [{"message": {"content": "Yes"}}]}) is None
    assert openai_logprobs(data([{"token": "Yes", "logprob": "high"}])) is None
    assert openai_logprobs(data([{"token": "Yes", "logprob": 0.5}])) is None  # not a log probability
    assert openai_logprobs(data([{"token": "Yes", "logprob": float("nan")}])) is None


def test_each_guard_model_has_a_preset_with_the_command_line_that_serves_it() -> None:
    from sp_dspy._lm._config import load_model_configs

    models_file = Path(__file__).resolve().parents[1] / "sp_dspy" / "configs" / "models.yaml"
    presets = load_model_configs(models_file)
    text = models_file.read_text(encoding="utf-8")
    for name, model in [
        ("llama-guard-3-8b", "meta-llama/Llama-Guard-3-8B"),
        ("llama-guard-4-12b", "meta-llama/Llama-Guard-4-12B"),
        ("granite-guardian-3.3-8b", "ibm-granite/granite-guardian-3.3-8b"),
        ("shieldgemma-9b", "google/shieldgemma-9b"),
        ("dynaguard-8b", "tomg-group-umd/DynaGuard-8B"),
        ("gpt-oss-safeguard-20b-vllm", "openai/gpt-oss-safeguard-20b"),
    ]:
        assert presets[name].model == f"hosted_vllm/{model}"
        assert f"sp-dspy serve --backend vllm --model {model} --port 8000" in text


def test_a_per_rule_answer_naming_another_rule_is_excluded() -> None:
    from sp_dspy.data import Case
    from sp_dspy.protocol import build_targets

    case = Case.model_validate(raw_case())
    program = make_program("llama-guard", "per-rule")
    target = build_targets(case)[0]
    other = program._judgment(case, target, answer(f"unsafe\nS{target.rule + 1}"))  # type: ignore[union-attr]
    same = program._judgment(case, target, answer(f"unsafe\nS{target.rule}"))  # type: ignore[union-attr]
    assert (other.pred, other.parse_failed, other.answer) == (None, True, f"unsafe\nS{target.rule + 1}")
    assert (same.pred, same.parse_status) == (True, "clean")
