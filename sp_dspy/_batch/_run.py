"""``eval --batch``: answer a run's units through the provider's batch API before the runner runs.

Batches fill the response cache, they are no second transport. Each pending unit's program
runs with the run's LM; its HTTP engine reads answers from the run's :class:`AnswerBook` and, for
a request without one, notes it and ends the unit (``RequestCaptured``). The noted requests,
exactly the bodies the one-at-a-time path would post, go out in batches; their answers are
logged, then served to the programs on the next pass, which DSPy caches under the usual keys.
A program's later calls (known only from an earlier answer) are noted on that pass and batched
in turn. When a pass notes nothing, the normal runner completes the run from those answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from .._errors import ConfigError, OutputError
from .._lm._direct import RequestCaptured, client_of, closing_transports
from ._book import AnswerBook, Wanted, current_unit
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
) -> AnswerBook:
    """Get every request ``units`` need answered through the batch API, logged in ``directory``;
    afterwards ``lm``'s engine reads those answers (at batch prices) instead of the network.

    Raises:
        ConfigError: the LM has no batch API sp-dspy drives.
        BatchEnded: a batch expired, was cancelled or failed (its answers are kept; ``--resume``
            submits the rest again).
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
    sent: set[str] = set()  # custom ids submitted by this invocation
    while True:
        for file_id, custom_ids in list(book.uploads.items()):  # killed between upload and create
            batch_id = wire.adopt(file_id)
            book.note_submitted(batch_id, custom_ids, file_id=file_id)
            console.print(f"batch {batch_id}: recovered from its uploaded file {file_id}", highlight=False)
        if book.open_batches():
            _wait(wire, book, console, interval, resume_hint)
        with context():
            wanted = asyncio.run(closing_transports(_capture(work, units, key, book, concurrency)))
        if not wanted:
            return book
        if set(wanted) <= sent:
            raise OutputError(
                f"--batch: the provider's batches returned no answer for {len(wanted)} request(s) they "
                f"held; {resume_hint} submits them again"
            )
        sent |= set(wanted)
        _submit(wire, book, wanted, console, resume_hint)


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
    wire: BatchWire, book: AnswerBook, wanted: dict[str, Wanted], console: Console, resume_hint: str
) -> None:
    """Submit ``wanted`` in as many batches as the limits need, logging each as it is created."""
    lines = [wire.line(cid, item.request) for cid, item in wanted.items()]
    for chunk in _chunks(wire, lines):
        ids = [str(line["custom_id"]) for line in chunk]
        uploaded: list[str] = []

        def note(file_id: str, ids: list[str] = ids, uploaded: list[str] = uploaded) -> None:
            book.note_upload(file_id, ids)
            uploaded.append(file_id)

        batch_id = wire.submit(chunk, note)
        book.note_submitted(batch_id, ids, file_id=uploaded[0] if uploaded else None)
        units = len({unit for cid in ids for unit in wanted[cid].units})
        console.print(
            f"batch {batch_id}: submitted {len(ids)} request(s) of {units} unit(s); "
            f"leave it running with Ctrl-C and collect it later with {resume_hint}",
            highlight=False,
        )


def _wait(wire: BatchWire, book: AnswerBook, console: Console, interval: float, resume_hint: str) -> None:
    """Poll the open batches until each has ended, collecting each one's answers as it ends."""
    while True:
        ended_early: list[str] = []
        for batch in book.open_batches():
            state = wire.poll(batch.batch_id)
            if state != batch.state:
                console.print(state.line(batch.batch_id), highlight=False)
                book.note_state(batch.batch_id, state)
            if not state.ended:
                continue
            held = set(batch.custom_ids)
            answers = [a for a in wire.answers(batch.batch_id) if a.custom_id in held]
            book.add_answers(answers)
            book.note_state(batch.batch_id, state, collected=True)
            missing = len(held - {a.custom_id for a in answers})
            if state.ended_early and missing:
                ended_early.append(
                    f"batch {batch.batch_id} {state.ended_early}: {missing} of {len(batch.custom_ids)} "
                    f"request(s) unanswered ({len(answers)} answer(s) kept)"
                )
        if ended_early:
            raise BatchEnded(f"{'; '.join(ended_early)}; {resume_hint} submits the unanswered ones again")
        if not book.open_batches():
            return
        time.sleep(interval)
