"""``--log-requests``: each record keeps the requests its unit sent (as ``--show-request`` prints
them, redacted), off by default; ``show`` prints them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sp_dspy import load_benchmark
from sp_dspy._redact import MASK
from sp_dspy.cli import app
from tests._results import iter_records
from tests._stub_server import StubServer

pytestmark = [pytest.mark.network, pytest.mark.timeout(120), pytest.mark.usefixtures("isolated_run")]


def run_eval(server: StubServer, out: Path, *args: str) -> list[dict]:
    result = CliRunner().invoke(
        app,
        ["eval", "--lm", "openai/stub", "--api-base", server.url, "--output-dir", str(out), "-q", "--no-cache",
         "--limit", "2", "--num-retries", "0", *args],
    )  # fmt: skip
    assert result.exit_code in (0, 3), (result.output, result.exception)
    (path,) = out.glob("*.jsonl")
    return list(iter_records(path))


def sent_bodies(server: StubServer) -> list[dict]:
    return [r.body for r in server.requests if r.path.endswith("/chat/completions") and r.body is not None]


@pytest.mark.parametrize("protocol", ["per-policy", "per-rule"])
def test_each_record_keeps_the_request_its_unit_sent(tmp_path: Path, protocol: str) -> None:
    with StubServer() as server:
        records = run_eval(server, tmp_path, "--protocol", protocol, "--log-requests")
        bodies, url = sent_bodies(server), server.url
    assert len(records) == len(bodies) > 0
    for record in records:
        (request,) = record["requests"]
        assert set(request) == {"method", "url", "headers", "body"}
        assert request["url"] == url + "/chat/completions"
        assert request["headers"]["Authorization"] == "Bearer ***"  # the key masked, as --show-request does
    assert sorted(map(str, (r["requests"][0]["body"] for r in records))) == sorted(map(str, bodies))


def test_records_keep_no_request_by_default(tmp_path: Path) -> None:
    with StubServer() as server:
        records = run_eval(server, tmp_path)
    assert records and all("requests" not in record for record in records)


def test_a_failed_call_keeps_its_request_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit whose call failed keeps what it sent; a secret in the environment is masked in it."""
    case = load_benchmark().cases[0]
    secret = case.conversation[10:40]
    monkeypatch.setenv("STUB_TOKEN", secret)
    with StubServer(fail_plan=["500"] * 8) as server:
        (record,) = run_eval(server, tmp_path, "--limit", "1", "--log-requests")
        (body, *_) = sent_bodies(server)
    assert record["error_class"] and len(record["requests"]) >= 1
    assert secret in json.dumps(body, ensure_ascii=False)  # the wire got the text
    kept = json.dumps(record["requests"][0]["body"], ensure_ascii=False)
    assert secret not in kept and MASK in kept


def test_show_prints_the_kept_request(tmp_path: Path) -> None:
    with StubServer() as server:
        records = run_eval(server, tmp_path, "--limit", "1", "--log-requests")
    (path,) = tmp_path.glob("*.jsonl")
    out = CliRunner().invoke(app, ["show", str(path)], env={"COLUMNS": "200"}).output
    assert "request:" in out
    assert '"Authorization": "Bearer ***"' in out
    assert records[0]["requests"][0]["body"]["model"] == "stub"


def test_ablate_keeps_requests_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sp_dspy._report._plots.render_plots", lambda summary: [])
    with StubServer() as server:
        result = CliRunner().invoke(
            app,
            ["ablate", "--lm", "openai/stub", "--api-base", server.url, "--limit", "1", "--variants",
             "official-per-policy", "--out", str(tmp_path / "ab"), "--no-cache", "--n-boot", "20", "-q",
             "--log-requests"],
        )  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)
    (path,) = (tmp_path / "ab").rglob("*.jsonl")
    (record,) = iter_records(path)
    assert record["requests"][0]["body"]["messages"]
