"""``sp-dspy compile`` end to end against a loopback stub: dry run, cache reruns, refused splits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from sp_dspy._data import load_benchmark, make_split
from sp_dspy._errors import ConfigError, DataError
from sp_dspy._lm import StubServer
from sp_dspy.cli._compile import register
from tests._compile_support import improving_stub

pytestmark = pytest.mark.network
TINY_COPRO = ["--optimizer", "copro", "--set", "breadth=2", "--set", "depth=1", "--set", "num_threads=2"]


def invoke(*args: str) -> Result:
    app = typer.Typer()

    @app.callback()
    def _group() -> None:
        """Test group, so ``compile`` stays a sub-command."""

    register(app)
    return CliRunner().invoke(app, ["compile", *args])


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with improving_stub() as server:
        yield server


def stub_lm(server: StubServer) -> list[str]:
    return ["--lm", "openai/stub", "--api-base", server.url, "--num-retries", "0"]


def test_dry_run_projects_the_compile_and_sends_nothing(stub: StubServer, tmp_path: Path) -> None:
    result = invoke(
        *stub_lm(stub), *TINY_COPRO, "--out", str(tmp_path / "art"), "--dry-run", "--max-calls", "5"
    )
    assert result.exit_code == 0, result.output
    assert (
        "Projected compile" in result.output and "dev_before" in result.output and "unpriced" in result.output
    )
    assert "--max-calls 5 is below the projection" in result.output
    assert stub.requests == [] and not (tmp_path / "art").exists()


def test_dry_run_prices_a_priced_model_without_calling_it(tmp_path: Path) -> None:
    result = invoke("--lm", "openai/gpt-4o-mini", *TINY_COPRO, "--out", str(tmp_path / "art"), "--dry-run")
    assert result.exit_code == 0, result.output
    assert "$" in result.output and "unpriced" not in result.output


def test_rerunning_the_same_compile_is_served_from_the_cache(stub: StubServer, tmp_path: Path) -> None:
    args = [*stub_lm(stub), *TINY_COPRO, "--out", str(tmp_path / "art"), "--quiet"]
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    sent = len(stub.chat_requests)
    program = (tmp_path / "art" / "program.json").read_text()
    dev = json.loads((tmp_path / "art" / "manifest.json").read_text())["dev"]
    assert sent > 0 and (dev["before"]["score"], dev["after"]["score"]) == (
        0.0,
        100.0,
    )  # via the stub's proposals
    assert "dev score (strict RMR): 0.00" in first.output

    second = invoke(*args)
    assert second.exit_code == 0, second.output
    assert len(stub.chat_requests) == sent  # no new request reached the model
    assert (tmp_path / "art" / "program.json").read_text() == program
    usage = json.loads((tmp_path / "art" / "manifest.json").read_text())["usage"]
    assert usage["cache_hits"] == usage["calls"] > 0


def test_no_cache_sends_every_call_again(stub: StubServer, tmp_path: Path) -> None:
    args = [*stub_lm(stub), *TINY_COPRO, "--out", str(tmp_path / "art"), "--quiet", "--no-cache"]
    assert invoke(*args).exit_code == 0
    sent = len(stub.chat_requests)
    assert invoke(*args).exit_code == 0
    assert len(stub.chat_requests) == 2 * sent


def test_a_capped_compile_never_sends_past_the_cap(stub: StubServer, tmp_path: Path) -> None:
    result = invoke(
        *stub_lm(stub), *TINY_COPRO, "--out", str(tmp_path / "art"), "--max-calls", "8", "--quiet"
    )
    assert result.exit_code == 0, result.output
    assert len(stub.chat_requests) <= 8 and "budget-limited" in result.output
    assert json.loads((tmp_path / "art" / "manifest.json").read_text())["budget_limited"] is True


def _split_file(tmp_path: Path, **parts: list[str]) -> Path:
    loaded = load_benchmark(None)
    split = make_split(loaded.cases, seed=0, ratios=(0.25, 0.25, 0.5), dataset_hash=loaded.content_hash)
    path = tmp_path / "splits.json"
    split.model_copy(update=parts).save(path)
    return path


def test_a_split_file_whose_parts_overlap_is_refused(stub: StubServer, tmp_path: Path) -> None:
    loaded = make_split(load_benchmark(None).cases, seed=0, ratios=(0.25, 0.25, 0.5), dataset_hash="x")
    leaked = _split_file(tmp_path, test=[*loaded.test, loaded.train[0]])
    result = invoke(*stub_lm(stub), *TINY_COPRO, "--out", str(tmp_path / "art"), "--splits", str(leaked))
    assert isinstance(result.exception, DataError) and "overlap" in str(result.exception)
    assert stub.chat_requests == []


def test_a_conversation_split_across_parts_is_refused(stub: StubServer, tmp_path: Path) -> None:
    loaded = make_split(load_benchmark(None).cases, seed=0, ratios=(0.25, 0.25, 0.5), dataset_hash="x")
    sibling = loaded.test[0][:-1] + ("1" if loaded.test[0].endswith("0") else "0")
    test = [case_id for case_id in loaded.test if case_id != sibling]
    leaked = _split_file(tmp_path, train=[*loaded.train, sibling], test=test)
    result = invoke(*stub_lm(stub), *TINY_COPRO, "--out", str(tmp_path / "art"), "--splits", str(leaked))
    assert isinstance(result.exception, DataError) and "conversation" in str(result.exception)


def test_a_given_split_is_used_and_copied_into_the_artifact(stub: StubServer, tmp_path: Path) -> None:
    path = _split_file(tmp_path)
    result = invoke(*stub_lm(stub), *TINY_COPRO, "--out", str(tmp_path / "art"), "--splits", str(path), "-q")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "art" / "splits.json").read_text()) == json.loads(path.read_text())
    manifest = json.loads((tmp_path / "art" / "manifest.json").read_text())
    assert manifest["split"]["source"] == str(path) and len(manifest["split"]["dev"]) == 6


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "bredth=3"], "field 'bredth'"),
        (["--max-usd", "1"], "--max-usd: no price"),
        (["--program", "per-case"], "--program 'per-case'"),
        (["--ratios", "0.5,0.5"], "--ratios"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = invoke(
        "--lm", "fake/instructed", *TINY_COPRO, "--out", str(tmp_path / "art"), "--dry-run", *args
    )
    assert isinstance(result.exception, ConfigError | DataError) and message in str(result.exception)


def test_the_lm_is_required(tmp_path: Path) -> None:
    result = invoke("--optimizer", "copro", "--out", str(tmp_path / "art"))
    assert isinstance(result.exception, ConfigError) and "--lm is required" in str(result.exception)


def test_an_interrupted_compile_rerun_reuses_every_finished_call(stub: StubServer, tmp_path: Path) -> None:
    base = [*stub_lm(stub), *TINY_COPRO, "--out", str(tmp_path / "art"), "--quiet"]
    assert invoke(*base, "--max-calls", "8").exit_code == 0  # stopped early, like an interrupted run
    stopped = len(stub.chat_requests)
    assert invoke(*base).exit_code == 0
    resumed = len(stub.chat_requests) - stopped

    with improving_stub() as fresh:  # the same compile from scratch, on an empty cache
        other = [*stub_lm(fresh), *TINY_COPRO, "--out", str(tmp_path / "other"), "--quiet", "--no-cache"]
        assert invoke(*other).exit_code == 0
        distinct = {json.dumps(r.body, sort_keys=True) for r in fresh.chat_requests}
    assert resumed == len(distinct) - stopped


def test_the_manifest_names_key_variables_never_keys(
    stub: StubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_API_KEY", "sk-test-secret-value-1234")
    args = [
        *stub_lm(stub),
        "--api-key-env",
        "STUB_API_KEY",
        *TINY_COPRO,
        "--out",
        str(tmp_path / "art"),
        "-q",
    ]
    assert invoke(*args).exit_code == 0
    text = "".join(p.read_text() for p in (tmp_path / "art").iterdir())
    assert "STUB_API_KEY" in text and "sk-test-secret-value-1234" not in text
