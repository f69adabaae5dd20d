"""Local model serving: llama.cpp (embedded SmolLM2 or any GGUF) and vLLM, speaking the OpenAI
API on 127.0.0.1 from child processes that a ``with`` block (or ``sp-dspy serve``) always stops;
``serve_model`` is ``sp-dspy serve``'s job: one server in the foreground, recorded for ``--lm local``."""

from __future__ import annotations

from ._foreground import (
    DEFAULT_N_CTX,
    Backend,
    ModelServerConfig,
    ServeListener,
    build_model_server_config,
    serve_model,
)
from ._llamacpp import LlamaCppServer
from ._local import ensure_local_server, local_context_window
from ._state import ServeState, clear_state, read_state, state_path, write_state
from ._vllm import VLLMServer, vllm_executable

__all__ = [
    "DEFAULT_N_CTX",
    "Backend",
    "LlamaCppServer",
    "ModelServerConfig",
    "ServeListener",
    "ServeState",
    "VLLMServer",
    "build_model_server_config",
    "clear_state",
    "ensure_local_server",
    "local_context_window",
    "read_state",
    "serve_model",
    "state_path",
    "vllm_executable",
    "write_state",
]
