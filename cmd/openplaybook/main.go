// Command openplaybook checks and explains OpenPlaybook documents; see
// docs/cli.md.
package main

import (
	"os"

	"github.com/openplaybook/openplaybook/internal/cli"
)

func main() {
	os.Exit((&cli.CLI{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}).Main(os.Args[1:]))
}
