# The VS Code extension (client/, package.json at the root) and the editor end-to-end tests (tests/e2e/).
#   make client-check    lint + typecheck + unit tests of the TypeScript client
#   make vsix            build gradguard-<version>.vsix
#   make client-e2e      the VSIX in a real VS Code (code-server + headless Chromium), screenshots in artifacts/e2e/
# The Neovim test (tests/e2e/test_neovim.py) runs with pytest.
NPM ?= npm
NODE_STAMP := node_modules/.gradguard-npm-ci
CLIENT_SRC := $(wildcard client/src/*.ts) package.json tsconfig.json .vscodeignore client/README.md
VSIX_NAME = gradguard-$(shell node -p "require('./package.json').version").vsix

.PHONY: client-deps client-lint client-typecheck client-unit client-check vsix client-e2e

$(NODE_STAMP): package.json package-lock.json
	$(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

client-deps: $(NODE_STAMP)

client-lint: $(NODE_STAMP)
	$(NPM) run --silent lint

client-typecheck: $(NODE_STAMP)
	$(NPM) run --silent typecheck

client-unit: $(NODE_STAMP)
	$(NPM) run --silent test:unit

client-check: client-lint client-typecheck client-unit

vsix: $(NODE_STAMP)
	$(NPM) run --silent package

# Installs (once, into .cache/editors) chromium + libkrb5-dev via apt when missing, Node 24 and code-server
# from the npm registry; then drives the freshly built VSIX with the project's venv as gradguard.interpreter.
client-e2e: setup vsix
	bash tests/e2e/setup-code-server.sh >/dev/null
	node tests/e2e/vscode.e2e.mjs --vsix $(VSIX_NAME) --python $(abspath $(BIN))/python

TEST_TARGETS += client-lint client-typecheck client-unit vsix
TEST_LAST += client-e2e
