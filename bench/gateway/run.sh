#!/bin/bash
# run.sh: the MCP gateway of `openplaybook serve` against direct calls, side
# by side in one run (BENCHMARKS.md, "MCP gateway: direct vs through
# openplaybook serve"). Builds openplaybook and the benchmark from this
# tree, then runs bench/gateway (see its doc comment) with these flags:
#
#	bench/gateway/run.sh                                 # c=1 and 32, every-call and on-change, 5 s x 3 rounds
#	bench/gateway/run.sh -tools-check on-change -duration 10s -rounds 5
#	bench/gateway/run.sh -inproc -cpuprofile cpu.out -concurrency 1 -tools-check on-change
#	go tool pprof -top -cum cpu.out                      # (with -inproc)
#
# Needs node and npm ci (server-everything) at the repository root.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/openplaybook" ./cmd/openplaybook
go build -o "$tmp/gateway" ./bench/gateway
echo "# commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +dirty); node $(node --version)"
"$tmp/gateway" -openplaybook "$tmp/openplaybook" "$@"
