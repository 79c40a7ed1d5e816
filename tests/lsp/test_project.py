"""The project model end to end: imports resolve through the workspace (open buffers first) and the configured
interpreter's site-packages; a change in one file re-checks the open files that import it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
from lsp_helpers import (
    GG101_SRC,
    capabilities,
    codes,
    full_change,
    needs_analyzer,
    open_doc,
    session,
    wait_for,
    wait_published,
)
from lsprotocol import types as T

pytestmark = [pytest.mark.asyncio, needs_analyzer]

MODELS_RELU = """import torch.nn as nn


class Block(nn.Module):
    def __init__(self, ch=4):
        super().__init__()
        self.conv = nn.Conv2d(ch, ch, 3, padding=1)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.conv(x))
"""
MODELS_BN = MODELS_RELU.replace("nn.ReLU()", "nn.BatchNorm2d(ch)")

TRAIN = """import torch

from models import Block

model = Block()
x = torch.randn(2, 4, 8, 8)
out = model(x)
out += 1
out.sum().backward()
"""

OPS = """def scale_(t, s):
    t.mul_(s)
    return t
"""

TRAIN_OPS = """import torch

from ops import scale_

w = torch.randn(3, requires_grad=True)
h = torch.sigmoid(w)
h = scale_(h, 0.5)
h.sum().backward()
"""


def workspace(tmp_path, models=MODELS_RELU):
    (tmp_path / "models.py").write_text(models)
    (tmp_path / "train.py").write_text(TRAIN)
    return (tmp_path / "models.py").as_uri(), (tmp_path / "train.py").as_uri()


def changed(c, path, kind=T.FileChangeType.Changed):
    c.workspace_did_change_watched_files(T.DidChangeWatchedFilesParams(changes=[
        T.FileEvent(uri=path.as_uri(), type=kind)]))


def has_gg101(p):
    return "GG101" in codes(p.diagnostics)


def cleared(p):
    return p.diagnostics == ()


async def open_model(c, models):
    """Open models.py after train.py: train.py is checked again (the buffer may differ from the disk); wait for that
    too, or it could be taken for the answer to the next edit."""
    n = len(c.published)
    open_doc(c, models, MODELS_RELU)
    await wait_published(c, models, n)
    train = models.replace("models.py", "train.py")
    await wait_published(c, train, n)


async def test_import_from_the_workspace_and_watchers(tmp_path):
    _, train = workspace(tmp_path)
    async with session(root=tmp_path) as c:
        open_doc(c, train, TRAIN)
        p = await wait_published(c, train)
        assert codes(p.diagnostics) == ["GG101"] and p.diagnostics[0].range.start.line == 7
        await wait_for(lambda: c.registrations, what="the watcher registration")
        globs = [w["globPattern"] for w in c.registrations[0].registrations[0].register_options["watchers"]]
        assert globs == ["**/pyproject.toml", "**/*.py"]


async def test_editing_an_open_model_rechecks_the_training_script(tmp_path):
    models, train = workspace(tmp_path)
    async with session(root=tmp_path) as c:
        open_doc(c, train, TRAIN)
        assert has_gg101(await wait_published(c, train))
        await open_model(c, models)
        # The block now ends in BatchNorm (which does not save its output): train.py is fine, untouched.
        n = len(c.published)
        full_change(c, models, MODELS_BN, 2)
        p = await wait_published(c, train, n)
        assert p.diagnostics == () and p.version == 1  # benchmarks/bench_lsp_project.py times this
        # The edited file's own diagnostics come first.
        order = [q.uri for q in c.published[n:]]
        assert order.index(models) < order.index(train)
        # Back to ReLU: the hazard is back. Nothing was saved: the disk still holds the ReLU version all along.
        n = len(c.published)
        full_change(c, models, MODELS_RELU + "# edited\n", 3)
        assert has_gg101(await wait_published(c, train, n))
        # Closing models.py with the BatchNorm text unsaved: train.py sees the file on disk (ReLU) again.
        full_change(c, models, MODELS_BN, 4)
        await wait_published(c, train, n, lambda p: not has_gg101(p))
        n = len(c.published)
        c.text_document_did_close(T.DidCloseTextDocumentParams(text_document=T.TextDocumentIdentifier(uri=models)))
        assert has_gg101(await wait_published(c, train, n))


async def test_change_on_disk_rechecks_dependents(tmp_path):
    _, train = workspace(tmp_path)
    (tmp_path / "unrelated.py").write_text("x = 1\n")
    async with session(root=tmp_path) as c:
        open_doc(c, train, TRAIN)
        assert has_gg101(await wait_published(c, train))
        other = (tmp_path / "other.py").as_uri()
        open_doc(c, other, "import torch\nx = torch.ones(2)\n")
        await wait_published(c, other)
        # A file nobody imports changed: nothing is re-checked.
        n = len(c.published)
        changed(c, tmp_path / "unrelated.py")
        await asyncio.sleep(0.5)
        assert c.published[n:] == []
        # models.py changed on disk (e.g. git checkout): train.py is checked again; other.py does not read it.
        (tmp_path / "models.py").write_text(MODELS_BN)
        changed(c, tmp_path / "models.py")
        p = await wait_published(c, train, n)
        assert p.diagnostics == ()
        await asyncio.sleep(0.3)
        assert other not in [q.uri for q in c.published[n:]]
        # Deleted: the import no longer resolves, nothing is known of Block.
        n = len(c.published)
        (tmp_path / "models.py").write_text(MODELS_RELU)
        changed(c, tmp_path / "models.py")
        assert has_gg101(await wait_published(c, train, n))
        n = len(c.published)
        (tmp_path / "models.py").unlink()
        changed(c, tmp_path / "models.py", T.FileChangeType.Deleted)
        assert not has_gg101(await wait_published(c, train, n))
        # Created again (a new file can change what an import resolves to: every open document is re-checked).
        n = len(c.published)
        (tmp_path / "models.py").write_text(MODELS_RELU)
        changed(c, tmp_path / "models.py", T.FileChangeType.Created)
        assert has_gg101(await wait_published(c, train, n))



async def test_broken_imported_files_never_crash_the_server(tmp_path):
    models, train = workspace(tmp_path)
    async with session(root=tmp_path) as c:
        open_doc(c, train, TRAIN)
        assert has_gg101(await wait_published(c, train))
        await open_model(c, models)
        # Mid-typing, models.py does not parse: it says so itself; train.py is checked again without crashing
        # (Block is unknown meanwhile, so nothing is claimed about it).
        n = len(c.published)
        broken = MODELS_RELU.replace("def forward(self, x):", "def forward(self, x:")
        full_change(c, models, broken, 2)
        assert "GG000" in codes((await wait_published(c, models, n)).diagnostics)
        p = await wait_published(c, train, n)
        assert "GG000" not in codes(p.diagnostics)
        # Fixed again: the finding in train.py is back.
        n = len(c.published)
        full_change(c, models, MODELS_RELU, 3)
        assert has_gg101(await wait_published(c, train, n, has_gg101))
        c.text_document_did_close(T.DidCloseTextDocumentParams(text_document=T.TextDocumentIdentifier(uri=models)))
        # On disk: bytes that are no text, a file that imports itself through a cycle, a directory named models.py.
        for content in (b"\xff\xfe\x00garbage\x00", b"from train import *\nfrom models import Block\n"):
            n = len(c.published)
            (tmp_path / "models.py").write_bytes(content)
            changed(c, tmp_path / "models.py")
            p = await wait_published(c, train, n)
            assert not has_gg101(p)
        n = len(c.published)
        (tmp_path / "models.py").unlink()
        (tmp_path / "models.py").mkdir()
        changed(c, tmp_path / "models.py", T.FileChangeType.Deleted)
        assert not has_gg101(await wait_published(c, train, n))
        # Still serving: an edit of train.py itself is answered.
        n = len(c.published)
        full_change(c, train, GG101_SRC, 2)
        assert has_gg101(await wait_published(c, train, n))
        assert not [m for m in c.log_messages if "internal error" in m.message]


async def test_on_save_mode_rechecks_importers_on_save(tmp_path):
    models, train = workspace(tmp_path)
    async with session(root=tmp_path, init={"run": "onSave"}) as c:
        open_doc(c, train, TRAIN)
        assert has_gg101(await wait_published(c, train))
        await open_model(c, models)
        n = len(c.published)
        full_change(c, models, MODELS_BN, 2)
        await asyncio.sleep(0.5)
        assert c.published[n:] == []  # nothing is checked before the save
        (tmp_path / "models.py").write_text(MODELS_BN)
        c.text_document_did_save(T.DidSaveTextDocumentParams(text_document=T.TextDocumentIdentifier(uri=models)))
        changed(c, tmp_path / "models.py")  # the client's watcher sees the save too: an open buffer wins anyway
        p = await wait_published(c, train, n)
        assert p.diagnostics == ()


async def test_hazard_revealed_by_another_file_is_published_there(tmp_path):
    (tmp_path / "ops.py").write_text(OPS)
    (tmp_path / "train.py").write_text(TRAIN_OPS)
    ops, train = (tmp_path / "ops.py").as_uri(), (tmp_path / "train.py").as_uri()
    async with session(root=tmp_path) as c:
        open_doc(c, ops, OPS)
        p = await wait_published(c, ops)
        assert p.diagnostics == ()  # on its own, scale_ may be given anything
        n = len(c.published)
        open_doc(c, train, TRAIN_OPS)
        # train.py passes sigmoid's output, which sigmoid saved: the write is in ops.py, and shown there.
        p = await wait_published(c, ops, n, has_gg101)
        (d,) = p.diagnostics
        assert d.range.start.line == 1 and p.version == 1 and "mul_" in d.message
        assert d.data["fixes"], "fixes are attached as for the file's own findings"
        acts = await c.text_document_code_action_async(T.CodeActionParams(
            text_document=T.TextDocumentIdentifier(uri=ops), range=d.range,
            context=T.CodeActionContext(diagnostics=[d])))
        assert acts
        # train.py stops passing a saved tensor: the finding in ops.py goes away.
        n = len(c.published)
        full_change(c, train, TRAIN_OPS.replace("torch.sigmoid(w)", "w * 2"), 2)
        # (waiting for the cleared publish, not the next one: a publish of the analysis still running for the
        # previous text may come first on a loaded machine; a finding that stays times this out)
        await wait_published(c, ops, n, cleared)
        # ...and closing train.py takes what it revealed with it.
        n = len(c.published)
        full_change(c, train, TRAIN_OPS, 3)
        await wait_published(c, ops, n, has_gg101)
        n = len(c.published)
        c.text_document_did_close(T.DidCloseTextDocumentParams(text_document=T.TextDocumentIdentifier(uri=train)))
        await wait_published(c, ops, n, cleared)


async def test_pull_client_is_asked_to_refresh(tmp_path):
    models, train = workspace(tmp_path)
    async with session(caps=capabilities(pull=True), root=tmp_path) as c:
        def pull(uri):
            return c.text_document_diagnostic_async(T.DocumentDiagnosticParams(
                text_document=T.TextDocumentIdentifier(uri=uri)))

        open_doc(c, train, TRAIN)
        open_doc(c, models, MODELS_RELU)
        r = await pull(train)
        assert codes(r.items) == ["GG101"]
        before = c.diagnostic_refresh_count
        full_change(c, models, MODELS_BN, 2)
        await wait_for(lambda: c.diagnostic_refresh_count > before, what="workspace/diagnostic/refresh")
        r2 = await c.text_document_diagnostic_async(T.DocumentDiagnosticParams(
            text_document=T.TextDocumentIdentifier(uri=train), previous_result_id=r.result_id))
        assert r2.kind == "full" and r2.items == ()


def _venv_with_package(tmp_path):
    """A virtual environment (no pip) whose site-packages holds a layer package ending in an in-place ReLU."""
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, capture_output=True)
    exe = env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = subprocess.run([str(exe), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    assert site.startswith(str(env)), site  # the new environment's own site-packages, nothing else
    pkg = os.path.join(site, "fancylayers")
    os.makedirs(pkg)
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write("import torch.nn as nn\n\n\nclass ConvModule(nn.Module):\n    def __init__(self, c):\n"
                "        super().__init__()\n        self.conv = nn.Conv2d(c, c, 3, padding=1)\n"
                "        self.act = nn.ReLU(inplace=True)\n\n    def forward(self, x):\n"
                "        return self.act(self.conv(x))\n")
    return str(exe)


async def test_interpreter_setting_resolves_its_site_packages(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    src = ("import torch\nfrom fancylayers import ConvModule\n\nm = ConvModule(4)\n"
           "out = m(torch.randn(1, 4, 8, 8, requires_grad=True))\nout += 1\nout.sum().backward()\n")
    (ws / "train.py").write_text(src)
    uri = (ws / "train.py").as_uri()
    exe = _venv_with_package(tmp_path)
    async with session(root=ws) as c:  # the server's own interpreter has no fancylayers
        open_doc(c, uri, src)
        assert (await wait_published(c, uri)).diagnostics == ()
    async with session(root=ws, init={"interpreter": exe}) as c:
        open_doc(c, uri, src)
        p = await wait_published(c, uri)
        assert codes(p.diagnostics) == ["GG101"]
    async with session(root=ws, init={"interpreter": str(tmp_path / "no-such-python")}) as c:
        open_doc(c, uri, src)
        assert (await wait_published(c, uri)).diagnostics == ()
        await wait_for(lambda: any("no-such-python" in m.message for m in c.log_messages), what="a warning")
