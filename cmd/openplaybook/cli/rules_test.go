package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRulesJSON: rules --format json lists every rule of the catalog as
// {id, description}, in the text output's order.
func TestRulesJSON(t *testing.T) {
	t.Parallel()
	_, text, _ := run(t, nil, "rules")
	code, out, _ := run(t, nil, "rules", "-f", "json")
	var rules []map[string]string
	if err := json.Unmarshal([]byte(out), &rules); code != ExitOK || err != nil || len(rules) == 0 {
		t.Fatalf("rules -f json: exit %d, %v", code, err)
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) != len(rules) {
		t.Fatalf("%d rules in text, %d in json", len(lines), len(rules))
	}
	for i, r := range rules {
		if len(r) != 2 || !strings.HasPrefix(lines[i], r["id"]+" ") || !strings.HasSuffix(lines[i], r["description"]) {
			t.Errorf("rule %d: %v; text %q", i, r, lines[i])
		}
	}
}
