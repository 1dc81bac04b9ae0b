package cli

import (
	"os"
	"runtime/debug"
)

// gcPercentForCalls is the collector's target percentage (GOGC) while a
// command makes tool calls (run, resume, retry, serve), when the
// environment does not set GOGC. Such a process keeps a few MB live (the
// registry, the document, the store's state) while each MCP call's
// decoding allocates tens of KB that die at once (go-sdk), so at Go's
// default of 100 the collector runs every few dozen calls and takes CPU
// from the MCP server and the store's writer beside it; at 200 it runs
// half as often, for a heap of up to three times the live heap instead of
// two. BENCHMARKS.md, round 8; the Go GC guide,
// https://go.dev/doc/gc-guide#GOGC.
const gcPercentForCalls = 200

// gcForCalls sets gcPercentForCalls unless GOGC is set (then the
// runtime already follows it).
func gcForCalls() {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(gcPercentForCalls)
}
