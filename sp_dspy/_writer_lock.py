"""One writer per thing a command writes (a run, a compile's ``--out``, an ablation): an exclusive lock file.

Two writers would each do (and record) what the other does, or interleave their files.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Self

from ._errors import ConfigError, OutputError
from ._provenance import redacted_argv


class WriterLockedError(ConfigError):
    """Another live process writes what this one was asked to write."""


class WriterLock:
    """An exclusive ``flock`` on ``path`` while a process writes ``what``.

    The kernel drops a ``flock`` however its process ends, so a dead writer's file is
    taken over; the pid, host and command in it name the holder (and decide where there is
    no ``flock``). ``rule`` ends the refusal: why one writer, and what to do instead.
    """

    error: type[WriterLockedError] = WriterLockedError

    def __init__(self, path: Path, what: str, rule: str) -> None:
        self.path, self.what, self.rule = path, what, rule
        self._fd: int | None = None

    def acquire(self) -> Self:
        """Take the lock, or raise ``self.error`` naming the process that has it."""
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise OutputError(f"cannot create the lock {self.path}: {exc.strerror or exc}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:  # held, or no flock on this file system (the holder's note decides)
                holder = _read_holder(fd)
                if isinstance(exc, BlockingIOError) or _running_here(holder):
                    os.close(fd)
                    raise self.error(self._refusal(holder)) from None
            else:
                try:
                    current = os.stat(self.path).st_ino
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
        """Give the lock up (idempotent); the lock file is removed."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):  # a leftover is harmless: the next writer takes it over
            self.path.unlink(missing_ok=True)
        os.close(fd)

    def _refusal(self, holder: dict[str, object]) -> str:
        who = f"process {holder['pid']}" if "pid" in holder else "another process"
        if holder.get("host") not in (None, socket.gethostname()):
            who += f" on {holder['host']}"
        details = ", ".join(str(holder[k]) for k in ("command", "since") if holder.get(k))
        return (
            f"{self.what} is being written by {who}{f' ({details})' if details else ''}: "
            f"{self.rule} (lock: {self.path})"
        )

    def __enter__(self) -> Self:
        """Take the lock, unless this object holds it already (``claim_out`` hands one over held)."""
        return self if self._fd is not None else self.acquire()

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
