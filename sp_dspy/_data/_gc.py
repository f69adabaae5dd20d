"""``gc_paused``: build a bulk of long-lived objects without the cyclic collector.

A module of its own so the scorer and result reader need not import the loader.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a bulk of long-lived objects is built.

    Each collection would walk the whole growing heap again. On exit ``freeze`` +
    ``unfreeze`` move the survivors straight to the oldest generation (they stay
    collectable); skipped when the process froze objects itself (a pre-fork server),
    since ``unfreeze`` would thaw those too.
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
