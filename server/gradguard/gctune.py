"""Fewer garbage collections while checking.

An analysis allocates many objects that live for the whole check (syntax trees of the checked files and of every
module they import, the project's summaries) and few that form reference cycles: most of what one file's analysis
makes is freed by reference counting when it ends. CPython's cyclic collector nevertheless scans every young
object at least once, and the long-lived trees are most of them: with mypy's thresholds
(``gc.set_threshold(200 * 1000, 30, 30)``) the collector took a tenth of a whole-package check of timm, almost all
of it spent on live trees.

So a check turns the automatic collector off and collects itself, between two files (when one file's analysis is
over and its cycles are garbage), once a few million objects have accumulated since the last collection: the
young generations only, so the trees that survived a collection are not scanned again. A check nested in another
one, or run by a program that turned the collector off itself (the language server collects while idle), leaves
collection alone. At the end the collector is turned back on, so an embedding program keeps its own settings.
(Moving what accumulated into the oldest generation unscanned, with ``gc.freeze()`` then ``gc.unfreeze()``, saves
the next young pass but leaves CPython's count of long-lived objects behind, so that every later collection of
the embedding program became a full one: ``ast.parse`` of timm after a check took twice as long.)
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_LIMIT = 3_000_000  # objects allocated (net) since the last collection before `between_files` collects
_owned = False  # this module turned the collector off (and `between_files` may collect)


@contextmanager
def fewer_collections() -> Iterator[None]:
    global _owned
    if not gc.isenabled():  # a nested check, or the program manages collection
        yield
        return
    gc.disable()
    _owned = True
    try:
        yield
    finally:
        _owned = False
        gc.enable()


def between_files() -> None:
    """One file's check is over: collect the cycles it left, when enough has accumulated."""
    if _owned and gc.get_count()[0] > YOUNG_LIMIT:
        gc.collect(1)
