package schema

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAjvStrict: both published schemas compile under Ajv's strict mode
// (https://ajv.js.org/strict-mode.html), with Ajv's draft 2020-12 class:
// no unknown or ignored keyword, every keyword's type stated, every
// required property defined where it is required. Editors and other
// implementations use Ajv; a schema it refuses is one they cannot use.
// scripts/ajv-strict.mjs does the compiling, with the ajv pinned in
// package-lock.json (npm ci, run by scripts/deps.sh). Without node or ajv
// the test is skipped, unless $CI is set.
func TestAjvStrict(t *testing.T) {
	node, root := ajvNode(t)
	files := []string{"schema/openplaybook-1.6.schema.json", "schema/harness.schema.json"}
	cmd := exec.Command(node, append([]string{"scripts/ajv-strict.mjs"}, files...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ajv strict mode refuses a schema (node scripts/ajv-strict.mjs %s): %v\n%s", strings.Join(files, " "), err, out)
	}
	for _, f := range files {
		if !strings.Contains(string(out), f+": compiles in strict mode") {
			t.Errorf("ajv did not report %s as compiling:\n%s", f, out)
		}
	}
}

// TestAjvStrictCatches: the script does fail on what strict mode
// forbids, so a pass above means something.
func TestAjvStrictCatches(t *testing.T) {
	node, root := ajvNode(t)
	bad := filepath.Join(t.TempDir(), "bad.schema.json")
	// "required" of a property no schema defines, "minLength" without a
	// type, and a keyword that does not exist.
	src := `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
	  "properties": {"a": {"minLength": 1}}, "oneOf": [{"required": ["b"]}], "descripton": "typo"}`
	if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "scripts/ajv-strict.mjs", bad)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("ajv-strict.mjs accepted a schema strict mode forbids:\n%s", out)
	}
	for _, want := range []string{"strictTypes", "strictRequired", `unknown keyword: "descripton"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("ajv-strict.mjs does not report %s:\n%s", want, out)
		}
	}
}

// ajvNode returns node's path and the repository root, or skips the test
// when node or the pinned ajv is missing (fails it when $CI is set).
func ajvNode(t *testing.T) (node, root string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	missing := ""
	if node, err = exec.LookPath("node"); err != nil {
		missing = "node is not on PATH"
	} else if _, err := os.Stat(filepath.Join(root, "node_modules", "ajv", "dist", "2020.js")); err != nil {
		missing = "ajv is not installed (npm ci, or scripts/deps.sh)"
	}
	if missing != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s; CI must run this test", missing)
		}
		t.Skip(missing)
	}
	return node, root
}
