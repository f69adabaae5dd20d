"""What one model answer is, whichever engine produced it: text, usage and cost, cache status."""

from __future__ import annotations

from pydantic import BaseModel

from .._usage import Usage


class ChatResult(BaseModel):
    """One model answer to raw messages.

    ``usage`` (with its ``cost``) describes the answer as produced, also when replayed from the
    cache; ``None``: the provider reported none. ``cached`` says this call paid nothing;
    ``batched``: the answer is one of the run's batch answers (paid at the batch rate), never
    ``cached`` as well, even when DSPy's cache handed it over.
    """

    text: str
    reasoning: str | None = None
    usage: Usage | None = None
    cached: bool = False
    batched: bool = False
    model: str | None = None
    finish_reason: str | None = None
    #: The first answer token's logprob by token, its alternatives included (None: the server sent
    #: none; asked for with ``logprobs``): where a guard's probability of ``Yes`` is read.
    first_token_logprobs: dict[str, float] | None = None
