package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestDocsMan: docs man DIR writes one page per available command (the
// hidden ones and help aside), each naming its command, its synopsis and
// every flag it has, with the date SOURCE_DATE_EPOCH gives.
func TestDocsMan(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "new", "man1") // created
	env := map[string]string{"SOURCE_DATE_EPOCH": "1780000000"}
	c := &CLI{Getenv: func(k string) string { return env[k] }}
	code, out, stderr := runIn(c, "docs", "man", dir)
	if code != ExitOK || out != "" || stderr != "" {
		t.Fatalf("docs man: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	want := map[string]*cobra.Command{}
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		want[strings.ReplaceAll(cmd.CommandPath(), " ", "-")+".1"] = cmd
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() && !sub.IsAdditionalHelpTopicCommand() {
				walk(sub)
			}
		}
	}
	walk((&CLI{}).root())
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	var names []string
	for n := range want {
		names = append(names, n)
	}
	slices.Sort(names)
	if !slices.Equal(got, names) {
		t.Fatalf("pages %q, want one per command %q", got, names)
	}
	for _, must := range []string{"openplaybook-validate.1", "openplaybook-check.1", "openplaybook-docs-man.1", "openplaybook.1"} {
		if want[must] == nil {
			t.Errorf("no page %s", must)
		}
	}
	for name, cmd := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		page := string(b)
		dashed := strings.TrimSuffix(name, ".1")
		if !strings.Contains(page, `.TH "`+strings.ToUpper(dashed)+`" "1" "May 2026"`) {
			t.Errorf("%s: no .TH header with the command and the SOURCE_DATE_EPOCH date:\n%.300s", name, page)
		}
		if !strings.Contains(page, cmd.UseLine()) {
			t.Errorf("%s: no synopsis %q", name, cmd.UseLine())
		}
		cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && !strings.Contains(page, `\fB--`+f.Name+`\fP`) {
				t.Errorf("%s: flag --%s is not on the page", name, f.Name)
			}
		})
		if strings.Contains(page, "Auto generated") {
			t.Errorf("%s: has cobra's generated-by footer", name)
		}
	}
	// The help texts read as written: a rule pattern keeps its asterisk,
	// an aligned table stays preformatted.
	b, _ := os.ReadFile(filepath.Join(dir, "openplaybook-check.1"))
	if !strings.Contains(string(b), "(rules drift-*; see docs/drift.md)") || !strings.Contains(string(b), "\n.EX\n") {
		t.Errorf("check's page lost its text:\n%s", b)
	}
}

// TestDocsManUsage: docs with no subcommand, man with no DIR or two, and
// a DIR that cannot be made are usage errors (exit 2) that write nothing
// to standard output.
func TestDocsManUsage(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "f", []byte("x"))
	for _, args := range [][]string{{"docs"}, {"docs", "man"}, {"docs", "man", "a", "b"}, {"docs", "man", filepath.Join(file, "sub")}} {
		code, out, stderr := run(t, nil, args...)
		if code != ExitUsage || out != "" || stderr == "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, stderr)
		}
	}
	env := map[string]string{"SOURCE_DATE_EPOCH": "soon"}
	c := &CLI{Getenv: func(k string) string { return env[k] }}
	if code, _, stderr := runIn(c, "docs", "man", t.TempDir()); code != ExitUsage || !strings.Contains(stderr, "SOURCE_DATE_EPOCH") {
		t.Errorf("bad SOURCE_DATE_EPOCH: exit %d, %q", code, stderr)
	}
}
