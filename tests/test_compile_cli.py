"""``sp-dspy compile`` end to end against a loopback stub: dry run, cache reruns, refused splits."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from sp_dspy._benchmarks import load_benchmark
from sp_dspy._compile._artifact import claim_out
from sp_dspy._data import make_split
from sp_dspy._errors import ConfigError, DataError
from sp_dspy.cli._compile import register
from tests._compile_support import improving_stub
from tests._stub_server import StubServer

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
        "Estimated compile" in result.output and "dev_before" in result.output and "unpriced" in result.output
    )
    assert "--max-calls 5 is below the estimate" in result.output
    assert "These are estimates, not limits" in result.output
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
    fresh = json.loads((tmp_path / "art" / "manifest.json").read_text())["usage"]
    dev = json.loads((tmp_path / "art" / "manifest.json").read_text())["dev"]
    assert sent > 0 and (dev["before"]["score"], dev["after"]["score"]) == (
        0.0,
        100.0,
    )  # via the stub's proposals
    assert "dev score (strict RMR): 0.00" in first.output

    second = invoke(*args, "--force")
    assert second.exit_code == 0, second.output
    assert len(stub.chat_requests) == sent  # no new request reached the model
    assert (tmp_path / "art" / "program.json").read_text() == program
    usage = json.loads((tmp_path / "art" / "manifest.json").read_text())["usage"]
    assert usage["cache_hits"] == usage["calls"] > 0
    # Replayed answers count the tokens they took when first produced, as on every path.
    tokens = ("prompt_tokens", "completion_tokens", "usd")
    assert [usage[k] for k in tokens] == [fresh[k] for k in tokens]


def test_no_cache_sends_every_call_again(stub: StubServer, tmp_path: Path) -> None:
    args = [*stub_lm(stub), *TINY_COPRO, "--out", str(tmp_path / "art"), "--quiet", "--no-cache", "--force"]
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
    assert invoke(*base, "--force").exit_code == 0
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


def test_an_existing_artifact_is_refused_before_any_call_unless_forced(
    stub: StubServer, tmp_path: Path
) -> None:
    args = [*stub_lm(stub), *TINY_COPRO, "--out", str(tmp_path / "art"), "-q"]
    assert invoke(*args).exit_code == 0
    sent, manifest = len(stub.chat_requests), (tmp_path / "art" / "manifest.json").read_text()
    again = invoke(*args, "--no-cache")
    assert isinstance(again.exception, ConfigError)
    assert str(again.exception) == (
        f"--out {tmp_path / 'art'}: already holds a compiled artifact (manifest.json); "
        "pass --force to replace it, or choose another --out"
    )
    assert len(stub.chat_requests) == sent and (tmp_path / "art" / "manifest.json").read_text() == manifest
    assert invoke(*args, "--no-cache", "--force").exit_code == 0
    assert len(stub.chat_requests) > sent


def test_an_unwritable_out_is_refused_before_the_first_lm_call(stub: StubServer, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = invoke(*stub_lm(stub), *TINY_COPRO, "--out", str(blocker / "art"))
    assert isinstance(result.exception, ConfigError)
    assert str(result.exception).startswith(f"--out {blocker / 'art'}: cannot create the directory")
    assert stub.chat_requests == []


def test_a_compile_shows_progress_and_a_summary_and_logs_the_libraries_to_a_file(
    stub: StubServer, tmp_path: Path
) -> None:
    """A capped compile: no flood of refused calls, one line per phase, the summary says what was kept."""
    out = tmp_path / "art"
    result = invoke(*stub_lm(stub), *TINY_COPRO, "--out", str(out), "--max-calls", "11")
    assert result.exit_code == 0, result.output
    phases = [line for line in result.output.splitlines() if line.startswith("compile: ")]
    assert [line.split(" (")[0] for line in phases] == [
        "compile: scoring the starting program on dev",
        "compile: optimizing with copro on train",
        "compile: scoring 1 candidate(s) on dev",
        "compile: saving the artifact",
    ]
    assert "calls 0 / 11" in phases[0] and "budget-limited (--max-calls)" in result.output
    assert phases[1].endswith("; best dev score so far 0.00)") and phases[3].endswith("so far 100.00)")
    assert "ERROR" not in result.output and "Traceback" not in result.output and "%|" not in result.output
    assert len(result.output) < 2000  # the summary and the phases, nothing else
    assert "Kept a candidate the optimizer tried: it scored 100.00 on dev" in result.output
    log = (out / "compile.log").read_text()
    assert "dspy.teleprompt" in log or "Iteration" in log  # the optimizer's own output went to the log


def test_budget_flags_total_tokens_cap_and_per_call_max_tokens(stub: StubServer, tmp_path: Path) -> None:
    out = tmp_path / "art"
    args = [
        *stub_lm(stub),
        *TINY_COPRO,
        "--out",
        str(out),
        "-q",
        "--max-total-tokens",
        "20000",
        "--max-tokens",
        "300",
        "--no-cache",
    ]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["budget"]["max_tokens"] == 20000 and manifest["budget"]["refused_by"] == "max_tokens"
    assert manifest["usage"]["total_tokens"] <= 20000
    assert manifest["lms"]["task"]["max_tokens"] == 300
    sent = [r.body.get("max_tokens", r.body.get("max_completion_tokens")) for r in stub.chat_requests]
    assert sent and all(limit == 300 for limit in sent)


def test_ctrl_c_says_what_was_kept_and_how_to_continue(
    stub: StubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sp_dspy._compile._run as run

    real = run.evaluate_on_dev
    calls = []

    def interrupted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 2:  # the user presses Ctrl-C while the candidates are scored
            raise KeyboardInterrupt
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(run, "evaluate_on_dev", interrupted)
    out = tmp_path / "art"
    result = invoke(*stub_lm(stub), *TINY_COPRO, "--out", str(out))
    assert result.exit_code == 130
    assert "interrupted during 'scoring 1 candidate(s) on dev': no artifact was written in" in result.output
    assert "LM call(s) made so far are in the response cache, so rerunning the same command continues" in (
        " ".join(result.output.split())
    )
    assert not (out / "manifest.json").exists() and "KeyboardInterrupt" in (out / "compile.log").read_text()


def compile_in_a_process(server: StubServer, out: Path) -> subprocess.CompletedProcess[str]:
    """The console script on a real process, so a compile that hangs at exit fails the test."""
    command = [sys.executable, "-c", "from sp_dspy.cli import main; main()", "compile", *stub_lm(server)]
    command += [*TINY_COPRO, "--out", str(out), "--quiet"]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("full", "says"),
    [
        # The optimizer's threads write their progress bars and logs to compile.log: a write that fails
        # there once left a progress bar's lock held, and the compile hung at exit.
        ("compile.log", "cannot write compile.log (No space left on device); the compile stopped"),
        ("program.json.tmp", "cannot write program.json (No space left on device); the artifact was not"),
    ],
)
def test_a_full_disk_stops_a_compile_with_one_line_and_no_half_written_file(
    stub: StubServer, tmp_path: Path, full: str, says: str
) -> None:
    out = tmp_path / "art"
    out.mkdir()
    (out / full).symlink_to("/dev/full")  # every write there fails with ENOSPC, as on a full disk
    done = compile_in_a_process(stub, out)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith(f"error: --out {out}: {says}"), done.stderr
    assert "rerun the same command" in lines[0]
    left = sorted(path.name for path in out.iterdir())
    assert left == ["compile.log"], left  # no artifact file, whole or half, and no temporary file


def test_a_second_compile_into_an_out_being_written_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "art"
    with claim_out(out, force=False):  # what a running compile holds until it ends
        result = invoke("--lm", "fake/oracle", *TINY_COPRO, "--out", str(out), "--quiet")
    assert isinstance(result.exception, ConfigError), result.output
    message = str(result.exception)
    assert "\n" not in message and message.startswith(f"--out {out} is being written by process ")
    assert "one compile writes an --out at a time" in message
    assert sorted(p.name for p in out.iterdir()) == []  # nothing of the second's, and the lock is gone


def test_a_cache_write_failing_mid_compile_is_said_on_the_terminal_not_in_the_log(
    stub: StubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os

    import diskcache

    def disk_full(self: object, *args: object, **kwargs: object) -> object:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(diskcache.Disk, "store", disk_full)
    out = tmp_path / "art"
    result = invoke(*stub_lm(stub), *TINY_COPRO, "--out", str(out), "--quiet")
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert said.count("warning: response cache: cannot write in") == 1, result.output
    assert "the answers from here on are not cached" in said
    assert "response cache" not in (out / "compile.log").read_text(encoding="utf-8")
