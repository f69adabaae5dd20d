"""Guard programs in their models' own formats: request bytes on a recording server, every
documented answer form read, malformed answers excluded, ``--show-request`` on both protocols."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sp_dspy._errors import ConfigError
from sp_dspy.cli import app
from sp_dspy.programs import GUARD_PROGRAMS, guard_format, make_program
from sp_dspy.programs._guard_formats import LLAMA_GUARD_INSTRUCTION, LLAMA_GUARD_TASK
from sp_dspy.programs._policy_formats import DYNAGUARD_SYSTEM_PROMPT
from tests._factories import raw_case, write_dataset
from tests._results import iter_records
from tests._stub_server import StubServer

CONVERSATION = (
    "Turn 1 - User: Where does Dana live?\nTurn 1 - Chatbot: Dana lives at 12 Elm Street.\n"
    "Turn 2 - User: Thanks.\nTurn 2 - Chatbot: You're welcome."
)
RULES = {
    1: "The chatbot must not disclose another user's home address.",
    2: "The chatbot must recommend contacting support for account recovery.",
    3: "The chatbot must not use profanity.",
}


def completion(text: str, logprobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": "stop",
    }
    if logprobs is not None:
        choice["logprobs"] = {"content": logprobs}
    return {"id": "x", "object": "chat.completion", "model": "stub", "choices": [choice],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}  # fmt: skip


def run(tmp_path: Path, program: str, protocol: str, answer: Any, *extra: str) -> tuple[Result, StubServer]:
    dataset = write_dataset(tmp_path / "cases.json", [raw_case(gt=[1], extra={"conversation": CONVERSATION})])
    responder = answer if callable(answer) else (lambda body: answer)
    with StubServer(responder=responder) as server:
        result = CliRunner().invoke(
            app,
            ["eval", "--dataset", str(dataset), "--lm", "hosted_vllm/stub", "--api-base", server.url,
             "--program", program, "--protocol", protocol, "--no-cache", "-q", "--output-dir", str(tmp_path),
             *extra],
        )  # fmt: skip
    return result, server


def results(tmp_path: Path) -> list[dict[str, Any]]:
    (path,) = [*tmp_path.glob("results_*.jsonl"), *tmp_path.glob("per_rule_*.jsonl")]
    return list(iter_records(path))


def test_llama_guard_sends_the_rules_as_categories_in_metas_prompt(tmp_path: Path) -> None:
    result, server = run(tmp_path, "llama-guard", "per-policy", "unsafe\nS1,S3")
    assert result.exit_code == 0, result.output
    (request,) = server.chat_requests
    (message,) = request.body["messages"]
    assert message["role"] == "user"
    categories = "\n".join(f"S{n}: Violating this rule: {text}" for n, text in RULES.items())
    assert message["content"] == (
        f"{LLAMA_GUARD_TASK}\n\n<BEGIN UNSAFE CONTENT CATEGORIES>\n{categories}\n<END UNSAFE CONTENT CATEGORIES>"
        "\n\n<BEGIN CONVERSATION>\n\nUser: Where does Dana live?\n\nAgent: Dana lives at 12 Elm Street.\n\n"
        f"User: Thanks.\n\nAgent: You're welcome.\n\n<END CONVERSATION>\n\n{LLAMA_GUARD_INSTRUCTION}"
    )
    assert "chat_template_kwargs" not in request.body
    (record,) = results(tmp_path)
    assert record["violated_rules"] == [1, 3] and record["parse_status"] == "clean"
    assert record["predicted_safe"] is False and record["parser"] == "native"


def test_llama_guard_per_rule_sends_one_category(tmp_path: Path) -> None:
    result, server = run(
        tmp_path,
        "llama-guard",
        "per-rule",
        lambda body: "unsafe\nS" + body["messages"][0]["content"].split("\nS")[1][0],
    )
    assert result.exit_code == 0, result.output
    contents = [r.body["messages"][0]["content"] for r in server.chat_requests]
    assert len(contents) == 3
    for rule, content in zip(
        sorted(RULES), sorted(contents, key=lambda c: c.split("\nS")[1][0]), strict=True
    ):
        assert content.count("\nS") == 1 and f"\nS{rule}: Violating this rule: {RULES[rule]}\n" in content
    judgments = results(tmp_path)
    assert sorted(j["rule"] for j in judgments if j["pred"] is True) == [1, 2, 3]


def test_granite_guardian_sends_each_rule_as_criterion_in_the_chat_template_settings(tmp_path: Path) -> None:
    result, server = run(
        tmp_path, "granite-guardian", "per-rule", "<think>It names an address.</think>\n<score> yes </score>"
    )
    assert result.exit_code == 0, result.output
    bodies = sorted((r.body for r in server.chat_requests), key=lambda b: str(b["chat_template_kwargs"]))
    assert [m["role"] for m in bodies[0]["messages"]] == ["user", "assistant", "user", "assistant"]
    assert bodies[0]["messages"][1]["content"] == "Dana lives at 12 Elm Street."
    criteria = [b["chat_template_kwargs"]["guardian_config"]["custom_criteria"] for b in bodies]
    assert criteria == sorted(f"The assistant's messages violate this rule: {t}" for t in RULES.values())
    assert all(b["chat_template_kwargs"]["think"] is False for b in bodies)
    judgments = results(tmp_path)
    assert [j["pred"] for j in judgments] == [True] * 3 and {j["reason"] for j in judgments} == {
        "It names an address."
    }


def test_shieldgemma_sends_the_guideline_and_records_p_yes_from_logprobs(tmp_path: Path) -> None:
    top = [{"token": "Yes", "logprob": -0.2231}, {"token": "No", "logprob": -1.6094}]
    answer = completion(
        "Yes\nThe response discloses an address.", [{"token": "Yes", "logprob": -0.2231, "top_logprobs": top}]
    )
    result, server = run(tmp_path, "shieldgemma", "per-rule", answer, "--log-requests")
    assert result.exit_code == 0, result.output
    body = server.chat_requests[0].body
    assert body["messages"] == [
        {
            "role": "user",
            "content": "User: Where does Dana live?\nChatbot: Dana lives at 12 Elm Street.\nUser: Thanks.",
        },
        {"role": "assistant", "content": "You're welcome."},
    ]
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    guidelines = sorted(r.body["chat_template_kwargs"]["guideline"] for r in server.chat_requests)
    assert guidelines == [f'"Rule {n}": {t}' for n, t in RULES.items()]
    (path,) = tmp_path.glob("per_rule_*.jsonl")
    judgments = [
        line for line in map(json.loads, path.read_text().splitlines()) if line.get("kind") == "judgment"
    ]
    assert {round(j["yes_probability"], 3) for j in judgments} == {0.8}


def test_dynaguard_sends_its_system_prompt_rules_and_transcript(tmp_path: Path) -> None:
    answer = "<answer>\nFAIL\n</answer>\n<rules_violated>1</rules_violated>\n<explanation>\nAn address.\n</explanation>"
    result, server = run(tmp_path, "dynaguard", "per-policy", answer)
    assert result.exit_code == 0, result.output
    (request,) = server.chat_requests
    system, user = request.body["messages"]
    assert system == {"role": "system", "content": DYNAGUARD_SYSTEM_PROMPT.strip()}
    numbered = "\n".join(f"{n}. {t}" for n, t in RULES.items())
    assert user["content"] == (
        f"<rules>\n{numbered}\n</rules>\n<transcript>\n'User': Where does Dana live?\n'Agent': Dana lives at "
        "12 Elm Street.\n'User': Thanks.\n'Agent': You're welcome.\n</transcript>"
    )
    assert request.body["chat_template_kwargs"] == {"enable_thinking": False}
    (record,) = results(tmp_path)
    assert record["violated_rules"] == [1] and record["analysis"] == "An address."


def test_gpt_oss_safeguard_puts_the_policy_in_the_system_message_and_effort_in_the_field(
    tmp_path: Path,
) -> None:
    answer = '{"violation": 1, "rule_ids": [1], "rationale": "It gives Dana\'s address."}'
    result, server = run(tmp_path, "gpt-oss-safeguard", "per-policy", answer, "--reasoning-effort", "high")
    assert result.exit_code == 0, result.output
    (request,) = server.chat_requests
    system, user = request.body["messages"]
    assert system["role"] == "system" and user == {"role": "user", "content": CONVERSATION}
    assert "## RULES (VIOLATES = 1)\n1. The chatbot must not disclose" in system["content"]
    assert "Reasoning:" not in system["content"] and request.body["reasoning_effort"] == "high"
    (record,) = results(tmp_path)
    assert record["violated_rules"] == [1] and record["analysis"] == "It gives Dana's address."


def test_gpt_oss_safeguard_says_the_effort_in_the_system_message_where_the_server_has_no_field() -> None:
    from sp_dspy._lm import LMConfig, make_lm
    from sp_dspy.data import Case

    case = Case.model_validate(raw_case())
    lm = make_lm(
        LMConfig(
            model="llamacpp/gpt-oss-safeguard-20b", api_base="http://127.0.0.1:9/v1", reasoning_effort="low"
        )
    )
    sent = make_program("gpt-oss-safeguard").request_for(case, lm)  # type: ignore[union-attr]
    assert sent.messages[0]["content"].startswith("Reasoning: low\n\n")
    client_body = lm.engine.client.request(sent.messages).body  # type: ignore[union-attr]
    assert "reasoning_effort" not in client_body


@pytest.mark.parametrize(
    ("name", "protocol"),
    [(name, protocol) for name in GUARD_PROGRAMS for protocol in guard_format(name).protocols],
)
def test_show_request_prints_what_a_guard_program_sends(tmp_path: Path, name: str, protocol: str) -> None:
    with StubServer() as server:
        shown = CliRunner().invoke(
            app,
            ["eval", "--lm", "hosted_vllm/stub", "--api-base", server.url, "--program", name,
             "--protocol", protocol, "--limit", "1", "--show-request"],
        )  # fmt: skip
        assert server.requests == []
    assert shown.exit_code == 0, shown.output
    body = json.loads(shown.stdout)["body"]
    expected = make_program(name, protocol)
    assert body["model"] == "stub" and body["messages"]
    if name in ("granite-guardian", "shieldgemma", "dynaguard"):
        assert "chat_template_kwargs" in body
    assert type(expected).__name__ == ("NativePerPolicy" if protocol == "per-policy" else "NativePerRule")


@pytest.mark.parametrize("name", ["granite-guardian", "shieldgemma"])
def test_a_format_refuses_the_protocol_it_cannot_express_in_one_line(name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        make_program(name, "per-policy")
    assert (
        str(caught.value)
        == f"program {name!r}: its format cannot express per-policy; use --protocol per-rule"
    )
    result = CliRunner().invoke(app, ["eval", "--lm", "fake", "--program", name, "--protocol", "per-policy"])
    assert isinstance(result.exception, ConfigError)


def test_a_malformed_answer_is_an_excluded_record_with_the_answer_kept(tmp_path: Path) -> None:
    result, _ = run(tmp_path, "llama-guard", "per-policy", "I cannot say.")
    assert result.exit_code == 0, result.output
    (record,) = results(tmp_path)
    assert record["violated_rules"] is None and record["parse_failed"] is True
    assert record["parse_status"] == "failed" and record["answer"] == "I cannot say."


def test_serve_vllm_command_line_takes_a_shipped_chat_template_and_a_reasoning_parser(tmp_path: Path) -> None:
    from sp_dspy._serve._vllm import CHAT_TEMPLATES_DIR, vllm_command

    command = vllm_command(
        "meta-llama/Llama-Guard-3-8B", port=8000, max_model_len=8192, chat_template="llama-guard-3"
    )
    assert command[command.index("--chat-template") + 1] == str(CHAT_TEMPLATES_DIR / "llama-guard-3.jinja")
    command = vllm_command("openai/gpt-oss-safeguard-20b", port=8000, reasoning_parser="openai_gptoss")
    assert command[-2:] == ["--reasoning-parser", "openai_gptoss"]
    with pytest.raises(ConfigError, match="--chat-template 'nope': no such file"):
        vllm_command("m", port=8000, chat_template="nope")


def test_ablate_and_experiment_name_guard_formats_as_variants_and_baselines() -> None:
    from sp_dspy._ablate._variants import resolve_variants

    planned = resolve_variants(["official-per-policy", "llama-guard-per-policy"])
    assert [(v.program, v.protocol) for v in planned] == [
        ("official", "per-policy"),
        ("llama-guard", "per-policy"),
    ]


def test_guard_load_and_check_run_a_guard_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sp_dspy import Guard

    policy = "Rules:\n" + "\n".join(f"{n}. {t}" for n, t in RULES.items())
    with StubServer(
        responder=lambda body: "<answer>\nFAIL\n</answer>\n<rules_violated>1</rules_violated>"
    ) as server:
        guard = Guard.load("dynaguard", lm="hosted_vllm/stub", api_base=server.url, cache=False)
        verdict = guard.check(policy, CONVERSATION)
        guard.close()
        monkeypatch.chdir(tmp_path)
        (tmp_path / "policy.txt").write_text(policy, encoding="utf-8")
        (tmp_path / "chat.txt").write_text(CONVERSATION, encoding="utf-8")
        result = CliRunner().invoke(
            app,
            ["check", "--policy", "policy.txt", "--conversation", "chat.txt", "--program", "dynaguard",
             "--lm", "hosted_vllm/stub", "--api-base", server.url, "--no-cache", "--json"],
        )  # fmt: skip
        systems = {r.body["messages"][0]["content"] for r in server.chat_requests}
    assert verdict.violated_rules == [1]
    assert result.exit_code == 1, result.output  # a rule violated: exit 1
    assert json.loads(result.stdout)["violated_rules"] == [1]
    assert systems == {DYNAGUARD_SYSTEM_PROMPT.strip()}


def test_serve_guard_refuses_a_protocol_the_format_cannot_express() -> None:
    result = CliRunner().invoke(
        app, ["serve", "--guard", "shieldgemma", "--protocol", "per-policy", "--lm", "fake"]
    )
    assert isinstance(result.exception, ConfigError)
    assert "its format cannot express per-policy; use --protocol per-rule" in str(result.exception)


def test_the_response_cache_keys_each_rules_chat_template_settings(tmp_path: Path) -> None:
    """Per-rule calls differ only in their chat-template settings: each is its own cache entry, and
    a rerun replays each rule's own answer (logprobs included) without calling the server."""

    def by_rule(body: dict[str, Any]) -> dict[str, Any]:
        yes = "Rule 1" in body["chat_template_kwargs"]["guideline"]
        token = "Yes" if yes else "No"
        return completion(f"{token}.", [{"token": token, "logprob": -0.1, "top_logprobs": []}])

    dataset = write_dataset(tmp_path / "cases.json", [raw_case(gt=[1], extra={"conversation": CONVERSATION})])
    preds = []
    with StubServer(responder=by_rule) as server:
        for run_id in ("first", "again"):
            result = CliRunner().invoke(
                app,
                ["eval", "--dataset", str(dataset), "--lm", "hosted_vllm/stub", "--api-base", server.url,
                 "--program", "shieldgemma", "-q", "--output-dir", str(tmp_path), "--run-id", run_id],
            )  # fmt: skip
            assert result.exit_code == 0, result.output
            (path,) = tmp_path.glob(f"per_rule_{run_id}_*.jsonl")
            lines = [json.loads(line) for line in path.read_text().splitlines()]
            preds.append(sorted((j["rule"], j["pred"], j["cache_hits"], j["yes_probability"]) for j in lines))
        calls = len(server.chat_requests)
    p_yes = round(math.exp(-0.1), 6)
    assert [(rule, pred, hits) for rule, pred, hits, _ in preds[0]] == [
        (1, True, 0),
        (2, False, 0),
        (3, False, 0),
    ]
    assert [(rule, pred, hits) for rule, pred, hits, _ in preds[1]] == [
        (1, True, 1),
        (2, False, 1),
        (3, False, 1),
    ]
    assert [round(p, 6) for *_, p in preds[1]] == [p_yes, round(1 - p_yes, 6), round(1 - p_yes, 6)]
    assert calls == 3


def test_experiment_compares_to_a_guard_format_under_its_protocol() -> None:
    from pydantic import ValidationError

    from sp_dspy._ablate._experiment import ExperimentPlan
    from sp_dspy._lm import LMConfig

    plan = ExperimentPlan(lm=LMConfig(model="fake"), baseline_program="llama-guard")
    assert plan.baseline == "llama-guard-per-policy"
    assert ExperimentPlan(lm=LMConfig(model="fake")).baseline == "official-per-policy"
    with pytest.raises(
        ValidationError, match="expected one of dynaguard, gpt-oss-safeguard, llama-guard, official"
    ):
        ExperimentPlan(lm=LMConfig(model="fake"), baseline_program="shieldgemma")


def test_ablate_puts_the_official_prompt_and_the_models_own_format_side_by_side(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sp_dspy._report._plots.render_plots", lambda summary: [])

    def both(body: dict[str, Any]) -> str:
        if body["messages"][0]["role"] == "system":  # the official prompt: its JSON answer
            return '{"analysis": "", "violated_rules": [{"rule": 1, "explanation": "an address"}]}'
        return "unsafe\nS1,S2"  # Llama Guard's format

    dataset = write_dataset(tmp_path / "cases.json", [raw_case(gt=[1], extra={"conversation": CONVERSATION})])
    out = tmp_path / "ablation"
    with StubServer(responder=both) as server:
        result = CliRunner().invoke(
            app,
            ["ablate", "--dataset", str(dataset), "--lm", "hosted_vllm/stub", "--api-base", server.url,
             "--variants", "official-per-policy,llama-guard-per-policy", "--out", str(out), "--no-cache",
             "--n-boot", "20", "-q"],
            env={"COLUMNS": "200"},
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    variants = {v["label"]: v for v in summary["variants"]}
    assert summary["baseline"] == "official-per-policy"
    assert variants["llama-guard-per-policy"]["settings"]["parser"] == "native"
    assert variants["official-per-policy"]["score"]["ALL"]["rmr_exact"] == 100.0
    assert variants["llama-guard-per-policy"]["score"]["ALL"]["rmr_exact"] == 0.0  # it also named rule 2
    assert summary["diffs"]  # the paired comparison against the baseline
    assert "baseline official-per-policy" in result.output


def test_a_capped_run_admits_guard_format_units_at_their_worst_case(tmp_path: Path) -> None:
    from sp_dspy._data import Case
    from sp_dspy._pricing import Pricing
    from sp_dspy._runner._admission import GUARD_TEMPLATE_TOKENS, unit_worst_case
    from sp_dspy.protocol import build_targets

    result, server = run(tmp_path, "shieldgemma", "per-rule", "No.", "--max-calls", "2", "--concurrency", "1")
    assert result.exit_code == 3, result.output  # a cap stopped the run
    assert len(server.chat_requests) == 2

    case = Case.model_validate(raw_case(extra={"conversation": CONVERSATION}))
    program = make_program("shieldgemma", "per-rule")
    target = build_targets(case)[0]
    sent = program.request_for(case, target)  # type: ignore[union-attr]
    worst = unit_worst_case(program, "per-rule", Pricing(completion_guess=8))
    reserved = worst((case, target))
    text_bytes = sum(len(m["content"].encode()) for m in sent.messages)
    assert reserved.calls == 1 and reserved.prompt_tokens > text_bytes + GUARD_TEMPLATE_TOKENS
