"""Units of work of a run: cases (per-policy) or judgments (per-rule).

Each job knows which of its units a results file already holds (so ``--resume``
sends nothing twice), how to run one unit, how to record a failure, when a case is
finished (for the progress display) and which of its units ended in error.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._data import Case
from ._failures import ErrorSummary, latest_by_unit
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
        self.skipped_errors = 0  # of those, units whose latest record is an error

    def done_record(self, record: Mapping[str, Any]) -> bool:
        """Whether a stored record finishes its unit (errored ones are retried on request)."""
        return not (self.retry_errors and record.get("error_class"))

    def unit_key(self, record: Mapping[str, Any]) -> Hashable | None:
        """The unit a record belongs to (None: not one of this job's kind)."""
        raise NotImplementedError

    def unit_count(self) -> int:
        raise NotImplementedError

    def latest(self, path: Path) -> dict[Hashable, Mapping[str, Any]]:
        """The latest record of each unit in the results file (what the scorer reads too)."""
        return latest_by_unit(iter_records(path), self.unit_key)

    def _done(self, path: Path) -> set[Hashable]:
        """Units that need no call; counts them and the errored ones among them."""
        latest = self.latest(path)
        done = {unit for unit, record in latest.items() if self.done_record(record)}
        self.skipped_errors = sum(1 for unit in done if latest[unit].get("error_class"))
        return done

    def error_summary(self, path: Path) -> ErrorSummary:
        """Which of this job's units ended in error, by class, as the results file stands."""
        return ErrorSummary.of(self.latest(path), self.unit_count())


class PerPolicyJob(_Job):
    """Units are cases; a case recorded in the results file is done."""

    def __init__(self, cases: list[Case], program: Any, lm: Any, **settings: Any) -> None:
        super().__init__(cases, program, lm, **settings)
        self.index = {case.id: i for i, case in enumerate(cases, 1)}

    def unit_key(self, record: Mapping[str, Any]) -> Hashable | None:
        unit = record.get("id")
        return unit if isinstance(unit, str) and unit in self.index else None

    def unit_count(self) -> int:
        return len(self.cases)

    def pending(self, path: Path) -> list[Case]:
        done = self._done(path)
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
        from .._protocol import build_targets

        super().__init__(cases, program, lm, **settings)
        self.remaining: dict[str, int] = {}
        self.targets = [(case, target) for case in cases for target in build_targets(case)]
        self.units = {(case.id, target.rule) for case, target in self.targets}

    def unit_key(self, record: Mapping[str, Any]) -> Hashable | None:
        if record.get("kind") != "judgment":
            return None
        unit = (record.get("cid"), record.get("rule"))
        return unit if unit in self.units else None

    def unit_count(self) -> int:
        return len(self.units)

    def pending(self, path: Path) -> list[tuple[Case, RuleTarget]]:
        done = self._done(path)
        units: list[tuple[Case, RuleTarget]] = []
        for case, target in self.targets:
            if (case.id, target.rule) not in done:
                units.append((case, target))
                self.remaining[case.id] = self.remaining.get(case.id, 0) + 1
        self.skipped = len(self.targets) - len(units)
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


def unit_errors(results_file: Path, cases: list[Case], protocol: str) -> ErrorSummary:
    """Which units of a results file (cases, or per-rule judgments) ended in error."""
    job_type = PerRuleJob if protocol == "per-rule" else PerPolicyJob
    job = job_type(cases, None, None, model="", run_fields={}, retry_errors=False)
    return job.error_summary(results_file)
