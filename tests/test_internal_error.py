"""A bug inside the analysis is a GG000 note on the file (exit status as for any finding), never a traceback."""

from __future__ import annotations

import pytest
from gradguard import api


def test_analysis_exception_becomes_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    import gradguard.analysis as analysis

    def boom(*args: object, **kwargs: object) -> None:
        raise ValueError("synthetic failure")

    monkeypatch.setattr(analysis, "analyze_file", boom)
    monkeypatch.delenv("GRADGUARD_DEBUG", raising=False)
    res = api.check_source("import torch\nx = torch.ones(2)\n", "t.py")
    assert [f.code for f in res] == ["GG000"]
    assert "internal error" in res[0].message and "synthetic failure" in res[0].message

    monkeypatch.setenv("GRADGUARD_DEBUG", "1")
    with pytest.raises(ValueError):
        api.check_source("import torch\nx = torch.ones(2)\n", "t2.py")
