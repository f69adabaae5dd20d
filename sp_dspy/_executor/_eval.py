"""``run_eval``: ``sp-dspy eval``'s job, a plan of one evaluation step run by the executor."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from ._executor import Plan, execute
from ._steps import EvaluateStep, StepContext

if TYPE_CHECKING:
    import dspy

    from .._budget import Ledger
    from .._lm import LMConfig
    from .._runner import EvalConfig, EvalOutcome


def run_eval(
    config: EvalConfig,
    lm_config: LMConfig,
    *,
    console: Console | None = None,
    lm: dspy.LM | None = None,
    show_progress: bool = True,
    retry_errors: bool = False,
    log_requests: bool = False,
    ledger: Ledger | None = None,
) -> EvalOutcome:
    """Run one model over the selected cases, append results durably, score them.

    ``lm``: a ready ``dspy.LM`` (tests pass the fake); by default one is built from ``lm_config``.
    ``log_requests`` keeps with each record the requests its unit sent (``--log-requests``).
    ``ledger``: a job's ledger this run is a step of: its caps hold too.
    With ``config.batch`` the units are answered in rounds of provider batches.

    Raises:
        RunStopped: the run stopped early on a lasting failure (after writing the
            manifest); every record written is kept.
        RunLockedError: another process is writing this run.
        ConfigError: a resume whose dataset, program, selection or model differs from
            the run's manifest (checked before anything is written or sent).
        OutputError: the output directory cannot be written, or a write failed
            mid-run (the run stops at once; ``--resume`` continues it).
    """
    step = EvaluateStep(config, lm_config)
    context = StepContext(
        console or Console(stderr=True), lms={} if lm is None else {"task": lm}, retry_errors=retry_errors,
        log_requests=log_requests, show_progress=show_progress,
    )  # fmt: skip
    execute(Plan([step], ledger_for=None if ledger is None else lambda _step: ledger), context)
    assert step.outcome is not None  # one step, never skipped: it ran or raised
    return step.outcome
