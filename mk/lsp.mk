# The language server (server/gradguard/lsp/, docs/lsp.md). Its pytest-lsp tests (tests/lsp/) run in `make pytest`.
#   make lsp-test     only the language server tests
#   make bench-lsp    didChange -> publishDiagnostics latency vs `ruff server`, cold start (prints figures)
.PHONY: lsp-test bench-lsp

lsp-test: setup
	$(BIN)/python -m pytest -q tests/lsp

bench-lsp: setup
	$(BIN)/python benchmarks/bench_lsp.py
