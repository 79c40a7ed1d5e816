"""Results on disk: a file whose text and whose dependencies' texts are unchanged is not analysed again.

Like ``.ruff_cache``/``.mypy_cache``: one JSON entry per checked file under ``.gradguard_cache/`` at the workspace
root (it ignores itself for git), keyed by everything a result depends on: gradguard's own code and knowledge
table, the configuration, the import search path, and the file's content hash. An entry records the content hashes
of the modules the analysis read (the file's imports, transitively, as far as it followed them); it is used only if
all of them are unchanged. The cache is capped in size (oldest entries go first) and holds JSON only: a
workspace's cache is data, never code, even when the workspace is not trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gradguard import __version__

CACHE_DIR_NAME = ".gradguard_cache"
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
_FORMAT = 1

_code_digest: str | None = None


def code_digest() -> str:
    """A hash of gradguard's analysis code and knowledge table: results from another build are never reused."""
    global _code_digest
    if _code_digest is None:
        h = hashlib.blake2b(f"{__version__}:{_FORMAT}".encode(), digest_size=16)
        pkg = Path(__file__).resolve().parent.parent
        for sub in ("analysis", "rules", "fixes", "knowledge", "project"):
            for p in sorted((pkg / sub).glob("*")):
                if p.suffix in (".py", ".json"):
                    h.update(p.name.encode())
                    h.update(p.read_bytes())
        for name in ("api.py", "model.py", "config.py"):
            p = pkg / name
            if p.exists():
                h.update(p.read_bytes())
        _code_digest = h.hexdigest()
    return _code_digest


class ResultCache:
    """Per-file check results in ``<root>/.gradguard_cache/``; ``context`` is what else results depend on."""

    def __init__(self, root: str, context: Any, max_bytes: int = DEFAULT_MAX_BYTES):
        self.base = Path(root) / CACHE_DIR_NAME
        ctx = json.dumps(context, sort_keys=True, default=str)
        key = hashlib.blake2b(f"{code_digest()}:{ctx}".encode(), digest_size=12).hexdigest()
        self.dir = self.base / key
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0

    def _entry(self, path: str) -> Path:
        return self.dir / (hashlib.blake2b(os.path.abspath(path).encode(), digest_size=12).hexdigest() + ".json")

    def get(self, path: str, digest: str, dep_digest: Callable[[str], str | None]) -> dict[str, Any] | None:
        """The stored result for ``path`` if its text (``digest``) and its dependencies are unchanged."""
        try:
            with open(self._entry(path), encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            self.misses += 1
            return None
        ok = isinstance(data, dict) and data.get("digest") == digest and isinstance(data.get("deps"), dict) \
            and isinstance(data.get("result"), dict)
        if ok:
            for dep, d in data["deps"].items():
                if not isinstance(dep, str) or dep_digest(dep) != d:
                    ok = False
                    break
        if not ok:
            self.misses += 1
            return None
        self.hits += 1
        result: dict[str, Any] = data["result"]
        return result

    def put(self, path: str, digest: str, deps: dict[str, str], result: dict[str, Any]) -> None:
        try:
            self._ensure_dir()
            payload = json.dumps({"path": os.path.abspath(path), "digest": digest, "deps": deps, "result": result},
                                 ensure_ascii=False)
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(payload)
            os.replace(tmp, self._entry(path))
        except OSError:
            pass  # a read-only or full disk: checking goes on without the cache

    def _ensure_dir(self) -> None:
        if self.dir.is_dir():
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        ignore = self.base / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# Automatically created by gradguard.\n*\n", encoding="utf-8")
        tag = self.base / "CACHEDIR.TAG"
        if not tag.exists():
            tag.write_text("Signature: 8a477f597d28d172789f06886806bc55\n"
                           "# This file is a cache directory tag created by gradguard.\n", encoding="utf-8")

    def prune(self) -> None:
        """Keep the cache under its size cap: the least recently written entries go first; other keys' (older
        builds', other configurations') directories go before this one's entries."""
        try:
            entries = []
            for d in self.base.iterdir():
                if not d.is_dir():
                    continue
                for p in d.glob("*.json"):
                    st = p.stat()
                    entries.append((d == self.dir, st.st_mtime, st.st_size, p))
        except OSError:
            return
        total = sum(e[2] for e in entries)
        if total <= self.max_bytes:
            return
        for _mine, _mtime, size, p in sorted(entries, key=lambda e: (e[0], e[1])):
            try:
                p.unlink()
            except OSError:
                continue
            total -= size
            if total <= self.max_bytes * 0.8:
                break
