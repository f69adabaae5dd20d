"""A run killed mid-way (SIGKILL, SIGTERM or Ctrl-C) resumes with no loss, no duplicate, no repeat.

``sp-dspy eval`` runs in a child process against a loopback stub server started
here, slow enough (latency per request) that the kill lands mid-run. The stub
records every request body, so the test can count what reached the "model" in
both runs. The response cache is off (``--no-cache``): resume alone must avoid
repeats.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
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
from tests._stub_server import StubServer

pytestmark = [pytest.mark.usefixtures("restore_dspy_cache"), pytest.mark.network, pytest.mark.timeout(180)]

SAMPLE = load_benchmark().cases
CLI = [sys.executable, "-c", "from sp_dspy.cli import main; main()"]
Unit = tuple[str, int]  # (case id, rule); rule 0 for a per-policy case


@pytest.fixture
def server() -> Iterator[StubServer]:
    with oracle_stub(latency_s=0.15) as stub:
        yield stub


def eval_args(server: StubServer, out: Path, *args: str) -> list[str]:
    return [
        *CLI, "eval", "--lm", "openai/stub", "--api-base", server.url, "--output-dir", str(out),
        "--no-cache", "-q", *args,
    ]  # fmt: skip


def start(server: StubServer, out: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        eval_args(server, out, *args), cwd=out, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def resume(server: StubServer, out: Path, *args: str) -> str:
    """``--resume`` in this process (the stub counts its requests the same way); returns the output."""
    command = eval_args(server, out, "--resume", *args)
    result = CliRunner().invoke(app, command[len(CLI) :])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def complete_lines(path: Path) -> int:
    if not path.exists():
        return 0
    return path.read_bytes().count(b"\n")


def wait_for_records(process: subprocess.Popen[str], path: Path, count: int, timeout: float = 90) -> None:
    """Block until ``count`` records are in ``path``; the run must still be going then."""
    deadline = time.monotonic() + timeout
    while complete_lines(path) < count:
        if process.poll() is not None:
            _, err = process.communicate()
            pytest.fail(f"eval ended (rc {process.returncode}) before {count} records: {err[-2000:]}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"no {count} records in {path} after {timeout} s")
        time.sleep(0.01)


def units_of(cases: list[Case], protocol: str) -> dict[Unit, str]:
    """Every unit of work of a run and the request messages it sends (as a JSON key)."""
    if protocol == "per-policy":
        return {(case.id, 0): key(per_policy_messages(case)) for case in cases}
    return {
        (case.id, target.rule): key(per_rule_messages(case, target))
        for case in cases
        for target in build_targets(case)
    }


def key(messages: Any) -> str:
    return json.dumps(messages, ensure_ascii=False, sort_keys=True)


def request_keys(server: StubServer, start: int = 0) -> Counter[str]:
    return Counter(key((r.body or {}).get("messages")) for r in server.chat_requests[start:])


def read_units(path: Path, protocol: str) -> list[Unit]:
    """Units recorded in a results file; every line must be a complete JSON record."""
    data = path.read_bytes()
    assert data.endswith(b"\n"), "results file ends in a torn line"
    records = [json.loads(line) for line in data.decode("utf-8").splitlines()]
    if protocol == "per-policy":
        return [(r["id"], 0) for r in records]
    return [(r["cid"], r["rule"]) for r in records]


def check_resumed_run(
    server: StubServer,
    path: Path,
    protocol: str,
    units: dict[Unit, str],
    done_first: set[Unit],
    first_requests: int,
) -> None:
    """No unit lost or duplicated; the second run sent exactly the unfinished units, once each."""
    recorded = read_units(path, protocol)
    assert Counter(recorded) == Counter(dict.fromkeys(units, 1))
    unfinished = Counter(units[unit] for unit in units if unit not in done_first)
    assert request_keys(server, first_requests) == unfinished
    # The first run sent each finished unit (several units may share one message).
    finished = Counter(units[unit] for unit in done_first)
    first = request_keys(server)
    first.subtract(request_keys(server, first_requests))
    assert all(first[message] >= count for message, count in finished.items())


@pytest.mark.parametrize(
    ("protocol", "args", "kill_after"),
    [
        ("per-policy", ("--limit", "12", "--concurrency", "2"), 3),
        ("per-rule", ("--protocol", "per-rule", "--limit", "2", "--concurrency", "3"), 6),
    ],
)
def test_sigkill_mid_run_then_resume_finishes_without_loss_or_repeat(
    server: StubServer, tmp_path: Path, protocol: str, args: tuple[str, ...], kill_after: int
) -> None:
    prefix = "results" if protocol == "per-policy" else "per_rule"
    path = tmp_path / f"{prefix}_k1_stub.jsonl"
    units = units_of(SAMPLE[:2] if protocol == "per-rule" else SAMPLE[:12], protocol)

    process = start(server, tmp_path, "--run-id", "k1", *args)
    wait_for_records(process, path, kill_after)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL
    first_requests = len(server.chat_requests)
    done_first = set(read_units(path, protocol))
    assert kill_after <= len(done_first) < len(units), "the kill must land mid-run"
    # The manifest written as the run started: scored on the run's own cases, not the whole sample.
    assert json.loads((tmp_path / "manifest_k1.json").read_text(encoding="utf-8"))["runs"]["stub"][
        "status"
    ] == ("running")
    scored = CliRunner().invoke(app, ["score", str(path), "--json", "-", "--n-boot", "0"])
    assert scored.exit_code == 0, scored.output
    cases = 2 if protocol == "per-rule" else 12
    assert json.loads(scored.stdout)["ALL"]["total"] == cases
    # A process killed inside a write leaves half a line; resume must cut it off.
    with path.open("ab") as handle:
        handle.write(b'{"kind": "judgment", "cid": "torn", "id": "torn", "rul')

    resumed = resume(server, tmp_path, "--run-id", "k1", *args)
    assert f"resumed: {len(done_first)} unit(s) already done" in resumed
    check_resumed_run(server, path, protocol, units, done_first, first_requests)
    manifest = json.loads((tmp_path / "manifest_k1.json").read_text(encoding="utf-8"))
    run = manifest["runs"]["stub"]
    assert (run["status"], run["units_total"], run["units_skipped_on_resume"]) == (
        "complete",
        len(units),
        len(done_first),
    )
    assert run["totals"]["records"] == len(units)


@pytest.mark.parametrize(("stop", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_or_sigterm_stops_cleanly_with_its_exit_status_and_resume_completes(
    server: StubServer, tmp_path: Path, stop: signal.Signals, status: int
) -> None:
    """SIGTERM (``kill``) takes Ctrl-C's path: whole records kept, manifest ``interrupted``,
    one line naming the resume; only the exit status tells them apart."""
    args = ("--limit", "12", "--concurrency", "2")
    path = tmp_path / "results_c1_stub.jsonl"
    units = units_of(SAMPLE[:12], "per-policy")

    process = start(server, tmp_path, "--run-id", "c1", *args)
    wait_for_records(process, path, 3)
    process.send_signal(stop)
    _, err = process.communicate(timeout=60)
    assert process.returncode == status, err[-2000:]
    assert "interrupted" in err and "--resume --run-id c1" in err
    first_requests = len(server.chat_requests)
    done_first = set(read_units(path, "per-policy"))
    assert 3 <= len(done_first) < len(units)
    manifest = json.loads((tmp_path / "manifest_c1.json").read_text(encoding="utf-8"))
    assert manifest["runs"]["stub"]["status"] == "interrupted"
    assert manifest["runs"]["stub"]["totals"]["records"] == len(done_first)

    # --resume without --run-id continues the newest run of this model.
    resume(server, tmp_path, *args)
    check_resumed_run(server, path, "per-policy", units, done_first, first_requests)
    manifest = json.loads((tmp_path / "manifest_c1.json").read_text(encoding="utf-8"))
    assert manifest["runs"]["stub"]["status"] == "complete"


def test_resume_without_run_id_skips_a_model_whose_name_ends_like_ours(tmp_path: Path) -> None:
    from sp_dspy._runner._paths import resolve_run

    out = tmp_path / "results"
    out.mkdir()
    ours = out / "results_r1_mini.jsonl"
    ours.write_text('{"id": "a-l0", "run_id": "r1"}\n', encoding="utf-8")
    other = out / "results_r2_gpt_mini.jsonl"  # model "gpt_mini", run "r2"
    other.write_text('{"id": "a-l0", "run_id": "r2"}\n', encoding="utf-8")
    os.utime(ours, (1, 1))  # the other model's file is newer
    assert resolve_run(out, "mini", None, resume=True, protocol="per-policy").run_id == "r1"
