#!/usr/bin/env bash
# Builds Ory Hydra v2.3.0, the OAuth 2.1 / OpenID Connect server the
# identity tests run on loopback (internal/hydratest), once, and prints the
# binary's path. Hydra's module carries replace directives, so it cannot be
# `go install`ed: it is added as a tool of a scratch module, whose go.mod
# repeats the one replace the build needs, and built there. The binary is
# cached in $(go env GOPATH)/bin/hydra-v2.3.0. It is built with SQLite
# (cgo) for the in-memory database the tests give it (dsn: memory).
set -euo pipefail
version=v2.3.0
gobin="$(go env GOPATH)/bin"
out="$gobin/hydra-$version"
if [ -x "$out" ]; then
  echo "$out"; exit 0
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
go mod init openplaybook.local/hydra-build >/dev/null 2>&1
# Hydra's go.mod replaces gobuffalo/pop with Ory's fork; without it the
# build fails (pop.store has no SQLDB).
go mod edit -replace github.com/gobuffalo/pop/v6=github.com/ory/pop/v6@v6.2.1-0.20241121111754-e5dfc0f3344b
go get -tool "github.com/ory/hydra/v2@$version" >&2
go mod tidy >&2
mkdir -p "$gobin"
go build -tags sqlite,sqlite_omit_load_extension -o "$out.tmp" github.com/ory/hydra/v2 >&2
mv "$out.tmp" "$out"
echo "$out"
