"""``sp-dspy serve``: flag checks per backend and the foreground record/stop cycle."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from sp_dspy._errors import ConfigError, SpDspyError
from sp_dspy._serve import ServeState, _foreground, _vllm, read_state
from sp_dspy.cli import _serve as serve_cli


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """Keep `serve` a subcommand, as in the real CLI."""

    serve_cli.register(app)
    return app


def _invoke(app: typer.Typer, *args: str) -> BaseException | None:
    result = CliRunner().invoke(app, ["serve", *args])
    return result.exception


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-model-len", "4096"], "--max-model-len: not an option of --backend llama-cpp"),
        (
            ["--gpu-memory-utilization", "0.5", "--tensor-parallel-size", "2"],
            "--gpu-memory-utilization, --tensor-parallel-size: not an option of --backend llama-cpp",
        ),
        (
            ["--backend", "vllm", "--model", "m", "--threads", "2"],
            "--threads: not an option of --backend vllm",
        ),
        (["--backend", "vllm"], "--model: --backend vllm needs a Hub model id"),
    ],
)
def test_flags_of_the_other_backend_are_refused(app: typer.Typer, args: list[str], message: str) -> None:
    error = _invoke(app, *args)
    assert isinstance(error, ConfigError)
    assert str(error).startswith(message)


def test_vllm_backend_without_vllm_says_how_to_install(
    app: typer.Typer, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        _vllm.importlib.util, "find_spec", lambda name: None if name == "vllm" else real(name)
    )
    error = _invoke(app, "--backend", "vllm", "--model", "Qwen/Qwen3-8B")
    assert isinstance(error, ConfigError)
    assert "pip install 'sp-dspy[vllm]'" in str(error)


def test_unknown_backend_is_a_usage_error(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["serve", "--backend", "ollama"])
    assert result.exit_code == 2


class _FakeServer:
    """A started server whose ``poll`` runs a scripted ending."""

    def __init__(self, ending: type[BaseException] | int) -> None:
        self.ending, self.polls, self.stopped = ending, 0, False
        self.seen_states: list[ServeState | None] = []
        self.pid, self.api_base, self.model_name = os.getpid(), "http://127.0.0.1:5555/v1", "tiny"

    def __enter__(self) -> _FakeServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopped = True

    def poll(self) -> int | None:
        self.polls += 1
        self.seen_states.append(read_state())
        if self.polls < 2:
            return None
        if isinstance(self.ending, int):
            return self.ending
        raise self.ending()


def test_foreground_records_then_cleans_up_on_ctrl_c(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_foreground.time, "sleep", lambda seconds: None)
    server = _FakeServer(KeyboardInterrupt)
    _foreground._run_foreground(server, _foreground.Backend.llama_cpp, "/m/tiny.gguf", n_ctx=4096)  # type: ignore[arg-type]
    state = server.seen_states[0]
    assert state is not None
    assert (state.backend, state.model, state.model_name, state.n_ctx) == (
        "llama-cpp",
        "/m/tiny.gguf",
        "tiny",
        4096,
    )
    assert state.owner_pid == os.getpid()
    assert server.stopped
    assert read_state() is None


def test_foreground_reports_a_server_that_dies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_foreground.time, "sleep", lambda seconds: None)
    server = _FakeServer(9)
    with pytest.raises(SpDspyError, match="exited on its own with status 9"):
        _foreground._run_foreground(server, _foreground.Backend.vllm, "org/m", n_ctx=None)  # type: ignore[arg-type]
    assert server.seen_states[0] is not None and server.seen_states[0].backend == "vllm"
    assert server.stopped
    assert read_state() is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--guard", "official", "--lm", "fake", "--model", "m.gguf", "--n-ctx", "512"],
         "--model, --n-ctx: an option of the model server, not of --guard"),
        (["--lm", "fake", "--max-usd", "1"], "--max-usd, --lm: an option of the guard service; add --guard"),
        (["--host", "0.0.0.0"], "--host: an option of the guard service"),
        (["--guard", "official"], "--lm: missing"),
        (["--guard", "official", "--lm", "fake", "--max-usd", "-1"], "--max-usd: Input should be greater than 0"),
        (["--guard", "official", "--lm", "fake", "--host", "0.0.0.0"],
         "--host 0.0.0.0: serving beyond this machine needs --auth-token-env VAR"),
        (["--guard", "official", "--lm", "fake", "--auth-token-env", "SP_TEST_UNSET_TOKEN"],
         "--auth-token-env SP_TEST_UNSET_TOKEN: the environment variable is not set or empty"),
    ],
)  # fmt: skip
def test_serve_refuses_the_other_modes_flags_and_open_binds(
    app: typer.Typer, args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SP_TEST_UNSET_TOKEN", raising=False)
    result = CliRunner().invoke(app, ["serve", *args])
    assert isinstance(result.exception, ConfigError), result.output
    assert str(result.exception).startswith(message)
