"""The project layer: which files make up the program, where imports lead, and what is cached between runs.

Like mypy's build graph or pyright's program, it knows modules and their dependencies but nothing about tensors:
the per-function analysis (:mod:`gradguard.analysis`) asks it to resolve imports and hands back the set of modules
each file's analysis read, which is what invalidation and the result cache need.

- :mod:`.search_path`: workspace roots, ``src``, and the configured interpreter's site-packages (read without
  running anything from the workspace or a ``.pth`` file);
- :mod:`.resolver`: dotted names and relative imports -> source files, as Python would resolve them;
- :mod:`.sources`: source text, content hashes, parsed trees and top-level bindings, shared by all analyses;
- :mod:`.cache`: results on disk, keyed by content hashes (``.gradguard_cache/``);
- :mod:`.context_scan`, :mod:`.callers`: a text scan for code that only runs under ``torch.no_grad()`` (in one
  file, and across the workspace: a module only ever called under no_grad in other files).
"""

from __future__ import annotations

from collections.abc import Sequence

from gradguard.project.resolver import Module, Project
from gradguard.project.search_path import SearchPath, interpreter_paths, workspace_roots
from gradguard.project.sources import SourceFile

__all__ = ["Module", "Project", "SearchPath", "SourceFile", "build_project"]


def build_project(paths: Sequence[str], config_root: str = "", src: Sequence[str] = (),
                  python: str | None = None, use_site: bool = True) -> Project:
    """A project for checking ``paths``: the workspace roots around them, then ``python``'s site-packages."""
    roots = workspace_roots(list(paths), config_root, tuple(src))
    site: list[str] = []
    editable: dict[str, str] = {}
    if use_site:
        ip = interpreter_paths(python)
        site = [s for s in ip.site if s not in roots]
        editable = dict(ip.editable)
    return Project(SearchPath(roots=roots, site=site, editable=editable))
