"""A backward that runs inside another file's training helper (``update_params(optim, loss, ...)``): the finding
sits on the call in the checked file, and points at the argument the helper backpropagates and at the backward
itself. The label of the same shape is proven by running tests/fixtures/projects/gan_step_in_helper."""

from __future__ import annotations

import textwrap
from pathlib import Path

from gradguard.api import check_text
from gradguard.project import Project, SearchPath

UTILS = textwrap.dedent("""
    def update_params(optim, loss, retain_graph=False):
        optim.zero_grad()
        loss.backward(retain_graph=retain_graph)
        optim.step()
""")

AGENT = textwrap.dedent("""
    import torch
    import torch.nn as nn

    from utils import update_params


    def learn(states):
        fraction_net = nn.Linear(4, 3)
        quantile_net = nn.Linear(4, 3)
        fraction_optim = torch.optim.Adam(fraction_net.parameters())
        quantile_optim = torch.optim.Adam(quantile_net.parameters())
        entropies = fraction_net(states).softmax(-1)
        entropy_loss = -entropies.mean()
        quantile_loss = quantile_net(states).pow(2).mean()
        update_params(fraction_optim, entropy_loss, retain_graph=True)
        update_params(
            quantile_optim,
            quantile_loss + entropy_loss,
        )
""")


def test_backward_in_helper_points_at_the_argument(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "utils.py").write_text(UTILS)
    (tmp_path / "agent.py").write_text(AGENT)
    project = Project(SearchPath(roots=[str(tmp_path)]))
    r = check_text(AGENT, str(tmp_path / "agent.py"), project=project)
    steps = [f for f in r.findings if f.code == "GG202"]
    assert len(steps) == 1, r.findings
    lines = AGENT.splitlines()
    first_call = next(i for i, ln in enumerate(lines, 1) if "update_params(fraction_optim" in ln)
    argument = next(i for i, ln in enumerate(lines, 1) if "quantile_loss + entropy_loss" in ln)
    f = steps[0]
    assert f.line == first_call  # the step runs inside the first call
    related = {(Path(r.path).name, r.line) for r in f.related}
    assert ("agent.py", argument) in related  # the value the second helper call backpropagates
    assert ("utils.py", UTILS.splitlines().index("    loss.backward(retain_graph=retain_graph)") + 1) in related
