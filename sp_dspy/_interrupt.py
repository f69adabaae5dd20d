"""Stop signals: SIGTERM (``kill``, a scheduler's stop) interrupts like Ctrl-C.

One path for both: while :func:`sigterm_interrupts` is active, SIGTERM is handed to
whatever handles SIGINT at that moment, so a run inside ``asyncio.run`` has its main task
cancelled (units in flight dropped, every finished record kept) and anything else gets
``KeyboardInterrupt``; ``finally`` blocks and ``with`` exits run, child servers stop. The
CLI holds it around every command and exits with :func:`interrupted_exit_code`: 130 after
Ctrl-C, 143 after SIGTERM (128 + the signal's number, as a shell reports a process it killed).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

#: Exit status of a command stopped by Ctrl-C (SIGINT).
EXIT_SIGINT = 128 + signal.SIGINT
#: Exit status of a command stopped by SIGTERM.
EXIT_SIGTERM = 128 + signal.SIGTERM

_received: set[int] = set()  # the stop signals this process has been sent so far


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    _received.add(signum)
    on_sigint = signal.getsignal(signal.SIGINT)
    # asyncio.run's handler cancels its main task; with none (SIGINT ignored by a shell's `&`) raise.
    if not callable(on_sigint):
        on_sigint = signal.default_int_handler
    on_sigint(signal.SIGINT, frame)


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While the block runs (in the main thread), SIGTERM interrupts as Ctrl-C does;
    the handler it replaced is restored after. The outermost block starts a new command:
    no stop signal received yet (one received inside is remembered after it ends)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGTERM) is not _on_sigterm:
        _received.clear()
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def graceful_stop(loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> Iterator[None]:
    """While the block runs on ``loop`` in the main thread, the first Ctrl-C or SIGTERM calls
    ``stop`` (a service finishing the work in flight) instead of interrupting, and a second
    one raises ``KeyboardInterrupt`` (stop now); both count for :func:`interrupted_exit_code`.
    Unlike :func:`sigterm_interrupts` it does not depend on who handles SIGINT: SIGTERM stops
    gracefully also where SIGINT is ignored (and then still is). The handlers the block
    replaced are restored after it; outside the main thread it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # SIGINT stays ignored where the shell ignores it (a job started with `&` in a script).
    stops = [
        signum for signum in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(signum) != signal.SIG_IGN
    ]
    previous = {signum: signal.getsignal(signum) for signum in stops}

    came: list[int] = []

    def on_signal(signum: int) -> None:
        _received.add(signum)
        came.append(signum)
        if len(came) > 1:
            raise KeyboardInterrupt
        stop()

    for signum in stops:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            loop.remove_signal_handler(signum)
            signal.signal(signum, handler)


def interrupted_exit_code() -> int:
    """The exit status of an interrupted command: 143 once SIGTERM came, else 130 (Ctrl-C)."""
    return EXIT_SIGTERM if signal.SIGTERM in _received else EXIT_SIGINT
