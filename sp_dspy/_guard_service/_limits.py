"""What one request may ask of the guard service: past a limit it gets a one-line 4xx (or 429, 504)."""

from __future__ import annotations

from dataclasses import dataclass

from .._guard._guard import DEFAULT_DEADLINE_S


@dataclass(frozen=True)
class ServiceLimits:
    """The service's limits; the command line's ``--max-*`` and ``--request-timeout`` set them."""

    max_body_bytes: int = 1024 * 1024
    max_messages: int = 200
    max_rules: int = 200
    max_batch: int = 64
    max_in_flight: int = 64
    #: Seconds one check may take in all (the guard's deadline); past it the answer is a 504.
    request_timeout_s: float = DEFAULT_DEADLINE_S
    #: ``/readyz`` probes the LM at most once per this many seconds (the answer between is the last one's).
    probe_interval_s: float = 10.0
