"""Local model serving: llama.cpp (embedded SmolLM2 or any GGUF) and vLLM, speaking the OpenAI
API on 127.0.0.1 from child processes that a ``with`` block (or ``sp-dspy serve``) always stops."""

from __future__ import annotations

from ._llamacpp import LlamaCppServer
from ._local import ensure_local_server, local_context_window
from ._state import ServeState, clear_state, read_state, state_path, write_state
from ._vllm import VLLMServer

__all__ = [
    "LlamaCppServer",
    "ServeState",
    "VLLMServer",
    "clear_state",
    "ensure_local_server",
    "local_context_window",
    "read_state",
    "state_path",
    "write_state",
]
