#!/usr/bin/env bash
# The test command: installs the real parts the tests use (MCP servers from
# npm, stripe-mock), then runs every Go test. Tests start their own servers
# on loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
PATH="$(scripts/deps.sh)"
export PATH
go test ./... "$@"
