"""The server started exactly as the VS Code client starts it (client/launcher/launch.py, see
client/src/interpreter.ts serverCommand and client/src/environment.ts probeGradguard/processEnv), next to a
workspace full of modules that would shadow gradguard's own: none of them is imported, and diagnostics still
arrive.  test_argv_matches_the_client checks that the builders below are the client's (compiled from its
TypeScript)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lsp_helpers import GG101_SRC, HAS_ANALYZER, ROOT, _make_client, capabilities, codes, open_doc, wait_published
from lsprotocol import types as T

LAUNCHER = ROOT / "client" / "launcher" / "launch.py"
LAUNCH_FLAGS = ("-I", "-P")  # client/src/interpreter.ts LAUNCH_FLAGS

# What the server (or Python's start-up) imports, as files at the root of a hostile workspace.
SHADOWS = ("gradguard/__init__.py", "gradguard/__main__.py", "pygls/__init__.py", "lsprotocol/__init__.py",
           "libcst/__init__.py", "attrs/__init__.py", "cattrs/__init__.py", "json.py", "typing_extensions.py",
           "sitecustomize.py", "usercustomize.py", "asyncio/__init__.py", "logging/__init__.py")


def hostile_workspace(tmp_path: Path) -> tuple[Path, Path]:
    ws, markers = tmp_path / "ws", tmp_path / "markers"
    markers.mkdir()
    for rel in SHADOWS:
        f = ws / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        name = rel.replace("/", ".")
        f.write_text(f"open({str(markers / name)!r}, 'w').close()\nraise SystemExit('workspace code ran: {name}')\n")
    return ws, markers


def probe_command(python: str, folders: list[str]) -> tuple[list[str], str]:
    """client/src/environment.ts probeGradguard: argv and working directory."""
    return [python, str(LAUNCHER), *[a for f in folders for a in ("--exclude", f)], "--probe"], str(LAUNCHER.parent)


def server_command(python: str, flags: list[str], extra: list[str], folders: list[str]) -> tuple[list[str], str]:
    """client/src/interpreter.ts serverCommand: argv and working directory (test_argv_matches_the_client)."""
    args = [f for f in flags if f in LAUNCH_FLAGS] + [str(LAUNCHER)]
    args += [a for f in folders for a in ("--exclude", f)] + ["lsp", *extra]
    return [python, *args], str(LAUNCHER.parent)


def inside(path: str, folder: str) -> bool:
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(folder))
    return rel == "." or not (rel == ".." or rel.startswith(".." + os.sep))


def process_env(env: dict[str, str], trusted: bool, folders: list[str]) -> dict[str, str]:
    """client/src/environment.ts processEnv (POSIX)."""
    out = dict(env, PYTHONUNBUFFERED="1")
    if not trusted and "PYTHONPATH" in env:
        kept = [e for e in env["PYTHONPATH"].split(os.pathsep)
                if e and os.path.isabs(e) and not any(inside(e, f) for f in folders)]
        if kept:
            out["PYTHONPATH"] = os.pathsep.join(kept)
        else:
            del out["PYTHONPATH"]
    return out


def parse_probe(stdout: str) -> dict[str, str]:
    return dict(line.split(":", 1) for line in stdout.splitlines() if ":" in line)


@pytest.mark.asyncio
@pytest.mark.parametrize(("trusted", "pythonpath"), [
    (True, None),                   # the environment as it is
    (True, ["", "."]),              # empty and relative PYTHONPATH entries: the working directory
    (False, ["", ".", "{ws}", "{ws}/sub"]),  # untrusted: also the workspace itself on PYTHONPATH
], ids=["trusted", "trusted, cwd on PYTHONPATH", "untrusted, workspace on PYTHONPATH"])
async def test_server_started_like_the_client_never_imports_the_workspace(tmp_path, trusted, pythonpath):
    ws, markers = hostile_workspace(tmp_path)
    raw = dict(os.environ)
    if pythonpath is not None:
        raw["PYTHONPATH"] = os.pathsep.join([e.format(ws=ws) for e in pythonpath] + [raw.get("PYTHONPATH", "")])
    folders = [str(ws)]
    env = process_env(raw, trusted, folders)  # what the client passes

    argv, cwd = probe_command(sys.executable, folders)
    r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    probe = parse_probe(r.stdout)
    assert r.returncode == 0 and "gradguard" in probe, r.stdout + r.stderr
    flags = probe["flags"].split()
    assert set(flags) <= set(LAUNCH_FLAGS)
    if env.get("PYTHONPATH"):
        assert "-I" not in flags  # -I would hide a gradguard found through PYTHONPATH
    if sys.version_info >= (3, 11):
        assert flags in (["-I"], ["-P"])

    argv, cwd = server_command(sys.executable, flags, [], folders)
    client = _make_client()
    await client.start_io(*argv, env=env, cwd=cwd)
    try:
        await client.initialize_session(T.InitializeParams(
            capabilities=capabilities(), root_uri=ws.as_uri(),
            workspace_folders=[T.WorkspaceFolder(uri=ws.as_uri(), name="ws")],
            initialization_options={"workspaceTrusted": trusted}))
        uri = (ws / "model.py").as_uri()
        open_doc(client, uri, GG101_SRC)
        p = await wait_published(client, uri, timeout=60)
        assert codes(p.diagnostics) == (["GG101"] if HAS_ANALYZER else [])
        await asyncio.wait_for(client.shutdown_session(), 10)
    finally:
        server = getattr(client, "_server", None)
        if server is not None and server.returncode is None:
            server.kill()
        await asyncio.wait_for(client.stop(), 10)
    assert sorted(os.listdir(markers)) == []


def test_the_old_way_would_have_run_the_workspace(tmp_path):
    """Control: `python -m gradguard` in that workspace (how the client used to start the server) runs its code."""
    ws, markers = hostile_workspace(tmp_path)
    subprocess.run([sys.executable, "-m", "gradguard", "--version"], cwd=ws, capture_output=True, timeout=60)
    assert "gradguard.__init__.py" in os.listdir(markers)


def test_argv_matches_the_client(tmp_path):
    """server_command() and process_env() above are the client's serverCommand() and processEnv(): compile
    client/src/environment.ts (which imports interpreter.ts) and compare."""
    node = shutil.which("node")
    esbuild = ROOT / "node_modules" / ".bin" / "esbuild"
    if node is None or not esbuild.exists():
        pytest.skip("needs node and node_modules (npm ci)")
    out = tmp_path / "client.js"
    entry = tmp_path / "entry.ts"
    entry.write_text(f"export * from {json.dumps(str(ROOT / 'client/src/interpreter'))};\n"
                     f"export * from {json.dumps(str(ROOT / 'client/src/environment'))};\n")
    subprocess.run([str(esbuild), str(entry), "--bundle", "--platform=node", "--format=cjs", f"--outfile={out}",
                    "--log-level=warning"], check=True, timeout=60)

    def ts(fn: str, *args: object) -> object:
        call = f"console.log(JSON.stringify(require({json.dumps(str(out))}).{fn}({', '.join(map(json.dumps, args))})))"
        return json.loads(subprocess.run([node, "-e", call], check=True, capture_output=True, text=True,
                                         timeout=60).stdout)

    for python, flags, extra, folders in [("/py", ["-I"], ["--log-level", "debug"], ["/ws", "/other ws"]),
                                          ("/py", ["-P", "-X", "evil"], [], [])]:
        got = ts("serverCommand", python, str(LAUNCHER), flags, extra, folders)
        assert isinstance(got, dict)
        argv, cwd = server_command(python, flags, extra, folders)
        assert [got["command"], *got["args"]] == argv and got["cwd"] == cwd
    env = {"PYTHONPATH": os.pathsep.join(["", "/ws", "/ws/src", "rel", "/opt/lib", "/wsx"]), "HOME": "/h"}
    for trusted in (True, False):
        assert ts("processEnv", env, trusted, ["/ws"], sys.platform) == process_env(env, trusted, ["/ws"])
