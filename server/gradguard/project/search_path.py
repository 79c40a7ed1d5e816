"""Where imports are looked for: the workspace roots, then the configured interpreter's site-packages.

The interpreter is asked for its paths with ``-I -S`` (isolated, no ``site``): no code from the workspace, the
user's site-packages or a ``.pth`` file runs. The ``.pth`` files are then read as data: their path lines are
added, their ``import`` lines are not executed (setuptools' editable finders are read for their ``MAPPING``).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

# Run with -I -S. Without ``site``, a virtual environment's sys.prefix is still the base interpreter's (site.venv()
# sets it, and also runs the .pth files: not called); its pyvenv.cfg is read here as data instead, as site.venv()
# would read it.
_PROBE = (
    "import json, os, site, sys, sysconfig\n"
    "exe_dir = os.path.dirname(os.path.abspath(sys.executable))\n"
    "prefixes, system_site, venv = [sys.prefix], True, ''\n"
    "for conf in (os.path.join(exe_dir, 'pyvenv.cfg'), os.path.join(os.path.dirname(exe_dir), 'pyvenv.cfg')):\n"
    "    if os.path.isfile(conf):\n"
    "        venv = os.path.dirname(exe_dir)\n"
    "        with open(conf, encoding='utf-8') as f:\n"
    "            for line in f:\n"
    "                key, _, value = line.partition('=')\n"
    "                if key.strip().lower() == 'include-system-site-packages':\n"
    "                    system_site = value.strip().lower() == 'true'\n"
    "        break\n"
    "if venv:\n"
    "    prefixes = [venv] + ([sys.prefix] if system_site and sys.prefix != venv else [])\n"
    "paths = set()\n"
    "for pre in prefixes:\n"
    "    for scheme_key in ('purelib', 'platlib'):\n"
    "        p = sysconfig.get_paths(vars={'base': pre, 'platbase': pre}).get(scheme_key)\n"
    "        if p: paths.add(p)\n"
    "    try:\n"
    "        paths.update(site.getsitepackages([pre]))\n"
    "    except Exception:\n"
    "        pass\n"
    "user = ''\n"
    "try:\n"
    "    user = site.getusersitepackages() if system_site else ''\n"
    "except Exception:\n"
    "    pass\n"
    "print(json.dumps({'site': sorted(paths), 'user': user, 'version': list(sys.version_info[:2]),"
    " 'executable': sys.executable}))\n"
)


@dataclass(frozen=True)
class InterpreterPaths:
    """What one interpreter imports from (beyond the standard library), and editable packages' locations."""

    python: str
    site: tuple[str, ...] = ()
    editable: tuple[tuple[str, str], ...] = ()  # (top-level package name, directory) from editable finders
    error: str = ""


@dataclass
class SearchPath:
    """The ordered places absolute imports are looked up in."""

    roots: list[str] = field(default_factory=list)  # workspace roots and `src` entries, first wins
    site: list[str] = field(default_factory=list)  # the interpreter's site-packages and .pth paths
    editable: dict[str, str] = field(default_factory=dict)

    def key(self) -> str:
        return json.dumps([self.roots, self.site, sorted(self.editable.items())])


_interp_cache: dict[tuple[str, float], InterpreterPaths] = {}


def interpreter_paths(python: str | None = None, timeout: float = 20.0) -> InterpreterPaths:
    """Site-packages (and .pth path entries) of ``python`` (default: the interpreter running gradguard)."""
    exe = python or sys.executable
    try:
        mtime = os.stat(exe).st_mtime
    except OSError as e:
        return InterpreterPaths(exe, error=f"cannot use interpreter {exe}: {e.strerror or e}")
    key = (exe, mtime)
    hit = _interp_cache.get(key)
    if hit is not None:
        return hit
    # Not realpath: a virtual environment's python is a link to the base interpreter, and which site-packages it
    # has depends on where the link is (its pyvenv.cfg), not on the binary.
    if python is None or os.path.abspath(python) == os.path.abspath(sys.executable):
        info = _probe_here()
    else:
        info = _probe_other(exe, timeout)
    if info.get("error"):
        res = InterpreterPaths(exe, error=str(info["error"]))
    else:
        listed = info.get("site")
        site_dirs = [d for d in (listed if isinstance(listed, list) else []) if isinstance(d, str) and os.path.isdir(d)]
        user = info.get("user")
        if isinstance(user, str) and user and os.path.isdir(user):
            site_dirs.append(user)
        extra, editable = _read_pth(site_dirs)
        env_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.isdir(p)]
        ordered: list[str] = []
        for d in [*env_paths, *site_dirs, *extra]:
            d = os.path.normpath(os.path.abspath(d))
            if d not in ordered:
                ordered.append(d)
        res = InterpreterPaths(exe, tuple(ordered), tuple(sorted(editable.items())))
    _interp_cache[key] = res
    return res


def _probe_here() -> dict[str, object]:
    import site
    import sysconfig

    paths = {p for k in ("purelib", "platlib") if (p := sysconfig.get_paths().get(k))}
    try:
        paths.update(site.getsitepackages())
    except Exception:  # virtualenv's old site.py lacks it
        pass
    user = ""
    if site.ENABLE_USER_SITE:
        try:
            user = site.getusersitepackages()
        except Exception:
            user = ""
    return {"site": sorted(paths), "user": user}


def _probe_other(exe: str, timeout: float) -> dict[str, object]:
    try:
        p = subprocess.run([exe, "-I", "-S", "-c", _PROBE], capture_output=True, text=True, timeout=timeout,
                           cwd=tempfile.gettempdir(), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as e:
        return {"error": f"cannot run {exe}: {e}"}
    if p.returncode != 0:
        return {"error": f"{exe} -I -S failed (exit {p.returncode}): {p.stderr.strip()[-300:]}"}
    try:
        data = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"{exe} printed no search path"}
    return data if isinstance(data, dict) else {"error": f"{exe} printed no search path"}


def _read_pth(site_dirs: list[str]) -> tuple[list[str], dict[str, str]]:
    """Path lines of the .pth files in ``site_dirs`` (as ``site`` would add them), and editable finders' maps."""
    paths: list[str] = []
    editable: dict[str, str] = {}
    for d in site_dirs:
        try:
            names = sorted(n for n in os.listdir(d) if n.endswith(".pth"))
        except OSError:
            continue
        for n in names:
            try:
                with open(os.path.join(d, n), encoding="utf-8", errors="replace") as f:
                    lines = f.read(1_000_000).splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                if line.startswith(("import ", "import\t")):
                    # setuptools' editable install: `import __editable___pkg_finder; ...install()`
                    mod = line.split(None, 1)[1].split(";", 1)[0].strip()
                    if mod.startswith("__editable__") and mod.replace("_", "").replace(".", "").isalnum():
                        editable.update(_editable_mapping(os.path.join(d, mod + ".py")))
                    continue
                p = os.path.join(d, line)
                if os.path.isdir(p):
                    paths.append(p)
    return paths, editable


def _editable_mapping(path: str) -> dict[str, str]:
    """``MAPPING = {'pkg': '/abs/src/pkg'}`` of a setuptools editable finder, read without running it."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "MAPPING" for t in targets) and node.value is not None:
                try:
                    value = ast.literal_eval(node.value)
                except (ValueError, SyntaxError):
                    return {}
                if isinstance(value, dict):
                    return {str(k): str(v) for k, v in value.items() if isinstance(v, str) and os.path.isdir(v)}
    return {}


def workspace_roots(paths: list[str], config_root: str = "", src: tuple[str, ...] = ()) -> list[str]:
    """The workspace's import roots, first wins: ``src`` entries (relative to the config's directory), the
    config's directory, each directory named on the command line (or the directory of each named file), the
    directory holding the package each of those sits in, and the git root above them.

    The package's directory is found as mypy finds it, by walking up while a directory has an ``__init__.py``:
    ``gradguard check ultralytics`` (or one file in it) resolves the package's own absolute imports, ``from
    ultralytics.utils.torch_utils import smart_inference_mode``, with no git root or configuration above it."""
    out: list[str] = []

    def add(d: str) -> None:
        d = os.path.normpath(os.path.abspath(d))
        if os.path.isdir(d) and d not in out:
            out.append(d)

    if config_root:
        for s in src:
            add(os.path.join(config_root, s))
        add(config_root)
    for p in paths:
        d = os.path.abspath(p if os.path.isdir(p) else os.path.dirname(os.path.abspath(p)))
        add(d)
        top = d
        while os.path.isfile(os.path.join(top, "__init__.py")) and os.path.dirname(top) != top:
            top = os.path.dirname(top)
        if top != d:
            add(top)
    for d in list(out):
        g = git_root(d)
        if g:
            add(g)
    return out


def git_root(start: str) -> str:
    d = os.path.abspath(start)
    while True:
        if os.path.exists(os.path.join(d, ".git")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return ""
        d = parent
