package registry_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestVocabularyLinksNoDatabaseDriver: the vocabulary packages and the
// tools that only read documents (validate, explain, pin) name no store
// engine, so they link no database driver: neither SQLite
// (modernc.org/sqlite) nor PostgreSQL (jackc/pgx, lib/pq), nor any store
// engine package.
func TestVocabularyLinksNoDatabaseDriver(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(goBin, "list", "-deps", "./validate", "./explain", "./pin", "./registry")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(pkg, "modernc.org/sqlite"),
			strings.HasPrefix(pkg, "github.com/jackc/pgx"),
			strings.HasPrefix(pkg, "github.com/lib/pq"),
			strings.HasPrefix(pkg, "github.com/openplaybook/openplaybook/store/"):
			t.Errorf("validate, explain, pin or registry depends on %s", pkg)
		}
	}
}
