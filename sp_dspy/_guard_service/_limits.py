"""What one request may ask of the guard service: past a limit it gets a one-line 4xx (or 429, 504)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .._guard import DEFAULT_DEADLINE_S


class ServiceLimits(BaseModel):
    """The service's limits; the command line's ``--max-*`` and ``--request-timeout`` set them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_body_bytes: int = Field(default=1024 * 1024, ge=1)
    max_messages: int = Field(default=200, ge=1)
    max_rules: int = Field(default=200, ge=1)
    max_batch: int = Field(default=64, ge=1)
    max_in_flight: int = Field(default=64, ge=1)
    #: Seconds one check may take in all (the guard's deadline); past it the answer is a 504.
    request_timeout_s: float = Field(default=DEFAULT_DEADLINE_S, gt=0)
    #: ``/readyz`` probes the LM at most once per this many seconds (the answer between is the last one's).
    probe_interval_s: float = Field(default=10.0, ge=0)
