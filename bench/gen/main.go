// Command gen writes a generated OpenPlaybook document (internal/testgen)
// for the scripts under bench/:
//
//	go run ./bench/gen -steps 1000 -tools 5000 -o big.json   # about 6 MB
//	go run ./bench/gen -mb 64 -o big64.json                   # about 64 MB
//
// -mb scales the 1,000-step, 5,000-tool document (5,992,780 bytes) to
// about that many megabytes (10^6 bytes), keeping one step for every five
// tools; it overrides -steps and -tools.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"

	"github.com/openplaybook/openplaybook/internal/testgen"
)

// baseSize is the size of testgen.Large(1000, 5000).
const baseSize = 5_992_780

func main() {
	steps := flag.Int("steps", 1000, "number of steps")
	tools := flag.Int("tools", 5000, "number of embedded tool definitions")
	mb := flag.Float64("mb", 0, "approximate size in MB (10^6 bytes); sets -steps and -tools")
	out := flag.String("o", "", "output file (default standard output)")
	flag.Parse()
	if *mb > 0 {
		*tools = max(1, int(math.Round(5000**mb*1e6/baseSize)))
		*steps = max(1, *tools/5)
	}
	src := testgen.Large(*steps, *tools)
	var err error
	if *out == "" {
		_, err = os.Stdout.Write(src)
	} else {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
