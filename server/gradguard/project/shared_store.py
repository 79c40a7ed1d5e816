"""Results that every analysis of a project may reuse, with the files each one read.

A whole-project check analyses each file on its own, and each analysis follows imports into the same library
and workspace modules: torch_geometric's 300 example and test files each run ``GCNConv.forward`` and
``MessagePassing.propagate`` anew. The analysis keeps what such a call did (:mod:`gradguard.analysis.shared`)
here, under a key that names no object of one analysis, together with the files the call read; the next file's
analysis replays it.

The store knows nothing about tensors. It drops an entry when a file it read changes (an editor buffer, a
change on disk), and everything when a file appears or disappears (an import may now lead elsewhere). It holds
at most ``limit`` entries: when full, it starts again empty.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable
from typing import Any

MAX_ENTRIES = 20_000


class SharedStore:
    __slots__ = ("_by_file", "_entries", "hits", "limit", "misses")

    def __init__(self, limit: int = MAX_ENTRIES):
        self.limit = limit
        self._entries: dict[Hashable, tuple[frozenset[str], Any]] = {}
        self._by_file: dict[str, set[Hashable]] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> Any:
        got = self._entries.get(key)
        if got is None:
            self.misses += 1
            return None
        self.hits += 1
        return got[1]

    def put(self, key: Hashable, files: frozenset[str], value: Any) -> None:
        if self.limit <= 0:
            return  # a store that keeps nothing (to compare analyses with and without it)
        if len(self._entries) >= self.limit:
            self.clear()
        self._entries[key] = (files, value)
        for f in files:
            self._by_file.setdefault(f, set()).add(key)

    def changed(self, paths: Iterable[str], listing_changed: bool) -> None:
        """``paths`` changed; ``listing_changed``: a file was created or deleted (imports may resolve elsewhere)."""
        if listing_changed:
            self.clear()
            return
        for p in paths:
            for key in self._by_file.pop(os.path.normpath(os.path.abspath(p)), ()):
                self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()
        self._by_file.clear()
