"""``--batch`` on the runner's side: the run's one engine, run in rounds over the units a provider
batch must answer first (``sp_dspy._batch`` submits, polls and logs the batches between rounds).

A unit whose request has no answer yet ends with ``RequestCaptured``: the engine keeps it for the
next round and writes nothing; a unit whose requests are all answered is written in that round,
by the engine, store and job that write one-at-a-time answers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._errors import ConfigError
from .._lm import RequestCaptured, closing_transports

if TYPE_CHECKING:
    from rich.console import Console

    from .._batch import AnswerBook
    from .._budget import BudgetCaps
    from ._config import EvalConfig
    from ._engine import Record, UnitEngine
    from ._paths import RunPaths
    from ._units import PerPolicyJob, PerRuleJob


def refuse_caps(caps: BudgetCaps) -> None:
    """Per-call caps are refused with ``--batch``: a batch is paid as a whole, not call by call."""
    named = [
        flag
        for flag, value in (
            ("--max-calls", caps.max_calls),
            ("--max-total-tokens", caps.max_tokens),
            ("--max-usd", caps.max_usd),
        )
        if value is not None
    ]
    if named:
        raise ConfigError(
            f"--batch: {', '.join(named)} stop a run call by call, and a batch is paid as a whole; "
            "see its price with --dry-run --batch, then run without the cap"
        )


def send_by_batch(
    config: EvalConfig,
    job: PerPolicyJob | PerRuleJob,
    engine: UnitEngine[Any, Record],
    units: list[Any],
    lm: Any,
    *,
    paths: RunPaths,
    console: Console,
    retry_errors: bool,
    context: Callable[[], contextlib.AbstractContextManager[Any]],
) -> AnswerBook:
    """Run ``engine`` over ``units`` in rounds until none waits for a batch answer; the run's book.

    The run exists from its first batch on (its results file is open): ``--resume`` finds it
    whatever stops this invocation.
    """
    from .._batch import fill_by_batch, labelled

    engine.work = labelled(engine.work, job.key)
    engine.defer_on = (RequestCaptured,)
    waiting = list(units)

    def run_round() -> bool:
        nonlocal waiting
        engine.deferred = []
        with context():
            asyncio.run(closing_transports(engine.run(waiting)))
        waiting = engine.deferred
        return bool(waiting) and not engine.stats.stopped_early

    return fill_by_batch(
        run_round, lm,
        directory=paths.batch_dir_for(str(config.protocol)),
        console=console,
        resume_hint=f"--resume --run-id {paths.run_id}",
        retry_errors=retry_errors,
        resubmit=config.resubmit,
    )  # fmt: skip
