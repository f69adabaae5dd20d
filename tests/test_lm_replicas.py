"""Several replicas behind one LM (``--api-base URL1,URL2``), over real loopback HTTP.

Two :class:`StubServer`s stand in for two vLLM or llama.cpp servers of one model:
requests must reach both, a replica that fails must be retried on the other, the
manifest must say how many requests each one served, and the JSON-schema
``response_format`` must reach whichever replica answers.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

import sp_dspy._lm._replicas as replicas_module
from sp_dspy import load_benchmark
from sp_dspy._lm import (
    LMConfig,
    classify_error,
    configure_cache,
    import_dspy,
    make_lm,
)
from sp_dspy._lm._cache import ENDPOINT_GROUP_KEY
from sp_dspy._lm._replicas import AsyncReplicaEngine, ReplicaEngine
from sp_dspy._runner._fake_gold import teach_fake
from sp_dspy.cli import app
from sp_dspy.lm import achat, chat
from tests._results import iter_records
from tests._stub_server import StubServer

pytestmark = [pytest.mark.usefixtures("restore_dspy_cache"), pytest.mark.network, pytest.mark.timeout(120)]

SCHEMA_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "answer", "strict": True, "schema": {"type": "object", "properties": {}}},
}


def replicas(*servers: StubServer, **settings: Any) -> LMConfig:
    return LMConfig(model="openai/stub", api_base=",".join(s.url for s in servers), **settings)


def served(server: StubServer) -> int:
    """Chat requests the stub answered (planned failures excluded)."""
    return sum(1 for r in server.chat_requests if r.failure is None)


async def ask_concurrently(lm: Any, count: int) -> list[str]:
    answers = await asyncio.gather(*(achat(lm, [{"role": "user", "content": f"q{i}"}]) for i in range(count)))
    return [answer.text for answer in answers]


def test_requests_are_spread_over_both_replicas() -> None:
    configure_cache(enabled=False)
    with StubServer(latency_s=0.05) as one, StubServer(latency_s=0.05) as two:
        lm = make_lm(replicas(one, two))
        assert isinstance(lm.engine, ReplicaEngine)
        assert asyncio.run(ask_concurrently(lm, 12)) and asyncio.run(ask_concurrently(lm, 4))
        counts = dict(lm.endpoint_requests)
        assert counts == {one.url: served(one), two.url: served(two)}
        assert sum(counts.values()) == 16 and min(counts.values()) >= 4  # least-busy, not all on one


@pytest.mark.parametrize("failure", ["500", "503", "drop", "429"])
def test_a_failing_replica_is_retried_on_the_other(failure: str) -> None:
    configure_cache(enabled=False)
    # The first replica fails every request; with no DSPy retry the router alone must cope.
    with StubServer(fail_plan=[failure] * 50) as broken, StubServer() as healthy:
        lm = make_lm(replicas(broken, healthy, num_retries=0))
        answers = [chat(lm, [{"role": "user", "content": f"q{i}"}]).text for i in range(3)]
        answers += asyncio.run(ask_concurrently(lm, 5))
        assert all(answers)
        assert broken.chat_requests, "the router never tried the failing replica"
        assert dict(lm.endpoint_requests) == {broken.url: 0, healthy.url: 8}


def test_when_every_replica_fails_the_error_is_classified() -> None:
    configure_cache(enabled=False)
    with StubServer(fail_plan=["500"] * 5) as one, StubServer(fail_plan=["500"] * 5) as two:
        lm = make_lm(replicas(one, two, num_retries=0))
        with pytest.raises(import_dspy().LMError) as raised:
            chat(lm, [{"role": "user", "content": "anyone?"}])
        assert classify_error(raised.value) == "server_error"
        assert (len(one.chat_requests), len(two.chat_requests)) == (1, 1)  # one attempt per replica
        assert dict(lm.endpoint_requests) == {one.url: 0, two.url: 0}


def test_when_every_replica_failed_once_the_retry_waits_out_the_cooldown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Longer than DSPy's backoff before its last retry (1 s + 2 s): without the cooldown
    # as retry_after, both retries would find every replica still cooling down.
    monkeypatch.setattr(replicas_module, "COOLDOWN_S", 3.5)
    configure_cache(enabled=False)
    with StubServer(fail_plan=["500"]) as one, StubServer(fail_plan=["503"]) as two:
        lm = make_lm(replicas(one, two, num_retries=2))
        started = time.monotonic()
        assert chat(lm, [{"role": "user", "content": "second time lucky"}]).text
        elapsed = time.monotonic() - started
        assert sum(lm.endpoint_requests.values()) == 1
    assert 3.5 <= elapsed < 8


def test_response_format_and_settings_reach_the_replica_without_the_group_marker() -> None:
    configure_cache(enabled=False)
    with StubServer() as one, StubServer() as two:
        lm = make_lm(replicas(one, two, json_schema=True, temperature=0, max_tokens=64))
        assert lm.engine.supports_response_schema and "response_format" in lm.engine.supported_params
        chat(lm, [{"role": "user", "content": "format?"}], response_format=SCHEMA_FORMAT)
        (body,) = [r.body for r in one.chat_requests + two.chat_requests]
    assert body is not None
    assert body["response_format"] == SCHEMA_FORMAT
    assert (body["temperature"], body["max_tokens"], body["model"]) == (0, 64, "stub")
    assert "metadata" not in body and ENDPOINT_GROUP_KEY not in json.dumps(body)


def test_the_response_cache_is_keyed_by_the_endpoint_group(tmp_path: Path) -> None:
    configure_cache(enabled=True, directory=tmp_path)
    messages = [{"role": "user", "content": "cache me"}]
    with StubServer() as one, StubServer() as two, StubServer() as three:
        first = chat(make_lm(replicas(one, two)), messages)
        again = chat(make_lm(replicas(one, two)), messages)  # a rerun of the same pool
        other = chat(make_lm(replicas(one, three)), messages)  # another pool: its own entry
        assert served(one) + served(two) + served(three) == 2
    assert again.cached and again.text == first.text and not other.cached


def test_copies_share_the_engine_and_the_counts() -> None:
    import copy

    configure_cache(enabled=False)
    with StubServer() as one, StubServer() as two:
        lm = make_lm(replicas(one, two))
        clone = copy.deepcopy(lm)
        chat(clone, [{"role": "user", "content": "from a copy"}])
        assert clone.engine is lm.engine and isinstance(lm._async_engine_spec, AsyncReplicaEngine)
        assert sum(lm.endpoint_requests.values()) == 1


def test_saved_state_has_no_key_and_loads_one_pool_for_both_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLICA_KEY", "replica-secret-123")
    dspy = import_dspy()
    lm = make_lm(
        LMConfig(model="openai/stub", api_base="http://127.0.0.1:9/v1,http://me:pw-4711@127.0.0.1:10/v1",
                 api_key_env="REPLICA_KEY")
    )  # fmt: skip
    state = lm.dump_state()
    assert "replica-secret-123" not in json.dumps(state) and "pw-4711" not in json.dumps(state)
    loaded = dspy.LM.load_state(state, allow_custom_lm_class=True)
    assert isinstance(loaded.engine, ReplicaEngine)
    assert loaded.engine.pool is loaded._async_engine_spec.pool
    assert loaded.engine.pool.endpoints == ["http://127.0.0.1:9/v1", "http://***@127.0.0.1:10/v1"]


@pytest.mark.parametrize(
    ("protocol", "program", "units"), [("per-policy", "official", 4), ("per-policy", "dspy", 4)]
)
def test_eval_over_two_replicas_completes_and_the_manifest_counts_them(
    protocol: str, program: str, units: int, tmp_path: Path
) -> None:
    cases = load_benchmark().cases[:units]
    with StubServer(latency_s=0.05, fail_plan=["500", "drop"]) as one, StubServer(latency_s=0.05) as two:
        for server in (one, two):
            teach_fake(SimpleNamespace(engine=server.fake), cases)
        result = CliRunner().invoke(
            app,
            ["eval", "--lm", "openai/stub", "--api-base", f"{one.url},{two.url}", "--json-schema",
             "--protocol", protocol, "--program", program, "--limit", str(units), "--concurrency", "4",
             "--num-retries", "0", "--no-cache", "--run-id", "pool", "--output-dir", str(tmp_path), "-q"],
        )  # fmt: skip
        assert result.exit_code == 0, (result.output, result.exception)
        bodies = [r.body for r in one.chat_requests + two.chat_requests if r.failure is None]
        urls = (one.url, two.url)
    records = list(iter_records(tmp_path / "results_pool_stub.jsonl"))
    assert sorted(r["id"] for r in records) == sorted(c.id for c in cases)
    assert not [r for r in records if r.get("error_class")], "a failed replica leaked an error record"
    assert all(r["parse_status"] != "failed" for r in records)
    manifest = json.loads((tmp_path / "manifest_pool.json").read_text())
    counts = manifest["runs"]["stub"]["endpoint_requests"]
    assert set(counts) == set(urls) and sum(counts.values()) == len(bodies) == units
    assert counts[urls[1]] >= 1
    assert all(isinstance(b, dict) and b["response_format"]["type"] == "json_schema" for b in bodies)
