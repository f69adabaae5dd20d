"""``sp-dspy serve``'s jobs from Python: ``serve_guard`` with a ``GuardServiceConfig`` answers what the
command's guard service answers, ``serve_model`` runs a ``ModelServerConfig``, and a bad setting is
one line naming its field (its flag, from the builders)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

import sp_dspy
from sp_dspy import ConfigError, DataError, GuardServiceConfig, LMConfig, ModelServerConfig
from sp_dspy._serve import ServeState, _foreground, read_state
from tests.test_guard_service import MESSAGES, POLICY, WAIT_S, _free_port, check

ROOT = Path(__file__).resolve().parents[1]
NAMES = ("GuardServiceConfig", "ModelServerConfig", "ServeListener", "ServingGuard", "StoppedAtOnce",
         "build_guard_service_config", "build_model_server_config", "serve_guard", "serve_model")  # fmt: skip

#: ``serve_guard`` from Python: the official guard on the fake model, on a free port; it prints what
#: ``on_ready`` gets, and ``returned`` once a SIGTERM stopped it gracefully.
PYTHON_SERVICE = textwrap.dedent(
    """
    import sys
    import sp_dspy

    config = sp_dspy.GuardServiceConfig(guard="official", policy=sys.argv[1], port=0)
    lm = sp_dspy.LMConfig(model="fake/all", cache=False)
    ready = lambda s: print(s.url, s.guard, s.protocol, s.model, s.auth, flush=True)
    sp_dspy.serve_guard(config, lm, on_ready=ready)
    print("returned", flush=True)
    """
)


def test_the_jobs_are_public_names_and_import_sp_dspy_stays_light() -> None:
    assert set(NAMES) <= set(sp_dspy.__all__)
    code = "import sys, sp_dspy; sp_dspy.GuardServiceConfig; sp_dspy.ModelServerConfig; print('aiohttp' in sys.modules)"
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert shown.stdout.strip() == "False"


@contextmanager
def _started(command: list[str]) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``command`` running, with the first line it printed; SIGTERM-ed (killed past ``WAIT_S``) after."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield process, process.stdout.readline()
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(WAIT_S)
            except subprocess.TimeoutExpired:
                process.kill()
        process.communicate()


def _verdict(answer: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in answer.items() if key != "latency_ms"}


@pytest.mark.network
@pytest.mark.timeout(120)
def test_serve_guard_from_python_answers_what_the_command_answers(tmp_path: Path) -> None:
    policy = tmp_path / "policy.txt"
    policy.write_text(POLICY, encoding="utf-8")
    port = _free_port()
    cli = [sys.executable, "-c", "from sp_dspy.cli import main; main()", "serve", "--guard", "official",
           "--lm", "fake/all", "--no-cache", "--policy", str(policy), "--port", str(port)]  # fmt: skip
    python = [sys.executable, "-c", PYTHON_SERVICE, str(policy)]
    with _started(python) as (api, ready), _started(cli) as (_, announced):
        url, guard, protocol, model, auth = ready.split()
        assert (guard, protocol, model, auth) == ("official", "per-policy", "all", "False"), ready
        assert announced.startswith(f"serving guard official (per-policy) on all at http://127.0.0.1:{port}")
        status, _, answer = check(url, {"messages": MESSAGES})
        command_status, _, command_answer = check(f"http://127.0.0.1:{port}", {"messages": MESSAGES})
        assert status == command_status == 200
        assert answer["violated_rules"], answer  # the fake's ``all``: a verdict with rules, not an empty one
        assert _verdict(answer) == _verdict(command_answer)
        api.send_signal(signal.SIGTERM)
        out, errors = api.communicate(timeout=WAIT_S)
    assert api.returncode == 0, errors
    assert out.strip() == "returned"
    assert "Traceback" not in errors


def _no_session(lm: LMConfig) -> AbstractContextManager[LMConfig]:
    raise AssertionError("the LM session opened before the settings were checked")


@pytest.mark.parametrize(
    ("settings", "error", "message"),
    [
        ({"host": "0.0.0.0"}, ConfigError, "--host 0.0.0.0: serving beyond this machine needs --auth-token-env VAR (a bearer token every endpoint but /healthz requires)"),
        ({"auth_token_env": "SP_TEST_UNSET_TOKEN"}, ConfigError,
         "--auth-token-env SP_TEST_UNSET_TOKEN: the environment variable is not set or empty"),
        ({"policy": "missing-policy.txt"}, DataError, "--policy missing-policy.txt: no such file"),
    ],
)  # fmt: skip
def test_serve_guard_refuses_bad_settings_before_the_lm_session_opens(
    settings: dict[str, Any], error: type[Exception], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SP_TEST_UNSET_TOKEN", raising=False)
    config = GuardServiceConfig(guard="official", **settings)
    with pytest.raises(error) as raised:
        sp_dspy.serve_guard(config, LMConfig(model="fake"), session=_no_session)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"caps": {"max_usd": -1}}, "--max-usd: Input should be greater than 0"),
        ({"caps": {"max_tokens": 0}}, "--max-total-tokens: Input should be greater than or equal to 1"),
        ({"limits": {"max_in_flight": 0}}, "--max-in-flight: Input should be greater than or equal to 1"),
        ({"limits": {"max_body_bytes": 0}}, "--max-body-kb: Input should be greater than or equal to 1"),
        ({"limits": {"request_timeout_s": 0}}, "--request-timeout: Input should be greater than 0"),
        ({"port": 70000}, "--port: Input should be less than or equal to 65535"),
        ({"on_error": "drop"}, "--on-error: Input should be 'block' or 'allow'"),
        ({"scope": "turn"}, "--scope: Input should be 'conversation' or 'last-turn'"),
        ({"workers": 2}, "--workers: Extra inputs are not permitted"),
    ],
)
def test_a_bad_guard_service_setting_is_one_line_naming_its_flag(flags: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        sp_dspy.build_guard_service_config({"guard": "official", **flags})
    assert str(raised.value) == message


def test_the_guard_service_config_names_the_field_and_keeps_the_defaults() -> None:
    with pytest.raises(
        ValidationError, match=r"limits\.max_batch\n  Input should be greater than or equal to 1"
    ):
        GuardServiceConfig(guard="official", limits={"max_batch": 0})  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"guard\n  Field required"):
        GuardServiceConfig()  # type: ignore[call-arg]
    config = sp_dspy.build_guard_service_config(
        {"guard": "official", "port": None, "limits": {"max_batch": None}}
    )
    assert (config.host, config.port, config.parser, config.scope, config.on_error) == (
        "127.0.0.1", 8080, "strict", "conversation", "block",
    )  # fmt: skip
    assert config.limits == sp_dspy.GuardServiceConfig(guard="x").limits and not config.caps.any


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"max_model_len": 4096}, "--max-model-len: not an option of --backend llama-cpp"),
        ({"backend": "vllm", "model": "m", "threads": 2, "n_ctx": 512},
         "--n-ctx, --threads: not an option of --backend vllm"),
        ({"backend": "vllm"}, "--model: --backend vllm needs a Hub model id or a local model directory"),
        ({"backend": "ollama"}, "--backend: Input should be 'llama-cpp' or 'vllm'"),
        ({"n_ctx": 128}, "--n-ctx: Input should be greater than or equal to 256"),
        ({"gpu_memory_utilization": 1.5, "backend": "vllm", "model": "m"},
         "--gpu-memory-utilization: Input should be less than or equal to 1"),
    ],
)  # fmt: skip
def test_a_bad_model_server_setting_is_one_line_naming_its_flag(flags: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        sp_dspy.build_model_server_config(flags)
    assert str(raised.value) == message
    with pytest.raises(ValidationError):
        ModelServerConfig(**flags)


class _Server:
    """A llama.cpp server that starts at once and, on its second poll, is stopped by Ctrl-C."""

    made: ClassVar[list[_Server]] = []

    def __init__(self, model: Path | None, port: int | None, **settings: Any) -> None:
        self.settings = {"model": model, "port": port, **settings}
        self.pid, self.api_base, self.model_name, self.model = (
            os.getpid(),
            "http://127.0.0.1:5555/v1",
            "tiny",
            model,
        )
        self.polls, self.stopped = 0, False
        _Server.made.append(self)

    def __enter__(self) -> _Server:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopped = True

    def poll(self) -> int | None:
        self.polls += 1
        if self.polls > 1:
            raise KeyboardInterrupt
        return None


class _Listener:
    def __init__(self) -> None:
        self.heard: list[tuple[str, Any]] = []

    def starting(self, backend: _foreground.Backend, model_name: str) -> None:
        self.heard.append(("starting", (backend.value, model_name)))

    def replacing(self, earlier: ServeState) -> None:
        self.heard.append(("replacing", earlier))

    def serving(self, state: ServeState) -> None:
        self.heard.append(("serving", (state.backend, state.model_name, state.n_ctx, read_state() == state)))


def test_serve_model_from_python_tells_its_listener_and_cleans_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_foreground, "LlamaCppServer", _Server)
    monkeypatch.setattr(_foreground.time, "sleep", lambda seconds: None)
    listener = _Listener()
    sp_dspy.serve_model(ModelServerConfig(model="m/tiny.gguf", threads=2), listener)  # returns after Ctrl-C
    (server,) = _Server.made
    assert server.settings == {"model": Path("m/tiny.gguf"), "port": None, "n_ctx": 8192, "threads": 2,
                               "n_parallel": 1}  # fmt: skip
    assert listener.heard == [
        ("starting", ("llama-cpp", "tiny")),
        ("serving", ("llama-cpp", "tiny", 8192, True)),
    ]
    assert server.stopped and read_state() is None
