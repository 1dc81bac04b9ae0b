// Command gen writes the inputs of one openplaybook run that calls the
// echo tool of @modelcontextprotocol/server-everything N times, for
// bench/echo.sh:
//
//	go run ./bench/echo/gen -n 1000 -dir /tmp/echo1000
//
// It writes, in DIR:
//
//   - echo.json: a playbook with one agent step ("echo", agent "bench")
//     whose allowedTools is ["mcp.everything.echo"], embedding that tool's
//     definition as server-everything lists it (`openplaybook pin` says
//     it is in line);
//   - transcript.json: the step's N calls, each {"message": MESSAGE}
//     (N=0: a step with no calls);
//   - harness.yaml: server "everything" bound by command (node, the
//     server's entry point under ROOT/node_modules, stdio; with -preload,
//     node --require PRELOAD first), agent "bench"
//     on the transcript driver, the store in DIR/store.db, and maxToolCalls
//     large enough for N.
//
// Run the result with
//
//	openplaybook run --harness DIR/harness.yaml --input '{}' DIR/echo.json
//
// and remove DIR/store.db between runs to start each from an empty store.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/openplaybook/openplaybook/bench/echo/echogen"
)

func main() {
	n := flag.Int("n", 1000, "number of echo calls (0 or more)")
	dir := flag.String("dir", "", "output directory (created if needed)")
	root := flag.String("root", ".", "the repository root, where node_modules is")
	msg := flag.String("message", echogen.Message, "the message to echo")
	preload := flag.String("preload", "", "a script for node to preload into the server (node --require PRELOAD ...), such as bench/echo/exit-on-eof.cjs")
	toolsCheck := flag.String("tools-check", "", "the server's toolsCheck in the harness: every-call (the default) or on-change")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: gen -n N -dir DIR [-root REPO] [-preload FILE]")
		os.Exit(2)
	}
	if err := echogen.Write(*n, *dir, *root, *preload, *msg, *toolsCheck); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
