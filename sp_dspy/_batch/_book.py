"""A run's batches, durable: what is about to be created (intents), what was submitted (ids, files,
the requests and units each holds), their last state, and every answer collected, each appended
and synced as it happens.

``batches.jsonl`` logs events (``intent``, ``uploaded``, ``submitted``, ``dropped``, ``state``,
``collected``); ``answers.jsonl`` holds each request's answer (or failure) by ``custom_id``, masked
as records are. The intent is logged before the create call, so a process killed at any point
leaves a log from which ``--resume`` polls what was submitted, or asks the provider for the batch
an intent names, instead of sending it again. Both files are appended through the results
store (``JsonlStore``): a torn last line is cut before anything is read or appended.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .._errors import ConfigError, DataError, OutputError
from .._lm import HttpRequest, RequestCaptured, status_error
from .._redact import redact, redact_data
from .._runner._store import JsonlStore, repair_torn_tail
from ._wire import BatchAnswer, BatchState, Intent, fingerprint

#: The unit (``case`` or ``case#rule``) whose program is running, for the log's ``units``.
current_unit: contextvars.ContextVar[str] = contextvars.ContextVar("sp_dspy_batch_unit", default="")


def custom_id(request: HttpRequest) -> str:
    """A request's id in batches: the hash of its URL and body (identical requests are one)."""
    data = request.url.encode() + b"\n" + orjson.dumps(request.body, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(data).hexdigest()[:40]


@dataclass
class Submitted:
    """One batch of the run as the log records it."""

    batch_id: str
    custom_ids: list[str]
    state: BatchState = field(default_factory=lambda: BatchState(status="submitted"))
    collected: bool = False


@dataclass
class Wanted:
    """A request some unit needs and no answer holds yet."""

    request: HttpRequest
    units: set[str] = field(default_factory=set)


def masked(answer: BatchAnswer) -> BatchAnswer:
    """``answer`` with every known key masked, as a record stores a model's answer."""
    if answer.body is not None:
        return BatchAnswer(answer.custom_id, body=redact_data(answer.body))
    return BatchAnswer(answer.custom_id, status=answer.status, message=redact(answer.message))


class AnswerBook:
    """The batch answers of one run's results file, served to sp-dspy's HTTP engine in place of the
    network (``DirectChat.preset``).

    While :attr:`collecting`, a request without an answer is noted in :attr:`wanted` and
    :class:`RequestCaptured` ends its unit; afterwards it fails as a server error would
    (``--retry-errors`` submits it again).
    """

    def __init__(self, directory: Path, *, keep_errors: bool = True) -> None:
        self.directory = directory
        self.log_path = directory / "batches.jsonl"
        self.answers_path = directory / "answers.jsonl"
        self.answers: dict[str, BatchAnswer] = {}
        self.batches: dict[str, Submitted] = {}
        self.intents: dict[str, Intent] = {}  # by fingerprint: logged, no batch id recorded yet
        self.wanted: dict[str, Wanted] = {}
        self.collecting = False
        self.model = ""
        self.received = 0  # answers collected by this invocation: the manifest's batch endpoint_requests
        try:
            directory.mkdir(parents=True, exist_ok=True)
            for path in (self.answers_path, self.log_path):
                repair_torn_tail(path)  # a line torn by a kill or a full disk: its event never completed
        except OSError as exc:
            raise OutputError(
                f"cannot write the batch directory {directory}: {exc.strerror or exc}"
            ) from None
        for line in self._lines(self.answers_path):
            answer = BatchAnswer(
                str(line["custom_id"]),
                body=line.get("body"),
                status=int(line.get("status") or 0),
                message=str(line.get("message") or ""),
            )
            if answer.body is None and not keep_errors:
                self.answers.pop(answer.custom_id, None)  # --retry-errors: a failed request is asked again
            elif self._takes(answer):
                self.answers[answer.custom_id] = answer
        for event in self._lines(self.log_path):
            self._replay(event)

    @staticmethod
    def _lines(path: Path) -> list[dict[str, Any]]:
        if not path.exists():
            return []
        lines: list[dict[str, Any]] = []
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except ValueError:
                line = None
            if not isinstance(line, dict):
                raise DataError(
                    f"{path}, line {number}: not a JSON object (a damaged batch book: delete that line, "
                    "and --resume asks its request again)"
                )
            lines.append(line)
        return lines

    def _takes(self, answer: BatchAnswer) -> bool:
        """Whether ``answer`` is kept: the first answer of a request stands, an error gives way."""
        held = self.answers.get(answer.custom_id)
        return held is None or (held.body is None and answer.body is not None)

    def _replay(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        ids = [str(cid) for cid in event.get("custom_ids") or []]
        mark = str(event.get("fingerprint") or (fingerprint(ids) if ids else ""))
        if kind == "intent":
            file = str(event["file"]) if event.get("file") else None
            self.intents[mark] = Intent(mark, tuple(ids), at=event.get("at"), file=file)
        elif kind == "uploaded":  # logs older than intents have no intent before it
            before = self.intents.get(mark) or Intent(mark, tuple(ids))
            self.intents[mark] = Intent(mark, before.custom_ids, at=before.at, file=str(event["file"]))
        elif kind == "submitted":
            self.intents.pop(mark, None)
            self.batches[str(event["batch"])] = Submitted(str(event["batch"]), ids)
        elif kind == "dropped":
            self.intents.pop(mark, None)
        elif kind in ("state", "collected") and str(event.get("batch")) in self.batches:
            batch = self.batches[str(event["batch"])]
            batch.state = BatchState(**event["state"])
            batch.collected = batch.collected or kind == "collected"

    def _append(self, path: Path, lines: list[dict[str, Any]]) -> None:
        """Append ``lines`` durably through the results store (a failed write leaves no torn line)."""
        with JsonlStore(path) as store:
            for line in lines:
                store.append(line)

    def _log(self, event: dict[str, Any]) -> None:
        self._append(self.log_path, [event])
        self._replay(event)

    # ----- the log -----------------------------------------------------------------------
    def note_intent(self, custom_ids: list[str], file_id: str | None = None) -> Intent:
        """Log that a batch of ``custom_ids`` (of the uploaded ``file_id``) is about to be created:
        before the create call, whose answer a kill may never let this process see."""
        mark = fingerprint(custom_ids)
        self._log(
            {
                "event": "intent",
                "fingerprint": mark,
                "custom_ids": custom_ids,
                "at": time.time(),
                "file": file_id,
            }
        )
        return self.intents[mark]

    def note_dropped(self, intent: Intent, why: str) -> None:
        """Log that no batch exists for ``intent`` (its requests are wanted again)."""
        self._log({"event": "dropped", "fingerprint": intent.fingerprint, "why": why})

    def note_submitted(self, batch_id: str, intent: Intent) -> None:
        """Record a created batch, with the units its requests answer."""
        ids = list(intent.custom_ids)
        units = {cid: sorted(self.wanted[cid].units) for cid in ids if cid in self.wanted}
        self._log(
            {
                "event": "submitted",
                "fingerprint": intent.fingerprint,
                "batch": batch_id,
                "file": intent.file,
                "custom_ids": ids,
                "units": units,
            }
        )

    def note_state(self, batch_id: str, state: BatchState, *, collected: bool = False) -> None:
        self._log({"event": "collected" if collected else "state", "batch": batch_id, "state": vars(state)})

    def add_answers(self, answers: list[BatchAnswer]) -> None:
        """Keep ``answers`` (masked) the book does not hold yet; the first answer of a request stands."""
        new: dict[str, BatchAnswer] = {}
        for answer in answers:
            if answer.custom_id not in new and self._takes(answer):
                new[answer.custom_id] = masked(answer)
        lines = [
            {"custom_id": a.custom_id, "body": a.body}
            if a.body is not None
            else {"custom_id": a.custom_id, "status": a.status, "message": a.message}
            for a in new.values()
        ]
        if lines:
            self._append(self.answers_path, lines)
        self.answers.update(new)
        self.received += sum(1 for answer in new.values() if answer.body is not None)

    def open_batches(self) -> list[Submitted]:
        """Batches submitted and not yet collected (this invocation's or an earlier one's)."""
        return [batch for batch in self.batches.values() if not batch.collected]

    def in_flight(self) -> set[str]:
        """Requests in a batch still open, or in one that may have been created (an intent)."""
        ids = {cid for batch in self.open_batches() for cid in batch.custom_ids}
        return ids | {cid for intent in self.intents.values() for cid in intent.custom_ids}

    # ----- sp-dspy's HTTP engine reads answers here --------------------------------------------
    def key(self, request: HttpRequest) -> str:
        return custom_id(request)

    def holds(self, key: str) -> bool:
        found = self.answers.get(key)
        return found is not None and found.body is not None

    def answer(self, request: HttpRequest) -> dict[str, Any]:
        key = custom_id(request)
        found = self.answers.get(key)
        if found is not None and found.body is not None:
            return found.body
        if found is not None:
            raise status_error(found.status, found.message, model=self.model, retry_after=0.0)
        if self.collecting:
            self.wanted.setdefault(key, Wanted(request)).units.add(current_unit.get())
            raise RequestCaptured(request)
        raise status_error(
            500, "the batch returned no answer to this request", model=self.model, retry_after=0.0
        )


def refuse_open_batches(directory: Path) -> None:
    """Refuse to resume a batched run one request at a time while its batches may still answer:
    they are paid for, and sending their requests again would pay twice.

    Raises:
        ConfigError: the run has submitted batches not yet collected.
    """
    if not (directory / "batches.jsonl").exists():
        return
    book = AnswerBook(directory)
    pending = [batch.batch_id for batch in book.open_batches()]
    pending += [f"one being created ({len(i.custom_ids)} request(s))" for i in book.intents.values()]
    if pending:
        raise ConfigError(
            f"--resume: this run has {len(pending)} batch(es) still open ({', '.join(pending[:3])}); "
            "resume it with --batch to collect them (sending their requests alone would pay for them twice)"
        )
