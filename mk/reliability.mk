# Reliability: worst-case inputs, fuzzing, determinism, --fix convergence (issue 11). The short runs are part of
# `make pytest`; these are the long ones.
#   make fuzz          long fuzz: thousands of hypothesis examples (random seeds), mutants of every zoo file
#   make sweep         every timm file: --fix converges, byte-identical output across seeds/-j/path order;
#                      the 10 MB document's own result in the language server
#   make bench-scaling time against size for generated worst cases, with ast.parse as the anchor (prints figures)
.PHONY: fuzz sweep bench-scaling

fuzz: setup
	GRADGUARD_FUZZ=long $(BIN)/python -m pytest -q -p no:cacheprovider tests/fuzz

sweep: setup
	GRADGUARD_SWEEP=full $(BIN)/python -m pytest -q tests/fixes/test_fix_converges.py tests/cli/test_deterministic.py tests/lsp/test_large.py

bench-scaling: setup
	$(BIN)/python benchmarks/bench_scaling.py
