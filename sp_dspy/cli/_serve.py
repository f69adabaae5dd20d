"""``sp-dspy serve``: run a local OpenAI-compatible model server in the foreground.

Other commands reach it with ``--lm local`` (llama.cpp) or ``--lm openai/<name> --api-base <url>``.
"""

from __future__ import annotations

import os
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from .._errors import ConfigError, SpDspyError
from .._interrupt import sigterm_interrupts
from .._serve import LlamaCppServer, ServeState, VLLMServer, clear_state, read_state, state_path, write_state
from ._console import console, err_console

DEFAULT_N_CTX = 8192


class Backend(StrEnum):
    llama_cpp = "llama-cpp"
    vllm = "vllm"


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)


def serve(
    backend: Annotated[
        Backend, typer.Option("--backend", help="llama-cpp (CPU, GGUF files) or vllm (CUDA GPUs).")
    ] = Backend.llama_cpp,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="llama-cpp: a .gguf file (default: the embedded SmolLM2-135M-Instruct). "
            "vllm: a Hub model id or local directory (required).",
        ),
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", min=1, max=65535, help="Port on 127.0.0.1 (default: a free one).")
    ] = None,
    n_ctx: Annotated[
        int | None,
        typer.Option("--n-ctx", min=256, help=f"llama-cpp: context per request [{DEFAULT_N_CTX}]."),
    ] = None,
    threads: Annotated[
        int | None,
        typer.Option("--threads", min=1, help="llama-cpp: CPU threads (default: half the CPUs, at least 1)."),
    ] = None,
    n_parallel: Annotated[
        int | None, typer.Option("--n-parallel", min=1, help="llama-cpp: requests decoded together [1].")
    ] = None,
    max_model_len: Annotated[
        int | None, typer.Option("--max-model-len", min=1, help="vllm: context length (default: auto).")
    ] = None,
    gpu_memory_utilization: Annotated[
        float | None,
        typer.Option("--gpu-memory-utilization", min=0.01, max=1.0, help="vllm: share of GPU memory to use."),
    ] = None,
    tensor_parallel_size: Annotated[
        int | None, typer.Option("--tensor-parallel-size", min=1, help="vllm: GPUs to shard the model over.")
    ] = None,
) -> None:
    """Serve a model on 127.0.0.1 until Ctrl-C; other commands can use it meanwhile."""
    vllm_flags = {
        "--max-model-len": max_model_len,
        "--gpu-memory-utilization": gpu_memory_utilization,
        "--tensor-parallel-size": tensor_parallel_size,
    }
    llama_cpp_flags = {"--n-ctx": n_ctx, "--threads": threads, "--n-parallel": n_parallel}
    other_flags = vllm_flags if backend is Backend.llama_cpp else llama_cpp_flags
    if given := [flag for flag, value in other_flags.items() if value is not None]:
        raise ConfigError(f"{', '.join(given)}: not an option of --backend {backend.value}")
    server: LlamaCppServer | VLLMServer
    if backend is Backend.llama_cpp:
        context = n_ctx or DEFAULT_N_CTX
        server = LlamaCppServer(
            Path(model) if model else None, port, n_ctx=context, threads=threads, n_parallel=n_parallel or 1
        )
        err_console.print(f"loading {server.model_name} with llama.cpp ...", highlight=False)
        _run_foreground(server, backend, str(server.model), n_ctx=context)
    else:
        if not model:
            raise ConfigError("--model: --backend vllm needs a Hub model id or a local model directory")
        server = VLLMServer(
            model,
            port,
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            tensor_parallel_size=tensor_parallel_size,
            inherit_output=True,
        )
        err_console.print(f"starting vllm serve {model} (loading can take minutes) ...", highlight=False)
        _run_foreground(server, backend, model, n_ctx=max_model_len)


def _run_foreground(
    server: LlamaCppServer | VLLMServer, backend: Backend, model: str, *, n_ctx: int | None
) -> None:
    """Start ``server``, record it, wait for Ctrl-C or SIGTERM, then stop and un-record it."""
    owner = os.getpid()
    try:
        # `kill PID` must clean up like Ctrl-C: stop the child, remove the state file.
        with sigterm_interrupts(), server:
            state = ServeState(
                backend=backend.value,
                pid=server.pid,
                owner_pid=owner,
                api_base=server.api_base,
                model=model,
                model_name=server.model_name,
                n_ctx=n_ctx,
            )
            earlier = read_state()
            if earlier is not None and earlier.alive():
                err_console.print(
                    f"[yellow]note:[/yellow] replacing the record of the server at {earlier.api_base} "
                    f"(pid {earlier.pid}); `--lm local` now uses this one"
                )
            write_state(state)
            try:
                console.print(
                    f"serving [bold]{state.model_name}[/bold] ({state.backend}) at {state.api_base}\n"
                    "use it from other commands with:\n"
                    + ("  --lm local\n" if backend is Backend.llama_cpp else "")
                    + f"  --lm openai/{state.model_name} --api-base {state.api_base}\npress Ctrl-C to stop",
                    highlight=False,
                    soft_wrap=True,
                )
                while (status := server.poll()) is None:
                    time.sleep(0.5)
                raise SpDspyError(f"the {backend.value} server exited on its own with status {status}")
            finally:
                clear_state(owner_pid=owner)
    except KeyboardInterrupt:
        err_console.print(f"stopped; removed {state_path()}", highlight=False)
