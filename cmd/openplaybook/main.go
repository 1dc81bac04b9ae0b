// Command openplaybook validates, explains, checks and runs OpenPlaybook
// documents; see docs/cli.md.
//
// A release build sets the version, commit and date that
// `openplaybook version` prints:
//
//	go build -ldflags "-X github.com/openplaybook/openplaybook/cmd/openplaybook/cli.Version=v1.2.3 \
//	  -X github.com/openplaybook/openplaybook/cmd/openplaybook/cli.Commit=$(git rev-parse HEAD) \
//	  -X github.com/openplaybook/openplaybook/cmd/openplaybook/cli.Date=$(git log -1 --format=%cI)" ./cmd/openplaybook
//
// Without them, the commit and date are those the go command records from
// the clone.
package main

import (
	"os"

	"github.com/openplaybook/openplaybook/cmd/openplaybook/cli"
)

func main() {
	os.Exit((&cli.CLI{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}).Main(os.Args[1:]))
}
