"""Fuzzing in the suite: generated Python (hypothesmith: grammar- and CST-based; a torch-shaped generator) and
mutants of real files (timm, fixtures). The properties are in harness.py: no exception escapes, every finding
lies inside the file, each file finishes within a CPU budget, fixes still parse.

`make test` runs a short deterministic run (derandomized hypothesis, a fixed sample of mutants); `make fuzz`
runs the long one (GRADGUARD_FUZZ=long: random seeds, thousands of examples, mutants of every zoo file).
"""

from __future__ import annotations

import os
import random
import zlib

import hypothesmith
import pytest
from harness import MUTATIONS, ROOT, check_properties, mutate, timm_files, zoo_files
from hypothesis import HealthCheck, given, settings
from programs import torch_programs

LONG = os.environ.get("GRADGUARD_FUZZ", "") == "long"
EXAMPLES = int(os.environ.get("GRADGUARD_FUZZ_EXAMPLES", "2000" if LONG else "40"))

fuzz_settings = settings(max_examples=EXAMPLES, deadline=None, derandomize=not LONG, database=None,
                         suppress_health_check=list(HealthCheck), print_blob=True)


@fuzz_settings
@given(hypothesmith.from_grammar())
def test_grammar_generated_python(src: str) -> None:
    assert check_properties(src) == []


@fuzz_settings
@given(hypothesmith.from_node())
def test_cst_generated_python(src: str) -> None:
    assert check_properties(src) == []


@fuzz_settings
@given(torch_programs())
def test_torch_shaped_programs(src: str) -> None:
    assert check_properties(src) == []


@fuzz_settings
@given(torch_programs())
def test_torch_shaped_programs_as_bytes_crlf_bom(src: str) -> None:
    data = b"\xef\xbb\xbf" + src.replace("\n", "\r\n").encode()
    assert check_properties(data) == []


def _mutant_cases() -> list[tuple[str, str, int]]:
    if LONG:
        files = zoo_files()
        return [(str(f), kind, seed) for f in files for kind in MUTATIONS for seed in range(1 if kind == "none" else 2)]
    # A fixed sample: the smaller timm model files (every mutation of each), plus the fixtures.
    timm = [f for f in timm_files() if 5_000 < f.stat().st_size < 40_000][::12]
    return [(str(f), kind, 0) for f in timm for kind in MUTATIONS]


# Mutants that once broke a property (found by `make fuzz`), kept in the default run.
REGRESSIONS = [
    (str(ROOT / "tests/fixtures/gg202/pos_actor_critic.py"), "nest_blocks", 1),  # 99 levels + the hatch's `with`
    (str(ROOT / "tests/fixtures/gg202/pos_gan_reused_logits.py"), "nest_blocks", 1),
    *[(str(f), "line_separators", 0) for f in timm_files() if f.name == "coat.py"],  # GG000 past the line end
]
MUTANTS = _mutant_cases() + REGRESSIONS


@pytest.mark.parametrize(("path", "kind", "seed"), MUTANTS,
                         ids=[f"{os.path.basename(p)}-{k}-{s}" for p, k, s in MUTANTS])
def test_mutants_of_real_files(path: str, kind: str, seed: int) -> None:
    with open(path, "rb") as f:
        data = f.read()
    rnd = random.Random(zlib.crc32(f"{path}:{kind}:{seed}".encode()))
    assert check_properties(mutate(data, kind, rnd), os.path.basename(path)) == []


def test_the_sample_is_not_empty() -> None:
    assert len(MUTANTS) >= 60 and {k for _, k, _ in MUTANTS} == set(MUTATIONS)
