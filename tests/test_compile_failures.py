"""A compile that says when it failed: failed LM calls counted by class, eval's early stop, no false tie.

Against a loopback stub that fails every call: a context overflow (not lasting for the
run, lasting for the prompt) leaves every dev answer excluded, which the summary, the
console and the manifest say, without calling 0.00 against 0.00 a tie; a refused key or a
dead server stops the compile after its first calls with the line ``eval`` prints.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from sp_dspy._compile import CompileConfig, compile_guard
from sp_dspy._compile._run import CompileError
from sp_dspy._lm import LMConfig
from sp_dspy._run_manifest import ErrorClassCount, ErrorSummary
from sp_dspy.cli._compile import register
from tests._stub_server import StubServer

pytestmark = [pytest.mark.network, pytest.mark.timeout(120)]
BOOTSTRAP = ["--optimizer", "bootstrap", "--num-retries", "0", "--no-cache"]


def invoke(*args: str) -> Result:
    app = typer.Typer()

    @app.callback()
    def _group() -> None:
        """Test group, so ``compile`` stays a sub-command."""

    register(app)
    return CliRunner().invoke(app, ["compile", *args])


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_a_compile_whose_every_call_overflows_says_so_and_calls_nothing_a_tie(tmp_path: Path) -> None:
    out = tmp_path / "art"
    with StubServer(fail_plan=["400"] * 500) as server:
        result = invoke("--lm", "openai/stub", "--api-base", server.url, *BOOTSTRAP, "--out", str(out))
        sent = len(server.chat_requests)
    assert result.exit_code == 3, result.output  # an artifact, but its calls failed: like eval's exit 3
    assert "tied" not in result.output
    assert "rest on excluded answers (3 and 3 of 3 dev cases)" in result.output
    # During the compile (one line per phase off a terminal) and after it, by error class.
    phases = [line for line in result.output.splitlines() if line.startswith("compile: ")]
    assert "failed calls: context_length" in phases[-1]
    assert f"errors: {sent} of {sent} LM call(s) ended in error" in result.output
    assert f"  context_length: {sent} (first: task LM: ContextWindowExceededError" in result.output
    assert "re-send" not in result.output  # the same prompts would overflow again
    assert "of 4,096 tokens; sending them again fails the same way" in result.output  # the stated window
    assert "fewer demonstrations" in result.output and "--max-tokens" in result.output
    warnings = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["warnings"]
    assert f"{sent} of {sent} LM call(s) failed with context_length" in warnings[1]
    assert "3 of 3 dev answers of the starting program were excluded" in warnings[0]
    assert any("do not fit the model's context window" in warning for warning in warnings)


@pytest.mark.parametrize(("failure", "kind"), [("401", "auth"), ("closed", "unreachable")])
def test_a_lasting_failure_stops_the_compile_early_with_evals_line(
    tmp_path: Path, failure: str, kind: str
) -> None:
    config = CompileConfig(optimizer="bootstrap", out=tmp_path / "art", concurrency=1)
    if failure == "closed":
        lm = LMConfig(model="openai/stub", api_base=closed_port_url(), num_retries=0, cache=False)
        with pytest.raises(CompileError) as raised:
            compile_guard(config, lm)
    else:
        with StubServer(fail_plan=[failure] * 500) as server, pytest.raises(CompileError) as raised:
            lm = LMConfig(model="openai/stub", api_base=server.url, num_retries=0, cache=False)
            compile_guard(config, lm)
        assert len(server.chat_requests) == 1  # not the ten failures of a flaky server
    message = str(raised.value)
    assert message.startswith(f"compile stopped early: 1 call(s) failed with {kind} (task LM: ")
    assert "\n" not in message and raised.value.exit_code == 2
    fix = "the API key is missing or refused" if kind == "auth" else "nothing answers at http://127.0.0.1:"
    assert fix in message and "rerun the same command" in message
    assert not (tmp_path / "art" / "manifest.json").exists()


def test_the_summary_and_prompt_md_name_the_lm_that_was_used(tmp_path: Path) -> None:
    out = tmp_path / "art"
    result = invoke("--lm", "fake/instructed", *BOOTSTRAP, "--out", str(out), "--quiet")
    assert result.exit_code == 0, result.output
    command = f"sp-dspy eval --program {out} --benchmark safepyramid --lm fake/instructed --split {out}/splits.json:test"
    assert "--lm MODEL" not in result.output and command in result.output.replace("\n", "")
    prompt = (out / "prompt.md").read_text(encoding="utf-8")
    assert "--lm MODEL" not in prompt and f"`{command}`" in prompt


def test_an_endpoint_is_named_with_its_lm_never_its_credentials() -> None:
    lm = LMConfig(model="openai/m", api_base="http://user:pw@127.0.0.1:8000/v1", api_key_env="MY_KEY")
    assert lm.command_flags() == "--lm openai/m --api-base http://***@127.0.0.1:8000/v1 --api-key-env MY_KEY"
    assert LMConfig(model="openai/m", api_base="http://h:1/v1", name="local").command_flags() == "--lm local"


def test_the_error_summary_never_offers_retry_errors_for_context_overflows() -> None:
    overflow = ErrorClassCount(error_class="context_length", count=2, first_error="x", prompt_tokens=9000)
    timeout = ErrorClassCount(error_class="timeout", count=1, first_error="y")
    lines = ErrorSummary(units=5, errors=3, classes=[overflow, timeout]).lines("RETRY", window=8192)
    assert lines[-2] == "  re-send the others with RETRY"
    assert (
        "2 prompt(s) (the largest ~9,000 tokens) do not fit the model's context window of 8,192" in lines[-1]
    )
    only = ErrorSummary(units=5, errors=2, classes=[overflow]).lines("RETRY")
    assert not any("RETRY" in line for line in only)
    assert "context window;" in only[-1]  # no window known, none stated: not invented


def test_a_compile_dry_run_caps_the_demos_to_the_models_context_window(tmp_path: Path) -> None:
    # gpt-4's 8,192-token window (LiteLLM's offline map) holds the largest case and one demo, not seven.
    result = invoke(
        "--lm", "openai/gpt-4", "--optimizer", "bootstrap", "--out", str(tmp_path / "a"), "--dry-run"
    )
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "demonstrations capped (max_bootstrapped_demos 1, max_labeled_demos 0; asked 7)" in flat
    assert "context window of 8,192 tokens" in flat and not (tmp_path / "a").exists()
    unknown = invoke(
        "--lm", "fake/instructed", "--optimizer", "bootstrap", "--out", str(tmp_path / "b"), "--dry-run"
    )
    assert unknown.exit_code == 0 and "capped" not in unknown.output  # no window known: nothing invented


def test_an_eval_dry_run_warns_when_its_largest_prompt_overflows_the_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = CliRunner()
    fits = runner.invoke(_app(), ["eval", "--lm", "openai/gpt-4", "--dry-run"])
    assert fits.exit_code == 0, fits.output
    assert "of 8,192 context tokens" in fits.output and "does not fit" not in fits.output
    monkeypatch.setattr("sp_dspy._pricing.context_window", lambda config: 2000)
    small = runner.invoke(_app(), ["eval", "--lm", "openai/gpt-4", "--dry-run"])
    flat = " ".join(small.output.split())
    assert small.exit_code == 0 and "does not fit gpt-4's context window of 2,000 tokens" in flat
    assert "fail with context_length" in flat


def _app() -> typer.Typer:
    from sp_dspy.cli._eval import register as register_eval

    app = typer.Typer()

    @app.callback()
    def _group() -> None:
        """Test group."""

    register_eval(app)
    return app
