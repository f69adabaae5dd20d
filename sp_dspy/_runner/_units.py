"""Units of work of a run: cases (per-policy) or (case, target) judgments (per-rule).

A job knows which of its units a results file already holds (so ``--resume`` sends
nothing twice), how to run and record one unit, and which units ended in error.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from sp_dspy.programs import judge_target, run_case

from .._data import Case
from .._lm import HttpRequest, logging_requests
from .._metrics import JudgmentRecord, PolicyRecord, ResultSet
from .._protocol import build_targets
from .._run_manifest import ErrorSummary
from ._engine import Record
from ._records import (
    error_judgment_record,
    error_policy_record,
    judgment_record,
    policy_record,
    sent_requests,
)

if TYPE_CHECKING:
    from .._protocol import RuleTarget

_R = TypeVar("_R", PolicyRecord, JudgmentRecord)


def units_of(cases: Sequence[Case], protocol: str) -> list[Any]:
    """The units a run of ``cases`` sends: cases, or (case, target) judgments per-rule."""
    if protocol != "per-rule":
        return list(cases)

    return [(case, target) for case in cases for target in build_targets(case)]


class _Job:
    """What both kinds of job share; ``key(unit)`` is what ``unit_key`` reads back from its record."""

    protocol: str

    def __init__(
        self,
        cases: list[Case],
        program: Any,
        lm: Any,
        *,
        model: str,
        run_fields: dict[str, Any],
        retry_errors: bool,
        log_requests: bool = False,
    ) -> None:
        self.program, self.lm, self.model, self.run = program, lm, model, run_fields
        self.retry_errors = retry_errors
        self.log_requests = log_requests  # keep each unit's requests with its record
        self._sent: dict[Hashable, list[HttpRequest]] = {}  # a unit's requests until its record is built
        self.index = {case.id: i for i, case in enumerate(cases, 1)}
        self.units = units_of(cases, self.protocol)
        self.keys = {self.key(unit) for unit in self.units}
        self.skipped = 0  # units already in the results file (set by ``pending``)
        self.skipped_errors = 0  # of those, units whose latest record is an error

    def key(self, unit: Any) -> Hashable:
        raise NotImplementedError

    def unit_key(self, record: Record) -> Hashable | None:
        """The unit a record belongs to (None: not one of this job's units)."""
        raise NotImplementedError

    def latest(self, results: ResultSet) -> dict[Hashable, Record]:
        """The latest record of each unit in the results (in the order units first appear)."""
        return {unit: record for record in results.lines if (unit := self.unit_key(record)) is not None}

    def pending(self, results: ResultSet) -> list[Any]:
        """The units still to send; a unit's stored record finishes it, an error one only without ``retry_errors``."""
        latest = self.latest(results)
        done = {unit for unit, record in latest.items() if not (self.retry_errors and record.error_class)}
        self.skipped_errors = sum(1 for unit in done if latest[unit].error_class)
        todo = [unit for unit in self.units if self.key(unit) not in done]
        self.skipped = len(self.units) - len(todo)
        return todo

    @contextlib.contextmanager
    def sending(self, unit: Any) -> Iterator[None]:
        """Collect the requests ``unit`` sends (with ``log_requests``) for :meth:`with_requests`."""
        if not self.log_requests:
            yield
            return
        with logging_requests() as sent:
            self._sent[self.key(unit)] = sent
            yield

    def with_requests(self, unit: Any, record: _R) -> _R:
        """``record`` with the requests its unit sent (an answer or a failed call alike); none, none."""
        sent = self._sent.pop(self.key(unit), None)
        if sent:
            record.requests = sent_requests(sent)
        return record

    def error_summary(self, results: ResultSet) -> ErrorSummary:
        """Which of this job's units ended in error, by class, as the results stand."""
        return ErrorSummary.of(self.latest(results), len(self.keys))


class PerPolicyJob(_Job):
    """Units are cases; a case recorded in the results file is done."""

    protocol = "per-policy"

    def key(self, unit: Case) -> Hashable:
        return unit.id

    def unit_key(self, record: Record) -> Hashable | None:
        return record.id if isinstance(record, PolicyRecord) and record.id in self.index else None

    async def work(self, case: Case) -> PolicyRecord:
        started = time.perf_counter()
        with self.sending(case):
            output = await run_case(self.program, case, self.lm)
        latency = time.perf_counter() - started
        record = policy_record(
            case, self.index[case.id], output, model=self.model, run=self.run, latency_s=latency
        )
        return self.with_requests(case, record)

    def on_error(self, case: Case, exc: BaseException) -> PolicyRecord:
        record = error_policy_record(case, self.index[case.id], exc, model=self.model, run=self.run)
        return self.with_requests(case, record)

    def case_finished(self, record: Record) -> bool:
        return True


class PerRuleJob(_Job):
    """Units are (case, target) judgments; a case finishes with its last judgment."""

    protocol = "per-rule"

    def key(self, unit: tuple[Case, RuleTarget]) -> Hashable:
        return (unit[0].id, unit[1].rule)

    def unit_key(self, record: Record) -> Hashable | None:
        if not isinstance(record, JudgmentRecord):
            return None
        unit = (record.cid, record.rule)
        return unit if unit in self.keys else None

    def pending(self, results: ResultSet) -> list[Any]:
        todo = super().pending(results)
        self.remaining = Counter(case.id for case, _ in todo)
        return todo

    async def work(self, unit: tuple[Case, RuleTarget]) -> JudgmentRecord:
        case, target = unit
        started = time.perf_counter()
        with self.sending(unit):
            judgment = await judge_target(self.program, case, target, self.lm)
        latency = time.perf_counter() - started
        record = judgment_record(case, judgment, model=self.model, run=self.run, latency_s=latency)
        return self.with_requests(unit, record)

    def on_error(self, unit: tuple[Case, RuleTarget], exc: BaseException) -> JudgmentRecord:
        case, target = unit
        record = error_judgment_record(case, target, exc, model=self.model, run=self.run)
        return self.with_requests(unit, record)

    def case_finished(self, record: Record) -> bool:
        cid = record.cid if isinstance(record, JudgmentRecord) else record.id
        self.remaining[cid] = self.remaining.get(cid, 1) - 1
        return self.remaining[cid] == 0


def unit_errors(results: ResultSet, cases: list[Case], protocol: str) -> ErrorSummary:
    """Which units of a run's results (cases, or per-rule judgments) ended in error."""
    job_type = PerRuleJob if protocol == "per-rule" else PerPolicyJob
    job = job_type(cases, None, None, model="", run_fields={}, retry_errors=False)
    return job.error_summary(results)
