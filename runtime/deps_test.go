package runtime_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies holds the layering rule of docs/runtime.md: the runtime
// knows no provider, no model SDK and no harness wiring. What executes a
// call reaches it as a registry.Tool; drivers reach it as driver.Driver.
// A package listed here showing up in `go list -deps ./runtime` fails.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/openplaybook/openplaybook/runtime").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages; it cannot have listed the runtime's", len(deps))
	}
	const mod = "github.com/openplaybook/openplaybook/"
	forbidden := []string{
		mod + "preflight", mod + "host", mod + "harness", mod + "mcphost", mod + "builtin",
		mod + "connector", mod + "driver/openai", mod + "driver/openairesponses", mod + "driver/anthropic", mod + "driver/drivers", mod + "driver/transcript",
		"github.com/openai/", "github.com/anthropics/", "github.com/stripe/", "github.com/modelcontextprotocol/",
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, strings.TrimSuffix(f, "/")+"/") {
				t.Errorf("package runtime depends on %s (through %s); it must not (docs/runtime.md, \"Layout\")", f, d)
			}
		}
	}
}
