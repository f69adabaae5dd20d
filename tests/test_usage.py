"""The one usage type: what a provider's usage dict reads as, how usages add up, how a line stores one."""

from __future__ import annotations

from sp_dspy.lm import Usage, parse_usage
from sp_dspy.metrics import Usage as MetricsUsage


def test_openai_usage_reads_reasoning_and_cached_prompt_tokens() -> None:
    raw = {
        "prompt_tokens": 1000,
        "completion_tokens": 200,
        "total_tokens": 1200,
        "prompt_tokens_details": {"cached_tokens": 600},
        "completion_tokens_details": {"reasoning_tokens": 50},
    }
    assert parse_usage(raw) == Usage(
        prompt_tokens=1000,
        completion_tokens=200,
        total_tokens=1200,
        reasoning_tokens=50,
        cache_read_tokens=600,
    )


def test_anthropic_usage_counts_its_disjoint_cache_counters_in_the_prompt() -> None:
    raw = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 20,
    }
    assert parse_usage(raw) == Usage(
        prompt_tokens=130, completion_tokens=5, total_tokens=135, cache_read_tokens=100, cache_write_tokens=20
    )
    assert parse_usage({"input_tokens": 3, "output_tokens": 1}) == Usage(
        prompt_tokens=3, completion_tokens=1, total_tokens=4
    )


def test_missing_and_odd_counts_read_as_zero_and_nothing_reported_is_none() -> None:
    assert parse_usage({"prompt_tokens": 7, "completion_tokens": None}) == Usage(
        prompt_tokens=7, total_tokens=7
    )
    assert parse_usage({"prompt_tokens": True, "completion_tokens": "2", "reasoning_tokens": 3}) == Usage(
        reasoning_tokens=3
    )
    assert parse_usage({}) is None and parse_usage(None) is None and parse_usage([1, 2]) is None


def test_sums_keep_unknown_apart_from_zero() -> None:
    priced = Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3, cost=0.5)
    unpriced = Usage(prompt_tokens=4, total_tokens=4, cache_read_tokens=2)
    total = priced + unpriced
    assert (total.prompt_tokens, total.total_tokens, total.cost, total.cache_read_tokens) == (5, 7, 0.5, 2)
    assert total.reasoning_tokens is None and Usage.total([unpriced, unpriced]).cost is None
    assert Usage.total([]) == Usage()


def test_a_result_line_stores_the_reported_counts_without_the_cost() -> None:
    assert Usage(prompt_tokens=3, completion_tokens=1, total_tokens=4, cost=0.1).tokens() == {
        "prompt_tokens": 3,
        "completion_tokens": 1,
        "total_tokens": 4,
    }
    assert Usage(cache_read_tokens=0).tokens()["cache_read_tokens"] == 0
    assert MetricsUsage is Usage  # programs import it from the public metrics module
