"""The one ledger: no call starts that a cap cannot cover, at any concurrency, in eval, the guard
service and an experiment, against a loopback model whose every answer carries 4,000 completion tokens.

Each test counts what was spent from the stub's own answers (its requests and the usage it
reported), not from sp-dspy's accounting, and checks it against the cap.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sp_dspy._budget import BudgetCaps, BudgetExceeded, Ledger, Reservation, Spend, ledger_line
from sp_dspy._lm import LMConfig
from sp_dspy._lm._fake import count_tokens
from sp_dspy._lm._fake_prompts import message_text
from sp_dspy._pricing import pricing_for
from sp_dspy._usage import Usage
from sp_dspy.cli import app
from tests._stub_server import StubServer, chat_completion
from tests.test_guard_service import MESSAGES, POLICY, _answer, _service, call, check, running

pytestmark = [pytest.mark.timeout(300)]

COMPLETION = 4_000  # every answer's completion tokens, as the stub reports them
MODEL = "openai/gpt-4o-mini"  # priced: 0.15 USD per million prompt tokens, 0.60 per million completion tokens
PRICES = pricing_for(LMConfig(model=MODEL), 0)


def large_usage(reply: Any) -> Any:
    """A stub responder whose answers say ``reply(body)`` and report 4,000 completion tokens."""

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        prompt = sum(count_tokens(message_text(m.get("content"))) for m in body.get("messages") or [])
        return chat_completion(reply(body), prompt_tokens=prompt, completion_tokens=COMPLETION)

    return respond


def stub_spend(stub: StubServer) -> Spend:
    """What the stub's answers cost: its chat requests, each at the usage it reported."""
    calls = prompt = completion = 0
    for request in stub.chat_requests:
        calls += 1
        prompt += sum(count_tokens(message_text(m.get("content"))) for m in (request.body or {})["messages"])
        completion += COMPLETION
    usd = PRICES.usd(prompt, completion)
    usage = Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion, cost=usd
    )
    return Spend(calls=calls, usage=usage)


# -- the ledger itself ------------------------------------------------------------------------


def test_concurrent_tasks_never_pass_a_cap_and_settle_at_what_they_used() -> None:
    ledger = Ledger(BudgetCaps(max_tokens=10_000, max_usd=1.0))
    admitted: list[int] = []

    async def call(number: int) -> None:
        try:
            with ledger.admitted("task", Reservation(1, 100, 1_000, 0.05)) as admission:
                await asyncio.sleep(0.01)
                admitted.append(number)
                admission.used = Spend(calls=1, usage=Usage(prompt_tokens=100, completion_tokens=150))
        except BudgetExceeded:
            pass

    async def main() -> None:
        await asyncio.gather(*(call(n) for n in range(64)))

    asyncio.run(main())
    assert len(admitted) == 10  # 10 worst cases of 1,000 tokens fit at once; the other 54 never started
    assert ledger.total().tokens == 2_500 and ledger.reserved() == Reservation(0, 0, 0, 0.0)
    assert ledger.refused_by == "max_tokens" and ledger.refusals == 54


def test_async_calls_wait_for_the_calls_in_flight_and_are_refused_only_when_they_cannot_fit() -> None:
    ledger = Ledger(BudgetCaps(max_tokens=10_000))
    admitted: list[int] = []
    refused: list[int] = []

    async def call(number: int) -> None:
        try:
            async with ledger.aadmitted("task", Reservation(1, 100, 1_000, 0.0)) as admission:
                await asyncio.sleep(0.005)
                admitted.append(number)
                admission.used = Spend(calls=1, usage=Usage(prompt_tokens=100, completion_tokens=150))
        except BudgetExceeded:
            refused.append(number)

    async def main() -> None:
        await asyncio.gather(*(call(n) for n in range(64)))

    asyncio.run(main())
    # 36 calls of 250 tokens spent 9,000; the 37th fits its 1,000 beside them; the 38th never can.
    assert len(admitted) == 37 and len(refused) == 27 and ledger.total().tokens == 9_250
    assert ledger.refused_by == "max_tokens" and ledger.reserved().calls == 0


def test_a_step_is_admitted_by_its_own_caps_and_the_jobs() -> None:
    job = Ledger(BudgetCaps(max_calls=5), earlier=Spend(calls=2))
    step = Ledger(BudgetCaps(max_tokens=100), parent=job)
    tickets = [step.admit("task", Reservation(1, 10, 20, 0.0)) for _ in range(3)]
    assert job.left() == {"max_calls": 0} and step.left() == {"max_tokens": 40, "max_calls": 0}
    with pytest.raises(BudgetExceeded, match="max_calls"):
        step.admit("task", Reservation(1, 10, 20, 0.0))
    assert step.refused_by == "max_calls" and step.exhausted  # the job's cap stopped the step
    for ticket in tickets:
        step.settle(ticket, Spend(calls=1))
    assert job.total().calls == 5 and step.total().calls == 3
    assert ledger_line(step) == "tokens 0+0 reserved/100"
    assert ledger_line(Ledger(parent=job)) == "calls 5+0 reserved/5"  # a step without caps shows the job's


def test_a_call_that_raises_releases_its_reservation() -> None:
    ledger = Ledger(BudgetCaps(max_calls=1))
    with pytest.raises(RuntimeError), ledger.admitted("task", Reservation(1, 1, 1, 0.0)):
        raise RuntimeError("the LM failed")
    assert ledger.reserved().calls == 0 and ledger.total().calls == 0
    ledger.admit("task", Reservation(1, 1, 1, 0.0))  # nothing was spent: the call cap still admits one


# -- the guard service, 32 clients at once ------------------------------------------------------


def service_config(url: str) -> LMConfig:
    return LMConfig(model=MODEL, api_base=url, cache=False, num_retries=0, timeout=10, max_tokens=COMPLETION)


@pytest.fixture
def large_stub() -> Iterator[StubServer]:
    with StubServer(latency_s=0.05, responder=large_usage(_answer)) as stub:
        yield stub


@pytest.mark.network
@pytest.mark.parametrize(
    ("caps", "cap"),
    [
        (BudgetCaps(max_usd=0.01), "max_usd"),
        (BudgetCaps(max_tokens=12_000), "max_tokens"),
        (BudgetCaps(max_calls=5), "max_calls"),
    ],
)
def test_the_service_with_32_clients_never_passes_a_cap(
    large_stub: StubServer, caps: BudgetCaps, cap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tests.test_guard_service._config", service_config)
    service = _service(large_stub.url, caps=caps, max_in_flight=64)
    with running(service) as url, ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(lambda n: check(url, {"policy": POLICY, "messages": MESSAGES}), range(32)))
        metrics = call(url, "GET", "/metrics")[2]
    statuses = [answer[0] for answer in answers]
    spend = stub_spend(large_stub)
    assert 0 < statuses.count(200) == spend.calls < 32 and statuses.count(503) == 32 - spend.calls
    limit = getattr(caps, cap)
    used = {"max_usd": spend.usd, "max_tokens": spend.tokens, "max_calls": spend.calls}[cap]
    assert used is not None and used <= limit  # before the one ledger: $0.078 of $0.01, 6,612 of 5,000 tokens
    assert 'sp_dspy_guard_budget_reserved{kind="calls"} 0' in metrics
    assert f'sp_dspy_guard_budget_spent{{kind="calls"}} {spend.calls}' in metrics


# -- eval at concurrency 64 ---------------------------------------------------------------------


@pytest.mark.network
@pytest.mark.usefixtures("isolated_run")
@pytest.mark.parametrize(
    ("flag", "value"), [("--max-usd", "0.02"), ("--max-total-tokens", "40000"), ("--max-calls", "7")]
)
def test_eval_at_concurrency_64_never_passes_a_cap(tmp_path: Path, flag: str, value: str) -> None:
    with StubServer(latency_s=0.05) as stub:
        stub.responder = large_usage(lambda body: stub.fake.reply(body["messages"]))
        result = CliRunner().invoke(
            app,
            ["eval", "--lm", MODEL, "--api-base", stub.url, "--output-dir", str(tmp_path), "--protocol",
             "per-rule", "--concurrency", "64", "--max-tokens", str(COMPLETION), "--no-cache", "--run-id", "c",
             "--num-retries", "0", flag, value],
        )  # fmt: skip
        spend = stub_spend(stub)
    assert result.exit_code == 3, (result.output, result.exception)
    assert f"stopped at {flag}" in result.output
    used = {"--max-usd": spend.usd, "--max-total-tokens": spend.tokens, "--max-calls": spend.calls}[flag]
    assert spend.calls > 0 and used is not None and used <= float(value)
    lines = (tmp_path / "per_rule_c_gpt-4o-mini.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == spend.calls  # every paid answer is recorded: none refused after it was sent


# -- an experiment: compiles and test evaluations under one cap ---------------------------------


def recorded_usd(out: Path) -> float:
    """The experiment's own accounting of what it spent: every compile's manifest (a capped one too)
    and every unit its test evaluations recorded."""
    from sp_dspy._ablate._seeds import results_spend

    manifests = (
        json.loads(path.read_text(encoding="utf-8")) for path in out.glob("artifacts/*/manifest.json")
    )
    compiles = sum(manifest["usage"]["usd"] for manifest in manifests)
    return compiles + sum(results_spend(path).usd or 0.0 for path in out.glob("results/*.jsonl"))


@pytest.mark.network
@pytest.mark.usefixtures("restore_dspy_cache")
@pytest.mark.parametrize(
    "cap", [0.05, 0.42]
)  # stopped in the compile ($0.37 in all); in the test evaluations
def test_the_experiments_total_never_passes_its_cap(tmp_path: Path, cap: float) -> None:
    from sp_dspy._ablate import build_experiment, run_experiment

    with StubServer() as stub:
        stub.responder = large_usage(lambda body: stub.fake.reply(body["messages"]))
        lm = {
            "model": MODEL,
            "api_base": stub.url,
            "cache": False,
            "num_retries": 0,
            "max_tokens": COMPLETION,
        }
        plan = build_experiment(
            {"lm": lm, "optimizers": "bootstrap", "seeds": "0", "ratios": [0.25, 0.25, 0.5], "n_boot": 20,
             "caps": {"max_usd": cap}, "concurrency": 2}
        )  # fmt: skip
        outcome = run_experiment(plan, tmp_path / "exp", show_progress=False)
        spend = stub_spend(stub)
    assert outcome.capped_by == "max_usd" and outcome.summary is None
    assert spend.usd is not None and 0 < spend.usd <= cap  # the model's side: what was paid
    assert recorded_usd(tmp_path / "exp") == pytest.approx(spend.usd, abs=1e-5)  # and its own accounting
    if cap == 0.42:
        assert outcome.compiles[0].status == "compiled" and outcome.ablation is not None


@pytest.mark.network
def test_the_readiness_probe_is_a_call_the_caps_admit(
    large_stub: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tests.test_guard_service._config", service_config)
    with running(_service(large_stub.url, caps=BudgetCaps(max_calls=2))) as url:
        ready = call(url, "GET", "/readyz")
        first, second = check(url), check(url)
        metrics = call(url, "GET", "/metrics")[2]
    assert (ready[0], first[0], second[0]) == (200, 200, 503)  # the probe took one of the two calls
    assert len(large_stub.chat_requests) == 2 and 'sp_dspy_guard_budget_spent{kind="calls"} 2' in metrics
