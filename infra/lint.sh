#!/usr/bin/env bash
# Lints the SAM template with cfn-lint (errors, warnings and informational
# findings all fail). Uses the repository's virtualenv, creating it and
# installing cfn-lint when missing. CI calls this script.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
if [ ! -x "$venv/bin/cfn-lint" ]; then
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet cfn-lint
fi
"$venv/bin/cfn-lint" --version
# -c I: include informational rules (e.g. explicit deletion policies).
"$venv/bin/cfn-lint" -c I -- "$root/infra/template.yaml"
echo "cfn-lint: infra/template.yaml OK"
