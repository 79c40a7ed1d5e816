"""What `.parameters()` of a module reaches (nn_modules.NNModules.reach): the objects and parameter storages an
optimizer built from it updates."""

from gradguard.analysis.nn_modules import NNModules
from gradguard.analysis.values import Choice, Obj, Storage, T


def _module(name: str) -> tuple[Obj, Storage]:
    m = Obj("torch", f"torch.nn.{name}", None)
    s = Storage(f"{name}.weight", None, True, m)
    m.params["weight"] = T(frozenset({s}), leaf=True)
    return m, s


def test_a_wrapper_reaches_every_module_a_factory_may_have_built() -> None:
    # `nn.DataParallel(define_f(...))` where define_f builds VGG16_FCN8s or UNet by a flag: the optimizer made
    # from the wrapper's parameters updates whichever it holds
    a, sa = _module("Conv2d")
    b, sb = _module("Linear")
    wrapper = Obj("wrapper", "torch.nn.DataParallel", None)
    wrapper.attrs["module"] = Choice((a, b))
    got = NNModules.reach(None, wrapper)  # type: ignore[arg-type]  # reach reads nothing of the analyzer
    assert {wrapper, a, b, sa, sb} <= got


def test_a_module_reaches_its_children_and_their_parameters() -> None:
    a, sa = _module("Conv2d")
    parent = Obj("local", "Block", None)
    parent.attrs["conv"] = a
    assert {parent, a, sa} <= NNModules.reach(None, parent)  # type: ignore[arg-type]
