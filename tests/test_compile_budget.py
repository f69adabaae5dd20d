"""Budget caps: every call asks first, none is made past a cap, a capped compile still saves."""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import Any

import pytest

from sp_dspy._budget import BudgetExceeded, Ledger, Reservation, Spend
from sp_dspy._compile import BudgetCaps, CompileConfig, CompileStatus, compile_guard
from sp_dspy._compile._budgeted_lm import BudgetedLM
from sp_dspy._errors import ConfigError
from sp_dspy._lm import LMConfig, fake_engine, make_lm
from sp_dspy._usage import Usage
from sp_dspy.programs import load_program
from tests._compile_support import PROPOSAL_REPLY, REFLECTION_REPLY, scripted_prompt_lm
from tests.test_compile_optimizers import INSTRUCTED, TINY, engine_calls, run_compile


def test_reservations_refuse_past_the_call_cap() -> None:
    budget = Ledger(BudgetCaps(max_calls=3))
    tickets = [budget.admit("task", Reservation(1, 10, 20, 0.0)) for _ in range(3)]
    with pytest.raises(BudgetExceeded, match="max_calls"):
        budget.admit("task", Reservation(1, 10, 20, 0.0))
    for ticket in tickets:
        budget.settle(ticket, Spend(calls=1, usage=Usage(prompt_tokens=10, completion_tokens=5)))
    assert budget.total().calls == 3 and budget.refusals == 1 and budget.refused_by == "max_calls"


def test_hold_back_reserves_budget_for_later() -> None:
    budget = Ledger(BudgetCaps(max_calls=5))
    with budget.hold_back(calls=3):
        budget.settle(budget.admit("task", Reservation(2, 0, 0, 0.0)), Spend(calls=2))
        with pytest.raises(BudgetExceeded):
            budget.admit("task", Reservation(1, 0, 0, 0.0))
    budget.settle(budget.admit("task", Reservation(3, 0, 0, 0.0)), Spend(calls=3))  # the held-back share
    assert budget.total().calls == 5


def test_concurrent_reservations_never_exceed_the_cap() -> None:
    budget = Ledger(BudgetCaps(max_calls=100))
    granted: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(40):
            try:
                ticket = budget.admit("task", Reservation(1, 1, 1, 0.0))
            except BudgetExceeded:
                continue
            with lock:
                granted.append(1)
            budget.settle(ticket, Spend(calls=1))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(granted) == budget.total().calls == 100


def test_token_and_dollar_caps_use_estimates_before_the_call() -> None:
    budget = Ledger(BudgetCaps(max_tokens=100, max_usd=1.0))
    budget.settle(
        budget.admit("task", Reservation(1, 40, 60, 0.5)),
        Spend(calls=1, usage=Usage(prompt_tokens=40, completion_tokens=20)),
    )
    with pytest.raises(BudgetExceeded, match="max_tokens"):
        budget.admit("task", Reservation(1, 30, 50, 0.1))  # 60 spent + 50 estimated > 100
    budget.admit("task", Reservation(1, 10, 40, 0.1))


def test_budgeted_lm_counts_completions_refuses_without_calling_and_shares_the_budget() -> None:
    lm = make_lm(LMConfig(model="fake/oracle"))
    budget = Ledger(BudgetCaps(max_calls=4))
    guarded = BudgetedLM(lm, budget, "task")
    guarded("Is anything violated?", n=3)
    assert budget.total().calls == 3 == len(fake_engine(lm).calls)  # type: ignore[union-attr]
    twin = copy.deepcopy(guarded)
    twin("Again?")
    with pytest.raises(BudgetExceeded):
        guarded.copy(temperature=1.0)("Once more?")
    assert len(fake_engine(lm).calls) == 4 and budget.roles["task"].calls == 4  # type: ignore[union-attr]
    assert budget.roles["task"].usage.prompt_tokens > 0


def test_a_copy_of_the_budgeted_lm_calls_with_its_own_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIMBA samples on ``lm.copy(rollout_id=r, temperature=1.0)``: the call carries them."""
    lm = make_lm(LMConfig(model="fake/oracle"))
    guarded = BudgetedLM(lm, Ledger(BudgetCaps()), "task")
    seen: list[float | None] = []
    engine = fake_engine(lm)
    assert engine is not None
    complete = engine.complete

    def spy(request: Any) -> Any:
        seen.append(request.config.temperature)
        return complete(request)

    monkeypatch.setattr(engine, "complete", spy)
    guarded("Plain?")
    guarded.copy(rollout_id=1, temperature=1.0)("Sampled?")
    assert seen == [None, 1.0] and guarded.kwargs.get("temperature") is None


@pytest.mark.parametrize("optimizer", list(TINY))
def test_no_optimizer_makes_a_call_past_the_cap(optimizer: str, tmp_path: Path) -> None:
    cap = 10
    outcome, lms = run_compile(optimizer, tmp_path / "art", caps=BudgetCaps(max_calls=cap))
    manifest = outcome.manifest
    assert manifest is not None
    assert engine_calls(lms) == manifest.usage["calls"] <= cap
    assert manifest.budget_limited and manifest.budget.refused_by == "max_calls"
    assert manifest.budget.refusals == 1  # the optimizer stopped at once, not after refusing call after call
    load_program(tmp_path / "art")  # the best program so far was saved and loads


def test_a_capped_compile_keeps_the_best_candidate_found_before_the_cap(tmp_path: Path) -> None:
    # 3 dev calls, 1 proposal, 3 + 1 calls of candidate scoring, 3 dev calls held back for the end.
    outcome, _ = run_compile("copro", tmp_path / "art", caps=BudgetCaps(max_calls=11))
    manifest = outcome.manifest
    assert manifest is not None and manifest.budget_limited
    assert manifest.dev.selected == "recorded" and manifest.dev.after.score == 100.0
    assert "Check every rule" in (tmp_path / "art" / "prompt.md").read_text()
    assert "Budget-limited" in (tmp_path / "art" / "prompt.md").read_text()


def test_a_capped_gepa_keeps_the_proposal_it_found_before_the_cap(tmp_path: Path) -> None:
    """GEPA's proposal scored 100 on its minibatch, then the cap stopped GEPA: the proposal is kept."""
    config = CompileConfig(
        optimizer="gepa", out=tmp_path / "art", caps=BudgetCaps(max_calls=30),
        overrides={"max_metric_calls": 120, "num_threads": 2},
    )  # fmt: skip
    helper = make_lm(INSTRUCTED)
    status = CompileStatus()
    outcome = compile_guard(
        config, INSTRUCTED, lms={"task": make_lm(INSTRUCTED), "reflection": helper}, status=status
    )
    assert status.tried() == (2, 100.0)  # GEPA's traced minibatch scores reach the recorder
    manifest = outcome.manifest
    assert manifest is not None and manifest.budget_limited
    assert (manifest.dev.selected, manifest.dev.after.score) == ("recorded", 100.0)
    assert "+Check every rule" in (tmp_path / "art" / "prompt.md").read_text()


def test_token_cap_is_never_exceeded(tmp_path: Path) -> None:
    outcome, _ = run_compile("copro", tmp_path / "art", caps=BudgetCaps(max_tokens=20_000))
    manifest = outcome.manifest
    assert manifest is not None and manifest.budget.refused_by == "max_tokens"
    assert manifest.usage["total_tokens"] <= 20_000


def test_dollar_cap_needs_a_priced_model(tmp_path: Path) -> None:
    config = CompileConfig(optimizer="copro", out=tmp_path / "art", caps=BudgetCaps(max_usd=1.0))
    with pytest.raises(ConfigError, match="--max-usd: no price for the task LM fake/instructed"):
        compile_guard(config, INSTRUCTED)


def test_a_cap_too_small_for_dev_still_writes_an_artifact(tmp_path: Path) -> None:
    helper = scripted_prompt_lm(PROPOSAL_REPLY)
    config = CompileConfig(
        optimizer="copro", out=tmp_path / "art", caps=BudgetCaps(max_calls=2), overrides=TINY["copro"]
    )
    outcome = compile_guard(config, INSTRUCTED, lms={"task": make_lm(INSTRUCTED), "prompt": helper})
    manifest = outcome.manifest
    assert manifest is not None and manifest.budget_limited and manifest.dev.selected == "start"
    assert not manifest.dev.before.complete and manifest.usage["calls"] <= 2
    assert any("below the" in warning for warning in outcome.warnings)
    assert REFLECTION_REPLY  # the reflection script is exercised by the GEPA runs above


def test_unparseable_answers_score_zero_instead_of_stopping_the_compile(tmp_path: Path) -> None:
    garbage = LMConfig(model="fake/garbage")
    config = CompileConfig(optimizer="copro", out=tmp_path / "art", overrides=TINY["copro"])
    outcome = compile_guard(config, garbage, lms={"prompt": scripted_prompt_lm(PROPOSAL_REPLY)})
    manifest = outcome.manifest
    assert manifest is not None and not manifest.budget_limited
    assert manifest.dev.before.score == 0.0 and manifest.dev.before.excluded == 3


@pytest.mark.network
@pytest.mark.parametrize(
    ("optimizer", "message"),
    [
        ("copro", r"optimizer copro failed: LMServerError: .*stub planned 500.*rerun the same command"),
        ("bootstrap", r"compile stopped: 1\d LM calls failed \(last: task LM: LMServerError"),
    ],
)
def test_an_lm_that_fails_stops_the_compile_with_one_line(
    optimizer: str, message: str, tmp_path: Path
) -> None:
    from sp_dspy._compile._run import CompileError
    from tests._stub_server import StubServer

    with StubServer(fail_plan=["500"] * 200) as server:
        failing = LMConfig(model="openai/stub", api_base=server.url, num_retries=0, cache=False)
        overrides = {**TINY[optimizer], "num_threads": 2}
        config = CompileConfig(optimizer=optimizer, out=tmp_path / "art", overrides=overrides)
        with pytest.raises(CompileError, match=message) as raised:
            compile_guard(config, failing)
        assert raised.value.exit_code == 2  # an error, not check's "violations found"
        assert len(server.chat_requests) < 20  # stopped at once, not after scoring every candidate
    assert not (tmp_path / "art" / "manifest.json").exists()  # no artifact; the log says what happened
    assert "stub planned 500" in (tmp_path / "art" / "compile.log").read_text()


def test_after_ten_lm_failures_every_call_is_refused() -> None:
    budget = Ledger()
    for _ in range(budget.max_lm_errors):
        budget.settle(budget.admit("task", Reservation(1, 0, 0, 0.0)), Spend(calls=1))
        budget.record_error("task", "LMServerError: 500")
    with pytest.raises(BudgetExceeded, match="10 failed LM calls"):
        budget.admit("task", Reservation(1, 0, 0, 0.0))
    assert budget.failing and budget.refusals == 0  # not a cap: the compile reports it as a failure
