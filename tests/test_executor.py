"""The one executor: the order of steps, their head lines, resume, admission, locks, stops and the report."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest
from rich.console import Console

from sp_dspy._budget import BudgetCaps, Ledger, Spend
from sp_dspy._executor import CapReached, Plan, PlanOutcome, Status, StepContext, caps_left, execute
from sp_dspy._runner import RunStopped
from sp_dspy._writer_lock import WriterLock, WriterLockedError


@dataclass
class FakeStep:
    """A step that records what the executor did with it."""

    name: str
    kind: Literal["evaluate", "compile"] = "evaluate"
    done_earlier: bool = False
    ends: Status = "complete"
    events: list[str] = field(default_factory=list)
    ledgers: list[Ledger | None] = field(default_factory=list)
    capped_by: str | None = None

    def finished(self, *, retry_errors: bool) -> bool:
        return self.done_earlier and not retry_errors

    def head(self, number: int, total: int) -> str | None:
        return f"[{self.kind} {number}/{total}] {self.name}"

    def announce(self, head: str) -> str:
        return f"{head} starts"

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.events.append(f"lock {self.name}")
        yield
        self.events.append(f"unlock {self.name}")

    def start(self) -> AbstractContextManager[object]:
        return self._locked()

    def run(self, context: StepContext, ledger: Ledger | None, head: str) -> Status:
        self.events.append(f"run {self.name} ({head})")
        self.ledgers.append(ledger)
        if self.ends == "capped":
            self.capped_by = "max_calls"
        if self.ends == "interrupted" and self.name == "stops":
            raise RunStopped("auth", "the key was refused", "sp-dspy eval --resume")
        return self.ends


def context(retry_errors: bool = False) -> tuple[StepContext, io.StringIO]:
    printed = io.StringIO()
    return StepContext(Console(file=printed, width=200), retry_errors=retry_errors), printed


def test_steps_run_in_order_with_heads_numbered_within_their_kind() -> None:
    events: list[str] = []
    steps = [
        FakeStep("c1", "compile", events=events),
        FakeStep("c2", "compile", events=events),
        FakeStep("e1", events=events),
    ]
    reported: list[PlanOutcome] = []
    ctx, printed = context()
    outcome = execute(Plan(list(steps), report=reported.append), ctx)
    assert outcome.complete and outcome.reached == steps and reported == [outcome]
    assert printed.getvalue().splitlines() == [
        "[compile 1/2] c1 starts",
        "[compile 2/2] c2 starts",
        "[evaluate 1/1] e1 starts",
    ]
    assert events == [
        "lock c1", "run c1 ([compile 1/2] c1)", "unlock c1",
        "lock c2", "run c2 ([compile 2/2] c2)", "unlock c2",
        "lock e1", "run e1 ([evaluate 1/1] e1)", "unlock e1",
    ]  # fmt: skip


def test_a_resumed_plan_skips_finished_steps_unless_errors_are_retried() -> None:
    steps = [FakeStep("e1", done_earlier=True), FakeStep("e2")]
    ctx, printed = context()
    outcome = execute(Plan(list(steps), skip_finished=True), ctx)
    assert outcome.complete and steps[0].events == [] and steps[1].events[1].startswith("run e2")
    assert printed.getvalue().splitlines()[0] == "[evaluate 1/2] e1: finished earlier, not run again"
    again = [FakeStep("e1", done_earlier=True)]
    execute(Plan(list(again), skip_finished=True), context(retry_errors=True)[0])
    assert again[0].events[1].startswith("run e1")
    unskipped = [FakeStep("e1", done_earlier=True)]
    execute(Plan(list(unskipped)), context()[0])  # eval's plan: every step runs
    assert unskipped[0].events[1].startswith("run e1")


def test_the_first_step_that_does_not_complete_ends_the_plan_without_a_report() -> None:
    steps = [FakeStep("c1", "compile", ends="capped"), FakeStep("e1")]
    reported: list[PlanOutcome] = []
    outcome = execute(Plan(list(steps), report=reported.append), context()[0])
    assert outcome.stopped_by == "capped" and outcome.capped_by == "max_calls"
    assert outcome.reached == steps[:1] and steps[1].events == [] and reported == []


def test_a_spent_cap_keeps_a_step_from_starting() -> None:
    ledger = Ledger(BudgetCaps(max_calls=2), earlier=Spend(calls=2))
    steps = [FakeStep("e1")]

    def ledger_for(step: object) -> Ledger:
        caps_left(ledger)  # raises: nothing is left
        return ledger

    ctx, printed = context()
    outcome = execute(Plan(list(steps), ledger_for=ledger_for), ctx)
    assert outcome.stopped_by == "capped" and outcome.capped_by == "max_calls"
    assert steps[0].events == [] and printed.getvalue() == ""  # not announced, not locked


def test_each_step_gets_the_ledger_it_is_admitted_by_and_a_batched_refusal_says_why() -> None:
    ledger = Ledger(BudgetCaps(max_calls=5))
    first, second = FakeStep("e1"), FakeStep("e2")

    def ledger_for(step: object) -> Ledger:
        if step is second:
            raise CapReached("max_usd", "the batch may cost more than is left")
        return ledger

    outcome = execute(Plan([first, second], ledger_for=ledger_for), context()[0])
    assert first.ledgers == [ledger] and second.events == []
    assert (outcome.capped_by, outcome.cap_note) == ("max_usd", "the batch may cost more than is left")


def test_a_stopped_step_names_the_command_that_continues_the_plan() -> None:
    plan = Plan([FakeStep("stops", ends="interrupted")], continue_command="sp-dspy ablate --out X --resume")
    with pytest.raises(RunStopped) as raised:
        execute(plan, context()[0])
    assert str(raised.value).endswith("continue with sp-dspy ablate --out X --resume")
    with pytest.raises(RunStopped) as alone:  # eval's one step keeps the runner's own command
        execute(Plan([FakeStep("stops", ends="interrupted")]), context()[0])
    assert str(alone.value).endswith("continue with sp-dspy eval --resume")


def test_the_plan_lock_is_held_while_it_names_and_runs_its_steps(tmp_path: Path) -> None:
    lock_file = tmp_path / "plan.lock"
    seen: list[bool] = []

    def other_writer_refused() -> bool:
        try:
            with WriterLock(lock_file, "the plan", "wait"):
                return False
        except WriterLockedError:
            return True

    def steps() -> list[FakeStep]:
        seen.append(other_writer_refused())
        return [FakeStep("e1")]

    def report(outcome: PlanOutcome) -> None:
        seen.append(other_writer_refused())

    execute(Plan(steps, lock=WriterLock(lock_file, "the plan", "wait"), report=report), context()[0])  # type: ignore[arg-type]
    assert seen == [True, True] and not lock_file.exists()
