"""Process and loopback-HTTP plumbing shared by the llama.cpp and vLLM servers.

Servers run in their own session (process group): a terminal Ctrl-C reaches only the
parent, which stops the child deliberately, and a stop signal reaches every forked worker.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Any, Self

from .._errors import ConfigError

# Environment proxies must never see loopback traffic: ``http_proxy`` without a
# matching ``no_proxy`` would send our health checks to a remote host.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free right now (another process may still take it first)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def check_positive(**values: int | None) -> None:
    """``ConfigError`` naming the option (``n_ctx`` is ``--n-ctx``) of the first value below 1."""
    for name, value in values.items():
        if value is not None and value < 1:
            raise ConfigError(f"--{name.replace('_', '-')}: must be at least 1, got {value}")


def post_json(url: str, body: dict[str, Any], *, timeout: float) -> Any:
    """POST a JSON body and decode the JSON answer, bypassing any configured proxy."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with _OPENER.open(request, timeout=timeout) as response:
        return json.loads(response.read())


def served_model_ids(api_base: str, *, timeout: float = 2.0) -> list[str] | None:
    """Model ids listed by ``{api_base}/models``, or None when nothing answers."""
    try:
        with _OPENER.open(f"{api_base}/models", timeout=timeout) as response:
            payload = json.loads(response.read())
    except (OSError, ValueError):  # URLError is an OSError
        return None
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        return None
    return [str(item["id"]) for item in data if isinstance(item, dict) and "id" in item]


def wait_for_models(
    api_base: str, *, timeout: float, process: subprocess.Popen[Any] | None = None, what: str = "server"
) -> list[str]:
    """Poll ``/models`` until it answers; ``ConfigError`` if ``process`` exits first or time runs out."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        ids = served_model_ids(api_base, timeout=min(2.0, max(0.1, deadline - time.monotonic())))
        if ids is not None:
            return ids
        if process is not None and process.poll() is not None:
            raise ConfigError(f"{what} exited with status {process.returncode} before {api_base} answered")
        if time.monotonic() >= deadline:
            raise ConfigError(f"{what} did not answer at {api_base}/models within {timeout:g} s")
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (zombies count as gone)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat_path = f"/proc/{pid}/stat"  # Linux only; elsewhere a zombie counts as alive
    with contextlib.suppress(OSError, IndexError), open(stat_path, errors="replace") as stat:
        if stat.read().rsplit(")", 1)[-1].split()[0] == "Z":
            return False
    return True


def die_with_parent() -> None:
    """``preexec_fn`` asking Linux to SIGTERM the child when its parent dies (even by SIGKILL),
    so it never holds the GPU or port; a no-op elsewhere. Linux ties the signal to the
    *thread* that forked, so start servers from a long-lived thread."""
    if not sys.platform.startswith("linux"):
        return

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def stop_process(process: subprocess.Popen[Any], *, grace: float) -> int | None:
    """SIGTERM, then SIGKILL, to the process group of a child started with ``start_new_session=True``;
    its exit status (None only if even SIGKILL did not reap it in time)."""
    if process.poll() is not None:
        return process.returncode
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            return process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    return process.poll()


class ChildServer(ABC):
    """A server run as a child process (``_process``, set by :meth:`start`) that a ``with`` block stops."""

    _process: subprocess.Popen[bytes] | None = None

    @abstractmethod
    def start(self) -> Self: ...

    @abstractmethod
    def stop(self) -> None: ...

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError(f"{type(self).__name__} is not running")
        return self._process.pid

    def poll(self) -> int | None:
        """The server process's exit status, or None while it runs (or before it starts)."""
        return None if self._process is None else self._process.poll()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
