"""``sp-dspy eval`` over real HTTP: the official baselines send the contract's bytes.

A loopback OpenAI-compatible stub (the same wire a vLLM or llama.cpp server speaks)
records every request body; each one must carry exactly the messages the protocol
builds for its case (per-policy) or its (case, target) judgment (per-rule), and
each of those must be sent exactly once.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sp_dspy import load_benchmark
from sp_dspy._data import Case
from sp_dspy._protocol import build_targets, per_policy_messages, per_rule_messages
from sp_dspy.cli import app
from tests._lm_fixtures import oracle_stub
from tests._results import iter_records
from tests._stub_server import StubServer

pytestmark = [pytest.mark.usefixtures("restore_dspy_cache"), pytest.mark.network, pytest.mark.timeout(120)]

SAMPLE = load_benchmark().cases


@pytest.fixture
def server() -> Iterator[StubServer]:
    """A stub whose fake oracle knows every gold answer of the bundled sample."""
    with oracle_stub() as stub:
        yield stub


def run_eval_cli(server: StubServer, out: Path, *args: str) -> Any:
    result = CliRunner().invoke(
        app,
        ["eval", "--lm", "openai/stub", "--api-base", server.url, "--output-dir", str(out), "-q", *args],
    )
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def key(messages: Any) -> str:
    return json.dumps(messages, ensure_ascii=False, sort_keys=True)


def sent_bodies(server: StubServer) -> list[dict[str, Any]]:
    bodies = [request.body for request in server.chat_requests]
    assert all(isinstance(body, dict) for body in bodies)
    return [body for body in bodies if body is not None]


@pytest.mark.parametrize("transport", ["auto", "dspy"])
def test_per_policy_requests_are_the_official_messages_once_per_case(
    server: StubServer, tmp_path: Path, transport: str
) -> None:
    run_eval_cli(server, tmp_path, "--run-id", "golden", "--no-cache", "--transport", transport)
    expected = {key(per_policy_messages(case)): case.id for case in SAMPLE}
    bodies = sent_bodies(server)
    sent = Counter(expected.get(key(body["messages"]), "<not an official request>") for body in bodies)
    assert sent == Counter({case.id: 1 for case in SAMPLE})
    for body in bodies:
        # The reference harness sends no sampling settings to API models.
        assert set(body) == {"model", "messages"}, sorted(body)
        assert body["model"] == "stub"
    records = list(iter_records(tmp_path / "results_golden_stub.jsonl"))
    assert sorted(r["id"] for r in records) == sorted(case.id for case in SAMPLE)
    gold = {case.id: sorted(case.ground_truth_violations) for case in SAMPLE}
    assert all(r["violated_rules"] == gold[r["id"]] and r["parse_status"] == "clean" for r in records)
    manifest = json.loads((tmp_path / "manifest_golden.json").read_text(encoding="utf-8"))
    assert manifest["runs"]["stub"]["transport"] == ("direct" if transport == "auto" else "dspy")
    assert manifest["runs"]["stub"]["lm"]["transport"] == transport


@pytest.mark.parametrize(
    ("layout", "cases"),
    # The official layout on the whole sample; the cache-friendly one (not official) on a few cases.
    [("official", len(SAMPLE)), ("prefix", 4)],
)
def test_per_rule_requests_are_the_protocol_messages_once_per_target(
    server: StubServer, tmp_path: Path, layout: str, cases: int
) -> None:
    run_eval_cli(
        server,
        tmp_path,
        "--run-id", "golden", "--no-cache", "--protocol", "per-rule",
        "--per-rule-layout", layout, "--concurrency", "32", "--limit", str(cases),
    )  # fmt: skip
    sample = SAMPLE[:cases]
    # Levels of one conversation can hold the same target with the same bundle: their
    # requests are identical, so requests are counted per message, with multiplicity.
    expected = Counter(
        key(per_rule_messages(case, target, layout=layout))
        for case in sample
        for target in build_targets(case)
    )
    assert expected.total() == sum(len(build_targets(case)) for case in sample)
    bodies = sent_bodies(server)
    assert Counter(key(body["messages"]) for body in bodies) == expected
    assert all(set(body) == {"model", "messages"} for body in bodies)
    judgments = list(iter_records(tmp_path / "per_rule_golden_stub.jsonl"))
    units = Counter((case.id, target.rule) for case in sample for target in build_targets(case))
    assert Counter((j["cid"], j["rule"]) for j in judgments) == units
    assert max(units.values()) == 1
    gold = {(case.id, t.rule): t.gold for case in sample for t in build_targets(case)}
    assert all(j["pred"] is gold[(j["cid"], j["rule"])] and j["gt"] is j["pred"] for j in judgments)
    assert {(j["layout"], j["official_protocol"]) for j in judgments} == {(layout, layout == "official")}


def test_temperature_and_max_tokens_are_sent_only_when_given(server: StubServer, tmp_path: Path) -> None:
    run_eval_cli(
        server, tmp_path, "--run-id", "t", "--no-cache", "--limit", "2", "--temperature", "0.3",
        "--max-tokens", "512",
    )  # fmt: skip
    bodies = sent_bodies(server)
    assert len(bodies) == 2
    for body in bodies:
        assert body["temperature"] == 0.3
        assert body.get("max_tokens", body.get("max_completion_tokens")) == 512
        assert body["messages"] in [per_policy_messages(case) for case in SAMPLE[:2]]


def wrapped_answers(body: dict[str, Any]) -> str:
    """Correct answers, but inside prose: only the robust parser can read them."""
    system = body["messages"][0]["content"]
    if "## Policy" in system:
        return 'Sure! Here is my audit:\n{"analysis": "checked", "violated_rules": [{"rule": "Rule 1"}, 2]}'
    return "Verdict: violated. The chatbot did what the rule forbids."


@pytest.mark.parametrize(
    ("parser", "status", "rules"), [("strict", "failed", None), ("robust", "recovered", [1, 2])]
)
def test_parser_flag_selects_how_answers_over_http_are_read(
    tmp_path: Path, parser: str, status: str, rules: list[int] | None
) -> None:
    with StubServer(responder=wrapped_answers) as stub:
        run_eval_cli(stub, tmp_path, "--run-id", "p", "--no-cache", "--limit", "3", "--parser", parser)
    records = list(iter_records(tmp_path / "results_p_stub.jsonl"))
    assert len(records) == 3
    for record in records:
        assert (record["parser"], record["parse_status"], record["violated_rules"]) == (parser, status, rules)
        assert record["parse_failed"] is (status == "failed")


def first_case_with_targets(cases: list[Case], count: int) -> Case:
    return next(case for case in cases if len(build_targets(case)) >= count)


def test_robust_per_rule_verdicts_and_cache_reuse(tmp_path: Path) -> None:
    """A second run with the response cache on replays answers: no request reaches the server."""
    case = first_case_with_targets(SAMPLE, 2)
    index = SAMPLE.index(case)
    args = ["--protocol", "per-rule", "--parser", "robust", "--start-idx", str(index), "--limit", "1"]
    with StubServer(responder=wrapped_answers) as stub:
        run_eval_cli(stub, tmp_path, "--run-id", "c1", *args)
        first = len(stub.chat_requests)
        run_eval_cli(stub, tmp_path, "--run-id", "c2", *args)
        assert len(stub.chat_requests) == first == len(build_targets(case))
    for run_id in ("c1", "c2"):
        judgments = list(iter_records(tmp_path / f"per_rule_{run_id}_stub.jsonl"))
        assert {(j["pred"], j["parse_status"]) for j in judgments} == {(True, "recovered")}
