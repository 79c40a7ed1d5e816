"""Settings (initializationOptions, didChangeConfiguration, workspace/configuration) and pyproject.toml."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_helpers import GG101_SRC, codes, needs_analyzer, open_doc, session, wait_for, wait_published
from lsprotocol import types as T

pytestmark = [pytest.mark.asyncio, needs_analyzer]


def changed(c, path):
    c.workspace_did_change_watched_files(T.DidChangeWatchedFilesParams(changes=[
        T.FileEvent(uri=path.as_uri(), type=T.FileChangeType.Changed)]))


async def test_pyproject_change_rechecks(tmp_path):
    pp = tmp_path / "pyproject.toml"
    pp.write_text('[tool.gradguard]\nignore = ["GG101"]\n')
    (tmp_path / "m.py").write_text(GG101_SRC)
    async with session(root=tmp_path) as c:
        await wait_for(lambda: c.registrations, what="the pyproject.toml watcher registration")
        (reg,) = c.registrations[0].registrations
        assert reg.method == "workspace/didChangeWatchedFiles"
        assert reg.register_options["watchers"][0]["globPattern"] == "**/pyproject.toml"
        uri = (tmp_path / "m.py").as_uri()
        open_doc(c, uri, GG101_SRC)
        p = await wait_published(c, uri)
        assert p.diagnostics == ()
        pp.write_text('[tool.gradguard]\nseverity = { GG101 = "hint" }\n')
        n = len(c.published)
        changed(c, pp)
        p = await wait_published(c, uri, n)
        assert codes(p.diagnostics) == ["GG101"] and p.diagnostics[0].severity == T.DiagnosticSeverity.Hint


async def test_precedence_and_did_change_configuration(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.gradguard]\nselect = ["GG3"]\n')
    uri = (tmp_path / "m.py").as_uri()
    # filesystemFirst (default): pyproject's select wins over the editor's
    async with session(root=tmp_path, init={"gradguard": {"select": ["GG1"]}}) as c:
        open_doc(c, uri, GG101_SRC)
        p = await wait_published(c, uri)
        assert p.diagnostics == ()
        # the client says otherwise: editorFirst
        n = len(c.published)
        c.workspace_did_change_configuration(T.DidChangeConfigurationParams(
            settings={"gradguard": {"select": ["GG1"], "configurationPreference": "editorFirst",
                                    "severity": {"GG1": "error"}}}))
        p = await wait_published(c, uri, n)
        assert codes(p.diagnostics) == ["GG101"] and p.diagnostics[0].severity == T.DiagnosticSeverity.Error
        # settings: null -> the server asks with workspace/configuration (section "gradguard")
        c.set_configuration({"enable": False}, section="gradguard")
        n = len(c.published)
        c.workspace_did_change_configuration(T.DidChangeConfigurationParams(settings=None))
        p = await wait_published(c, uri, n)
        assert p.diagnostics == ()
        # bad values are ignored with a warning, the rest applies
        n = len(c.published)
        c.workspace_did_change_configuration(T.DidChangeConfigurationParams(settings={
            "enable": True, "debounceMs": "soon", "severity": {"GG101": "loud"}, "exclude": ["gen/"]}))
        p = await wait_published(c, uri, n)
        assert codes(p.diagnostics) == ["GG101"] and p.diagnostics[0].severity == T.DiagnosticSeverity.Error
        await wait_for(lambda: any("debounceMs" in m.message for m in c.log_messages), what="a warning")
        assert any("loud" in m.message for m in c.log_messages)
        # exclude: files under gen/ get no diagnostics
        gen = (tmp_path / "gen" / "g.py").as_uri()
        open_doc(c, gen, GG101_SRC)
        p = await wait_published(c, gen)
        assert p.diagnostics == ()


async def test_no_pyproject_uses_editor_settings(tmp_path):
    uri = (tmp_path / "m.py").as_uri()
    async with session(root=tmp_path, init={"ignore": ["GG1"]}) as c:
        open_doc(c, uri, GG101_SRC)
        p = await wait_published(c, uri)
        assert p.diagnostics == ()


async def test_bad_pyproject_is_one_notification_and_defaults_apply(tmp_path):
    pp = tmp_path / "pyproject.toml"
    pp.write_text('[tool.gradguard]\nselect = 5\nignore = ["GG101"]\n')
    log_file = tmp_path / "server.log"
    async with session(root=tmp_path, init={"debounceMs": 0, "logFile": str(log_file)}) as c:
        uris = [(tmp_path / f"m{i}.py").as_uri() for i in range(3)]
        for uri in uris:
            open_doc(c, uri, GG101_SRC)
        for uri in uris:
            p = await wait_published(c, uri)
            assert codes(p.diagnostics) == ["GG101"]  # the defaults (the bad table's ignore does not apply)
        shown = [m for m in c.messages if "pyproject.toml" in m.message]
        assert len(shown) == 1, shown  # one notification, however many files
        assert shown[0].type == T.MessageType.Error
        assert "[tool.gradguard] select: expected a list of rule codes" in shown[0].message
        assert any("[tool.gradguard] select" in m.message for m in c.log_messages)
        await wait_for(lambda: "[tool.gradguard] select" in log_file.read_text(), what="the log line")
        # fixed: the table applies again, no new notification
        pp.write_text('[tool.gradguard]\nignore = ["GG101"]\n')
        n = len(c.published)
        changed(c, pp)
        p = await wait_published(c, uris[0], n)
        assert p.diagnostics == ()
        # broken again, differently: a file that does not parse is an error too, shown again
        pp.write_text('[tool.gradguard\n')
        n = len(c.published)
        changed(c, pp)
        p = await wait_published(c, uris[0], n)
        assert codes(p.diagnostics) == ["GG101"]
        await wait_for(lambda: any("could not parse" in m.message for m in c.messages), what="the parse error")
        assert len([m for m in c.messages if "pyproject.toml" in m.message]) == 2


async def test_bad_settings_are_one_notification_and_defaults_apply(tmp_path):
    uri = (tmp_path / "m.py").as_uri()
    init = {"select": ["GG999"], "exclude": ["!"], "debounceMs": "soon"}
    async with session(root=tmp_path, init=init) as c:
        open_doc(c, uri, GG101_SRC)
        p = await wait_published(c, uri)
        assert codes(p.diagnostics) == ["GG101"]  # select ["GG999"] would turn every rule off: ignored instead
        await wait_for(lambda: c.messages, what="a notification")
        assert len(c.messages) == 1 and c.messages[0].type == T.MessageType.Warning
        text = c.messages[0].message
        assert "3 settings ignored" in text and "GG999" in text and "'!'" in text and "debounceMs" in text
        assert sum("ignored" in m.message for m in c.log_messages) >= 3


async def test_rule_links_are_real_or_configured(tmp_path):
    """codeDescription.href: the installed version's page (a file that exists), or the docsBaseUrl setting."""
    from urllib.parse import urlparse
    from urllib.request import url2pathname

    uri = (tmp_path / "m.py").as_uri()
    async with session() as c:
        open_doc(c, uri, GG101_SRC)
        (d,) = (await wait_published(c, uri)).diagnostics
        href = d.code_description.href
        assert href.startswith("file:") and href.endswith("GG101.md")
        assert "GG101" in Path(url2pathname(urlparse(href).path)).read_text(encoding="utf-8")
    async with session(init={"docsBaseUrl": "https://docs.example.org/gradguard/{code}.html"}) as c:
        open_doc(c, uri, GG101_SRC)
        (d,) = (await wait_published(c, uri)).diagnostics
        assert d.code_description.href == "https://docs.example.org/gradguard/GG101.html"
