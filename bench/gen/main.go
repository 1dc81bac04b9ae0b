// Command gen writes a generated OpenPlaybook document (internal/testgen)
// for the scripts under bench/:
//
//	go run ./bench/gen -steps 1000 -tools 5000 -o big.json
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/openplaybook/openplaybook/internal/testgen"
)

func main() {
	steps := flag.Int("steps", 1000, "number of steps")
	tools := flag.Int("tools", 5000, "number of embedded tool definitions")
	out := flag.String("o", "", "output file (default standard output)")
	flag.Parse()
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
