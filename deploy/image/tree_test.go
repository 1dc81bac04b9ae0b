package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCopyDirLeavesNPMConfigOut: an npm directory's builtin npmrc and any
// .npmrc (where a registry token of the build machine may be) are not
// copied into the image; the rest is.
func TestCopyDirLeavesNPMConfigOut(t *testing.T) {
	src := t.TempDir()
	for name, data := range map[string]string{
		"npmrc":                "//registry.npmjs.org/:_authToken=npm_SECRET\n",
		"lib/.npmrc":           "//registry.npmjs.org/:_authToken=npm_SECRET\n",
		"bin/npm-cli.js":       "#!/usr/bin/env node\n",
		"lib/cli.js":           "module.exports = 1\n",
		"docs/npmrc/README.md": "kept: a directory named npmrc is not npm's config\n",
	} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tr := tree{}
	if err := tr.copyDir("/usr/lib/node_modules/npm", src); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"npmrc", "lib/.npmrc"} {
		if _, ok := tr["/usr/lib/node_modules/npm/"+gone]; ok {
			t.Errorf("%s was copied into the image", gone)
		}
	}
	for _, kept := range []string{"bin/npm-cli.js", "lib/cli.js", "docs/npmrc/README.md"} {
		if _, ok := tr["/usr/lib/node_modules/npm/"+kept]; !ok {
			t.Errorf("%s was left out", kept)
		}
	}
}
