"""vLLM: command assembly, the missing-vLLM error, and the process lifecycle (fake server)."""

from __future__ import annotations

import importlib.util
import os
import sys
import textwrap
from pathlib import Path

import pytest

from sp_dspy._errors import ConfigError
from sp_dspy._serve import VLLMServer, _vllm
from sp_dspy._serve._process import pid_alive, served_model_ids
from sp_dspy._serve._vllm import VLLM_INSTALL, vllm_command


def test_minimal_command_binds_loopback_with_prefix_caching() -> None:
    assert vllm_command("Qwen/Qwen3-8B", port=8001) == [
        "vllm", "serve", "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", "8001", "--enable-prefix-caching",
    ]  # fmt: skip


def test_all_options_in_order_with_extra_args_last() -> None:
    command = vllm_command(
        "/models/llama",
        port=9000,
        host="0.0.0.0",
        max_model_len=16384,
        gpu_memory_utilization=0.85,
        tensor_parallel_size=2,
        extra_args=("--dtype", "bfloat16"),
        executable="/venv/bin/vllm",
    )
    assert command == [
        "/venv/bin/vllm", "serve", "/models/llama", "--host", "0.0.0.0", "--port", "9000",
        "--enable-prefix-caching", "--max-model-len", "16384", "--gpu-memory-utilization", "0.85",
        "--tensor-parallel-size", "2", "--dtype", "bfloat16",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "flag"),
    [
        ({"port": 0}, "--port"),
        ({"port": 80, "max_model_len": 0}, "--max-model-len"),
        ({"port": 80, "gpu_memory_utilization": 1.5}, "--gpu-memory-utilization"),
        ({"port": 80, "gpu_memory_utilization": 0.0}, "--gpu-memory-utilization"),
        ({"port": 80, "tensor_parallel_size": 0}, "--tensor-parallel-size"),
    ],
)
def test_out_of_range_values_name_the_flag(kwargs: dict[str, float], flag: str) -> None:
    with pytest.raises(ConfigError, match=flag):
        vllm_command("m", **kwargs)  # type: ignore[arg-type]


def test_server_validates_before_starting() -> None:
    with pytest.raises(ConfigError, match="--tensor-parallel-size"):
        VLLMServer("m", port=8000, tensor_parallel_size=0)


def test_missing_vllm_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        _vllm.importlib.util, "find_spec", lambda name: None if name == "vllm" else real(name)
    )
    with pytest.raises(ConfigError) as info:
        VLLMServer("Qwen/Qwen3-8B", port=8000).start()
    assert VLLM_INSTALL == "pip install 'sp-dspy[vllm]'"
    assert VLLM_INSTALL in str(info.value)
    assert "CUDA" in str(info.value)


def test_api_base_uses_loopback_for_wildcard_hosts() -> None:
    assert VLLMServer("m", port=8123, host="0.0.0.0").api_base == "http://127.0.0.1:8123/v1"
    assert VLLMServer("m", port=8123, host="::1").api_base == "http://[::1]:8123/v1"


_FAKE_VLLM = """\
    import json, sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    args = sys.argv[1:]
    assert args[0] == "serve" and "--enable-prefix-caching" in args, args
    model, port = args[1], int(args[args.index("--port") + 1])
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"object": "list", "data": [{"id": model}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *args):
            pass
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A ``vllm`` executable that serves ``/v1/models`` like ``vllm serve`` does."""
    script = tmp_path / "vllm"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(_FAKE_VLLM))
    script.chmod(0o755)
    monkeypatch.setattr(_vllm, "vllm_executable", lambda: str(script))
    return script


@pytest.mark.network
def test_server_starts_answers_and_stops(fake_vllm: Path) -> None:
    with VLLMServer("org/tiny-model", startup_timeout=20) as server:
        pid = server.pid
        assert server.poll() is None
        assert served_model_ids(server.api_base) == ["org/tiny-model"]
    assert not pid_alive(pid)
    assert served_model_ids(server.api_base, timeout=0.5) is None


@pytest.mark.network
def test_server_that_dies_at_start_reports_its_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    script = tmp_path / "vllm"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nprint('CUDA out of memory', file=sys.stderr)\nsys.exit(3)\n"
    )
    script.chmod(0o755)
    monkeypatch.setattr(_vllm, "vllm_executable", lambda: str(script))
    with pytest.raises(ConfigError, match=r"exited with status 3 .*\(log: .*vllm-.*\.log\)") as info:
        VLLMServer("m", startup_timeout=20).start()
    log = Path(str(info.value).rsplit("(log: ", 1)[1].rstrip(")"))
    assert "CUDA out of memory" in log.read_text()
    assert os.fspath(log).startswith(os.environ["SP_DSPY_CACHE_DIR"])
