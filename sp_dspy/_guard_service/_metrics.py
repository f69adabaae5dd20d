"""The guard service's counters, written as Prometheus' text format for ``GET /metrics``.

A handful of counters and one histogram: written here rather than with a client library
(no new dependency for a few metric families). Everything runs on the service's one event
loop, so no lock is needed.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter

from .._budget import Ledger
from .._guard import Verdict

#: Upper bounds (seconds) of the check latency histogram: an LM answers in tens of ms to minutes.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
PREFIX = "sp_dspy_guard"
_KINDS = ("calls", "tokens", "usd")


def _number(value: float) -> str:
    """A sample value: counts exact (no exponent), sums as Python writes floats."""
    return str(value) if isinstance(value, int) else repr(float(value))


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class ServiceMetrics:
    """What the service counted since it started."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, int]] = Counter()  # (endpoint, HTTP status)
        self.verdicts: Counter[tuple[str, str]] = Counter()  # (endpoint, verdict status)
        self.lm_errors: Counter[tuple[str, str]] = Counter()  # (endpoint, error class)
        self.violations: Counter[str] = Counter()  # by endpoint: verdicts naming a violated rule
        self.refused: Counter[tuple[str, str]] = Counter()  # (endpoint, why): checks given no verdict
        self.buckets = [0] * len(BUCKETS)
        self.latency_sum = 0.0
        self.latency_count = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.usd = 0.0
        self.in_flight = 0

    def request(self, endpoint: str, status: int) -> None:
        self.requests[(endpoint, status)] += 1

    def check(self, endpoint: str, verdict: Verdict, seconds: float) -> None:
        """Count one finished check of ``endpoint``: its verdict, a violation or LM failure if any,
        its tokens, dollars and latency."""
        self.verdicts[(endpoint, verdict.status)] += 1
        if verdict.violated_rules:
            self.violations[endpoint] += 1
        if verdict.status == "error":
            self.lm_errors[(endpoint, verdict.error_class or "unknown")] += 1
        usage = verdict.usage
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.usd += usage.cost or 0.0
        index = bisect_left(BUCKETS, seconds)
        if index < len(BUCKETS):
            self.buckets[index] += 1
        self.latency_sum += seconds
        self.latency_count += 1

    def refusal(self, endpoint: str, error_class: str) -> None:
        """Count one check of ``endpoint`` the service refused before a verdict (a bad input, a budget
        cap, an internal error): a gateway answers the others of its request, so the status code alone
        does not show it."""
        self.refused[(endpoint, error_class)] += 1

    def _latency_histogram(self) -> list[str]:
        """The ``check_seconds`` histogram's exposition: cumulative buckets, sum and count."""
        cumulative = 0
        samples: list[tuple[str, float]] = []
        for bound, count in zip(BUCKETS, self.buckets, strict=True):
            cumulative += count
            samples.append((f'_bucket{{le="{bound:g}"}}', cumulative))
        samples += [
            ('_bucket{le="+Inf"}', self.latency_count),
            ("_sum", self.latency_sum),
            ("_count", self.latency_count),
        ]
        return [
            f"# HELP {PREFIX}_check_seconds Seconds per check, LM calls included.",
            f"# TYPE {PREFIX}_check_seconds histogram",
            *(f"{PREFIX}_check_seconds{suffix} {_number(value)}" for suffix, value in samples),
        ]

    def text(self, ledger: Ledger | None = None) -> str:
        """The exposition: ``# HELP``/``# TYPE`` then the samples of each family (``ledger``: the
        service's caps, with what is spent and what the checks in flight reserved)."""
        lines: list[str] = []

        def family(name: str, kind: str, help: str, samples: list[tuple[str, float]]) -> None:
            lines.extend((f"# HELP {PREFIX}_{name} {help}", f"# TYPE {PREFIX}_{name} {kind}"))
            lines.extend(f"{PREFIX}_{name}{labels} {_number(value)}" for labels, value in samples)

        family(
            "requests_total", "counter", "HTTP requests answered, by endpoint and status code.",
            [(f'{{endpoint="{_label(e)}",code="{code}"}}', n) for (e, code), n in sorted(self.requests.items())],
        )  # fmt: skip
        family(
            "verdicts_total", "counter", "Checks answered, by endpoint and verdict status.",
            [(f'{{endpoint="{_label(e)}",status="{_label(s)}"}}', n) for (e, s), n in sorted(self.verdicts.items())],
        )  # fmt: skip
        family(
            "violations_total", "counter", "Checks whose verdict named a violated rule, by endpoint.",
            [(f'{{endpoint="{_label(e)}"}}', n) for e, n in sorted(self.violations.items())],
        )  # fmt: skip
        family(
            "lm_errors_total", "counter", "Checks the LM failed (status error), by endpoint and error class.",
            [(f'{{endpoint="{_label(e)}",error_class="{_label(c)}"}}', n)
             for (e, c), n in sorted(self.lm_errors.items())],
        )  # fmt: skip
        family(
            "checks_refused_total", "counter",
            "Checks the service refused before a verdict (bad_input, budget, internal), by endpoint and why.",
            [(f'{{endpoint="{_label(e)}",error_class="{_label(c)}"}}', n)
             for (e, c), n in sorted(self.refused.items())],
        )  # fmt: skip
        lines.extend(self._latency_histogram())
        family(
            "tokens_total", "counter", "LM tokens the checks used (answers replayed from the cache included).",
            [('{kind="prompt"}', self.prompt_tokens), ('{kind="completion"}', self.completion_tokens)],
        )  # fmt: skip
        family(
            "cost_usd_total",
            "counter",
            "USD of the checks' answers at DSPy's price snapshot.",
            [("", self.usd)],
        )
        family("in_flight", "gauge", "Checks in flight now.", [("", self.in_flight)])
        for name, help, samples in [] if ledger is None else ledger_samples(ledger):
            family(name, "gauge", help, samples)
        return "\n".join(lines) + "\n"


def ledger_samples(ledger: Ledger) -> list[tuple[str, str, list[tuple[str, float]]]]:
    """The gauges of the service's caps: what is spent, what the checks in flight reserved, the caps."""
    total, held, caps = ledger.total(), ledger.reserved(), ledger.caps
    figures: tuple[tuple[str, str, tuple[float | None, ...]], ...] = (
        ("budget_spent", "What the checks spent against the caps (--max-*).",
         (total.calls, total.tokens, total.usd or 0.0)),
        ("budget_reserved", "What the checks in flight reserved: each one's worst case.",
         (held.calls, held.tokens, held.usd)),
        ("budget_cap", "The caps (--max-calls, --max-total-tokens, --max-usd); absent: uncapped.",
         (caps.max_calls, caps.max_tokens, caps.max_usd)),
    )  # fmt: skip
    return [
        (
            name,
            help,
            [(f'{{kind="{kind}"}}', v) for kind, v in zip(_KINDS, values, strict=True) if v is not None],
        )
        for name, help, values in figures
    ]
