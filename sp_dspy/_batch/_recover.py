"""``--resume`` after a process killed while creating a batch: ask the provider for that batch
before anything is sent again, so that no request is paid twice.

The run's log holds an intent per batch being created (its custom ids, fingerprint, time and input
file). The wire lists the provider's batches around that time: one match is the run's batch and is
collected; none (the listing reached back past that time) means the creation never happened, and
the requests are sent now. When the provider cannot be asked (no list route, a failing list) or
several batches match, nothing is sent: the line says so, and ``--resubmit`` sends them anyway.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING

from .._errors import SpDspyError
from ._provider import ProviderFailed

if TYPE_CHECKING:
    from rich.console import Console

    from ._book import AnswerBook
    from ._provider import Provider
    from ._wire import BatchWire, Intent


def recover(
    wire: BatchWire, book: AnswerBook, provider: Provider, console: Console, *, resubmit: bool
) -> None:
    """Settle every intent of the log: the batch found, or dropped (created never, or ``--resubmit``).

    Raises:
        ProviderFailed: a batch may exist that cannot be matched, and ``resubmit`` is off.
    """
    for intent in list(book.intents.values()):
        what = f"the batch of {len(intent.custom_ids)} request(s) being created when the run stopped"
        known = set(book.batches)
        try:
            found = provider.patiently(
                f"listing the provider's batches to find {what}", functools.partial(wire.find, intent, known)
            )
        except SpDspyError as failed:  # the list failed, or the log cannot be matched (no time)
            reason = failed.clause if isinstance(failed, ProviderFailed) else str(failed)
            _unmatched(book, provider, console, intent, reason, resubmit=resubmit)
            continue
        if len(found) == 1:
            book.note_submitted(found[0], intent)
            console.print(
                f"batch {found[0]}: found on the provider ({what}); collecting it, nothing is sent again",
                markup=False,
                highlight=False,
            )
        elif not found:
            book.note_dropped(intent, "the provider lists no such batch")
            console.print(
                f"{what} was never created (the provider lists none): its requests are sent now",
                markup=False,
                highlight=False,
            )
        else:
            reason = f"{len(found)} of the provider's batches match it ({', '.join(found[:3])})"
            _unmatched(book, provider, console, intent, reason, resubmit=resubmit)


def _unmatched(
    book: AnswerBook, provider: Provider, console: Console, intent: Intent, reason: str, *, resubmit: bool
) -> None:
    """An intent no batch can be matched to: dropped with ``--resubmit``, else the run stops sending nothing."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(intent.at)) if intent.at else "an unknown time"
    what = f"a batch of {len(intent.custom_ids)} request(s) being created at {when}"
    if resubmit:
        book.note_dropped(intent, "--resubmit")
        console.print(
            f"--resubmit: {what} cannot be matched ({reason}); its requests are sent again",
            markup=False,
            highlight=False,
        )
        return
    raise ProviderFailed(
        f"--batch: the run stopped while creating {what}, and no batch of the provider can be matched to it "
        f"({reason}); nothing was sent again. If the provider's batch list shows none, continue with "
        f"{provider.resume_hint} --resubmit to send them (paid twice if it was created after all)",
        "unmatched",
        reason,
    )
