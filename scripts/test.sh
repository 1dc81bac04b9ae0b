#!/usr/bin/env bash
# The test command: installs the real parts the tests use (MCP servers from
# npm, stripe-mock), then runs every Go test. Tests start their own servers
# on loopback ports. The runtime, CLI and serve suites run twice: on SQLite
# (in go test ./...) and on PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."
PATH="$(scripts/deps.sh)"
export PATH
go test -timeout 30m ./... "$@"
# The suites that run the whole runtime, a second time on the PostgreSQL
# engine (internal/teststore; internal/pgtest starts a throwaway server,
# or uses $OPENPLAYBOOK_TEST_POSTGRES; under CI a missing server fails).
OPENPLAYBOOK_TEST_STORE=postgres go test -timeout 30m ./runtime ./cmd/openplaybook/cli ./serve "$@"
