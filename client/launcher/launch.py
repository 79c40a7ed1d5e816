"""Starts gradguard for the VS Code extension so that no file in the workspace can stand in for a module.

    python [FLAGS] launch.py [--libs DIR] [--exclude DIR]... COMMAND [ARGS...]   runs `gradguard COMMAND ARGS...`
    python launch.py [--libs DIR | --fallback-libs DIR] --probe                is gradguard importable; FLAGS

The server the extension ships: `--libs DIR` (the VSIX's bundled/libs: gradguard and its pure-Python
dependencies) is put first on sys.path, explicitly, after the clean-up below, so the user's interpreter runs it
and nothing is installed into the user's environment (gradguard.importStrategy "useBundled", the default).
`--fallback-libs DIR` ("fromEnvironment") uses the environment's gradguard when it is importable, else DIR. The
probe says which it found (`source:bundled` or `source:environment`); the extension then starts the server with
`--libs DIR` or without. A bundled server always runs with `-I`: it needs neither PYTHONPATH nor user site-packages.

Why: `python -m gradguard lsp` started in the workspace imports the workspace's own `gradguard/`, `pygls/`,
`json.py`, `typing_extensions.py`... instead of the real ones, because `python -m` and `python -c` put the working
directory first on sys.path (and so does an empty PYTHONPATH component).  Linting must never run the user's code.

How the extension starts it (client/src/interpreter.ts serverCommand; tests/lsp/test_launch.py does the same):
  * the working directory is this file's directory, never the workspace;
  * FLAGS are what `--probe` printed on its `flags:` line: `-I` (isolated mode: no PYTHONPATH, no user
    site-packages, no PYTHON* variables, no script directory on sys.path) when that finds the same gradguard as a
    plain start, that is when neither PYTHONPATH nor PYTHONHOME is set and no user site-packages directory is on
    sys.path; otherwise `-P` on Python 3.11+ (no script directory on sys.path), so that a gradguard installed with
    `pip install --user` or found through PYTHONPATH still starts;
  * `--exclude DIR` names the workspace folders;
  * before anything but the standard library is imported, this file removes from sys.path '' and every relative
    entry, the working directory, its own directory and the `--exclude` directories.

It runs under any Python 3.6+ (the probe must answer "too old" rather than fail to parse) and imports only os and
sys (already loaded by the interpreter's start-up) before cleaning sys.path.
"""

import os
import sys

MIN_PYTHON = (3, 10)


def _key(path):
    return os.path.normcase(os.path.realpath(path))


def clean_path(entries, cwd, drop):
    """sys.path without '' or relative entries (the working directory), the working directory itself and ``drop``."""
    dropped = {_key(d) for d in [cwd, *drop] if d}
    return [p for p in entries if p and os.path.isabs(p) and _key(p) not in dropped]


def isolated_flags(environ, path, user_site, version):
    """The interpreter flags to start gradguard with (see the module docstring)."""
    same_without_env = not environ.get("PYTHONPATH") and not environ.get("PYTHONHOME")
    user_site_on_path = bool(user_site) and _key(user_site) in {_key(p) for p in path if p}
    if same_without_env and not user_site_on_path:
        return ["-I"]
    return ["-P"] if tuple(version[:2]) >= (3, 11) else []


def _user_site():
    try:
        import site

        return site.getusersitepackages() if site.ENABLE_USER_SITE else None
    except Exception:
        return None


def _importable(name):
    try:
        import importlib.util

        return importlib.util.find_spec(name) is not None
    except Exception:
        return False


def use_libs(libs, fallback):
    """Put the bundled server first on sys.path: always (``libs``), or when the environment has no gradguard
    (``fallback``). Returns "bundled" or "environment"."""
    if libs is None and fallback is not None and not _importable("gradguard"):
        libs = fallback
    if libs is None:
        return "environment"
    sys.path.insert(0, os.path.abspath(libs))
    return "bundled"


def probe(source="environment"):
    print("python:{}.{}.{}".format(*sys.version_info[:3]))
    if source == "bundled":
        print("flags:-I")
    else:
        print("flags:" + " ".join(isolated_flags(os.environ, sys.path, _user_site(), sys.version_info)))
    print("source:" + source)
    if tuple(sys.version_info[:2]) < MIN_PYTHON:
        print("missing:Python {}.{} is too old: gradguard needs {}.{} or later".format(*sys.version_info[:2], *MIN_PYTHON))
        return 3
    try:
        import gradguard
    except Exception as e:
        print("missing:" + type(e).__name__ + ": " + str(e))
        return 3
    print("gradguard:" + str(gradguard.__version__))
    print("location:" + os.path.dirname(os.path.abspath(gradguard.__file__)))
    return 0


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    drop = [here]
    args = list(argv)
    libs = fallback = None
    while len(args) >= 2 and args[0] in ("--exclude", "--libs", "--fallback-libs"):
        if args[0] == "--exclude":
            drop.append(args[1])
        elif args[0] == "--libs":
            libs = args[1]
        else:
            fallback = args[1]
        del args[:2]
    sys.path[:] = clean_path(sys.path, os.getcwd(), drop)
    source = use_libs(libs, fallback)
    if args == ["--probe"]:
        return probe(source)
    if not args:
        sys.stderr.write("usage: launch.py [--exclude DIR]... COMMAND [ARGS...] | launch.py --probe\n")
        return 2
    try:
        from gradguard.cli import main as gradguard_main
    except ImportError as e:
        sys.stderr.write(f"gradguard is not importable by {sys.executable}: {e}\n")
        return 3
    sys.argv = ["gradguard", *args]
    return gradguard_main(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
