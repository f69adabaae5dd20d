"""``eval --batch``: answer a run's units through the provider's batch API before the runner runs.

Batches fill the response cache, they are no second transport. Each pending unit's program
runs with the run's LM; its HTTP engine reads answers from the run's :class:`AnswerBook` and, for
a request without one, notes it and ends the unit (``RequestCaptured``). The noted requests,
exactly the bodies the one-at-a-time path would post, go out in batches; their answers are
logged, then served to the programs on the next pass, which DSPy caches under the usual keys.
A program's later calls (known only from an earlier answer) are noted on that pass and batched
in turn. When a pass notes nothing, the normal runner completes the run from those answers.

Every provider call goes through ``_provider`` (one redacted line, exit 2, never a traceback); a
request whose output line was unreadable is asked again once per invocation.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from .._errors import ConfigError, OutputError
from .._lm._direct import RequestCaptured, client_of, closing_transports
from .._redact import redact
from ._book import AnswerBook, Submitted, Wanted, current_unit
from ._output import read_output
from ._provider import WHILE_RUNNING, Provider, patience
from ._recover import recover
from ._registry import wire_for
from ._wire import BatchWire

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

#: Seconds between polls of the open batches (the providers finish most within an hour).
POLL_ENV = "SP_DSPY_BATCH_POLL_S"
DEFAULT_POLL_S = 30.0


class BatchEnded(OutputError):
    """A batch ended before answering everything (expired, cancelled, failed); its answers are kept."""


def poll_interval() -> float:
    """``SP_DSPY_BATCH_POLL_S``, else :data:`DEFAULT_POLL_S`."""
    text = os.environ.get(POLL_ENV, "").strip()
    try:
        return max(0.0, float(text)) if text else DEFAULT_POLL_S
    except ValueError:
        raise ConfigError(f"{POLL_ENV}: expected seconds, got {text!r}") from None


def unit_label(key: Hashable) -> str:
    """A unit's key as the log names it: ``case`` or ``case#rule``."""
    return "#".join(str(part) for part in key) if isinstance(key, tuple) else str(key)


def fill_by_batch(
    work: Callable[[Any], Awaitable[Any]],
    units: Sequence[Any],
    key: Callable[[Any], Hashable],
    lm: Any,
    *,
    directory: Path,
    console: Console,
    resume_hint: str,
    retry_errors: bool,
    concurrency: int,
    context: Callable[[], contextlib.AbstractContextManager[Any]],
    resubmit: bool = False,
) -> AnswerBook:
    """Get every request ``units`` need answered through the batch API, logged in ``directory``;
    afterwards ``lm``'s engine reads those answers (at batch prices) instead of the network.
    ``resubmit``: send the requests of a batch being created when the run stopped that the
    provider cannot match (it may pay them twice).

    Raises:
        ConfigError: the LM has no batch API sp-dspy drives.
        BatchEnded: a batch expired, was cancelled or failed (its answers are kept; ``--resume``
            submits the rest again).
        ProviderFailed: a provider call failed (one line: what, why, what to do).
        KeyboardInterrupt: left while batches run; ``--resume`` collects them.
    """
    client = client_of(lm)
    if client is None:
        raise ConfigError(
            f"--batch: model '{getattr(lm, 'model', lm)}' does not go through sp-dspy's HTTP engine "
            "(fake, replicas or --transport dspy), which builds the requests a batch holds"
        )
    book = AnswerBook(directory, keep_errors=not retry_errors)
    wire = wire_for(client, directory)
    book.model = client.config.model
    client.preset = book
    interval = poll_interval()
    provider = Provider(
        client.config, client.api_base, resume_hint, patience(), min(1.0, max(interval, 0.01))
    )
    asked: Counter[str] = Counter()  # custom ids submitted by this invocation, and how often
    recover(wire, book, provider, console, resubmit=resubmit)
    while True:
        if book.open_batches():
            _wait(wire, book, provider, console, interval)
        with context():
            wanted = asyncio.run(closing_transports(_capture(work, units, key, book, concurrency)))
        if not wanted:
            return book
        twice = [cid for cid in wanted if asked[cid] >= 2]
        if twice:
            raise OutputError(
                f"--batch: the provider's batches returned no readable answer for {len(twice)} request(s), "
                f"asked twice; {resume_hint} submits them again"
            )
        asked.update(list(wanted))
        _submit(wire, book, provider, wanted, console)


async def _capture(
    work: Callable[[Any], Awaitable[Any]],
    units: Sequence[Any],
    key: Callable[[Any], Hashable],
    book: AnswerBook,
    concurrency: int,
) -> dict[str, Wanted]:
    """Run every unit on the answers so far; the requests still unanswered (and in no open batch)."""
    book.wanted = {}
    book.collecting = True
    gate = asyncio.Semaphore(concurrency)

    async def one(unit: Any) -> None:
        async with gate:
            current_unit.set(unit_label(key(unit)))  # this task's own context
            with contextlib.suppress(RequestCaptured, Exception):  # the runner records failures
                await work(unit)

    try:
        await asyncio.gather(*(one(unit) for unit in units))
    finally:
        book.collecting = False
    in_flight = book.in_flight()
    return {cid: wanted for cid, wanted in book.wanted.items() if cid not in in_flight}


def _chunks(wire: BatchWire, lines: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """``lines`` split under the provider's limits on one batch (requests and bytes)."""
    chunks: list[list[dict[str, Any]]] = [[]]
    size = 0
    for line in lines:
        length = len(orjson.dumps(line)) + 1
        if chunks[-1] and (len(chunks[-1]) >= wire.max_requests or size + length > wire.max_bytes):
            chunks.append([])
            size = 0
        chunks[-1].append(line)
        size += length
    return [chunk for chunk in chunks if chunk]


def _submit(
    wire: BatchWire, book: AnswerBook, provider: Provider, wanted: dict[str, Wanted], console: Console
) -> None:
    """Submit ``wanted`` in as many batches as the limits need: each input file uploaded, the intent
    logged, then the batch created (once: a failure leaves its fate to ``--resume``) and logged."""
    lines = [wire.line(cid, item.request) for cid, item in wanted.items()]
    for chunk in _chunks(wire, lines):
        ids = [str(line["custom_id"]) for line in chunk]
        what = f"a batch of {len(ids)} request(s)"
        upload = functools.partial(wire.upload, chunk)  # safe to repeat: an unused file costs nothing
        file_id = provider.patiently(f"uploading the input file of {what}", upload)
        intent = book.note_intent(ids, file_id)
        batch_id = provider.create(
            f"creating {what}",
            functools.partial(wire.create, chunk, intent),
            refused=functools.partial(book.note_dropped, intent),
        )
        book.note_submitted(batch_id, intent)
        units = len({unit for cid in ids for unit in wanted[cid].units})
        console.print(
            f"batch {batch_id}: submitted {len(ids)} request(s) of {units} unit(s); "
            f"leave it running with Ctrl-C and collect it later with {provider.resume_hint}",
            markup=False,
            highlight=False,
        )


def _wait(wire: BatchWire, book: AnswerBook, provider: Provider, console: Console, interval: float) -> None:
    """Poll the open batches until each has ended, collecting each one's answers as it ends."""
    while True:
        ended_early: list[str] = []
        for batch in book.open_batches():
            kept = (
                f"the {len(book.answers)} answer(s) collected so far are kept, the provider keeps the batch"
            )
            state = provider.patiently(
                f"polling batch {batch.batch_id}", functools.partial(wire.poll, batch.batch_id),
                kept=kept, passing=WHILE_RUNNING,
            )  # fmt: skip
            if state != batch.state:
                console.print(redact(state.line(batch.batch_id)), markup=False, highlight=False)
                book.note_state(batch.batch_id, state)
            if state.ended:
                ended_early += _collect(wire, book, provider, console, batch, kept)
        if ended_early:
            raise BatchEnded(
                f"{'; '.join(ended_early)}; {provider.resume_hint} submits the unanswered ones again"
            )
        if not book.open_batches():
            return
        time.sleep(interval)


def _collect(
    wire: BatchWire, book: AnswerBook, provider: Provider, console: Console, batch: Submitted, kept: str
) -> list[str]:
    """Read an ended batch's output, line by line, into the book; why it ended early, if it did."""
    lines = provider.patiently(
        f"downloading the output of batch {batch.batch_id}", functools.partial(wire.output, batch.batch_id),
        kept=kept, passing=WHILE_RUNNING | {"not_found"},  # an output file not there yet
    )  # fmt: skip
    held = set(batch.custom_ids)
    output = read_output(lines, held, wire.answer_of)
    for warning in output.lines(batch.batch_id):
        console.print(f"warning: {warning}", markup=False, highlight=False)
    book.add_answers(output.answers)
    state = batch.state
    book.note_state(batch.batch_id, state, collected=True)
    missing = len(held - {a.custom_id for a in output.answers})
    if state.ended_early and missing:
        return [
            redact(
                f"batch {batch.batch_id} {state.ended_early}: {missing} of {len(batch.custom_ids)} "
                f"request(s) unanswered ({len(output.answers)} answer(s) kept)"
            )
        ]
    return []
