"""Local model serving: llama.cpp (embedded SmolLM2 or any GGUF) and vLLM.

Both speak the OpenAI API on 127.0.0.1 from child processes that a ``with`` block (or
``sp-dspy serve``) starts and always stops. Importing this imports neither backend.
"""

from __future__ import annotations

from ._llamacpp import EMBEDDED_INSTALL, LlamaCppServer, embedded_model_path, model_name_for
from ._local import ensure_local_server
from ._state import ServeState, clear_state, read_state, state_path, write_state
from ._vllm import VLLM_INSTALL, VLLMServer, vllm_command

__all__ = [
    "EMBEDDED_INSTALL",
    "VLLM_INSTALL",
    "LlamaCppServer",
    "ServeState",
    "VLLMServer",
    "clear_state",
    "embedded_model_path",
    "ensure_local_server",
    "model_name_for",
    "read_state",
    "state_path",
    "vllm_command",
    "write_state",
]
