"""Result file names (as the reference harness lays them out), run ids, and the run's one-writer lock."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Self

from .._errors import ConfigError, OutputError
from .._provenance import redacted_argv
from .._run_manifest import manifest_path

UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str) -> str:
    """File-name-safe form of a model's short name."""
    return UNSAFE_CHARS.sub("-", text).strip("-") or "model"


def _prefix(protocol: str) -> str:
    return "per_rule" if protocol == "per-rule" else "results"


def new_run_id() -> str:
    """``RUN_ID`` from the environment, else a UTC timestamp."""
    return os.environ.get("RUN_ID") or datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


@dataclass(frozen=True)
class RunPaths:
    """Where one run of one model writes."""

    output_dir: Path
    run_id: str
    model: str

    def results_for(self, protocol: str) -> Path:
        return self.output_dir / f"{_prefix(protocol)}_{self.run_id}_{safe_name(self.model)}.jsonl"

    def batch_dir_for(self, protocol: str) -> Path:
        """Where ``--batch`` logs this results file's batches and their answers (``--resume`` reads it)."""
        return self.results_for(protocol).with_suffix(".batch")

    @property
    def manifest(self) -> Path:
        """One manifest per run id; several models of one run are entries in it."""
        return manifest_path(self.output_dir, self.run_id)

    @property
    def lock(self) -> Path:
        return self.output_dir / f"run_{self.run_id}.lock"


class RunLockedError(ConfigError):
    """Another live process writes the run this one was asked to write."""


class RunLock:
    """One run, one writer: an exclusive ``flock`` on ``run_<RUN_ID>.lock`` while a process writes it.

    Two writers would each send the units the other sends. The kernel drops a ``flock``
    however its process ends, so a dead writer's file is taken over; the pid, host and
    command in it name the holder (and decide where there is no ``flock``).
    """

    def __init__(self, paths: RunPaths) -> None:
        self.paths = paths
        self._fd: int | None = None

    def acquire(self) -> Self:
        """Take the run, or raise :class:`RunLockedError` naming the process that has it."""
        while True:
            try:
                fd = os.open(self.paths.lock, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise OutputError(
                    f"cannot create the run lock {self.paths.lock}: {exc.strerror or exc}"
                ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:  # held, or no flock on this file system (the holder's note decides)
                holder = _read_holder(fd)
                if isinstance(exc, BlockingIOError) or _running_here(holder):
                    os.close(fd)
                    raise RunLockedError(self._refusal(holder)) from None
            else:
                try:
                    current = os.stat(self.paths.lock).st_ino
                except FileNotFoundError:
                    current = None
                if current != os.fstat(fd).st_ino:  # its holder removed it between our open and flock
                    os.close(fd)
                    continue
            self._fd = fd
            break
        argv = redacted_argv()
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join([Path(argv[0]).name, *argv[1:]] if argv else []),
        }
        with contextlib.suppress(OSError):  # the lock holds without the note (then no pid is named)
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps(holder).encode("utf-8") + b"\n")
        return self

    def release(self) -> None:
        """Give the run up (idempotent); the lock file is removed."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):  # a leftover is harmless: the next writer takes it over
            self.paths.lock.unlink(missing_ok=True)
        os.close(fd)

    def _refusal(self, holder: dict[str, object]) -> str:
        who = f"process {holder['pid']}" if "pid" in holder else "another process"
        if holder.get("host") not in (None, socket.gethostname()):
            who += f" on {holder['host']}"
        details = ", ".join(str(holder[k]) for k in ("command", "since") if holder.get(k))
        return (
            f"run {self.paths.run_id} in {self.paths.output_dir} is being written by {who}"
            f"{f' ({details})' if details else ''}: one run has one writer; wait for it to end "
            f"(or stop it), then --resume (lock: {self.paths.lock})"
        )

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(self, *_: object) -> None:
        self.release()


def _running_here(holder: dict[str, object]) -> bool:
    """Whether the holder named in a lock file is a live process on this host."""
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid <= 0 or holder.get("host") != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _read_holder(fd: int) -> dict[str, object]:
    """What the holder wrote into the lock file (empty when unreadable)."""
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def resolve_run(output_dir: Path, model: str, run_id: str | None, *, resume: bool, protocol: str) -> RunPaths:
    """Pick the run id: the given one, or on ``--resume`` the newest run of this model."""
    if run_id:
        if UNSAFE_CHARS.search(run_id):
            raise ConfigError(
                f"--run-id: only letters, digits, '.', '_' and '-' are allowed (got {run_id!r})"
            )
        return RunPaths(output_dir, run_id, model)
    if resume:
        prefix = _prefix(protocol)
        pattern = f"{prefix}_*_{safe_name(model)}.jsonl"
        found = sorted(output_dir.glob(pattern), key=lambda p: p.stat().st_mtime, reverse=True)
        for path in found:
            run = _run_id_of(path, prefix, model)
            if run is not None:
                return RunPaths(output_dir, run, model)
        raise ConfigError(f"--resume: no earlier run of {model} in {output_dir} (looked for {pattern})")
    return RunPaths(output_dir, new_run_id(), model)


def _run_id_of(path: Path, prefix: str, model: str) -> str | None:
    """The run id of a results file of ``model``, or None when its first record says it is another model's.

    (The glob ``results_*_<model>.jsonl`` also matches a model whose short name ends in ``_<model>``.)
    """
    stem = path.name[len(prefix) + 1 : -len(f"_{safe_name(model)}.jsonl")]
    try:
        with path.open(encoding="utf-8") as handle:
            first = handle.readline()
        recorded = json.loads(first).get("run_id") if first.endswith("\n") else None
    except (OSError, ValueError, AttributeError):
        recorded = None
    if recorded is None:
        return stem  # an empty or foreign-format file: trust its name
    return stem if recorded == stem else None
