# One entry point for people and CI.  `make demo` and `make test` set everything up from scratch.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
LINT_STAMP := $(VENV)/.lint-stamp
STAMP := $(VENV)/.installed-stamp

.PHONY: setup setup-lint demo test lint typecheck pytest bench scan-timm clean knowledge dist

# Areas add their own targets in mk/*.mk (TEST_TARGETS += ..., or TEST_LAST += ... for what must run alone at the
# end) and pip requirements in requirements/*.txt.
TEST_TARGETS := lint typecheck pytest
TEST_LAST :=
REQS := $(sort $(wildcard requirements/*.txt))

# What linting needs (gradguard + libcst, pygls, pathspec: ~45 MB, ~15 s): enough for `make demo` and the editors.
$(LINT_STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e .
	touch $(LINT_STAMP)

# Everything the tests use on top: dev tools, torch (runs code), keras, timm, neovim, hypothesis (~1.2 GB).
$(STAMP): $(LINT_STAMP) pyproject.toml constraints.txt $(REQS)
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,torch]'
	for r in $(REQS); do $(BIN)/python -m pip install -q -c constraints.txt -r $$r || exit 1; done
	$(BIN)/python -m pip install -q -c constraints.txt --no-deps timm==1.0.31
	touch $(STAMP)

setup-lint: $(LINT_STAMP)

setup: $(STAMP)

# The main job on a shipped example: lint a model file with hazards, then show a fix as a diff. Lint
# dependencies only: no torch.
demo: $(LINT_STAMP)
	$(BIN)/gradguard check examples/ --exit-zero
	$(BIN)/gradguard check examples/cnn_inplace.py --diff --exit-zero

lint: setup
	$(BIN)/ruff check server tests benchmarks client/launcher

typecheck: setup
	$(BIN)/mypy

# Two workers (pytest-xdist), each taking whole test files: the torch-executed tests fork their own children,
# and more workers than cores only slows them down. PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= 2
pytest: setup
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=10

-include mk/*.mk

# Release artifacts in dist/: the wheel and the sdist (python -m build), and the self-contained VSIX (make vsix).
# Install them with `pip install dist/gradguard-*.whl` (or `pipx install .` from a clone) and
# `code --install-extension dist/gradguard-<version>.vsix`.
dist: $(LINT_STAMP) vsix
	$(BIN)/python -m pip install -q -c constraints.txt build
	rm -rf dist
	$(BIN)/python -m build -q --sdist --wheel --outdir dist .
	cp $(VSIX_NAME) dist/
	ls -l dist

# The checks run two at a time (lint, typecheck and the client's checks beside pytest; lines of their output
# interleave), then the editor end-to-end tests alone: a real editor on a loaded machine is slow to answer.
test:
	$(MAKE) --no-print-directory -j2 --output-sync=line $(TEST_TARGETS)
	$(if $(strip $(TEST_LAST)),$(MAKE) --no-print-directory $(TEST_LAST))

bench: setup
	$(BIN)/python benchmarks/bench_analyzer.py
	$(BIN)/python benchmarks/bench_fixes.py
	$(BIN)/python benchmarks/bench_runtime.py
	$(BIN)/python benchmarks/bench_lsp.py

scan-timm: setup
	$(BIN)/python benchmarks/scan_timm.py

knowledge: setup
	$(BIN)/gradguard knowledge --regenerate --output server/gradguard/knowledge/saved_tensors.json

clean:
	rm -rf $(VENV) build dist server/*.egg-info
