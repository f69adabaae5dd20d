"""Provider batch APIs (``eval --batch``): a run's requests answered at the batch rate, into the
response cache, durable across kills (``--resume`` polls what was submitted)."""

from ._book import AnswerBook, custom_id, refuse_open_batches
from ._registry import wire_class, wire_for
from ._run import BatchEnded, fill_by_batch, labelled
from ._wire import BatchAnswer, BatchState, BatchWire

__all__ = [
    "AnswerBook",
    "BatchAnswer",
    "BatchEnded",
    "BatchState",
    "BatchWire",
    "custom_id",
    "fill_by_batch",
    "labelled",
    "refuse_open_batches",
    "wire_class",
    "wire_for",
]
