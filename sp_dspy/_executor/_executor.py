"""One executor for every job: ``eval`` is a plan of one evaluation, ``ablate`` a plan of evaluations,
``experiment`` a plan of compiles and then evaluations.

The executor runs a plan's steps in order and owns what they have in common:

- the plan's lock (one writer per output directory) and, around each step, the step's own
  (an evaluation's run lock);
- resume: a step a resumed plan finished is not run again (``Plan.skip_finished``);
- admission: the ledger each step's calls are admitted by, asked for as the step starts (an
  experiment's: its caps and what its other steps spent); a spent cap stops the plan there;
- progress: one head line per step, numbered within its kind;
- stops: the first step that does not complete ends the plan, and a step that stops early on a
  lasting failure names the command that continues the plan.

What a plan checks and saves before its first step (its identity: ``plan.json``, ``experiment.json``)
and the report it writes after its last are the plan's own callbacks, run under the same lock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from .._budget import Ledger
from .._runner import RunStopped
from .._writer_lock import WriterLock
from ._steps import CapReached, Status, Step, StepContext

#: Asked as a step starts: the ledger its calls are admitted by (None: only the step's own caps).
LedgerFor = Callable[[Step], Ledger | None]


@dataclass
class Plan:
    """A list of steps and how to run them (see the module's docstring)."""

    #: The steps, or what names them under the plan's lock (after checking and saving the plan).
    steps: list[Step] | Callable[[], list[Step]]
    lock: WriterLock | None = None
    skip_finished: bool = False  # resumed: a step finished earlier is not run again
    continue_command: str | None = None  # a step stopped early: the command that continues the plan
    ledger_for: LedgerFor | None = None
    report: Callable[[PlanOutcome], None] | None = None  # under the lock, once every step completed


@dataclass
class PlanOutcome:
    """What one execution did: the steps it reached (run or found finished), in order, and why it stopped."""

    reached: list[Step] = field(default_factory=list)
    stopped_by: Status | None = None  # interrupted or capped: the step that did not complete
    capped_by: str | None = None  # the cap that stopped the plan
    cap_note: str | None = None  # why a batched step was not submitted under the cap

    @property
    def complete(self) -> bool:
        return self.stopped_by is None


def execute(plan: Plan, context: StepContext) -> PlanOutcome:
    """Run ``plan`` under its lock; the outcome says how far it got (``RunStopped``: a step stopped early)."""
    with plan.lock if plan.lock is not None else contextlib.nullcontext():
        steps = plan.steps() if callable(plan.steps) else plan.steps
        outcome = PlanOutcome()
        totals = {kind: sum(1 for step in steps if step.kind == kind) for kind in ("evaluate", "compile")}
        numbers = dict.fromkeys(totals, 0)
        for step in steps:
            numbers[step.kind] += 1
            head = step.head(numbers[step.kind], totals[step.kind])
            outcome.reached.append(step)
            if plan.skip_finished and step.finished(retry_errors=context.retry_errors):
                if head is not None:
                    context.console.print(f"{head}: finished earlier, not run again", highlight=False)
                continue
            status = _run_step(plan, step, head, context, outcome)
            if status != "complete":
                outcome.stopped_by = status
                return outcome
        if plan.report is not None:
            plan.report(outcome)
        return outcome


def _run_step(plan: Plan, step: Step, head: str | None, context: StepContext, outcome: PlanOutcome) -> Status:
    """Admit, announce, lock and run one step; its status (``capped`` when a cap keeps it from starting)."""
    try:
        ledger = None if plan.ledger_for is None else plan.ledger_for(step)
    except CapReached as reached:
        outcome.capped_by, outcome.cap_note = reached.cap, reached.why
        return "capped"
    with step.start():
        if head is not None:
            context.console.print(step.announce(head), highlight=False)
        try:
            status = step.run(context, ledger, head or "")
        except RunStopped as stopped:
            if plan.continue_command is None:
                raise
            raise RunStopped(stopped.kind, stopped.reason, plan.continue_command) from None
    if status == "capped":
        outcome.capped_by = step.capped_by
    return status
