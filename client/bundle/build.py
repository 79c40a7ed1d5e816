"""Build bundled/libs: the gradguard language server and its pure-Python dependencies, for the VSIX.

    python client/bundle/build.py [--out bundled/libs]

The extension runs this copy with the user's interpreter (any Python >= 3.10, see client/launcher/launch.py),
so nothing is installed into the user's environment. Only pure-Python wheels are accepted (``--platform any
--abi none``): the VSIX stays platform-neutral. libcst, the one compiled dependency, is left out; the server and
its fixes run without it.

Steps: ``pip install --target`` the pins of client/bundle/requirements.txt (cached in .cache/bundle/ by the hash
of that file, so a rebuild needs no network), copy server/gradguard (no __pycache__), refuse any compiled
extension module, and import the result with ``python -I -S`` (no site-packages at all: proof that it is
self-contained) before replacing the output directory.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REQS = os.path.join(ROOT, "client", "bundle", "requirements.txt")
COMPILED = (".so", ".pyd", ".dylib", ".dll")
SMOKE = """
import sys
sys.path.insert(0, sys.argv[1])
import gradguard.lsp.server  # the server and everything it imports at start-up
from gradguard.api import check_source
fs = check_source("import torch\\nx = torch.randn(3, requires_grad=True)\\ny = x.exp()\\ny += 1\\n", "t.py")
assert [f.code for f in fs] == ["GG101"], fs
assert "libcst" not in sys.modules, "libcst was imported"
print("ok", gradguard.__version__)
"""


def _third_party(cache_root: str) -> str:
    with open(REQS, "rb") as fh:
        key = hashlib.sha256(fh.read()).hexdigest()[:16]
    d = os.path.join(cache_root, key)
    if os.path.isfile(os.path.join(d, ".complete")):
        return d
    tmp = d + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
           "--no-deps", "--no-compile", "--only-binary=:all:", "--platform", "any", "--abi", "none",
           "--implementation", "py", "--python-version", "3.10", "--target", tmp, "-r", REQS]
    subprocess.run(cmd, check=True)
    shutil.rmtree(os.path.join(tmp, "bin"), ignore_errors=True)
    open(os.path.join(tmp, ".complete"), "w").close()
    shutil.rmtree(d, ignore_errors=True)
    os.replace(tmp, d)
    return d


def build(out: str, cache_root: str) -> str:
    libs = _third_party(cache_root)
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".libs-", dir=parent)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".complete")
    try:
        shutil.copytree(libs, tmp, dirs_exist_ok=True, ignore=ignore)
        shutil.copytree(os.path.join(ROOT, "server", "gradguard"), os.path.join(tmp, "gradguard"), ignore=ignore)
        compiled = [os.path.join(dp, f) for dp, _, fs in os.walk(tmp) for f in fs if f.endswith(COMPILED)]
        if compiled:
            raise SystemExit(f"bundle: compiled modules would make the VSIX platform-specific: {compiled}")
        with open(REQS, encoding="utf-8") as fh:
            pins = [ln.strip() for ln in fh if ln.strip() and not ln.startswith("#")]
        with open(os.path.join(tmp, "gradguard-bundle.json"), "w", encoding="utf-8") as fh:
            json.dump({"requirements": pins, "python_requires": ">=3.10"}, fh, indent=1)
        r = subprocess.run([sys.executable, "-I", "-S", "-B", "-c", SMOKE, tmp], capture_output=True, text=True,
                           timeout=120, cwd=tmp)
        if r.returncode != 0 or not r.stdout.startswith("ok"):
            raise SystemExit(f"bundle: the bundled server does not import on its own:\n{r.stdout}{r.stderr}")
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return r.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "bundled", "libs"))
    ap.add_argument("--cache", default=os.path.join(ROOT, ".cache", "bundle"))
    args = ap.parse_args(argv)
    got = build(args.out, args.cache)
    size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(args.out) for f in fs)
    print(f"bundle: {os.path.relpath(args.out, ROOT)} ({size / 1e6:.1f} MB, {got})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
