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

Every provider call goes through ``_provider`` (one redacted line, exit 2, never a traceback); a
request whose output line was unreadable is asked again once per invocation.
"""

from __future__ import annotations

import functools
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable
from typing import TYPE_CHECKING, Any

import orjson

from .._errors import ConfigError, OutputError
from .._lm import client_of
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
    resubmit: bool = False,
) -> AnswerBook:
    """Run rounds of the units until none waits for an answer, each round's unanswered requests
    submitted as batches (logged in ``directory``) and collected before the next round.

    ``run_round()`` runs the units still waiting on the answers so far (``lm``'s engine reads them
    from the book, at batch prices) and says whether a unit still waits for one. ``resubmit``: send
    the requests of a batch being created when the run stopped that the provider cannot match (it
    may pay them twice).

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
        wanted = _capture(run_round, book)
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
