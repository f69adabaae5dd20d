"""Fault scenarios of ``eval --batch`` against :class:`~tests._batch_server.BatchServer`: each runs
the CLI on a provider that misbehaves one way (or a client killed at one point), then on the healed
provider with ``--resume``, and measures what the issue counts: units lost, requests paid twice,
keys found in any file under the output and cache directories or in any printed line, tracebacks.

The tests (``tests/test_batch_faults.py``) run them in-process, and in a child process where one is
killed; ``benchmarks/bench_batch_faults.py`` runs all of them in child processes against any checkout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sp_dspy import load_benchmark
from sp_dspy._runner._fake_gold import teach_fake
from tests._batch_server import BatchServer
from tests._stub_server import StubServer

#: Keys of the shape providers issue, set in the environment of every scenario.
KEYS = {"openai": "sk-proj-Zq8vN3kR7tW2xY5mB9cD4fG6", "anthropic": "sk-ant-api03-Hx7Lp2Qw9Er4Ty6Ui1Op"}
LMS = {"openai": "openai/stub", "anthropic": "anthropic/stub"}
LIMIT = 3
#: Faults of the provider: one run meets it, the healed provider answers the ``--resume``.
FAULTS = (
    "auth-401-echoes-key", "poll-500-echoes-key", "poll-500-twice", "answer-echoes-key",
    "line-not-json", "line-json-list", "output-truncated", "line-unknown-id", "duplicate-id-differs",
    "output-404", "output-500-twice", "chat-only-server", "nothing-listening", "torn-book",
    "create-500-after-creating", "create-500-no-list-route",
)  # fmt: skip
#: Where a child process is killed (SIGKILL), then resumed on the healthy provider.
KILLS = (
    "kill-upload",
    "kill-create",
    "kill-poll",
    "kill-download",
    "kill-collect",
    "kill-create-no-list-route",
)
#: Requests a scenario asks again by design: a request whose output line was unreadable.
ASKED_AGAIN = {"line-not-json": 1, "line-json-list": 1, "output-truncated": 1, "line-unknown-id": 1}


@dataclass
class Ran:
    """One CLI invocation: exit status, everything it printed, whether a traceback was among it."""

    code: int
    printed: str
    traceback: bool


Runner = Callable[[list[str], dict[str, str], Path], Ran]


@dataclass
class Outcome:
    """What a scenario cost: the issue's three figures, tracebacks, and each run's exit and last line."""

    scenario: str
    wire: str
    units_lost: int = 0
    paid_twice: int = 0
    keys_found: list[str] = field(default_factory=list)
    tracebacks: int = 0
    runs: list[tuple[int, str]] = field(default_factory=list)
    printed: str = ""

    def row(self) -> str:
        said = " | ".join(f"exit {code}: {line[:150]}" for code, line in self.runs)
        return (
            f"{self.scenario:28} {self.wire:9} lost={self.units_lost} paid_twice={self.paid_twice} "
            f"keys={len(self.keys_found)} tracebacks={self.tracebacks}  [{said}]"
        )


def child_runner(code_root: Path) -> Runner:
    """Runs the CLI of the checkout at ``code_root`` in a child process (as a user runs it)."""

    def run(args: list[str], env: dict[str, str], cwd: Path) -> Ran:
        process = spawn(code_root, args, env, cwd)
        printed, _ = process.communicate(timeout=300)
        return Ran(process.returncode, printed, "Traceback (most recent call last)" in printed)

    return run


def spawn(code_root: Path, args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    full = {**os.environ, **env, "PYTHONPATH": str(code_root), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    command = [sys.executable, "-c", "from sp_dspy.cli import main; main()", *args]
    return subprocess.Popen(
        command, cwd=cwd, env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def batch_server(**options: Any) -> BatchServer:
    server = BatchServer(**options)
    teach_fake(SimpleNamespace(engine=server.fake), load_benchmark().cases)
    return server


def environment(wire: str, home: Path) -> dict[str, str]:
    """The scenario's key, its own cache directories, quick polls and a short patience."""
    return {
        "OPENAI_API_KEY" if wire == "openai" else "ANTHROPIC_API_KEY": KEYS[wire],
        "SP_DSPY_CACHE_DIR": str(home / "cache"),
        "DSPY_CACHEDIR": str(home / "dspy"),
        "SP_DSPY_BATCH_POLL_S": "0.01",
        "SP_DSPY_BATCH_PATIENCE_S": "0.5",
    }


def eval_args(url: str, out: Path, wire: str, *extra: str) -> list[str]:
    return ["eval", "--lm", LMS[wire], "--api-base", url, "--output-dir", str(out), "-q", "--limit", str(LIMIT),
            "--batch", "--run-id", "faults", *extra]  # fmt: skip


def keys_in(roots: list[Path], printed: str, key: str) -> list[str]:
    """Every file under ``roots`` (and ``printed``) holding ``key`` or a 12-character part of it."""
    parts = {key[i : i + 12].encode() for i in range(len(key) - 11)}
    found = [
        str(path)
        for root in roots
        if root.exists()
        for path in sorted(root.rglob("*"))
        if path.is_file() and any(part in path.read_bytes() for part in parts)
    ]
    return found + (["printed output"] if any(part.decode() in printed for part in parts) else [])


def units_recorded(out: Path) -> tuple[int, int]:
    """(units answered without error, records in all) of the run's results file."""
    lines = [
        json.loads(text)
        for path in out.glob("results_*.jsonl")
        for text in path.read_text(encoding="utf-8").splitlines()
        if text.strip().startswith("{")
    ]
    latest = {(line.get("id"), line.get("rule")): line for line in lines}
    return sum(1 for line in latest.values() if not line.get("error_class")), len(lines)


def _kill_at(process: subprocess.Popen[str], ready: Callable[[], bool]) -> Ran:
    deadline = time.monotonic() + 120
    while not ready() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    printed, _ = process.communicate(timeout=60)
    return Ran(-9, printed, "Traceback (most recent call last)" in printed)


def _setup(scenario: str, server: BatchServer) -> None:
    """Make the provider misbehave as ``scenario`` says (before the first run)."""
    if scenario == "auth-401-echoes-key":
        server.reject_key = True
    elif scenario == "poll-500-echoes-key":
        server.poll_errors = 10**9
    elif scenario == "poll-500-twice":
        server.poll_errors = 2
    elif scenario == "answer-echoes-key":
        server.echo_key = True
    elif scenario.startswith(("line-", "output-truncated", "duplicate")):
        server.output_fault = {"line-not-json": "not-json", "line-json-list": "list", "output-truncated": "truncated",
                               "line-unknown-id": "unknown-id", "duplicate-id-differs": "duplicate"}[scenario]  # fmt: skip
    elif scenario == "output-404":
        server.download_errors, server.download_status = 10**9, 404
    elif scenario == "output-500-twice":
        server.download_errors = 2
    elif scenario.startswith("create-500"):
        server.create_errors = 1
    elif scenario == "torn-book":
        server.expire_after = 1  # the first run keeps 1 answer; its book is then torn
    elif scenario in ("kill-create", "kill-create-no-list-route", "kill-upload", "kill-download"):
        server.hold[scenario.removeprefix("kill-").removesuffix("-no-list-route")] = 60.0
    elif scenario == "kill-poll":
        server.polls_before_end = 10**9


KILL_STAGE = {"kill-upload": "upload", "kill-create": "create", "kill-create-no-list-route": "create",
              "kill-poll": "poll", "kill-download": "download", "kill-collect": "downloaded"}  # fmt: skip


def run_scenario(scenario: str, wire: str, tmp: Path, run: Runner, code_root: Path) -> Outcome:
    """Run ``scenario`` on ``wire`` in ``tmp``; kills always run in a child of ``code_root``."""
    home, out = tmp / "home", tmp / "out"
    env = environment(wire, home)
    outcome = Outcome(scenario, wire)
    ran: list[Ran] = []
    if scenario in ("chat-only-server", "nothing-listening"):
        with StubServer() as stub:
            url = stub.url if scenario == "chat-only-server" else "http://127.0.0.1:9/v1"
            ran.append(run(eval_args(url, out, wire), env, tmp))
        return _measure(outcome, ran, out, home, None, env, expect_units=False)
    with batch_server() as server:
        _setup(scenario, server)
        args = eval_args(server.url, out, wire)
        if scenario in KILL_STAGE:
            process = spawn(code_root, args, env, tmp)
            ran.append(_kill_at(process, server.reached[KILL_STAGE[scenario]].is_set))
        else:
            ran.append(run(args, env, tmp))
        if scenario == "torn-book":
            for book in out.glob("*.batch/*.jsonl"):
                with book.open("ab") as handle:
                    handle.write(b'{"custom_id": "torn-by-a-full-dis')
        if scenario in ("kill-poll", "kill-create"):  # open: one at a time would pay twice
            ran.append(run([arg for arg in [*args, "--resume"] if arg != "--batch"], env, tmp))
        server.heal()
        if scenario.endswith("no-list-route"):
            server.list_route = False
            ran.append(run([*args, "--resume"], env, tmp))  # refused: nothing can be matched
            server.list_route = True
        if ran[-1].code != 0 or scenario in ("torn-book", "kill-create-no-list-route"):
            ran.append(run([*args, "--resume"], env, tmp))
        if scenario == "torn-book":
            ran.append(run([*args, "--resume"], env, tmp))  # a second resume reads the repaired book
        return _measure(outcome, ran, out, home, server, env, expect_units=True)


def _measure(
    outcome: Outcome, ran: list[Ran], out: Path, home: Path, server: BatchServer | None, env: dict[str, str],
    *, expect_units: bool,
) -> Outcome:  # fmt: skip
    key = KEYS[outcome.wire]
    printed = "\n".join(r.printed for r in ran)
    outcome.printed = printed
    outcome.keys_found = keys_in([out, home], printed, key)
    outcome.tracebacks = sum(1 for r in ran if r.traceback)
    outcome.runs = [(r.code, (r.printed.strip().splitlines() or [""])[-1]) for r in ran]
    if expect_units:
        answered, _ = units_recorded(out)
        outcome.units_lost = LIMIT - answered
    if server is not None:
        outcome.paid_twice = server.paid_twice()
    return outcome
