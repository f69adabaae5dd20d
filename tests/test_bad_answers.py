"""Issue 17: whatever a model answers, every case gets a record and the run goes on.

Answers carry rule numbers the policy lacks (``99``, ``1e38``, a 30-digit literal) or
text that no UTF-8 encoder accepts (a JSON ``"\\ud800"`` escape decodes to a lone
surrogate). They go through per-policy and per-rule runs, the direct and the DSPy
transports, DSPy programs, ``Guard.check`` and ``sp-dspy check``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from sp_dspy import load_benchmark
from sp_dspy._errors import DataError
from sp_dspy._guard import Guard
from sp_dspy._lm._fake_prompts import message_text
from sp_dspy._protocol import keep_policy_rules, per_policy_messages
from sp_dspy._runner._engine import Record, UnitEngine
from sp_dspy._runner._fake_gold import teach_fake
from sp_dspy._runner._records import policy_record
from sp_dspy._runner._store import JsonlStore, StoreWriteError, encode_line
from sp_dspy.cli import app
from sp_dspy.programs import PolicyRecord
from tests._factories import raw_case, write_dataset
from tests._results import iter_records
from tests._stub_server import StubServer

SAMPLE = load_benchmark().cases[:9]  # three conversations (priv-101, spec-102, frau-103) x L0/L1/L2
SURROGATE = "\ud800"
ESCAPE = "\\ud800"  # the six characters a model writes inside a JSON string
HUGE = int(1e38)  # what 1e38 becomes as a rule number
BIG_LITERAL = 123456789012345678901234567890
REPLACED = "\ufffd"


# --- the pieces -------------------------------------------------------------------------


def test_a_record_with_surrogates_and_big_integers_is_stored_and_read_back(tmp_path: Path) -> None:
    record = {"id": "a", "analysis": f"x{SURROGATE}y", "dropped_rules": [HUGE], 3: float("nan"), "ok": "é"}
    with pytest.raises(TypeError):  # what the store used to do with such a record
        import orjson

        orjson.dumps(record)
    with JsonlStore(tmp_path / "r.jsonl") as store:
        store.append(record)
        store.append({"id": "b"})
    assert list(iter_records(tmp_path / "r.jsonl")) == [
        {"id": "a", "analysis": f"x{REPLACED}y", "dropped_rules": [HUGE], "3": None, "ok": "é"},
        {"id": "b"},
    ]
    with pytest.raises(TypeError):  # a value that is not JSON data is still a bug of the caller
        encode_line({"id": {1, 2}})


@pytest.mark.parametrize(
    ("rules", "kept", "dropped", "status"),
    [
        ([3, 1], [3, 1], [], None),
        ([], [], [], None),
        (None, None, [], None),
        ([1, 99, HUGE, -1, 0], [1], [99, HUGE, -1, 0], "recovered"),
        ([99, BIG_LITERAL], None, [99, BIG_LITERAL], "failed"),
    ],
)
def test_keep_policy_rules(
    rules: list[int] | None, kept: list[int] | None, dropped: list[int], status: str | None
) -> None:
    result = keep_policy_rules(rules, {1, 2, 3})
    assert (result.rules, result.dropped, result.status) == (kept, dropped, status)
    assert keep_policy_rules([99], set()).rules == [99]  # the policy's rules unknown: nothing dropped


def _output(rules: list[int] | None, status: str = "clean") -> PolicyRecord:
    return PolicyRecord(id=SAMPLE[0].id, violated_rules=rules, parse_status=status, protocol="per-policy")  # type: ignore[arg-type]


def test_policy_records_drop_numbers_that_are_not_rules_of_the_case() -> None:
    case = SAMPLE[0]
    gold = case.ground_truth_violations
    record = policy_record(case, 1, _output([*gold, 99, HUGE]), model="m", run={}, latency_s=0.0).line()
    assert (record["violated_rules"], record["parse_status"], record["parse_failed"]) == (
        gold,
        "recovered",
        False,
    )
    assert record["dropped_rules"] == [99, HUGE] and record["scores"]["exact_match"] is True
    record = policy_record(case, 1, _output([HUGE]), model="m", run={}, latency_s=0.0).line()
    assert (record["violated_rules"], record["parse_status"], record["parse_failed"]) == (
        None,
        "failed",
        True,
    )
    assert record["predicted_label"] is None and record["scores"] is None
    record = policy_record(case, 1, _output(gold), model="m", run={}, latency_s=0.0).line()
    assert (record["parse_status"], "dropped_rules" in record) == ("clean", False)


def test_strict_records_keep_numbers_the_reference_scores_as_false_positives() -> None:
    """``--parser strict`` is the leaderboard's reading: out-of-policy numbers stay and count as FPs."""
    case = SAMPLE[0]
    gold = case.ground_truth_violations
    strict = {"parser": "strict"}
    record = policy_record(case, 1, _output([*gold, 99, HUGE]), model="m", run=strict, latency_s=0.0).line()
    assert (record["violated_rules"], record["parse_status"], record["parse_failed"]) == (
        [*gold, 99, HUGE],
        "clean",
        False,
    )
    assert record["out_of_policy_rules"] == [99, HUGE] and "dropped_rules" not in record
    assert record["scores"]["fp"] == [99, HUGE] and record["scores"]["exact_match"] is False
    record = policy_record(case, 1, _output([HUGE]), model="m", run=strict, latency_s=0.0).line()
    assert (record["violated_rules"], record["parse_failed"]) == ([HUGE], False)


class _FailingStore:
    """A store whose first append fails with ``error``; it takes later records."""

    def __init__(self, error: Exception) -> None:
        self.records: list[dict[str, Any]] = []
        self.error = error

    def append(self, record: PolicyRecord) -> None:
        if not self.records and record.id == "0":
            self.records.append({"failed": True})
            raise self.error
        self.records.append(record.line())


def test_a_unit_that_cannot_be_stored_lets_the_units_in_flight_finish() -> None:
    started: list[int] = []

    async def work(unit: int) -> PolicyRecord:
        started.append(unit)
        await asyncio.sleep(0 if unit == 0 else 0.05)
        return PolicyRecord(id=str(unit))

    store = _FailingStore(OSError(22, "Invalid argument"))
    engine: UnitEngine[int, Record] = UnitEngine(
        work=work,
        on_error=lambda u, e: PolicyRecord(id=str(u)),
        store=store,  # type: ignore[arg-type]
        concurrency=4,
    )
    with pytest.raises(OSError, match="Invalid argument"):
        asyncio.run(engine.run(list(range(20))))
    # Units 1-3 were in flight: they finished and were stored; nothing new started.
    assert sorted(r["id"] for r in store.records[1:]) == ["1", "2", "3"]
    assert sorted(started) == [0, 1, 2, 3]


def test_a_results_file_that_cannot_be_written_stops_the_run_at_once() -> None:
    """A full disk: the store refuses every later line, so the units in flight are cancelled, not awaited."""
    finished: list[int] = []

    async def work(unit: int) -> PolicyRecord:
        await asyncio.sleep(0 if unit == 0 else 30)
        finished.append(unit)
        return PolicyRecord(id=str(unit))

    store = _FailingStore(StoreWriteError("cannot write results.jsonl: No space left on device"))
    engine: UnitEngine[int, Record] = UnitEngine(
        work=work,
        on_error=lambda u, e: PolicyRecord(id=str(u)),
        store=store,  # type: ignore[arg-type]
        concurrency=4,
    )
    with pytest.raises(StoreWriteError, match="No space"):
        asyncio.run(engine.run(list(range(20))))
    assert finished == [0]  # units 1-3 were cancelled in flight, not awaited


# --- whole runs over HTTP ----------------------------------------------------------------

POLICY_BAD = {  # per-policy answers of two conversations; the third is answered by the oracle
    "priv-101": '{"analysis": "a ' + ESCAPE + ' b", "violated_rules": [1, 1e38]}',
    "spec-102": '{"analysis": "x", "violated_rules": [' + str(BIG_LITERAL) + "]}",
}
DSPY_POLICY_BAD = {
    "priv-101": f"[[ ## violated_rules ## ]]\n[1, {BIG_LITERAL}]\n\n[[ ## completed ## ]]",
    "spec-102": f"[[ ## violated_rules ## ]]\n[{BIG_LITERAL}]\n\n[[ ## completed ## ]]",
}
RULE_BAD = {
    "priv-101": '{"verdict": "violated", "reason": "a ' + ESCAPE + ' b"}',
    "spec-102": '{"verdict": [[1]], "reason": 1e38}',
}
DSPY_RULE_BAD = {
    "priv-101": f"[[ ## reasoning ## ]]\na {SURROGATE} b\n\n[[ ## verdict ## ]]\nviolated\n\n[[ ## completed ## ]]",
    "spec-102": f"[[ ## reasoning ## ]]\n{SURROGATE}\n\n[[ ## verdict ## ]]\n[1e38]\n\n[[ ## completed ## ]]",
}


def conversation_of(body: dict[str, Any]) -> str | None:
    text = "\n".join(message_text(m.get("content")) for m in body.get("messages") or [])
    return next((c.id[:-3] for c in SAMPLE if c.conversation in text), None)


@pytest.fixture
def bad_server() -> Iterator[Callable[[dict[str, str]], StubServer]]:
    """A stub answering two conversations with the given bad answers, the rest as the oracle."""
    servers: list[StubServer] = []

    def start(bad: dict[str, str]) -> StubServer:
        def responder(body: dict[str, Any]) -> str:
            answer = bad.get(conversation_of(body) or "")
            return answer if answer is not None else stub._fake_reply(body)

        stub = StubServer(responder=responder, latency_s=0.02).start()
        teach_fake(SimpleNamespace(engine=stub.fake), SAMPLE)
        servers.append(stub)
        return stub

    yield start
    for server in servers:
        server.stop()


def run_cli(server: StubServer, out: Path, *args: str, run_id: str = "bad") -> Any:
    return CliRunner().invoke(
        app,
        ["eval", "--lm", "openai/stub", "--api-base", server.url, "--output-dir", str(out), "--run-id", run_id,
         "-q", "--limit", "9", "--concurrency", "8", *args],
    )  # fmt: skip


@pytest.mark.network
@pytest.mark.timeout(180)
@pytest.mark.usefixtures("isolated_run")
@pytest.mark.parametrize(
    ("program", "transport", "bad"),
    [("official", "auto", POLICY_BAD), ("official", "dspy", POLICY_BAD), ("dspy", "auto", DSPY_POLICY_BAD)],
)
def test_per_policy_runs_record_every_answer_and_resume(
    bad_server: Callable[[dict[str, str]], StubServer],
    tmp_path: Path,
    program: str,
    transport: str,
    bad: dict[str, str],
) -> None:
    server = bad_server(bad)
    args = ("--program", program, "--transport", transport, "--parser", "robust")
    result = run_cli(server, tmp_path, *args)
    assert result.exit_code == 0, (result.output, result.exception)
    records = {r["id"]: r for r in iter_records(tmp_path / "results_bad_stub.jsonl")}
    assert sorted(records) == sorted(c.id for c in SAMPLE)
    assert not any(r.get("error_class") for r in records.values()), records
    for case in SAMPLE:
        record = records[case.id]
        if case.id.startswith("priv-101"):
            assert (record["violated_rules"], record["parse_status"]) == ([1], "recovered")
            assert record["dropped_rules"] == ([HUGE] if program == "official" else [BIG_LITERAL])
            if program == "official":
                assert record["analysis"] == f"a {REPLACED} b"
        elif case.id.startswith("spec-102"):
            assert (record["violated_rules"], record["parse_status"], record["parse_failed"]) == (
                None,
                "failed",
                True,
            )
        else:
            assert record["violated_rules"] == sorted(case.ground_truth_violations)
    sent = len(server.chat_requests)
    again = run_cli(server, tmp_path, *args, "--resume", "--retry-errors")
    assert again.exit_code == 0, (again.output, again.exception)
    assert len(server.chat_requests) == sent  # nothing errored, so nothing is sent again
    score = CliRunner().invoke(app, ["score", str(tmp_path / "results_bad_stub.jsonl")])
    assert score.exit_code == 0, (score.output, score.exception)
    # Another run replays the bad answers from the response cache: the same records, no crash.
    replay = run_cli(server, tmp_path, *args, run_id="replay")
    assert replay.exit_code == 0, (replay.output, replay.exception)
    assert len(server.chat_requests) == sent
    replayed = {r["id"]: r["violated_rules"] for r in iter_records(tmp_path / "results_replay_stub.jsonl")}
    assert replayed == {case_id: r["violated_rules"] for case_id, r in records.items()}


@pytest.mark.network
@pytest.mark.timeout(180)
@pytest.mark.usefixtures("isolated_run")
@pytest.mark.parametrize(
    ("program", "transport", "bad"),
    [("official", "auto", RULE_BAD), ("official", "dspy", RULE_BAD), ("dspy-cot", "auto", DSPY_RULE_BAD)],
)
def test_per_rule_runs_record_every_judgment_and_resume(
    bad_server: Callable[[dict[str, str]], StubServer],
    tmp_path: Path,
    program: str,
    transport: str,
    bad: dict[str, str],
) -> None:
    from sp_dspy._protocol import build_targets

    server = bad_server(bad)
    args = ("--program", program, "--transport", transport, "--parser", "robust", "--protocol", "per-rule")
    result = run_cli(server, tmp_path, *args)
    assert result.exit_code == 0, (result.output, result.exception)
    records = list(iter_records(tmp_path / "per_rule_bad_stub.jsonl"))
    expected = {(c.id, t.rule) for c in SAMPLE for t in build_targets(c)}
    assert {(r["cid"], r["rule"]) for r in records} == expected and len(records) == len(expected)
    assert not any(r.get("error_class") for r in records)
    for record in records:
        if record["cid"].startswith("priv-101"):
            assert (record["pred"], record["parse_status"]) == (True, "clean")
            assert record["reason"] == f"a {REPLACED} b"
        elif record["cid"].startswith("spec-102"):
            assert (record["pred"], record["parse_status"]) == (None, "failed")
    sent = len(server.chat_requests)
    again = run_cli(server, tmp_path, *args, "--resume")
    assert again.exit_code == 0, (again.output, again.exception)
    assert len(server.chat_requests) == sent


#: Envelopes with no answer in them, one per conversation (a server's bug, not a refusal).
MALFORMED: dict[str, dict[str, Any]] = {
    "priv-101": {"choices": []},
    "spec-102": {"choices": None},
    "frau-103": {"choices": [{"index": 0, "finish_reason": "stop"}]},
}
WHAT_IS_MISSING = {
    "priv-101": "no choices",
    "spec-102": "no choices",
    "frau-103": "no message in its first choice",
}


@pytest.mark.network
@pytest.mark.timeout(180)
@pytest.mark.usefixtures("isolated_run")
@pytest.mark.parametrize("protocol", ["per-policy", "per-rule"])
def test_a_malformed_envelope_is_a_failed_call_that_retry_errors_sends_again(
    tmp_path: Path, protocol: str
) -> None:
    broken = [True]

    def responder(body: dict[str, Any]) -> str | dict[str, Any]:
        conversation = conversation_of(body) or ""
        if broken[0]:
            return {"id": "x", "object": "chat.completion", "model": "stub", **MALFORMED[conversation]}
        return stub._fake_reply(body)

    stub = StubServer(responder=responder).start()
    teach_fake(SimpleNamespace(engine=stub.fake), SAMPLE)
    args = ("--protocol", protocol, "--num-retries", "0")
    results = tmp_path / ("results_bad_stub.jsonl" if protocol == "per-policy" else "per_rule_bad_stub.jsonl")
    try:
        failed = run_cli(stub, tmp_path, *args)
        assert failed.exit_code == 3, (failed.output, failed.exception)  # units failed: not a clean run
        records = list(iter_records(results))
        assert records and all(r["parse_status"] == "error" for r in records)
        if (
            protocol == "per-policy"
        ):  # not a refusal (an error judgment is refused=true, as the reference counts)
            assert not any(r["refused"] for r in records)
        for record in records:
            missing = WHAT_IS_MISSING[(record.get("id") or record["cid"])[:-3]]
            assert record["error_class"] == "server_error"
            assert record["error"] == f"LMServerError: [openai/stub] malformed response: {missing}"
        broken[0] = False  # the server is fixed
        again = run_cli(stub, tmp_path, *args, "--resume", "--retry-errors")
        assert again.exit_code == 0, (again.output, again.exception)
        latest = {(r.get("id") or r["cid"], r.get("rule")): r for r in iter_records(results)}
        assert len(latest) == len(records) and not any(r.get("error_class") for r in latest.values())
    finally:
        stub.stop()


@pytest.mark.network
@pytest.mark.timeout(60)
@pytest.mark.usefixtures("isolated_run")
def test_an_answer_in_content_parts_is_read_as_its_text(tmp_path: Path) -> None:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        text = stub._fake_reply(body)
        parts = [{"type": "text", "text": text[:5]}, {"type": "text", "text": text[5:]}]
        message = {"role": "assistant", "content": parts}
        return {
            "id": "x",
            "model": "stub",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }

    stub = StubServer(responder=responder).start()
    teach_fake(SimpleNamespace(engine=stub.fake), SAMPLE)
    try:
        result = run_cli(stub, tmp_path)
    finally:
        stub.stop()
    assert result.exit_code == 0, (result.output, result.exception)
    records = {r["id"]: r for r in iter_records(tmp_path / "results_bad_stub.jsonl")}
    assert {case_id: r["parse_status"] for case_id, r in records.items()} == {c.id: "clean" for c in SAMPLE}
    assert {case_id: r["violated_rules"] for case_id, r in records.items()} == {
        c.id: sorted(c.ground_truth_violations) for c in SAMPLE
    }


@pytest.mark.network
@pytest.mark.timeout(180)
@pytest.mark.usefixtures("isolated_run")
def test_a_record_that_cannot_be_written_does_not_close_the_pool_under_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def responder(body: dict[str, Any]) -> str:
        if body["messages"] != per_policy_messages(SAMPLE[0]):
            time.sleep(0.5)  # the other cases are still in flight when the first one is stored
        return stub._fake_reply(body)

    append = JsonlStore.append
    failed: list[str] = []

    def full_disk_once(self: JsonlStore, record: PolicyRecord) -> None:
        if not failed:
            failed.append(record.id)
            raise OSError(28, "No space left on device")
        append(self, record)

    monkeypatch.setattr(JsonlStore, "append", full_disk_once)
    with StubServer(responder=responder) as stub:
        teach_fake(SimpleNamespace(engine=stub.fake), SAMPLE)
        result = run_cli(stub, tmp_path, "--concurrency", "4")
    assert isinstance(result.exception, OSError) and failed == [SAMPLE[0].id]
    records = list(iter_records(tmp_path / "results_bad_stub.jsonl"))
    # The three cases in flight with the failed one finished normally; none was cut off.
    assert len(records) == 3 and not any(r.get("error_class") for r in records), records
    assert all(r["parse_status"] == "clean" for r in records)


# --- Guard and sp-dspy check ---------------------------------------------------------------

POLICY = "Rules:\n1. The chatbot must not swear.\n2. The chatbot must be polite."
MESSAGES = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "go away, damn you"}]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"violated_rules": [1, 99, 1e38]}', ([1], "recovered", [99, HUGE])),
        ('{"violated_rules": [7]}', (None, "failed", [7])),
        ('{"violated_rules": [2, 1]}', ([1, 2], "clean", [])),
        ('{"violated_rules": [[1, 2], [3]]}', (None, "failed", [])),
    ],
)
def test_guard_check_never_returns_a_number_outside_the_policy(
    reply: str, expected: tuple[list[int] | None, str, list[int]]
) -> None:
    guard = Guard.load("official", lm="fake/empty")
    guard.lm.engine.enqueue(reply)  # type: ignore[union-attr]
    verdict = guard.check(POLICY, MESSAGES)
    assert (verdict.violated_rules, verdict.status, verdict.dropped_rules) == expected


def test_dspy_guard_drops_numbers_outside_the_policy() -> None:
    guard = Guard.load("dspy", lm="fake/empty")
    guard.lm.engine.enqueue(f"[[ ## violated_rules ## ]]\n[2, {BIG_LITERAL}]\n\n[[ ## completed ## ]]")  # type: ignore[union-attr]
    verdict = guard.check(POLICY, MESSAGES)
    assert (verdict.violated_rules, verdict.status, verdict.dropped_rules) == (
        [2],
        "recovered",
        [BIG_LITERAL],
    )


@pytest.mark.network
@pytest.mark.timeout(120)
@pytest.mark.usefixtures("isolated_run")
@pytest.mark.parametrize("json_output", [False, True])
def test_sp_dspy_check_prints_a_verdict_for_a_bad_answer(tmp_path: Path, json_output: bool) -> None:
    reply = '{"analysis": "bad ' + ESCAPE + ' text", "violated_rules": [1, 1e38]}'
    (tmp_path / "policy.txt").write_text(POLICY, encoding="utf-8")
    (tmp_path / "chat.json").write_text(json.dumps(MESSAGES), encoding="utf-8")
    with StubServer(responder=lambda body: reply) as server:
        result = CliRunner().invoke(
            app,
            ["check", "--lm", "openai/stub", "--api-base", server.url, "--policy", str(tmp_path / "policy.txt"),
             "--conversation", str(tmp_path / "chat.json"), "--no-cache", *(["--json"] if json_output else [])],
        )  # fmt: skip
    assert result.exit_code == 1, (result.output, result.exception)  # a rule is violated
    if json_output:
        verdict = json.loads(result.stdout)
        assert (verdict["violated_rules"], verdict["status"], verdict["dropped_rules"]) == (
            [1],
            "recovered",
            [HUGE],
        )
        assert verdict["reasoning"] == f"bad {REPLACED} text"
    else:
        assert "dropped (not rules of this policy): " + str(HUGE) in result.output
        assert f"bad {REPLACED} text" in result.output


# --- an empty conversation ------------------------------------------------------------------


@pytest.mark.usefixtures("isolated_run")
@pytest.mark.parametrize("conversation", ["", "  \n "])
def test_eval_on_an_empty_conversation_is_a_one_line_error(tmp_path: Path, conversation: str) -> None:
    dataset = write_dataset(
        tmp_path / "d.json", [raw_case("ok-001-l0"), raw_case(extra={"conversation": conversation})]
    )
    result = CliRunner().invoke(app, ["eval", "--lm", "fake", "--dataset", str(dataset), "-q"])
    assert isinstance(result.exception, DataError), (result.output, result.exception)
    text = dataset.read_text(encoding="utf-8")
    line = text.count("\n", 0, text.find('"test-001-l0"')) + 1
    assert [str(result.exception)] == [
        f"{dataset}:{line}: case test-001-l0: field conversation: empty (there is nothing to check)"
    ]
