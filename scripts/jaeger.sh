#!/usr/bin/env bash
# Builds Jaeger v1.76.0 (all-in-one: OTLP receiver, in-memory storage,
# query API), the trace backend of serve's tracing test, into
# $(go env GOPATH)/bin/jaeger-v1.76.0, unless it is there. Jaeger's module
# carries replace directives, so `go install pkg@version` refuses it: it
# is built as a tool of a scratch module (go get -tool). Prints the path.
set -euo pipefail
version=v1.76.0
gobin="$(go env GOPATH)/bin"
out="$gobin/jaeger-$version"
if [ ! -x "$out" ]; then
  scratch="$(mktemp -d)"
  trap 'rm -rf "$scratch"' EXIT
  (
    cd "$scratch"
    go mod init scratch/jaeger >/dev/null 2>&1
    go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$version" >&2
    mkdir -p "$gobin"
    go build -o "$out.tmp" github.com/jaegertracing/jaeger/cmd/jaeger >&2
    mv "$out.tmp" "$out"
  )
fi
echo "$out"
