"""Code actions (quick fixes, suppress, fix-all), hover, and the fixAll command, over stdio."""

from __future__ import annotations

import pytest
from gradguard.fixes import apply_edits
from gradguard.model import Edit
from lsp_helpers import GG101_SRC, capabilities, codes, full_change, needs_analyzer, open_doc, session, wait_published
from lsprotocol import types as T

pytestmark = [pytest.mark.asyncio, needs_analyzer]


def apply_lsp(text: str, edits: list[T.TextEdit]) -> str:
    """Apply LSP edits (ASCII text here, so UTF-16 units == characters)."""
    return apply_edits(text, [Edit(e.range.start.line + 1, e.range.start.character + 1, e.range.end.line + 1,
                                   e.range.end.character + 1, e.new_text) for e in edits])


async def actions(c, uri, rng, diags, only=None):
    return await c.text_document_code_action_async(T.CodeActionParams(
        text_document=T.TextDocumentIdentifier(uri=uri), range=rng,
        context=T.CodeActionContext(diagnostics=list(diags), only=only)))


async def test_quickfixes_and_suppress(tmp_path):
    async with session() as c:
        uri = (tmp_path / "m.py").as_uri()
        open_doc(c, uri, GG101_SRC)
        p = await wait_published(c, uri)
        (d,) = p.diagnostics
        acts = await actions(c, uri, d.range, [d])
        quick = [a for a in acts if a.kind == T.CodeActionKind.QuickFix]
        assert len(quick) == len(d.data["fixes"]) >= 2  # one finding, one safe fix: no fix-all beside its own fix
        # titles name the tool and the rule, without literal backticks
        assert [a.title for a in quick] == ["gradguard (GG101): rewrite y += 1 as y = y + 1",
                                            "gradguard (GG101): clone y before modifying it (y = y.clone())",
                                            "gradguard (GG101): suppress on this line (# noqa: GG101)"]
        assert "`" not in d.message and '"y" in place' in d.message
        preferred = [a for a in quick if a.is_preferred]
        assert len(preferred) == 1 and preferred[0].title == quick[0].title
        assert all(a.diagnostics and a.diagnostics[0].code == "GG101" for a in quick)
        suppress = quick[-1]
        fixed = apply_lsp(GG101_SRC, suppress.edit.changes[uri])
        assert fixed.splitlines()[3] == "y += 1  # noqa: GG101"
        n = len(c.published)
        full_change(c, uri, fixed, 2)
        p2 = await wait_published(c, uri, n, lambda p: p.version == 2)
        assert p2.diagnostics == ()
        # the preferred fix really removes the hazard
        full_change(c, uri, GG101_SRC, 3)
        await wait_published(c, uri, n, lambda p: p.version == 3)
        after = apply_lsp(GG101_SRC, preferred[0].edit.changes[uri])
        full_change(c, uri, after, 4)
        p4 = await wait_published(c, uri, n, lambda p: p.version == 4)
        assert p4.diagnostics == ()


async def test_fix_all_source_action_and_command(tmp_path):
    src = GG101_SRC + "z = x.sigmoid()\nz.mul_(2)\nz.sum().backward()\n"
    async with session() as c:
        uri = (tmp_path / "m.py").as_uri()
        open_doc(c, uri, src)
        p = await wait_published(c, uri)
        assert codes(p.diagnostics) == ["GG101", "GG101"]
        whole = T.Range(start=T.Position(line=0, character=0), end=T.Position(line=0, character=0))
        acts = await actions(c, uri, whole, [], only=["source.fixAll"])
        assert [a.kind for a in acts] == ["source.fixAll.gradguard"]
        fixed = apply_lsp(src, acts[0].edit.changes[uri])
        assert "# noqa" not in fixed
        from gradguard.api import check_source

        assert check_source(fixed, "m.py") == []
        # lightbulb requests (no `only`) at the flagged line also offer it; `only: quickfix` does not
        acts = await actions(c, uri, p.diagnostics[0].range, [p.diagnostics[0]], only=[T.CodeActionKind.QuickFix])
        assert all(a.kind == "quickfix" for a in acts)
        # the command applies the same edit through workspace/applyEdit
        res = await c.workspace_execute_command_async(T.ExecuteCommandParams(
            command="gradguard.fixAll", arguments=[uri]))
        assert res == {"applied": 2}
        (applied,) = c.applied_edits
        assert apply_lsp(src, applied.edit.changes[uri]) == fixed


async def test_hover_explains_this_case(tmp_path):
    async with session() as c:
        uri = (tmp_path / "m.py").as_uri()
        open_doc(c, uri, GG101_SRC)
        await wait_published(c, uri)
        h = await c.text_document_hover_async(T.HoverParams(
            text_document=T.TextDocumentIdentifier(uri=uri), position=T.Position(line=3, character=2)))
        md = h.contents.value
        assert h.contents.kind == T.MarkupKind.Markdown
        assert "GG101" in md and "line 3" in md and "exp" in md and "`y = x.exp()`" in md
        assert "in place" in md and "backward" in md
        assert "y += 1" in md and "y = y + 1" in md
        assert "GG101.md" in md
        none = await c.text_document_hover_async(T.HoverParams(
            text_document=T.TextDocumentIdentifier(uri=uri), position=T.Position(line=0, character=2)))
        assert none is None


DETR_LIKE = '''import torch
from torch import nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(12))  # (too long to unroll: a false alarm)

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = nn.functional.relu(layer(x)) if i < 11 else layer(x)
        return x


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.bbox = Head()

    def forward(self, hs, ref):
        tmp = self.bbox(hs)
        boxes = [tmp]
        tmp[..., :2] += ref
        return tmp.sigmoid(), boxes
'''


async def test_fix_all_leaves_out_fixes_that_do_not_fix(tmp_path):
    """A false alarm (the loop is too long to unroll) whose finding no fix removes: relu saved the tensor it names
    as its own output, so cloning the input of the Linear that also saved it would leave the finding (that partial
    clone is not offered), and the copy that would silence it changes what the code computes (unsafe). Fix-all
    applies nothing, and the command says why."""
    async with session() as c:
        uri = (tmp_path / "detr.py").as_uri()
        open_doc(c, uri, DETR_LIKE)
        p = await wait_published(c, uri)
        gg101 = next(d for d in p.diagnostics if d.code == "GG101")
        assert not any(f["kind"] == "clone-at-use" for f in gg101.data["fixes"])
        preferred = next(f for f in gg101.data["fixes"] if f["preferred"])
        assert not preferred["safe"] and preferred["kind"] != "noqa"
        whole = T.Range(start=T.Position(line=0, character=0), end=T.Position(line=0, character=0))
        assert not await actions(c, uri, whole, [], only=["source.fixAll"])
        res = await c.workspace_execute_command_async(T.ExecuteCommandParams(
            command="gradguard.fixAll", arguments=[uri]))
        assert res["applied"] == 0 and not c.applied_edits
        assert "unsafe fix" in res["skipped"]  # and the command says why


async def test_hover_leads_with_the_two_lines_and_the_fix(tmp_path):
    """Saved here, modified here, the fix; then why, briefly. Not the message again, not the user's comments."""
    src = GG101_SRC.replace("y = x.exp()\n", "y = x.exp()  # keep this, Bob\n").replace(
        "y += 1\n", "y += 1  # TODO ask Alice\n")
    async with session() as c:
        uri = (tmp_path / "m.py").as_uri()
        open_doc(c, uri, src)
        (d,) = (await wait_published(c, uri)).diagnostics
        h = await c.text_document_hover_async(T.HoverParams(
            text_document=T.TextDocumentIdentifier(uri=uri), position=T.Position(line=3, character=2)))
        md = h.contents.value
        saved, modified, fix, why = (md.index(k) for k in ("**saved** line 3", "**modified** line 4", "**Fix**",
                                                          "Why backward breaks"))
        assert saved < modified < fix < why
        assert "`y = x.exp()`" in md[saved:modified] and "`y += 1`" in md[modified:fix]
        assert "y = y + 1" in md[fix:why]
        assert "Bob" not in md and "Alice" not in md  # trailing comments are not quoted back
        assert d.message not in md and "Before:" not in md
        assert len(md) < 1200 and md.count("\n") < 20


UNSAFE_SRC = (GG101_SRC.replace("y.sum().backward()\n", "")
              + "z = x.sigmoid()\nw = z\nz.mul_(2)\n(y.sum() + w.sum()).backward()\n")


async def test_fix_all_in_the_lightbulb_says_what_it_skips(tmp_path):
    caps = capabilities()
    caps.text_document.code_action.disabled_support = True
    async with session(caps=caps) as c:
        uri = (tmp_path / "m.py").as_uri()
        open_doc(c, uri, UNSAFE_SRC)
        p = await wait_published(c, uri)
        safe_d, unsafe_d = sorted(p.diagnostics, key=lambda d: d.range.start.line)
        assert [safe_d.range.start.line, unsafe_d.range.start.line] == [3, 6]
        # the lightbulb (no `only`) at the safe finding: its fixes, then fix-all, which names what it leaves out
        acts = await actions(c, uri, safe_d.range, [safe_d])
        fix_all = [a for a in acts if a.title.startswith("gradguard: fix all")]
        assert [a.kind for a in fix_all] == [T.CodeActionKind.QuickFix]
        assert fix_all[0].title == "gradguard: fix all (1 safe fix; skips 1 unsafe (GG101): may change results)"
        assert apply_lsp(UNSAFE_SRC, fix_all[0].edit.changes[uri]).splitlines()[3] == "y = y + 1"
        # source.fixAll (fix on save) is the same edit under its own kind, and stays out of `only: quickfix`
        src_acts = await actions(c, uri, safe_d.range, [], only=["source.fixAll"])
        assert [a.kind for a in src_acts] == ["source.fixAll.gradguard"]
        # the command says what it skipped and why
        res = await c.workspace_execute_command_async(T.ExecuteCommandParams(
            command="gradguard.fixAll", arguments=[uri]))
        assert res["applied"] == 1 and "unsafe" in res["skipped"] and "may change what the code computes" in \
            res["skipped"]
        # nothing left but the unsafe one: fix-all is shown disabled, with the reason
        fixed = apply_lsp(UNSAFE_SRC, c.applied_edits[0].edit.changes[uri])
        n = len(c.published)
        full_change(c, uri, fixed, 2)
        p2 = await wait_published(c, uri, n, lambda p: p.version == 2)
        (only_unsafe,) = p2.diagnostics
        acts = await actions(c, uri, only_unsafe.range, [only_unsafe])
        (disabled,) = [a for a in acts if a.disabled is not None]
        assert disabled.title.startswith("gradguard: fix all (skips 1 unsafe")
        assert "review" in disabled.disabled.reason
