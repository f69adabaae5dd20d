"""Units of work of a run: cases (per-policy) or judgments (per-rule).

Each job knows which of its units a results file already holds (so ``--resume``
sends nothing twice), how to run one unit, how to record a failure, and when a
case is finished (for the progress display).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._data import Case
from ._records import (
    Stopwatch,
    error_judgment_record,
    error_policy_record,
    judgment_record,
    policy_record,
)
from ._store import iter_records

if TYPE_CHECKING:
    from .._protocol import RuleTarget


class _Job:
    """What both kinds of job share: the cases, program, LM and record provenance."""

    def __init__(
        self,
        cases: list[Case],
        program: Any,
        lm: Any,
        *,
        model: str,
        run_fields: dict[str, Any],
        retry_errors: bool,
    ) -> None:
        self.cases, self.program, self.lm, self.model, self.run = cases, program, lm, model, run_fields
        self.retry_errors = retry_errors
        self.skipped = 0  # units already in the results file (set by ``pending``)

    def done_record(self, record: dict[str, Any]) -> bool:
        """Whether a stored record finishes its unit (errored ones are retried on request)."""
        return not (self.retry_errors and record.get("error_class"))


class PerPolicyJob(_Job):
    """Units are cases; a case recorded in the results file is done."""

    def __init__(self, cases: list[Case], program: Any, lm: Any, **settings: Any) -> None:
        super().__init__(cases, program, lm, **settings)
        self.index = {case.id: i for i, case in enumerate(cases, 1)}

    def pending(self, path: Path) -> list[Case]:
        done = {r.get("id") for r in iter_records(path) if self.done_record(r)}
        todo = [case for case in self.cases if case.id not in done]
        self.skipped = len(self.cases) - len(todo)
        return todo

    async def work(self, case: Case) -> dict[str, Any]:
        from programs import run_case

        watch = Stopwatch()
        output = await run_case(self.program, case, self.lm)
        return policy_record(
            case, self.index[case.id], output, model=self.model, run=self.run, latency_s=watch.elapsed
        )

    def on_error(self, case: Case, exc: BaseException) -> dict[str, Any]:
        return error_policy_record(case, self.index[case.id], exc, model=self.model, run=self.run)

    def case_finished(self, record: dict[str, Any]) -> bool:
        return True


class PerRuleJob(_Job):
    """Units are (case, target) judgments; a case finishes with its last judgment."""

    def __init__(self, cases: list[Case], program: Any, lm: Any, **settings: Any) -> None:
        super().__init__(cases, program, lm, **settings)
        self.remaining: dict[str, int] = {}

    def pending(self, path: Path) -> list[tuple[Case, RuleTarget]]:
        from .._protocol import build_targets

        done = {
            (r.get("cid"), r.get("rule"))
            for r in iter_records(path)
            if r.get("kind") == "judgment" and self.done_record(r)
        }
        units: list[tuple[Case, RuleTarget]] = []
        total = 0
        for case in self.cases:
            for target in build_targets(case):
                total += 1
                if (case.id, target.rule) not in done:
                    units.append((case, target))
                    self.remaining[case.id] = self.remaining.get(case.id, 0) + 1
        self.skipped = total - len(units)
        return units

    async def work(self, unit: tuple[Case, RuleTarget]) -> dict[str, Any]:
        from programs import judge_target

        case, target = unit
        watch = Stopwatch()
        judgment = await judge_target(self.program, case, target, self.lm)
        return judgment_record(case, judgment, model=self.model, run=self.run, latency_s=watch.elapsed)

    def on_error(self, unit: tuple[Case, RuleTarget], exc: BaseException) -> dict[str, Any]:
        case, target = unit
        return error_judgment_record(case, target, exc, model=self.model, run=self.run)

    def case_finished(self, record: dict[str, Any]) -> bool:
        cid = str(record.get("cid"))
        self.remaining[cid] = self.remaining.get(cid, 1) - 1
        return self.remaining[cid] == 0
