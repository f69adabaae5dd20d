"""The ``serve.json`` record and how ``ensure_local_server`` reuses or replaces servers."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

from sp_dspy._serve import (
    ServeState,
    _local,
    clear_state,
    ensure_local_server,
    read_state,
    state_path,
    write_state,
)
from sp_dspy._user_dirs import default_cache_dir

MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1"


class _Models(BaseHTTPRequestHandler):
    served: ClassVar[list[str]] = [MODEL_NAME]

    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": name} for name in self.served]}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def models_endpoint() -> Iterator[str]:
    """An ``api_base`` on 127.0.0.1 whose ``/models`` lists ``MODEL_NAME``."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _state(api_base: str, pid: int, **overrides: Any) -> ServeState:
    fields: dict[str, Any] = {
        "backend": "llama-cpp",
        "pid": pid,
        "owner_pid": pid,
        "api_base": api_base,
        "model": "/models/SmolLM2-135M-Instruct.Q4_1.gguf",
        "model_name": MODEL_NAME,
        "n_ctx": 8192,
    }
    fields.update(overrides)
    return ServeState(**fields)


class _FakeServer:
    """Stands in for LlamaCppServer: records how it was built, never loads a model."""

    started: ClassVar[list[_FakeServer]] = []

    def __init__(self, model: Path | None = None, **kwargs: Any) -> None:
        self.model, self.kwargs, self.stopped = model, kwargs, False
        self.model_name, self.api_base, self.pid = "fresh", "http://127.0.0.1:1/v1", 4242

    def start(self) -> _FakeServer:
        _FakeServer.started.append(self)
        return self

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def fake_server(monkeypatch: pytest.MonkeyPatch) -> type[_FakeServer]:
    _FakeServer.started = []
    monkeypatch.setattr(_local, "LlamaCppServer", _FakeServer)
    return _FakeServer


def test_cache_dir_follows_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SP_DSPY_CACHE_DIR", str(tmp_path / "c"))
    assert state_path() == tmp_path / "c" / "serve.json"
    monkeypatch.delenv("SP_DSPY_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "sp-dspy"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "sp-dspy"


def test_round_trip_and_no_leftover_temp_files() -> None:
    state = _state("http://127.0.0.1:8080/v1/", 123)
    path = write_state(state)
    assert read_state() == state
    assert state.api_base == "http://127.0.0.1:8080/v1"
    assert [p.name for p in path.parent.iterdir()] == ["serve.json"]


def test_unreadable_record_counts_as_none() -> None:
    assert read_state() is None
    state_path().parent.mkdir(parents=True)
    state_path().write_text("{not json")
    assert read_state() is None


def test_record_must_point_at_loopback() -> None:
    with pytest.raises(ValidationError, match="not a loopback address"):
        _state("http://10.0.0.5:8000/v1", 1)


def test_clear_only_removes_own_record() -> None:
    write_state(_state("http://127.0.0.1:8080/v1", 5, owner_pid=77))
    assert clear_state(owner_pid=78) is False
    assert read_state() is not None
    assert clear_state(owner_pid=77) is True
    assert read_state() is None
    assert clear_state() is False


@pytest.mark.network
def test_alive_needs_process_and_model(models_endpoint: str, dead_pid: int) -> None:
    import os

    assert _state(models_endpoint, os.getpid()).alive()
    assert not _state(models_endpoint, dead_pid).alive()
    assert not _state(models_endpoint, os.getpid(), model_name="other").alive()
    assert not _state("http://127.0.0.1:9/v1", os.getpid()).alive(timeout=0.5)


@pytest.mark.network
def test_live_record_is_reused_and_left_running(models_endpoint: str, fake_server: type[_FakeServer]) -> None:
    import os

    write_state(_state(models_endpoint, os.getpid()))
    with ensure_local_server() as handle:
        assert (handle.api_base, handle.model_name, handle.owned) == (models_endpoint, MODEL_NAME, False)
        assert handle.lm_model == f"openai/{MODEL_NAME}"
    assert fake_server.started == []
    assert read_state() is not None


@pytest.mark.network
def test_stale_record_is_removed_and_a_server_started(
    models_endpoint: str, dead_pid: int, fake_server: type[_FakeServer]
) -> None:
    write_state(_state(models_endpoint, dead_pid))
    handle = ensure_local_server(n_ctx=4096, threads=1)
    assert handle.owned and handle.model_name == "fresh"
    assert read_state() is None
    (server,) = fake_server.started
    assert server.kwargs["n_ctx"] == 4096 and server.kwargs["threads"] == 1
    handle.close()
    handle.close()
    assert server.stopped


@pytest.mark.network
@pytest.mark.parametrize(
    ("overrides", "request_kwargs"),
    [
        ({"backend": "vllm"}, {}),
        ({"n_ctx": 2048}, {"n_ctx": 8192}),
        ({}, {"model": Path("/elsewhere/other.gguf")}),
    ],
)
def test_unsuitable_live_record_is_kept_but_not_used(
    models_endpoint: str,
    fake_server: type[_FakeServer],
    overrides: dict[str, Any],
    request_kwargs: dict[str, Any],
) -> None:
    import os

    write_state(_state(models_endpoint, os.getpid(), **overrides))
    with ensure_local_server(**request_kwargs) as handle:
        assert handle.owned
    assert len(fake_server.started) == 1 and fake_server.started[0].stopped
    assert read_state() is not None


@pytest.mark.network
def test_same_model_path_is_reused(
    models_endpoint: str, fake_server: type[_FakeServer], tmp_path: Path
) -> None:
    import os

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    write_state(_state(models_endpoint, os.getpid(), model=str(gguf.resolve())))
    assert not ensure_local_server(gguf).owned
    assert fake_server.started == []
