"""``--lm local``: a llama.cpp server to talk to, reused or started on demand."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from .._interrupt import sigterm_interrupts
from ._llamacpp import LlamaCppServer
from ._state import ServeState, clear_state, read_state


@dataclass(eq=False)
class ServerHandle(contextlib.ExitStack):
    """An endpoint plus the duty (its exit callbacks) to stop it if we started it; closing a
    reused server (``owned=False``) leaves it to ``sp-dspy serve``."""

    api_base: str
    model_name: str
    owned: bool

    def __post_init__(self) -> None:
        super().__init__()

    @property
    def lm_model(self) -> str:
        """The model string for ``dspy.LM`` / litellm: ``openai/<model_name>``."""
        return f"openai/{self.model_name}"


#: Context tokens per request of the embedded server (SmolLM2 was trained with 8192).
DEFAULT_N_CTX = 8192


def local_context_window() -> int:
    """The context window ``--lm local`` gets: the recorded ``sp-dspy serve`` server's when it is
    reusable by that measure, else the embedded server's :data:`DEFAULT_N_CTX`. Starts nothing."""
    state = read_state()
    if state is not None and state.backend == "llama-cpp" and state.n_ctx and state.n_ctx >= DEFAULT_N_CTX:
        return state.n_ctx
    return DEFAULT_N_CTX


def ensure_local_server(
    model: Path | None = None,
    *,
    n_ctx: int = DEFAULT_N_CTX,
    threads: int | None = None,
    n_parallel: int = 1,
    startup_timeout: float = 60.0,
) -> ServerHandle:
    """A llama.cpp endpoint: the one ``sp-dspy serve`` runs if usable, else a new one.

    A recorded server is reused when alive, llama.cpp, with at least ``n_ctx`` context
    and serving ``model`` (any when None: ``sp-dspy serve --model X`` picks the local
    model); a dead record is removed. Otherwise a private server starts (``threads``,
    ``n_parallel`` and ``startup_timeout`` apply to it) and closing the handle stops it;
    until then SIGTERM interrupts this process like Ctrl-C, so ``kill`` never orphans it.
    """
    state = read_state()
    if state is not None and _reusable(state, model, n_ctx):
        return ServerHandle(api_base=state.api_base, model_name=state.model_name, owned=False)
    with contextlib.ExitStack() as owner:
        owner.enter_context(sigterm_interrupts())
        server = LlamaCppServer(model, n_ctx=n_ctx, threads=threads, n_parallel=n_parallel,
                                startup_timeout=startup_timeout).start()  # fmt: skip
        owner.callback(server.stop)  # runs first: the server is stopped, then SIGTERM's handler restored
        handle = ServerHandle(api_base=server.api_base, model_name=server.model_name, owned=True)
        handle.push(owner.pop_all())
    return handle


def _reusable(state: ServeState, model: Path | None, n_ctx: int) -> bool:
    if not state.alive():
        clear_state(owner_pid=state.owner_pid)
        return False
    if state.backend != "llama-cpp" or (state.n_ctx is not None and state.n_ctx < n_ctx):
        return False
    return model is None or Path(state.model) == Path(model).expanduser().resolve()
