"""``gc_paused``: build a bulk of long-lived objects without the cyclic collector.

Its own module (no pydantic model built on import) so the scorer and the result
reader can use it without importing the benchmark loader.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a bulk of long-lived objects is built.

    Validating a benchmark allocates ~350k tracked containers that all survive; the
    collector runs every 700 allocations and each full collection walks the whole
    growing heap again, which made loading 2-3x slower than the validation itself.
    On exit the survivors are moved straight to the oldest generation
    (``freeze`` + ``unfreeze``, two list splices): re-enabling alone would leave them
    all in the youngest generation, to be scanned at the next collections anyway.
    They stay collectable. Skipped when the process froze objects itself (a pre-fork
    server), since ``unfreeze`` would thaw those too.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if was_enabled:
            gc.enable()
