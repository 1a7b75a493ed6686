#!/usr/bin/env bash
# Runs every check of Baton: installs what the tests need (a moto server and
# cfn-lint in .venv), lints the SAM template, checks formatting and clippy
# (warnings are errors), then runs the Rust test suite.
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
