#!/usr/bin/env bash
# Installs what the tests and the examples need besides Go modules, and
# prints the PATH to use. Idempotent: skips what is already there.
#   - the MCP servers and ajv pinned in package-lock.json (npm ci)
#   - stripe-mock, which backs the Stripe connector (go install)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x node_modules/.bin/mcp-server-memory ] || [ ! -x node_modules/.bin/mcp-server-everything ] \
  || [ ! -f node_modules/ajv/dist/2020.js ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund >&2
fi
gobin="$(go env GOPATH)/bin"
if ! PATH="$gobin:$PATH" command -v stripe-mock >/dev/null 2>&1; then
  go install github.com/stripe/stripe-mock@v0.203.0 >&2
fi
echo "$gobin:$PATH"
