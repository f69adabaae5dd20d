"""``eval --batch`` against a provider that misbehaves, and a client killed at each point: every
unit recorded exactly once, no request paid twice, no key in any file or printed line, no traceback.

The scenarios live in ``tests._batch_faults`` (``benchmarks/bench_batch_faults.py`` runs the same
ones against any checkout for the issue's before/after matrix). The book's torn line and the
reading of a batch's output line by line are tested here on their own too.
"""

from __future__ import annotations

import errno
import json
import os
import traceback
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sp_dspy._batch import AnswerBook, BatchAnswer
from sp_dspy._batch._output import read_output
from sp_dspy._batch._wire import Intent
from sp_dspy._errors import OutputError, SpDspyError
from sp_dspy.cli import app
from tests._batch_faults import ASKED_AGAIN, FAULTS, KILLS, Ran, run_scenario

pytestmark = [pytest.mark.usefixtures("isolated_run"), pytest.mark.network, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[1]
WIRES = ("openai", "anthropic")

#: The first run's exit and a phrase of what it printed (every later run exits 0).
FIRST = {
    "auth-401-echoes-key": (2, "failed with auth"),
    "poll-500-echoes-key": (2, "polling batch batch-1 kept failing with server_error"),
    "poll-500-twice": (0, ""),
    "answer-echoes-key": (0, ""),
    "line-not-json": (0, "1 line(s) of its output unreadable (line 1: not JSON"),
    "line-json-list": (0, "1 line(s) of its output unreadable (line 1: a JSON list, not an object)"),
    "output-truncated": (0, "line(s) of its output unreadable (line 3: not JSON (cut short?))"),
    "line-unknown-id": (0, "is not one of this batch's requests"),
    "duplicate-id-differs": (0, "answered twice with different answers; the first is kept"),
    "output-404": (2, "kept failing with not_found"),
    "output-500-twice": (0, ""),
    "chat-only-server": (2, "has no batch API sp-dspy can use"),
    "nothing-listening": (2, "failed with unreachable"),
    "torn-book": (2, "expired: 2 of 3 request(s) unanswered (1 answer(s) kept)"),
    "create-500-after-creating": (2, "the provider may have created it: --resume --run-id faults asks the provider"),
    "create-500-no-list-route": (2, "the provider may have created it"),
}  # fmt: skip


def in_process(args: list[str], env: dict[str, str], cwd: Path) -> Ran:
    """The CLI in this process; an error is the line the console script prints, a traceback any other."""
    result = CliRunner().invoke(app, args, env=env)
    error = result.exception
    if isinstance(error, SpDspyError):
        return Ran(error.exit_code, f"{result.output}\nerror: {error}", False)
    if error is not None and not isinstance(error, SystemExit):
        return Ran(1, result.output + "".join(traceback.format_exception(error)), True)
    return Ran(result.exit_code, result.output, False)


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("scenario", FAULTS)
def test_a_misbehaving_provider_loses_no_unit_pays_nothing_twice_and_leaks_no_key(
    scenario: str, wire: str, tmp_path: Path
) -> None:
    outcome = run_scenario(scenario, wire, tmp_path, in_process, ROOT)
    code, phrase = FIRST[scenario]
    (first_code, _), *later = outcome.runs
    assert (first_code, outcome.tracebacks, outcome.keys_found) == (code, 0, []), outcome.row()
    assert phrase in " ".join(outcome.printed.split()), outcome.row()
    if scenario in ("chat-only-server", "nothing-listening"):
        assert not later
        return
    if scenario == "create-500-no-list-route":  # refused until the provider can be asked
        assert later[0][0] == 2 and "no batch of the provider can be matched" in later[0][1], outcome.row()
        later = later[1:]
    assert all(code == 0 for code, _ in later), outcome.row()
    assert (outcome.units_lost, outcome.paid_twice) == (0, ASKED_AGAIN.get(scenario, 0)), outcome.row()


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("scenario", KILLS)
def test_a_run_killed_at_each_point_resumes_with_every_unit_once_and_nothing_paid_twice(
    scenario: str, wire: str, tmp_path: Path
) -> None:
    if scenario == "kill-upload" and wire == "anthropic":
        pytest.skip("no upload on Anthropic's wire: the create call carries the requests")
    outcome = run_scenario(scenario, wire, tmp_path, in_process, ROOT)
    assert (outcome.units_lost, outcome.paid_twice, outcome.keys_found, outcome.tracebacks) == (
        0,
        0,
        [],
        0,
    ), outcome.row()
    assert outcome.runs[-1][0] == 0, outcome.row()
    if scenario in ("kill-poll", "kill-create"):
        assert outcome.runs[1][0] == 2 and "resume it with --batch to collect them" in outcome.runs[1][1]
    if scenario == "kill-create-no-list-route":
        assert outcome.runs[1][0] == 2 and "--resubmit" in outcome.runs[1][1], outcome.row()


def test_resubmit_sends_a_batch_that_cannot_be_matched_and_says_so(tmp_path: Path) -> None:
    from tests._batch_faults import batch_server, environment, eval_args

    with batch_server() as server:
        server.create_errors, server.list_route = 1, False
        args = eval_args(server.url, tmp_path / "out", "openai")
        env = environment("openai", tmp_path / "home")
        alone = in_process([*args, "--resubmit"], env, tmp_path)
        assert alone.code == 2 and "--resubmit: only with --batch --resume" in alone.printed
        assert in_process(args, env, tmp_path).code == 2
        refused = in_process([*args, "--resume"], env, tmp_path)
        assert refused.code == 2 and "continue with --resume --run-id faults --resubmit" in refused.printed
        assert len(server.created) == 1
        sent = in_process([*args, "--resume", "--resubmit"], env, tmp_path)
        assert sent.code == 0, sent.printed
        assert "--resubmit: a batch of 3 request(s) being created at" in sent.printed
        assert [len(batch.lines) for batch in server.created] == [3, 3]  # paid twice, as asked


# ----- the book ----------------------------------------------------------------------------------
def answer(cid: str, text: str = "ok") -> BatchAnswer:
    return BatchAnswer(cid, body={"choices": [{"message": {"content": text}}]})


def test_the_book_cuts_a_torn_last_line_and_never_appends_after_one(tmp_path: Path) -> None:
    book = AnswerBook(tmp_path)
    book.add_answers([answer("a"), answer("b")])
    intent = book.note_intent(["c"])
    with (tmp_path / "answers.jsonl").open("ab") as handle:  # a kill, or a full disk, mid-line
        handle.write(b'{"custom_id": "c", "body": {"choi')
    with (tmp_path / "batches.jsonl").open("ab") as handle:
        handle.write(b'{"event": "submitted", "batch": "batch-')
    again = AnswerBook(tmp_path)
    assert set(again.answers) == {"a", "b"} and set(again.intents) == {intent.fingerprint}
    again.add_answers([answer("c")])
    for _ in range(2):  # every later reading finds whole lines only
        lines = (tmp_path / "answers.jsonl").read_bytes().splitlines()
        assert [json.loads(line)["custom_id"] for line in lines] == ["a", "b", "c"]
        assert set(AnswerBook(tmp_path).answers) == {"a", "b", "c"}


def test_a_full_disk_while_answers_are_collected_leaves_no_torn_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = AnswerBook(tmp_path)
    book.add_answers([answer("a")])
    real_write = os.write

    def half_then_full(fd: int, data: Any) -> int:  # the disk fills in the middle of the line
        real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(OutputError, match="No space left on device"):
        book.add_answers([answer("b", "x" * 1000)])
    monkeypatch.undo()
    assert (tmp_path / "answers.jsonl").read_bytes().endswith(b"\n")
    resumed = AnswerBook(tmp_path)
    resumed.add_answers([answer("b")])
    assert set(AnswerBook(tmp_path).answers) == {"a", "b"}


def test_the_book_stores_answers_masked_and_keeps_the_first_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-masked-in-the-book-0123")
    book = AnswerBook(tmp_path)
    book.add_answers([answer("a", "echo sk-proj-masked-in-the-book-0123"), answer("a", "second")])
    book.add_answers([answer("a", "later")])
    assert b"sk-proj-masked" not in (tmp_path / "answers.jsonl").read_bytes()
    assert AnswerBook(tmp_path).answers["a"].body == {"choices": [{"message": {"content": "echo ***"}}]}


def test_an_intent_logged_before_a_create_stays_open_until_its_batch_is_settled(tmp_path: Path) -> None:
    from sp_dspy._batch import refuse_open_batches

    book = AnswerBook(tmp_path)
    intent = book.note_intent(["a", "b"], "file-1")
    assert AnswerBook(tmp_path).intents == {intent.fingerprint: intent}
    with pytest.raises(SpDspyError, match="one being created"):
        refuse_open_batches(tmp_path)
    book.note_submitted("batch-1", intent)
    assert AnswerBook(tmp_path).intents == {} and AnswerBook(tmp_path).in_flight() == {"a", "b"}
    other = book.note_intent(["c"])
    book.note_dropped(other, "the provider lists no such batch")
    assert AnswerBook(tmp_path).in_flight() == {"a", "b"}
    assert isinstance(other, Intent) and other.at is not None


def test_a_log_written_before_intents_reads_its_uploaded_file_as_one(tmp_path: Path) -> None:
    """An earlier sp-dspy logged an upload, not an intent: --resume finds the batch by that file."""
    uploaded = {"event": "uploaded", "file": "file-1", "custom_ids": ["a", "b"]}
    (tmp_path / "batches.jsonl").write_text(json.dumps(uploaded) + "\n", encoding="utf-8")
    (intent,) = AnswerBook(tmp_path).intents.values()
    assert (intent.custom_ids, intent.file, intent.at) == (("a", "b"), "file-1", None)
    submitted = {"event": "submitted", "batch": "batch-1", "file": "file-1", "custom_ids": ["a", "b"]}
    with (tmp_path / "batches.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(submitted) + "\n")
    book = AnswerBook(tmp_path)
    assert book.intents == {} and [b.batch_id for b in book.open_batches()] == ["batch-1"]


def test_a_vllm_run_batch_started_for_an_intent_is_found_by_its_input_file(tmp_path: Path) -> None:
    from sp_dspy._batch._vllm import VllmRunBatch

    wire = VllmRunBatch.__new__(VllmRunBatch)  # no client: find reads the run's directory only
    wire.directory = tmp_path
    lines = [json.dumps({"custom_id": cid}) for cid in ("a", "b")]
    (tmp_path / "vllm-1.in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    intent = Intent("f", ("a", "b"), at=0.0)
    assert wire.find(intent, set()) == []  # its input written, its child never started: nothing runs
    (tmp_path / "vllm-1.pid").write_text("1", encoding="utf-8")
    assert wire.find(intent, set()) == ["vllm-1"]
    assert wire.find(intent, {"vllm-1"}) == [] and wire.find(Intent("g", ("a",), at=0.0), set()) == []


# ----- a batch's output, line by line -----------------------------------------------------------
def openai_line(cid: str, text: str = "ok") -> bytes:
    body = {"choices": [{"message": {"content": text}}]}
    return json.dumps({"custom_id": cid, "response": {"status_code": 200, "body": body}}).encode()


def test_each_output_line_is_read_on_its_own() -> None:
    from sp_dspy._batch._openai import answer_of

    lines = [
        openai_line("a"),
        b"{not json",
        b"[1, 2]",
        json.dumps(
            {"custom_id": "z-of-another-batch", "response": {"status_code": 200, "body": {}}}
        ).encode(),
        json.dumps({"custom_id": "b"}).encode(),  # neither response nor error
        openai_line("c"),
        openai_line("a"),  # the same answer again: no warning
        openai_line("c", "different"),
        openai_line("d")[:20],  # truncated
    ]
    output = read_output(lines, {"a", "b", "c", "d"}, answer_of)
    assert [a.custom_id for a in output.answers] == ["a", "c"]
    assert output.answers[1] == BatchAnswer("c", body={"choices": [{"message": {"content": "ok"}}]})
    assert [bad.split(":")[0] for bad in output.bad] == ["line 2", "line 3", "line 4", "line 5", "line 9"]
    assert output.conflicts == ["c"]
    warnings = output.lines("batch-9")
    assert warnings[0].startswith(
        "batch batch-9: 5 line(s) of its output unreadable (line 2: not JSON (cut short?)"
    )
    assert warnings[1] == "batch batch-9: request c answered twice with different answers; the first is kept"


def test_an_anthropic_output_line_of_an_unknown_result_type_is_a_bad_line() -> None:
    from sp_dspy._batch._anthropic import AnthropicBatches

    lines = [
        json.dumps({"custom_id": "a", "result": {"type": "succeeded", "message": {"content": []}}}).encode(),
        json.dumps({"custom_id": "b", "result": {"type": "mystery"}}).encode(),
        json.dumps({"custom_id": "c", "result": {"type": "expired"}}).encode(),
    ]
    output = read_output(lines, {"a", "b", "c"}, AnthropicBatches.answer_of)
    assert [a.custom_id for a in output.answers] == ["a"]
    assert output.bad == ["line 2: a result of type 'mystery'"]
