"""The manifest counts the requests each endpoint answered, a single endpoint included."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sp_dspy import load_benchmark
from sp_dspy.cli import app
from tests._lm_fixtures import oracle_stub
from tests._stub_server import StubServer

pytestmark = [pytest.mark.usefixtures("isolated_run"), pytest.mark.network, pytest.mark.timeout(120)]

SAMPLE = load_benchmark().cases


@pytest.fixture
def server() -> Iterator[StubServer]:
    with oracle_stub() as stub:
        yield stub


def endpoint_requests(out: Path, run_id: str, *args: str, server: StubServer) -> dict[str, int]:
    command = ["eval", "--lm", "openai/stub", "--api-base", server.url, "--output-dir", str(out), "-q"]
    result = CliRunner().invoke(app, [*command, "--run-id", run_id, *args])
    assert result.exit_code == 0, (result.output, result.exception)
    manifest = json.loads((out / f"manifest_{run_id}.json").read_text(encoding="utf-8"))
    counts: dict[str, int] = manifest["runs"]["stub"]["endpoint_requests"]
    return counts


@pytest.mark.parametrize(
    "args",
    [
        ("--protocol", "per-policy"),  # the official baseline: the direct client counts
        ("--protocol", "per-rule"),
        ("--protocol", "per-policy", "--transport", "dspy"),  # DSPy's engine: its usage records count
        ("--program", "dspy"),
        ("--program", "dspy", "--protocol", "per-rule"),
    ],
    ids=["official", "official-per-rule", "official-dspy-engine", "dspy", "dspy-per-rule"],
)
def test_a_single_endpoint_counts_its_requests_not_cache_replays(
    server: StubServer, tmp_path: Path, args: tuple[str, ...]
) -> None:
    args = ("--limit", "2", *args)
    first = endpoint_requests(tmp_path, "first", *args, server=server)
    sent = len(server.chat_requests)
    assert sent > 0 and first == {server.url: sent}
    replayed = endpoint_requests(tmp_path, "again", *args, server=server)  # every answer from the cache
    assert len(server.chat_requests) == sent and replayed == {server.url: 0}
