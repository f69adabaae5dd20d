"""Serving a local model in the foreground (``sp-dspy serve`` without ``--guard``): its config, and
the run that starts the server, records it for ``--lm local``, waits for Ctrl-C or SIGTERM, then
stops it and removes the record."""

from __future__ import annotations

import os
import time
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .._errors import ConfigError, SpDspyError, validation_problem
from .._interrupt import sigterm_interrupts
from ._llamacpp import LlamaCppServer
from ._state import ServeState, clear_state, read_state, write_state
from ._vllm import VLLMServer

#: llama.cpp's context per request unless ``n_ctx`` says otherwise.
DEFAULT_N_CTX = 8192


class Backend(StrEnum):
    llama_cpp = "llama-cpp"
    vllm = "vllm"


_LLAMA_CPP_SETTINGS = ("n_ctx", "threads", "n_parallel")
_VLLM_SETTINGS = ("max_model_len", "gpu_memory_utilization", "tensor_parallel_size", "chat_template",
                  "reasoning_parser")  # fmt: skip


class ModelServerConfig(BaseModel):
    """A local model server: the backend, its model and port, and the backend's own settings (the
    other backend's are refused, each named as its flag)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Backend = Backend.llama_cpp
    #: llama-cpp: a .gguf file (default: the embedded SmolLM2-135M-Instruct); vllm: a Hub id or directory.
    model: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)  # on 127.0.0.1; None: a free one
    n_ctx: int | None = Field(default=None, ge=256)  # llama-cpp: context per request [DEFAULT_N_CTX]
    threads: int | None = Field(default=None, ge=1)  # llama-cpp: CPU threads (default: half the CPUs)
    n_parallel: int | None = Field(default=None, ge=1)  # llama-cpp: requests decoded together [1]
    max_model_len: int | None = Field(default=None, ge=1)  # vllm: context length (default: auto)
    gpu_memory_utilization: float | None = Field(default=None, ge=0.01, le=1.0)
    tensor_parallel_size: int | None = Field(default=None, ge=1)
    chat_template: str | None = None  # vllm: a file or one sp-dspy ships (llama-guard-3, llama-guard-4)
    reasoning_parser: str | None = None  # vllm: the server's reasoning parser (qwen3, openai_gptoss)

    @model_validator(mode="after")
    def _one_backends_settings(self) -> ModelServerConfig:
        other = _VLLM_SETTINGS if self.backend is Backend.llama_cpp else _LLAMA_CPP_SETTINGS
        if given := [_flag(name) for name in other if getattr(self, name) is not None]:
            raise ValueError(f"{', '.join(given)}: not an option of --backend {self.backend.value}")
        if self.backend is Backend.vllm and not self.model:
            raise ValueError("--model: --backend vllm needs a Hub model id or a local model directory")
        return self


def build_model_server_config(flags: dict[str, Any]) -> ModelServerConfig:
    """The config ``flags`` (its fields) describe, a None one left at its default; an error is one
    ``ConfigError`` line naming the flag."""
    try:
        return ModelServerConfig.model_validate(
            {key: value for key, value in flags.items() if value is not None}
        )
    except ValidationError as exc:
        field, message = validation_problem(exc)
        raise ConfigError(f"{_flag(field)}: {message}" if field else message) from None


def _flag(field: str) -> str:
    return f"--{field.replace('_', '-')}"


class ServeListener(Protocol):
    """What ``serve_model`` tells its caller as the server starts (``sp-dspy serve`` prints it)."""

    def starting(self, backend: Backend, model_name: str) -> None:
        """Before the server loads ``model_name`` (which can take minutes)."""

    def replacing(self, earlier: ServeState) -> None:
        """A live server's record is replaced: ``--lm local`` uses the new one from now."""

    def serving(self, state: ServeState) -> None:
        """The server answers at ``state.api_base`` and is recorded."""


def serve_model(config: ModelServerConfig, listener: ServeListener | None = None) -> None:
    """Serve ``config``'s model until Ctrl-C or SIGTERM (in the main thread), then return once the
    server stopped and its record is gone; a server that exits on its own is a ``SpDspyError``."""
    server: LlamaCppServer | VLLMServer
    n_ctx: int | None
    if config.backend is Backend.llama_cpp:
        context = config.n_ctx or DEFAULT_N_CTX
        server = LlamaCppServer(
            Path(config.model) if config.model else None, config.port, n_ctx=context, threads=config.threads,
            n_parallel=config.n_parallel or 1,
        )  # fmt: skip
        model, n_ctx = str(server.model), context
    else:
        assert config.model is not None  # the config's validator
        server = VLLMServer(
            config.model, config.port, max_model_len=config.max_model_len,
            gpu_memory_utilization=config.gpu_memory_utilization,
            tensor_parallel_size=config.tensor_parallel_size, chat_template=config.chat_template,
            reasoning_parser=config.reasoning_parser, inherit_output=True,
        )  # fmt: skip
        model, n_ctx = config.model, config.max_model_len
    (listener or _Quiet()).starting(config.backend, server.model_name)
    _run_foreground(server, config.backend, model, n_ctx=n_ctx, listener=listener)


def _run_foreground(
    server: LlamaCppServer | VLLMServer,
    backend: Backend,
    model: str,
    *,
    n_ctx: int | None,
    listener: ServeListener | None = None,
) -> None:
    """Start ``server``, record it, wait for Ctrl-C or SIGTERM, then stop and un-record it."""
    tell = listener or _Quiet()
    owner = os.getpid()
    try:
        # `kill PID` must clean up like Ctrl-C: stop the child, remove the state file.
        with sigterm_interrupts(), server:
            state = ServeState(
                backend=backend.value, pid=server.pid, owner_pid=owner, api_base=server.api_base,
                model=model, model_name=server.model_name, n_ctx=n_ctx,
            )  # fmt: skip
            earlier = read_state()
            if earlier is not None and earlier.alive():
                tell.replacing(earlier)
            write_state(state)
            try:
                tell.serving(state)
                while (status := server.poll()) is None:
                    time.sleep(0.5)
                raise SpDspyError(f"the {backend.value} server exited on its own with status {status}")
            finally:
                clear_state(owner_pid=owner)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: how a foreground server is meant to stop
        return


class _Quiet:
    """The listener of a caller that gave none: it says nothing."""

    def starting(self, backend: Backend, model_name: str) -> None:
        pass

    def replacing(self, earlier: ServeState) -> None:
        pass

    def serving(self, state: ServeState) -> None:
        pass
