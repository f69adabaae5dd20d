"""One invocation of an evaluation step, once its run lock is held: check that a resumed run is the
same run, send the pending units (one at a time, or in rounds of provider batches), write the
manifest as the run starts and as it ends, and score what the results file holds.

Both ways of sending go through one :class:`UnitEngine` writing one results file, so a record is
built by the same code whether its answer came one at a time or from a batch (``_batched``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from sp_dspy.programs import GUARD_PROGRAMS

from .._benchmarks import benchmark_kind
from .._budget import BudgetExceeded, Ledger
from .._data import Benchmark, Case, resolved_path
from .._errors import ConfigError, OutputError
from .._lm import RateWatch, client_of, closing_transports, display_endpoint, import_dspy, make_lm
from .._metrics import ResultSet, score
from .._provenance import git_commit, package_versions, redacted_argv
from .._regular import read_regular
from .._run_manifest import RUNNING, ModelRun, RunManifest, RunTotals, previous_run, read_run_manifest
from .._run_manifest import write_manifest as write_manifest_file
from ._admission import UnitAdmission, run_admission
from ._config import DataSelection, EvalConfig
from ._engine import Record, Unit, UnitEngine
from ._failures import EarlyStop
from ._fake_gold import teach_fake
from ._outcome import EvalOutcome, status_of
from ._paths import RunPaths
from ._progress import ProgressView
from ._resume import refuse_a_changed_resume
from ._sending import sending_context
from ._store import JsonlStore, StoreWriteError, read_run_results, repair_torn_tail
from ._units import PerPolicyJob, PerRuleJob

if TYPE_CHECKING:
    from .._lm import LMConfig


@dataclass
class StepInputs:
    """What ``run_eval`` resolved before taking the run's lock: the settings as the manifest records
    them (``config``, files resolved) and as typed (``typed``), the cases, the program, the paths."""

    config: EvalConfig
    typed: DataSelection
    loaded: Benchmark
    cases: list[Case]
    program: Any
    label: str
    paths: RunPaths


class EvalInvocation:
    """One ``run_eval`` call on one model, under the run's lock (see the module's docstring)."""

    def __init__(
        self, inputs: StepInputs, lm_config: LMConfig, *, console: Console, retry_errors: bool,
        log_requests: bool, ledger: Ledger | None = None,
    ) -> None:  # fmt: skip
        self.inputs, self.config, self.lm_config = inputs, inputs.config, lm_config
        self.console, self.retry_errors, self.log_requests = console, retry_errors, log_requests
        self.ledger = ledger  # a job's ledger this run is a step of (an experiment's): its caps hold too
        self.protocol = str(inputs.config.protocol)
        self.model = lm_config.display_name()
        self.results_file = inputs.paths.results_for(self.protocol)
        self.outcome = EvalOutcome(paths=inputs.paths, results_file=self.results_file, cases=inputs.cases)
        self.batch_answers: dict[str, int] = {}  # answers the provider's batch API sent this invocation
        self.started, self.clock = datetime.now(UTC), time.perf_counter()
        self.early = EarlyStop()
        self.caps: UnitAdmission | None = None

    # ----- before anything is sent --------------------------------------------------------
    def check(self) -> None:
        """Refuse a second run into an existing results file, a resumption that changed a setting, and
        per-call caps on a batched run."""
        config = self.config
        if config.batch:
            from ._batched import refuse_caps

            refuse_caps(config.caps)
        if self.results_file.exists() and not config.resume:
            raise ConfigError(
                f"{self.results_file} exists: pass --resume to continue that run, or choose another --run-id"
            )
        # The same run (resumed, or another model joining its run id): same dataset, program, selection.
        loaded = self.inputs.loaded
        refuse_a_changed_resume(
            read_run_manifest(self.inputs.paths.manifest), config, dataset=(loaded.source, loaded.content_hash),
            model=self.model, lm=self.lm_config, results_file=self.results_file, resume=config.resume,
        )  # fmt: skip

    def prepare(self, lm: Any) -> list[Any]:
        """Build the LM and the job; the units still to send (a torn last line is no unit done)."""
        config, inputs = self.config, self.inputs
        self.lm = lm if lm is not None else make_lm(self.lm_config)
        teach_fake(self.lm, inputs.cases)
        runner = PerRuleJob if self.protocol == "per-rule" else PerPolicyJob
        self.job = runner(
            inputs.cases, inputs.program, self.lm, model=self.model, run_fields=self._run_fields(),
            retry_errors=self.retry_errors, log_requests=self.log_requests,
        )  # fmt: skip
        with contextlib.suppress(OSError):  # the writer's open reports a file it cannot write
            repair_torn_tail(self.results_file)
        self.existing = read_run_results(self.results_file)
        units = self.job.pending(self.existing)
        self.caps = run_admission(
            config.caps, inputs.program, self.protocol, self.lm_config, parent=self.ledger
        )
        self.outcome.skipped_on_resume, self.outcome.skipped_errors = (
            self.job.skipped,
            self.job.skipped_errors,
        )
        self.work, self.endpoint_requests = _counting(self.job.work, self.lm, self.lm_config)
        self.rate = RateWatch(client.rate if (client := client_of(self.lm)) is not None else None)
        # Read before this invocation's start entry replaces it: a resumed run's time adds up.
        self.earlier = previous_run(inputs.paths.manifest, self.model) if config.resume else None
        return units

    def _run_fields(self) -> dict[str, Any]:
        config = self.config
        fields: dict[str, Any] = {
            "run_id": self.inputs.paths.run_id,
            "program": self.inputs.label,
            "protocol": self.protocol,
            "parser": _parser_label(config),
        }
        if self.protocol == "per-rule" and config.program == "official":
            fields["layout"] = config.per_rule_layout
            fields["official_protocol"] = config.per_rule_layout == "official"
        return fields

    # ----- sending --------------------------------------------------------------------------
    def send(self, units: list[Any], *, show_progress: bool) -> UnitEngine[Any, Record]:
        """Send ``units`` through one engine into the results file; the engine, for its counts."""
        outcome = self.outcome
        with (
            JsonlStore(self.results_file) as store,
            ProgressView(
                len(units),
                label=f"{self.model} {self.protocol}",
                console=self.console,
                enabled=show_progress,
                ledger=None if self.caps is None else self.caps.ledger,
                rate=self.rate,
            ) as view,  # fmt: skip
        ):
            engine: UnitEngine[Any, Record] = UnitEngine(
                work=self.work if self.caps is None else self.caps.wrap(self.work),
                stop_on=(BudgetExceeded,),
                on_error=self.job.on_error,
                store=store,
                concurrency=self.config.concurrency,
                on_record=lambda record: view.record(record, case_finished=self.job.case_finished(record)),
                stop_when=self.early.observe,
            )
            try:
                if self.config.batch:
                    self._send_by_batch(engine, units)
                else:
                    with sending_context(self.config, self.lm_config):
                        asyncio.run(closing_transports(engine.run(units)))
            except KeyboardInterrupt:  # left while units (or batches) run: --resume continues
                outcome.interrupted = True
            finally:
                outcome.units_run = engine.stats.done
            outcome.stopped = engine.stats.stopped_early and not outcome.interrupted
        return engine

    def _send_by_batch(self, engine: UnitEngine[Any, Record], units: list[Any]) -> None:
        """``--batch``: rounds of the engine over the units a batch must answer first (``_batched``)."""
        from ._batched import send_by_batch

        book = send_by_batch(
            self.config, self.job, engine, units, self.lm, paths=self.inputs.paths, console=self.console,
            retry_errors=self.retry_errors, context=lambda: sending_context(self.config, self.lm_config),
        )  # fmt: skip
        if (client := client_of(self.lm)) is not None:  # always: the batch path needs sp-dspy's engine
            self.batch_answers[f"{display_endpoint(client.api_base)} (batch)"] = book.received

    # ----- the whole invocation -----------------------------------------------------------------
    def run(self, lm: Any, *, show_progress: bool) -> EvalOutcome:
        """Check, prepare, send, score; the manifest written as the run starts and as it ends."""
        self.check()
        units = self.prepare(lm)
        config, outcome = self.config, self.outcome
        if config.resume and not config.batch:  # a batched run's open batches are collected with --batch only
            from .._batch import refuse_open_batches

            refuse_open_batches(self.inputs.paths.batch_dir_for(self.protocol))
        self.write_manifest(self.existing, status=RUNNING)
        try:
            engine = self.send(units, show_progress=show_progress)
        except StoreWriteError as failure:  # a full disk: stop, keep what is written, say how to go on
            self._write_failed()
            raise OutputError(
                f"{failure}: the run stopped after {outcome.units_run} new unit(s); everything written is kept: "
                f"free space (or fix the cause), then continue with --resume --run-id {self.inputs.paths.run_id}"
            ) from None
        except OutputError:  # a batch ended unanswered: the manifest says so
            self._write_failed()
            raise
        self.finish(engine)
        return outcome

    def _write_failed(self) -> None:
        self.outcome.failed = True
        with contextlib.suppress(OutputError):  # the disk may be too full for the manifest as well
            self.write_manifest(read_run_results(self.results_file))

    def finish(self, engine: UnitEngine[Any, Record]) -> None:
        """Read the results once, score them when the run is complete, write the final manifest."""
        outcome, inputs = self.outcome, self.inputs
        if self.caps is not None:
            outcome.spent = self.caps.ledger.total()
            outcome.capped_by = self.caps.ledger.refused_by if engine.stats.stopped else None
        complete = not (outcome.interrupted or outcome.stopped) and outcome.capped_by is None
        outcome.results = read_run_results(self.results_file, strict=complete)  # the one read after the units
        if complete:
            outcome.report = score(
                inputs.cases, outcome.results, per_rule=self.protocol == "per-rule",
                all_ids={c.id for c in inputs.cases}, by=benchmark_kind(inputs.loaded.benchmark).breakdown,
                unit=benchmark_kind(inputs.loaded.benchmark).unit,
            )  # fmt: skip
        outcome.errors = self.job.error_summary(outcome.results)
        self.write_manifest(outcome.results)
        if outcome.stopped:
            raise self.early.error(
                self.lm_config, results_file=self.results_file, kept=self.job.skipped + engine.stats.done,
                resume=f"--resume --retry-errors --run-id {inputs.paths.run_id}",
            )  # fmt: skip

    # ----- the manifest ---------------------------------------------------------------------------
    def write_manifest(self, results: ResultSet, *, status: str | None = None) -> None:
        """Write the run's manifest: as it starts (``status`` running: a run killed before its end
        is still scored on its own data and selection), and again as it ends."""
        inputs, config = self.inputs, self.config
        self.outcome.totals = RunTotals.of(results.lines)  # over the whole results file
        split_info = None
        if config.data.split:
            split_bytes = read_regular(Path(config.data.split.rpartition(":")[0]), "split file")
            split_info = {"spec": inputs.typed.split, "sha256": hashlib.sha256(split_bytes).hexdigest()}
        dataset = {
            "source": resolved_path(inputs.loaded.source),  # the file scored from any directory
            "typed": inputs.typed.dataset,  # as given (none: the benchmark's default data)
            "sha256": inputs.loaded.content_hash,
            "benchmark": inputs.loaded.benchmark,
            "cases": len(inputs.cases),
        }
        written = RunManifest(
            run_id=inputs.paths.run_id, command=redacted_argv(), settings=config.model_dump(mode="json"),
            dataset=dataset, split=split_info, versions=package_versions(), git_commit=git_commit(),
            runs={self.model: self._model_run(status)},
        )  # fmt: skip
        write_manifest_file(inputs.paths.manifest, written)

    def _model_run(self, status: str | None) -> ModelRun:
        """This model's entry in the manifest; a resumed run's time and start include the earlier invocations."""
        outcome = self.outcome
        wall_s = time.perf_counter() - self.clock
        started_at = self.started.isoformat(timespec="seconds")
        limited = self.rate.stats()
        if self.earlier is not None:
            wall_s += self.earlier.wall_s or 0.0
            started_at = self.earlier.started_at
            limited.rate_limited += self.earlier.rate_limited
            limited.wait_s += self.earlier.rate_limit_wait_s
        return ModelRun(
            model=self.model,
            lm=self.lm_config.public_dict(),
            results_file=str(self.results_file),
            status=status or status_of(outcome),
            started_at=started_at,
            finished_at=None if status else datetime.now(UTC).isoformat(timespec="seconds"),
            wall_s=round(wall_s, 3),
            units_total=len(self.job.units),
            units_skipped_on_resume=outcome.skipped_on_resume,
            totals=outcome.totals,
            errors=outcome.errors,
            endpoint_requests={**self.endpoint_requests(), **self.batch_answers},
            transport="direct" if client_of(self.lm) is not None else "dspy",
            rate_limited=limited.rate_limited,
            rate_limit_wait_s=round(limited.wait_s, 3),
            # The benchmark's own cells: no level cell for a kind without levels.
            metrics=None if outcome.report is None else dict(outcome.report.cells),
        )


def _parser_label(config: EvalConfig) -> str:
    """How a run's answers are read: the official parser's mode, a guard model's own format, DSPy's adapter."""
    if config.program == "official":
        return config.parser
    return "native" if config.program in GUARD_PROGRAMS else "dspy-adapter"


def _counting(
    work: Callable[[Unit], Awaitable[Record]], lm: Any, lm_config: LMConfig
) -> tuple[Callable[[Unit], Awaitable[Record]], Callable[[], dict[str, int]]]:
    """``work``, and the requests each endpoint answered in this invocation so far: a replica pool and
    sp-dspy's HTTP engine count their own, DSPy's engine on one ``--api-base`` what it tracks."""
    counts: Mapping[str, int] | None = getattr(lm, "endpoint_requests", None)
    client = client_of(lm)
    if counts is not None:
        return work, lambda: dict(counts)
    if client is not None:
        return work, lambda: {display_endpoint(client.api_base): client.answered}
    if len(lm_config.api_bases) != 1:
        return work, dict
    calls = 0

    async def tracked(unit: Unit) -> Record:
        nonlocal calls
        with import_dspy().track_usage() as tracker:
            try:
                return await work(unit)
            finally:
                calls += sum(len(entries) for entries in tracker.usage_data.values())

    return tracked, lambda: {display_endpoint(lm_config.api_bases[0]): calls}
