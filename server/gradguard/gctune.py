"""Fewer garbage collections while checking.

An analysis allocates many small objects that live for the whole check (syntax trees of the checked file and of
every module it imports, abstract values, summaries). CPython's cyclic collector runs a young-generation pass every
700 net allocations and, as the older generations fill, rescans all of them, which costs a fifth of a whole-project
check. Like mypy (``gc.set_threshold(200 * 1000, 30, 30)``), gradguard raises the thresholds while it checks; the
previous thresholds come back afterwards, so an embedding program keeps its own settings.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

THRESHOLDS = (200_000, 30, 30)


@contextmanager
def fewer_collections() -> Iterator[None]:
    before = gc.get_threshold()
    if before[0] >= THRESHOLDS[0] or before[0] == 0:  # already raised (a nested check), or collection is off
        yield
        return
    gc.set_threshold(*THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
