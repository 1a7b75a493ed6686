#!/usr/bin/env bash
# Runs every check of Baton: installs what the tests need (a moto server,
# cfn-lint, the Python MCP SDK and the A2A SDK in .venv; the reference MCP server
# server-everything in .mcp-servers; Chromium and chromedriver for the
# console's browser test), lints the SAM template, checks
# formatting and clippy (warnings are errors), then runs the Rust test suite.
# Usage: ./scripts/test.sh [extra cargo test args]
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv
if [ ! -x "$venv/bin/moto_server" ] || [ ! -x "$venv/bin/cfn-lint" ]; then
  echo "== installing moto[server] and cfn-lint into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet 'moto[server]' cfn-lint
fi

# MCP servers the e2e tests run Baton's MCP client against (tests/e2e/common/mcp.rs):
# tests/fixtures/mcp/tracker_server.py on the Python SDK (mcp 2.x: MCPServer),
# and tests/fixtures/oauth/server.py on its auth support (per-person connections)...
if ! "$venv/bin/python" -c 'import mcp.server.mcpserver' 2>/dev/null; then
  echo "== installing mcp (the Python MCP SDK) into $venv"
  "$venv/bin/pip" install --quiet 'mcp>=2.3,<3'
fi
# ...and the reference server-everything (Node), in a git-ignored directory.
mcp_servers=.mcp-servers
if [ ! -f "$mcp_servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js" ]; then
  echo "== installing @modelcontextprotocol/server-everything into $mcp_servers"
  mkdir -p "$mcp_servers"
  npm install --prefix "$mcp_servers" --no-audit --no-fund --loglevel=error \
    @modelcontextprotocol/server-everything@2026.8.31
fi

# The A2A client the e2e tests of Baton as an A2A agent run
# (tests/fixtures/a2a/client.py): the official A2A Python SDK.
if ! "$venv/bin/python" -c 'import a2a.client, httpx' 2>/dev/null; then
  echo "== installing a2a-sdk (the A2A Python SDK) into $venv"
  "$venv/bin/pip" install --quiet 'a2a-sdk>=1.3,<2' httpx
fi

# The web console's test (tests/e2e/console.rs) drives Debian's headless
# Chromium through chromedriver (a WebDriver server).
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  echo "== installing chromium and chromium-driver (apt-get)"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver
fi

if [ -f infra/template.yaml ]; then
  echo "== cfn-lint infra/template.yaml"
  "$venv/bin/cfn-lint" infra/template.yaml
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

echo "== cargo test --workspace"
cargo test --workspace --no-fail-fast "$@"
