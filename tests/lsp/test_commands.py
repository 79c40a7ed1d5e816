"""workspace/executeCommand: runFile (runtime doctor), showKnowledge, checkWorkspace (with $/progress)."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest
from lsp_helpers import GG101_SRC, codes, full_change, needs_analyzer, open_doc, session, wait_for, wait_published
from lsprotocol import types as T
from pygls.exceptions import JsonRpcException

pytestmark = pytest.mark.asyncio

HAS_RUNTIME = importlib.util.find_spec("gradguard.runtime.api") is not None
HAS_DESCRIBE = importlib.util.find_spec("gradguard.knowledge.describe") is not None


async def run(c, command, *args):
    return await c.workspace_execute_command_async(T.ExecuteCommandParams(command=command, arguments=list(args)))


@pytest.mark.torch
@pytest.mark.slow
async def test_run_file_publishes_runtime_diagnostics(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text(GG101_SRC.replace("y += 1\n", "y += 1\nprint('hello from the script')\n"))
    uri = script.as_uri()
    async with session(init={"runTimeout": 120}) as c:
        if not HAS_RUNTIME:
            with pytest.raises(JsonRpcException, match="not available"):
                await run(c, "gradguard.runFile", uri)
            return
        open_doc(c, uri, script.read_text())
        await wait_published(c, uri)
        n = len(c.published)
        res = await run(c, "gradguard.runFile", {"uri": uri})
        assert res["status"] == "error" and res["ok"] is False and res["diagnostics"] == 1
        assert res["exit_code"] == res["returncode"] == 1
        assert res["culprits"][0]["line"] == 4 and res["saved_by"][0]["line"] == 3
        p = await wait_published(c, uri, n, lambda p: any("Run File" in d.message for d in p.diagnostics))
        # one diagnostic on the line: the static finding, confirmed by the run (not a second one worded differently)
        (run_d,) = p.diagnostics
        assert run_d.code == "GG101" and run_d.range.start.line == 3 and run_d.source == "gradguard"
        assert run_d.severity == T.DiagnosticSeverity.Error and "confirmed" in run_d.message
        saved = [r for r in run_d.related_information if r.location.range.start.line == 2]
        assert saved and "exp" in saved[0].message
        # output streamed as window/logMessage, progress begin/end reported
        assert any("hello from the script" in m.message for m in c.log_messages)
        kinds = [v.kind for reports in c.progress_reports.values() for v in reports]
        assert kinds and kinds[0] == "begin" and kinds[-1] == "end"
        # the doctor's report in the log: the saving line and the modifying line, as path:line:col links
        report = next(m.message for m in c.log_messages if m.message.startswith("gradguard run:"))
        assert res["report"] in report
        assert f"saved by    exp        {script}:3:" in report and "y = x.exp()" in report
        assert "changed by  " in report and f"{script}:4:" in report and "y += 1" in report
        # they stay until the file changes
        n = len(c.published)
        full_change(c, uri, script.read_text() + "# edited\n", 2)
        p = await wait_published(c, uri, n, lambda p: p.version == 2)
        assert [d.source for d in p.diagnostics] == ["gradguard"] and "Run File" not in p.diagnostics[0].message


async def test_run_file_errors_are_clear(tmp_path):
    async with session() as c:
        with pytest.raises(JsonRpcException, match=r"does not exist|not available"):
            await run(c, "gradguard.runFile", (tmp_path / "missing.py").as_uri())
        with pytest.raises(JsonRpcException, match=r"not a file on disk|not available"):
            await run(c, "gradguard.runFile", "untitled:Untitled-1")
        with pytest.raises(JsonRpcException, match="expected"):
            await run(c, "gradguard.runFile", 42)


def _marker_script(tmp_path):
    marker = tmp_path / "ran"
    script = tmp_path / "writes_marker.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    return script, marker


@pytest.mark.parametrize("how", ["initializationOptions", "--untrusted"])
async def test_run_file_is_refused_in_an_untrusted_workspace(tmp_path, how):
    """workspaceTrusted: false (VS Code's Restricted Mode) or --untrusted: runFile runs nothing, says why, and a
    later settings object cannot lift it (only a new server can)."""
    script, marker = _marker_script(tmp_path)
    init = {"workspaceTrusted": False} if how == "initializationOptions" else None
    args = ("--untrusted",) if how == "--untrusted" else ()
    async with session(init=init, args=args, root=tmp_path) as c:
        with pytest.raises(JsonRpcException, match="refused: the workspace is not trusted"):
            await run(c, "gradguard.runFile", script.as_uri())
        await wait_for(lambda: any("refused" in m.message for m in c.log_messages), what="the refusal logged")
        c.workspace_did_change_configuration(T.DidChangeConfigurationParams(settings={"workspaceTrusted": True}))
        await wait_for(lambda: any("workspaceTrusted" in m.message and "restart the server" in m.message
                                   for m in c.log_messages), what="the warning about workspaceTrusted")
        with pytest.raises(JsonRpcException, match="refused: the workspace is not trusted"):
            await run(c, "gradguard.runFile", {"uri": script.as_uri()})
    assert not marker.exists()


@pytest.mark.skipif(not HAS_RUNTIME, reason="the runtime doctor is not installed")
@pytest.mark.parametrize("trusted", [True, None])
async def test_run_file_runs_when_trusted_or_not_reported(tmp_path, trusted):
    """workspaceTrusted: true, or no value at all (editors without a trust model): runFile runs the file."""
    script, marker = _marker_script(tmp_path)
    async with session(init={"workspaceTrusted": trusted} if trusted is not None else None, root=tmp_path) as c:
        res = await run(c, "gradguard.runFile", script.as_uri())
    assert res["status"] == "clean" and marker.exists()


async def test_show_knowledge(tmp_path):
    async with session() as c:
        if not HAS_DESCRIBE:
            with pytest.raises(JsonRpcException, match="not available"):
                await run(c, "gradguard.showKnowledge", "torch.exp")
            return
        res = await run(c, "gradguard.showKnowledge", "torch.exp")
        assert res["name"] == "torch.exp" and "saves the output" in res["text"]
        assert res["markdown"].startswith("```")
        missing = await run(c, "gradguard.showKnowledge", "not.a.callable")
        assert missing["markdown"] is None
        with pytest.raises(JsonRpcException, match="expected a callable name"):
            await run(c, "gradguard.showKnowledge")


@needs_analyzer
async def test_check_workspace_with_progress(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text(GG101_SRC)
    (tmp_path / "good.py").write_text("x = 1\n")
    async with session(root=tmp_path) as c:
        res = await run(c, "gradguard.checkWorkspace")
        assert res == {"files": 2, "findings": 1}
        bad = (tmp_path / "pkg" / "bad.py").as_uri()
        await wait_for(lambda: codes(c.diagnostics.get(bad, ())) == ["GG101"], what="workspace diagnostics")
        (reports,) = c.progress_reports.values()
        assert reports[0].kind == "begin" and reports[-1].kind == "end"


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.skipif(not HAS_RUNTIME, reason="the runtime doctor is not installed")
async def test_run_file_cancel_stops_the_script(tmp_path):
    """The client's Cancel (gradguard.cancelRun): pygls answers $/cancelRequest for a command without stopping it."""
    script = tmp_path / "slow.py"
    marker = tmp_path / "finished"
    script.write_text(f"import time\nprint('started', flush=True)\ntime.sleep(60)\nopen({str(marker)!r}, 'w')\n")
    uri = script.as_uri()
    async with session(init={"runTimeout": 120}) as c:
        assert (await run(c, "gradguard.cancelRun", uri)) == {"cancelled": 0}  # nothing running
        started = asyncio.get_running_loop().time()
        task = asyncio.ensure_future(run(c, "gradguard.runFile", {"uri": uri, "progress": False}))
        await wait_for(lambda: any("started" in m.message for m in c.log_messages), 60, "the script to start")
        assert (await run(c, "gradguard.cancelRun", uri)) == {"cancelled": 1}
        res = await asyncio.wait_for(task, 20)
        assert res["ok"] is False and not marker.exists()
        assert asyncio.get_running_loop().time() - started < 50
        assert not c.progress_reports  # "progress": false: the client shows its own, with Cancel


async def test_debug_info(tmp_path):
    async with session() as c:
        info = await run(c, "gradguard.debugInfo")
    import gradguard

    assert info["gradguard"] == gradguard.__version__ and info["python"]
    assert info["location"] == str(Path(gradguard.__file__).parent) and info["diagnostics"] == "push"
