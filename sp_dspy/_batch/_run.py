"""``eval --batch``: a run's units answered in rounds through the provider's batch API.

Batches fill the response cache, they are no second transport. The runner sends the pending
units through its one engine (``sp_dspy._runner``) with the run's LM, whose HTTP engine reads
answers from the run's :class:`AnswerBook`; a request without one is noted and ends its unit
(``RequestCaptured``: no record, the unit waits for the next round), while a unit whose every
request is answered is recorded then and there, by the code that records one-at-a-time answers.
The noted requests, exactly the bodies the one-at-a-time path would post, go out in batches; when
they are answered the next round runs the units that waited. A program's later calls (known only
from an earlier answer) are noted in that round and batched in turn. Each unit's program thus runs
once per round it takes part in.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import TYPE_CHECKING, Any

import orjson

from .._errors import ConfigError, OutputError
from .._lm._direct import client_of
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


def labelled(
    work: Callable[[Any], Awaitable[Any]], key: Callable[[Any], Hashable]
) -> Callable[[Any], Awaitable[Any]]:
    """``work`` naming its unit for the log (each submitted request's ``units``)."""

    async def run(unit: Any) -> Any:
        current_unit.set(unit_label(key(unit)))  # this task's own context
        return await work(unit)

    return run


def fill_by_batch(
    run_round: Callable[[], bool],
    lm: Any,
    *,
    directory: Path,
    console: Console,
    resume_hint: str,
    retry_errors: bool,
) -> AnswerBook:
    """Run rounds of the units until none waits for an answer, each round's unanswered requests
    submitted as batches (logged in ``directory``) and collected before the next round.

    ``run_round()`` runs the units still waiting on the answers so far (``lm``'s engine reads them
    from the book, at batch prices) and says whether a unit still waits for one.

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
        wanted = _capture(run_round, book)
        if not wanted:
            return book
        if set(wanted) <= sent:
            raise OutputError(
                f"--batch: the provider's batches returned no answer for {len(wanted)} request(s) they "
                f"held; {resume_hint} submits them again"
            )
        sent |= set(wanted)
        _submit(wire, book, wanted, console, resume_hint)


def _capture(run_round: Callable[[], bool], book: AnswerBook) -> dict[str, Wanted]:
    """One round on the answers so far; the requests still unanswered (and in no open batch)."""
    book.wanted = {}
    book.collecting = True
    try:
        waiting = run_round()
    finally:
        book.collecting = False
    if not waiting:
        return {}
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
