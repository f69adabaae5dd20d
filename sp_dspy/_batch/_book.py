"""A run's batches, durable: what was submitted (ids, files, the requests and units each holds),
their last state, and every answer collected, each appended and synced as it happens.

``batches.jsonl`` logs events (``uploaded``, ``submitted``, ``state``, ``collected``);
``answers.jsonl`` holds each request's answer (or failure) by ``custom_id``. A process killed at
any point leaves a log from which ``--resume`` polls what was submitted instead of sending it
again; an uploaded input file whose batch id was not recorded is looked up by that file.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .._errors import ConfigError, DataError, OutputError
from .._lm._direct import HttpRequest, RequestCaptured
from .._lm._errors import status_error
from ._wire import BatchAnswer, BatchState

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
        self.uploads: dict[str, list[str]] = {}  # input file id -> custom ids, batch id not yet recorded
        self.wanted: dict[str, Wanted] = {}
        self.collecting = False
        self.model = ""
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(
                f"cannot create the batch directory {directory}: {exc.strerror or exc}"
            ) from None
        for line in self._lines(self.answers_path):
            answer = BatchAnswer(
                str(line["custom_id"]),
                body=line.get("body"),
                status=int(line.get("status") or 0),
                message=str(line.get("message") or ""),
            )
            if answer.body is not None or keep_errors:
                self.answers[answer.custom_id] = answer
            else:
                self.answers.pop(answer.custom_id, None)  # --retry-errors: a failed request is asked again
        for event in self._lines(self.log_path):
            self._replay(event)

    def _lines(self, path: Path) -> list[dict[str, Any]]:
        if not path.exists():
            return []
        lines: list[dict[str, Any]] = []
        texts = path.read_text(encoding="utf-8").splitlines()
        for number, text in enumerate(texts, start=1):
            if not text.strip():
                continue
            try:
                lines.append(json.loads(text))
            except ValueError:
                if number == len(texts):
                    continue  # a line torn by a kill mid-write: its event never completed
                raise DataError(f"{path}, line {number}: not JSON") from None
        return lines

    def _replay(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "uploaded":
            self.uploads[str(event["file"])] = list(event["custom_ids"])
        elif kind == "submitted":
            self.uploads.pop(str(event.get("file")), None)
            self.batches[str(event["batch"])] = Submitted(str(event["batch"]), list(event["custom_ids"]))
        elif kind in ("state", "collected") and str(event.get("batch")) in self.batches:
            batch = self.batches[str(event["batch"])]
            batch.state = BatchState(**event["state"])
            batch.collected = batch.collected or kind == "collected"

    def _append(self, path: Path, lines: list[dict[str, Any]]) -> None:
        data = b"".join(orjson.dumps(line) + b"\n" for line in lines)
        try:
            if path.exists() and path.stat().st_size and not path.read_bytes().endswith(b"\n"):
                data = b"\n" + data  # after a line torn by a kill, never glued to it
            with path.open("ab") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None

    # ----- the log -----------------------------------------------------------------------
    def note_upload(self, file_id: str, custom_ids: list[str]) -> None:
        self.uploads[file_id] = custom_ids
        self._append(self.log_path, [{"event": "uploaded", "file": file_id, "custom_ids": custom_ids}])

    def note_submitted(self, batch_id: str, custom_ids: list[str], *, file_id: str | None = None) -> None:
        """Record a created batch, with the units its requests answer."""
        units = {cid: sorted(self.wanted[cid].units) for cid in custom_ids if cid in self.wanted}
        event = {
            "event": "submitted",
            "batch": batch_id,
            "file": file_id,
            "custom_ids": custom_ids,
            "units": units,
        }
        self._append(self.log_path, [event])
        self._replay(event)

    def note_state(self, batch_id: str, state: BatchState, *, collected: bool = False) -> None:
        event = {"event": "collected" if collected else "state", "batch": batch_id, "state": vars(state)}
        self._append(self.log_path, [event])
        self._replay(event)

    def add_answers(self, answers: list[BatchAnswer]) -> None:
        lines = [
            {"custom_id": a.custom_id, "body": a.body}
            if a.body is not None
            else {"custom_id": a.custom_id, "status": a.status, "message": a.message}
            for a in answers
        ]
        self._append(self.answers_path, lines)
        for answer in answers:
            self.answers[answer.custom_id] = answer

    def open_batches(self) -> list[Submitted]:
        """Batches submitted and not yet collected (this invocation's or an earlier one's)."""
        return [batch for batch in self.batches.values() if not batch.collected]

    def in_flight(self) -> set[str]:
        ids = {cid for batch in self.open_batches() for cid in batch.custom_ids}
        return ids | {cid for cids in self.uploads.values() for cid in cids}

    # ----- sp-dspy's HTTP engine reads answers here --------------------------------------------
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
    pending = [batch.batch_id for batch in book.open_batches()] + list(book.uploads)
    if pending:
        raise ConfigError(
            f"--resume: this run has {len(pending)} batch(es) still open ({', '.join(pending[:3])}); "
            "resume it with --batch to collect them (sending their requests alone would pay for them twice)"
        )
