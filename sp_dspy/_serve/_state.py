"""``serve.json`` in the user cache directory: how ``sp-dspy serve`` lends its server to
``--lm local``. A record is trusted only while its process is alive *and* its
``/v1/models`` still lists the recorded model (never a crashed server or a reused pid).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .._user_dirs import default_cache_dir
from ._process import pid_alive, served_model_ids

Backend = Literal["llama-cpp", "vllm"]
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def state_path() -> Path:
    return default_cache_dir() / "serve.json"


class ServeState(BaseModel):
    """One running server, as recorded by ``sp-dspy serve``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    backend: Backend
    pid: int = Field(description="Process that serves HTTP (the server child).")
    owner_pid: int = Field(description="The `sp-dspy serve` process that owns the record.")
    api_base: str
    model: str = Field(description="GGUF path (llama-cpp) or model id (vllm).")
    model_name: str = Field(description="Name listed by /v1/models and used as openai/<name>.")
    n_ctx: int | None = Field(default=None, description="Context tokens per request, when known.")
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @field_validator("api_base")
    @classmethod
    def _loopback_only(cls, value: str) -> str:
        # Reusing a server means sending it requests: never follow a record off this machine.
        if urlsplit(value).hostname not in _LOOPBACK:
            raise ValueError(f"api_base {value!r} is not a loopback address")
        return value.rstrip("/")

    def alive(self, *, timeout: float = 2.0) -> bool:
        """Whether the recorded process runs and still serves the recorded model."""
        if not pid_alive(self.pid):
            return False
        ids = served_model_ids(self.api_base, timeout=timeout)
        return ids is not None and self.model_name in ids


def read_state(path: Path | None = None) -> ServeState | None:
    """The recorded server, or None if there is no record or it is unreadable."""
    path = path or state_path()
    try:
        return ServeState.model_validate_json(path.read_bytes())
    except (OSError, ValidationError):
        return None


def write_state(state: ServeState, path: Path | None = None) -> Path:
    """Record ``state`` atomically (readers never see half a file)."""
    path = path or state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".serve-", suffix=".json", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(state.model_dump_json(indent=2))
    os.replace(tmp, path)
    return path


def clear_state(*, owner_pid: int | None = None, path: Path | None = None) -> bool:
    """Remove the record (whether one was removed); with ``owner_pid``, only if that process
    still owns it, so a second ``sp-dspy serve`` that took over keeps it when the first exits."""
    path = path or state_path()
    if owner_pid is not None:
        current = read_state(path)
        if current is not None and current.owner_pid != owner_pid:
            return False
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
        return True
    return False
