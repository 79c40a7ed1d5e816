"""Finding the Python files to check: directories recursively, honouring .gitignore files and excludes."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator

import pathspec

from gradguard.config import DEFAULT_EXCLUDE, Config

PY_SUFFIXES = (".py", ".pyi")
NOTEBOOK_SUFFIX = ".ipynb"


def pattern_factory() -> Callable[[str], pathspec.Pattern]:
    """The gitignore pattern class of the installed pathspec (< 0.12 only knows "gitwildmatch")."""
    try:
        return pathspec.util.lookup_pattern("gitignore")
    except (KeyError, LookupError):
        return pathspec.util.lookup_pattern("gitwildmatch")


def gitignore_spec(patterns: Iterable[str]) -> pathspec.PathSpec:
    """A spec of the lines that compile; a line that does not (a lone ``!``) is skipped, as git skips it."""
    factory = pattern_factory()
    compiled = []
    for line in patterns:
        try:
            compiled.append(factory(line))
        except (ValueError, TypeError):
            continue
    return pathspec.PathSpec(compiled)


def iter_python_files(paths: Iterable[str], config: Config, notebooks: bool = False) -> Iterator[str]:
    """Yield files to check. Explicitly named files are always yielded (like ruff); directories are walked (for
    ``.py``/``.pyi`` files, and ``.ipynb`` notebooks too with ``notebooks=True``)."""
    suffixes = (*PY_SUFFIXES, NOTEBOOK_SUFFIX) if notebooks else PY_SUFFIXES
    exclude = gitignore_spec([*DEFAULT_EXCLUDE, *config.exclude])
    seen: set[str] = set()
    for top in paths:
        if not os.path.isdir(top):  # a named file (even a FIFO: api refuses to read it, with a GG000)
            if top not in seen:
                seen.add(top)
                yield top
            continue
        yield from _walk(top, exclude, seen, suffixes)


def _walk(top: str, exclude: pathspec.PathSpec, seen: set[str], suffixes: tuple[str, ...] = PY_SUFFIXES
          ) -> Iterator[str]:
    # stack of (dir, [gitignore specs with their base dirs])
    stack: list[tuple[str, list[tuple[str, pathspec.PathSpec]]]] = [(top, _gitignores_above(top))]
    while stack:
        d, ignores = stack.pop()
        gi = os.path.join(d, ".gitignore")
        if os.path.isfile(gi):
            try:
                with open(gi, encoding="utf-8", errors="replace") as f:
                    ignores = [*ignores, (d, gitignore_spec(f.read().splitlines()))]
            except OSError:
                pass
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for e in entries:
            rel_top = os.path.relpath(e.path, top).replace(os.sep, "/")
            is_dir = e.is_dir(follow_symlinks=False)
            probe = rel_top + "/" if is_dir else rel_top
            if exclude.match_file(probe) or exclude.match_file(e.name + ("/" if is_dir else "")):
                continue
            if any(s.match_file(os.path.relpath(e.path, base).replace(os.sep, "/") + ("/" if is_dir else ""))
                   for base, s in ignores):
                continue
            if is_dir:
                subdirs.append(e.path)
            elif e.name.endswith(suffixes) and e.path not in seen and _regular(e):
                seen.add(e.path)
                yield e.path
        for sd in reversed(subdirs):
            stack.append((sd, ignores))


def _regular(e: os.DirEntry[str]) -> bool:
    """A regular file, or a symlink to one: a FIFO, socket or device named ``*.py`` would block a read forever."""
    try:
        return stat.S_ISREG(e.stat(follow_symlinks=True).st_mode)
    except OSError:
        return False


def _gitignores_above(top: str) -> list[tuple[str, pathspec.PathSpec]]:
    """.gitignore files between the repository root (a dir with .git) and ``top`` (exclusive of top)."""
    out: list[tuple[str, pathspec.PathSpec]] = []
    d = os.path.abspath(top)
    chain = []
    while True:
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
        chain.append(d)
        if os.path.isdir(os.path.join(d, ".git")):
            break
    else:  # pragma: no cover
        pass
    if not chain or not os.path.isdir(os.path.join(chain[-1], ".git")):
        return out
    abs_top = os.path.abspath(top)
    for base in reversed(chain):
        gi = os.path.join(base, ".gitignore")
        if os.path.isfile(gi):
            try:
                with open(gi, encoding="utf-8", errors="replace") as f:
                    spec = gitignore_spec(f.read().splitlines())
            except OSError:
                continue
            # A directory the user named explicitly is checked even if an ancestor .gitignore ignores it.
            parts = os.path.relpath(abs_top, base).replace(os.sep, "/").split("/")
            if any(spec.match_file("/".join(parts[: i + 1]) + "/") for i in range(len(parts))):
                continue
            out.append((base, spec))
    return out
