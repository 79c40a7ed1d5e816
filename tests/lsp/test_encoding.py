"""Position encoding negotiation: ranges are right on a line with CJK and astral (emoji) characters."""

from __future__ import annotations

import pytest
from lsp_helpers import capabilities, codes, edit, needs_analyzer, open_doc, session, wait_published
from lsprotocol import types as T

pytestmark = [pytest.mark.asyncio, needs_analyzer]

SRC = 'import torch\nx = torch.randn(3, requires_grad=True)\ny = x.exp()\ns = "中文😀"; y += 1\ny.sum().backward()\n'
# `y += 1` starts after 11 characters: `s = "中文😀"; ` = 8 ASCII + 2 CJK (3 UTF-8 bytes, 1 UTF-16 unit each)
# + 1 emoji (4 UTF-8 bytes, 2 UTF-16 units).
START = {"utf-16": 12, "utf-8": 18, "utf-32": 11}
EMOJI = {"utf-16": (7, 9), "utf-8": (11, 15), "utf-32": (7, 8)}  # where 😀 is, in each encoding


@pytest.mark.parametrize("encoding", [None, "utf-8", "utf-32"])
async def test_ranges_on_a_cjk_line(tmp_path, encoding):
    offered = [encoding, "utf-16"] if encoding else None
    enc = encoding or "utf-16"
    async with session(caps=capabilities(encodings=offered), init={"debounceMs": 0}) as c:
        assert c.init_result.capabilities.position_encoding == enc
        uri = (tmp_path / "m.py").as_uri()
        open_doc(c, uri, SRC)
        p = await wait_published(c, uri)
        (d,) = p.diagnostics
        assert d.range.start == T.Position(line=3, character=START[enc])
        assert d.range.end == T.Position(line=3, character=START[enc] + 6)
        # incremental sync in the same encoding: replace the emoji by a CJK character
        n = len(c.published)
        a, b = EMOJI[enc]
        edit(c, uri, 2, 3, a, 3, b, "文")
        p = await wait_published(c, uri, n, lambda p: p.version == 2)
        assert codes(p.diagnostics) == ["GG101"]
        shift = {"utf-16": 1, "utf-8": 1, "utf-32": 0}[enc]  # 😀 (2/4/1 units) -> 文 (1/3/1 units)
        assert p.diagnostics[0].range.start == T.Position(line=3, character=START[enc] - shift)
        # hover at the flagged expression, given in that encoding
        h = await c.text_document_hover_async(T.HoverParams(
            text_document=T.TextDocumentIdentifier(uri=uri), position=T.Position(line=3, character=START[enc])))
        assert h is not None and "GG101" in h.contents.value
