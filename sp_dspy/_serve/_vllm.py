"""vLLM's OpenAI-compatible server as a child process, for CUDA hosts.

vLLM is an optional extra (``sp-dspy[vllm]``) that is never imported: we run its
``vllm serve`` CLI. Prefix caching is always on: a case's guard prompts repeat its policy.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Self

from .._errors import ConfigError
from .._user_dirs import default_cache_dir
from ._process import ChildServer, check_positive, die_with_parent, free_port, stop_process, wait_for_models

VLLM_INSTALL = "pip install 'sp-dspy[vllm]'"
_WILDCARD_HOSTS = {"0.0.0.0", "::", ""}


def vllm_command(
    model: str,
    *,
    port: int,
    host: str = "127.0.0.1",
    max_model_len: int | None = None,
    gpu_memory_utilization: float | None = None,
    tensor_parallel_size: int | None = None,
    chat_template: str | None = None,
    reasoning_parser: str | None = None,
    extra_args: Sequence[str] = (),
    executable: str = "vllm",
) -> list[str]:
    """The ``vllm serve`` command line for ``model`` (Hub id or local directory): options left None
    are not passed, ``extra_args`` come last (they win); ``ConfigError`` when a value is out of range."""
    if not model:
        raise ConfigError("--model: vLLM needs a model (Hub id or local directory)")
    if not 0 < port < 65536:
        raise ConfigError(f"--port: {port} is not a TCP port (1-65535)")
    check_positive(max_model_len=max_model_len)
    if gpu_memory_utilization is not None and not 0 < gpu_memory_utilization <= 1:
        raise ConfigError(f"--gpu-memory-utilization: must be in (0, 1], got {gpu_memory_utilization}")
    check_positive(tensor_parallel_size=tensor_parallel_size)
    command = [executable, "serve", model, "--host", host, "--port", str(port), "--enable-prefix-caching"]
    if max_model_len is not None:
        command += ["--max-model-len", str(max_model_len)]
    if gpu_memory_utilization is not None:
        command += ["--gpu-memory-utilization", f"{gpu_memory_utilization:g}"]
    if tensor_parallel_size is not None:
        command += ["--tensor-parallel-size", str(tensor_parallel_size)]
    if chat_template is not None:
        command += ["--chat-template", str(chat_template_path(chat_template))]
    if reasoning_parser is not None:
        command += ["--reasoning-parser", reasoning_parser]
    return [*command, *extra_args]


#: The chat templates sp-dspy ships (``--chat-template NAME``): a guard model's turn tokens only.
CHAT_TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "configs" / "chat_templates"


def chat_template_names() -> list[str]:
    return sorted(path.stem for path in CHAT_TEMPLATES_DIR.glob("*.jinja"))


def chat_template_path(name_or_path: str) -> Path:
    """A shipped template by name (``llama-guard-3``), else a template file; ``ConfigError`` if neither."""
    shipped = CHAT_TEMPLATES_DIR / f"{name_or_path}.jinja"
    if shipped.is_file():
        return shipped
    path = Path(name_or_path)
    if path.is_file():
        return path.resolve()
    raise ConfigError(
        f"--chat-template {name_or_path!r}: no such file, nor one of sp-dspy's templates "
        f"({', '.join(chat_template_names())})"
    )


def vllm_executable() -> str:
    """The ``vllm`` console script of this environment; ``ConfigError`` when vLLM is not installed."""
    if importlib.util.find_spec("vllm") is None:
        raise ConfigError(f"the vllm backend needs vLLM on a CUDA host: install it with `{VLLM_INSTALL}`")
    sibling = Path(sys.executable).with_name("vllm")
    if sibling.is_file():
        return str(sibling)
    found = shutil.which("vllm")
    if found is None:
        raise ConfigError(
            f"vLLM is importable but its `vllm` command is missing: reinstall with `{VLLM_INSTALL}`"
        )
    return found


class VLLMServer(ChildServer):
    """Run ``vllm serve`` for the life of a ``with`` block and wait until it answers.

    Args:
        model: Hub id or local directory; it is also the served model name.
        port: TCP port; None picks one that is free now.
        host: interface to bind; the default keeps the (key-less) server off the network.
        inherit_output: show vLLM's progress on this terminal instead of a log file.
        startup_timeout: seconds for download, load, CUDA-graph capture and first answer.
    """

    def __init__(
        self,
        model: str,
        port: int | None = None,
        *,
        host: str = "127.0.0.1",
        max_model_len: int | None = None,
        gpu_memory_utilization: float | None = None,
        tensor_parallel_size: int | None = None,
        chat_template: str | None = None,
        reasoning_parser: str | None = None,
        inherit_output: bool = False,
        startup_timeout: float = 1800.0,
    ) -> None:
        self.model = self.model_name = model
        self.port = port if port is not None else free_port()
        self.host = host
        self._command = functools.partial(
            vllm_command,
            model,
            port=self.port,
            host=host,
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            tensor_parallel_size=tensor_parallel_size,
            chat_template=chat_template,
            reasoning_parser=reasoning_parser,
        )
        self._command()  # validate now, not after a slow start
        self.inherit_output = inherit_output
        self.startup_timeout = startup_timeout
        self.log_path: Path | None = None

    @property
    def api_base(self) -> str:
        client_host = "127.0.0.1" if self.host in _WILDCARD_HOSTS else self.host
        if ":" in client_host:
            client_host = f"[{client_host}]"
        return f"http://{client_host}:{self.port}/v1"

    def start(self) -> Self:
        if self._process is not None and self._process.poll() is None:
            return self
        command = self._command(executable=vllm_executable())
        output: IO[bytes] | None = None
        if not self.inherit_output:
            logs = default_cache_dir() / "logs"
            logs.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix="vllm-", suffix=".log", dir=logs)
            self.log_path = Path(name)
            output = os.fdopen(fd, "wb")
        try:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        finally:
            if output is not None:
                output.close()
        try:
            wait_for_models(
                self.api_base, timeout=self.startup_timeout, process=self._process, what="vllm serve"
            )
        except BaseException as error:
            self.stop()
            if isinstance(error, ConfigError) and self.log_path is not None:
                raise ConfigError(f"{error} (log: {self.log_path})") from error
            raise
        return self

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            stop_process(process, grace=30.0)

    def __repr__(self) -> str:
        return f"VLLMServer(model={self.model!r}, {self.api_base})"
