"""A provider's rate limits never fail a run: the endpoint's controller and the rate-limit wait.

Unit tests drive :class:`RateController` with a fake clock; the others run sp-dspy's HTTP engine,
``eval``, ``check --batch`` and the guard service against the loopback stub with request limits
(``tests._rate_limits``): every call answered, none failed, and a rate limit that outlasts
``--rate-limit-timeout`` is the usual ``rate_limit`` error record with the resume hint.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from sp_dspy import load_benchmark
from sp_dspy._lm import LMConfig, classify_error, closing_transports, make_lm
from sp_dspy._lm._direct import client_of
from sp_dspy._lm._limit_hints import LimitHints, Window, parse_hints
from sp_dspy._lm._rate import CUT, START, RateController, Ticket, controller_for, limit_bound_s
from sp_dspy._lm._rate_wait import RateLimitedCall, RateLimitTimeout, backoff_s, is_rate_limited
from sp_dspy._runner._fake_gold import teach_fake
from sp_dspy.cli import main
from tests._rate_limits import RateLimits
from tests._results import iter_records
from tests._stub_server import StubServer
from tests.test_cli_check import POLICY, batch, make_app
from tests.test_guard_service import MESSAGES, _answer, _service, call, running

NO_HINTS = LimitHints()
SAMPLE = load_benchmark().cases


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def controller(**settings: Any) -> tuple[RateController, Clock]:
    clock = Clock()
    return RateController("test", clock=clock, **settings), clock


async def admitted(control: RateController, callers: int) -> tuple[list[Ticket], int]:
    """Start ``callers`` acquisitions; the tickets granted at once and the number left waiting."""
    tasks = [asyncio.create_task(control.acquire()) for _ in range(callers)]
    await asyncio.sleep(0)
    done = [task.result() for task in tasks if task.done()]
    for task in tasks:
        if not task.done():
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return done, callers - len(done)


def test_it_starts_moderate_and_quadruples_each_round_trip_while_callers_wait() -> None:
    control, clock = controller()

    async def rounds() -> list[int]:
        pending = {asyncio.create_task(control.acquire()) for _ in range(64)}
        seen = []
        while pending:  # one round trip: every admitted call answers
            for _ in range(3):
                await asyncio.sleep(0)
            done = {task for task in pending if task.done()}
            seen.append(len(done))
            pending -= done
            clock.now += 0.2
            for task in done:
                control.answered(task.result(), NO_HINTS)
                control.release()
        return seen

    assert asyncio.run(rounds()) == [START, 64 - START]  # 16, then 16 + 3 x 16 = 64


def test_it_does_not_grow_past_what_its_callers_use() -> None:
    control, _ = controller()

    async def one_caller() -> None:
        for _ in range(50):
            async with control.slot() as ticket:
                control.answered(ticket, NO_HINTS)

    asyncio.run(one_caller())
    assert control.limit == START


def test_one_episode_cuts_once_and_a_later_one_again() -> None:
    control, clock = controller(limit=20)
    sent_together = [Ticket(clock.now) for _ in range(12)]
    clock.now += 0.2
    for ticket in sent_together:  # twelve 429s of calls sent before the cut: one episode
        control.rate_limited(ticket)
    assert control.limit == int(20 * CUT) and control.stats.episodes == 1
    assert control.stats.rate_limited == 12
    clock.now += 0.1
    control.rate_limited(Ticket(clock.now))  # sent after the cut: a new episode
    assert control.limit == int(int(20 * CUT) * CUT) and control.stats.episodes == 2


def test_after_an_episode_it_grows_by_one_per_round_trip() -> None:
    control, clock = controller(limit=10)
    control.rate_limited(Ticket(clock.now))
    limit = control.limit
    control.in_flight = 100  # callers wait: the limit is what holds them back
    for _ in range(int(limit)):
        control.answered(Ticket(clock.now), NO_HINTS)
    assert control.limit == limit + 1


def test_remaining_headers_slow_it_down_before_a_429() -> None:
    control, clock = controller(limit=10)
    control.in_flight = 100
    low = parse_hints({"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "5"})
    control.answered(Ticket(clock.now), low)
    assert control.limit == 10  # little left: no growth
    empty = parse_hints(
        {
            "x-ratelimit-limit-requests": "10",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "200ms",
        }
    )
    control.answered(Ticket(clock.now), empty)
    assert control.limit == 9 and control.stats.episodes == 0  # stepped down, no 429 met
    assert control._hold_left() == pytest.approx(0.02)  # one request's share of the 200 ms reset
    control.answered(Ticket(clock.now - 1), empty)  # sent before that step: no second step
    assert control.limit == 9


def test_pinned_it_admits_every_caller_and_never_changes() -> None:
    control, clock = controller(adaptive=False)
    tickets, waiting = asyncio.run(admitted(control, 64))
    assert (len(tickets), waiting) == (64, 0)
    control.rate_limited(Ticket(clock.now))
    control.answered(Ticket(clock.now), NO_HINTS)
    assert control.limit == START and control.concurrency == 0
    assert control.stats.rate_limited == 1 and control.stats.episodes == 0


def test_a_cancelled_waiter_gives_its_place_back() -> None:
    control, _ = controller(limit=1)

    async def scenario() -> int:
        first = await control.acquire()
        waiting = asyncio.create_task(control.acquire())
        await asyncio.sleep(0)
        control.release()  # handed to the waiter...
        waiting.cancel()  # ...which is cancelled before it runs
        await asyncio.gather(waiting, return_exceptions=True)
        await asyncio.sleep(0)
        del first
        return control.in_flight

    assert asyncio.run(scenario()) == 0


def test_callers_on_other_threads_and_event_loops_share_the_limit() -> None:
    """Compile's threads call synchronously, each call on its own event loop: one limit for all."""
    control = RateController("threads", limit=2)
    most = 0
    lock = threading.Lock()

    async def one_call() -> None:
        nonlocal most
        async with control.slot():
            with lock:
                most = max(most, control.in_flight)
            await asyncio.sleep(0.02)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda _: asyncio.run(one_call()), range(24)))
    assert most == 2 and control.in_flight == 0 and not control._waiters


def test_one_controller_per_endpoint_and_model() -> None:
    one = controller_for("http://h/v1/chat/completions", "m")
    assert controller_for("http://h/v1/chat/completions", "m") is one
    assert controller_for("http://h/v1/chat/completions", "other") is not one


def test_hints_are_read_in_openai_and_anthropic_spelling() -> None:
    openai = parse_hints(
        {
            "x-ratelimit-limit-requests": "60",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "1m0.5s",
            "x-ratelimit-limit-tokens": "1000",
            "x-ratelimit-remaining-tokens": "500",
            "x-ratelimit-reset-tokens": "120ms",
            "retry-after": "2",
            "retry-after-ms": "1500",
        }
    )
    assert openai.windows == (Window(60, 0, 60.5), Window(1000, 500, 0.12))
    assert openai.retry_after_s == 1.5  # retry-after-ms is the exact one
    assert openai.wait_s() == 60.5  # the later of the hints: the exhausted window's reset
    assert openai.remaining_share() == 0.0
    anthropic = parse_hints(
        {"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "10"}
    )
    assert anthropic.remaining_share() == 0.2 and anthropic.wait_s() is None
    assert parse_hints({"x-ratelimit-reset-requests": "soon"}).windows == (Window(None, None, None),)


def test_the_wait_is_the_later_of_the_hint_and_a_jittered_backoff() -> None:
    assert backoff_s(0, None, rng=lambda: 0.0) == 0.125
    assert backoff_s(2, None, rng=lambda: 1.0) == 1.0
    assert backoff_s(0, 3.0, rng=lambda: 1.0) == 3.0
    assert backoff_s(30, None, rng=lambda: 1.0) == 20.0  # capped
    assert is_rate_limited(429, b"") and is_rate_limited(529, b"")
    assert is_rate_limited(503, b'{"error": {"type": "overloaded_error"}}') and not is_rate_limited(
        503, b"down"
    )


def test_a_call_past_its_rate_limit_budget_raises() -> None:
    control, clock = controller()
    waits = RateLimitedCall(control, 0.1, clock=clock)
    with pytest.raises(RateLimitTimeout, match=r"rate-limit timeout of 0.1 s \(--rate-limit-timeout\)"):
        asyncio.run(waits.wait(429, "slow down", LimitHints(retry_after_s=1.0)))
    assert classify_error(RuntimeError("wrapped")) == "other"
    try:
        raise RuntimeError("wrapped") from RateLimitTimeout("x")
    except RuntimeError as exc:
        assert classify_error(exc) == "rate_limit"


def test_dry_run_bound_is_the_slower_limit() -> None:
    assert limit_bound_s(600, 10_000, rpm=60, tpm=None) == 600
    assert limit_bound_s(600, 10_000_000, rpm=600, tpm=1_000_000) == 600
    assert limit_bound_s(10, 10, rpm=None, tpm=None) is None


@pytest.mark.network
@pytest.mark.timeout(60)
def test_calls_under_a_request_limit_are_all_answered_without_spending_retries() -> None:
    limits = RateLimits(requests_per_s=40, burst=4)
    with StubServer(latency_s=0.05, limits=limits) as server:
        lm = make_lm(LMConfig(model="openai/stub", api_base=server.url, cache=False, num_retries=0))

        async def calls() -> list[Any]:
            messages = [[{"role": "user", "content": f"case {n}"}] for n in range(40)]
            return await asyncio.gather(*(lm.acall(messages=m) for m in messages))

        answers = asyncio.run(closing_transports(calls()))
    assert len(answers) == 40 and limits.admitted == 40
    client = client_of(lm)
    assert client is not None and client.rate.stats.rate_limited == limits.rejected


@pytest.mark.network
@pytest.mark.timeout(60)
def test_an_episode_longer_than_the_timeout_is_an_error_record_with_the_resume_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = StubServer(fail_plan=["429:1"] * 3)
    teach_fake(SimpleNamespace(engine=server.fake), SAMPLE)
    args = ["--limit", "3", "--concurrency", "1", "--no-cache", "-q", "--rate-limit-timeout", "0.5"]
    args += ["--output-dir", str(tmp_path), "--run-id", "r"]
    with server:
        monkeypatch.setattr(
            sys, "argv", ["sp-dspy", "eval", "--lm", "openai/stub", "--api-base", server.url, *args]
        )
        with pytest.raises(SystemExit) as exited:
            main()
        assert len(server.chat_requests) == 3  # one 429 each: its Retry-After (1 s) passes 0.5 s
    err = capsys.readouterr().err
    assert exited.value.code == 3
    assert "rate_limit: 3 (first:" in err and "--rate-limit-timeout" in err
    assert "re-send them with the same command plus --resume --retry-errors --run-id r" in err
    manifest = json.loads(next(tmp_path.rglob("manifest*.json")).read_text())
    (run,) = manifest["runs"].values()
    assert run["rate_limited"] == 3 and run["rate_limit_wait_s"] == 0
    records = list(iter_records(Path(run["results_file"])))
    assert [r["error_class"] for r in records] == ["rate_limit"] * 3


@pytest.mark.network
@pytest.mark.timeout(60)
def test_check_batch_under_a_rate_limit_loses_no_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.txt").write_text(POLICY, encoding="utf-8")
    batch(tmp_path, *[{"id": str(n), "messages": MESSAGES} for n in range(24)])
    limits = RateLimits(requests_per_s=30, burst=3, retry_after_ms=True)
    with StubServer(latency_s=0.05, limits=limits) as server:
        result = CliRunner().invoke(
            make_app(),
            ["check", "--policy", "policy.txt", "--batch", "in.jsonl", "--lm", "openai/stub", "--api-base",
             server.url, "--concurrency", "16", "--no-cache", "--num-retries", "0"],
        )  # fmt: skip
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["id"] for line in lines] == [str(n) for n in range(24)]
    assert all(line.get("error") is None and line["status"] == "clean" for line in lines), lines
    assert limits.rejected > 0  # the limit was met, and waited out


@pytest.mark.network
@pytest.mark.timeout(60)
def test_the_service_under_a_rate_limit_loses_no_check() -> None:
    limits = RateLimits(requests_per_s=30, burst=3)
    checks = [{"policy": POLICY, "messages": MESSAGES, "id": str(n)} for n in range(20)]
    with (
        StubServer(latency_s=0.05, responder=_answer, limits=limits) as stub,
        running(_service(stub.url)) as url,
    ):
        status, _, body = call(url, "POST", "/v1/check/batch", {"checks": checks})
    assert status == 200
    answers = body["answers"]
    assert [a["id"] for a in answers] == [str(n) for n in range(20)]
    assert all(a.get("error") is None and a["violated_rules"] == [1] for a in answers), answers
    assert limits.rejected > 0


def test_dry_run_estimates_the_wall_time_from_the_models_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "models.yaml").write_text(
        "models:\n  limited:\n    model: openai/stub\n    api_base: http://127.0.0.1:9/v1\n    rpm: 2\n",
        encoding="utf-8",
    )
    args = ["eval", "--lm", "limited", "--config", str(tmp_path / "models.yaml"), "--limit", "3", "--dry-run"]
    monkeypatch.setattr(sys, "argv", ["sp-dspy", *args, "--tpm", "1000000"])
    with pytest.raises(SystemExit) as exited:
        main()
    out = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert exited.value.code in (0, None), out
    assert (
        "wall time at the model's rate limits (2 requests/min, 1,000,000 tokens/min): at least 1.5 min" in out
    )


def test_progress_shows_the_concurrency_and_this_runs_rate_limit_waits() -> None:
    from rich.console import Console

    from sp_dspy._lm._rate import RateWatch
    from sp_dspy._runner._progress import ProgressView

    control, clock = controller(limit=12)
    control.rate_limited(Ticket(clock.now - 10))  # before the run: not its own
    watch = RateWatch(control)
    control.rate_limited(Ticket(clock.now))
    control.waited(1.25)
    view = ProgressView(10, label="m", console=Console(file=None), enabled=False, rate=watch)
    twice = int(int(12 * CUT) * CUT)  # two episodes: the one before the run and its own
    assert view.describe().endswith(f"errors 0 | concurrency {twice} | 429s 1, waited 1.2s")
    assert watch.stats().rate_limited == 1 and watch.stats().wait_s == 1.25
    assert RateWatch(None).describe() == ""
