package cli

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docExample is one command line of a code block in docs/cli.md.
type docExample struct {
	line    int    // in docs/cli.md
	command string // as written, its comment included
	exit    int    // the status its "# exit N" comment says; 0 without one
	output  string // the output shown under a "$ " line, "" if none
}

// placeholder matches what makes a command line a synopsis rather than
// something to run: an optional part, a choice, or an upper-case name
// (FILE, RUN, DOC..., PATH...).
var placeholder = regexp.MustCompile(`\[|\||\b[A-Z][A-Z_]+\b`)

var exitComment = regexp.MustCompile(`#\s*exit (\d+)\s*$`)

// docExamples returns the command lines of docs/cli.md's code blocks:
// lines starting with "openplaybook " (or, in a block of "$ " lines, those
// after "$ ", each with the output shown under it), placeholders or not.
func docExamples(t *testing.T) []docExample {
	t.Helper()
	f, err := os.Open("../../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []docExample
	var block []string
	var start int
	flush := func() {
		prompt := false
		for _, l := range block {
			prompt = prompt || strings.HasPrefix(l, "$ ")
		}
		for i := 0; i < len(block); i++ {
			l := block[i]
			var ex docExample
			switch {
			case prompt && strings.HasPrefix(l, "$ openplaybook "):
				ex.command = strings.TrimPrefix(l, "$ ")
				var shown []string
				for i+1 < len(block) && !strings.HasPrefix(block[i+1], "$ ") {
					i++
					shown = append(shown, block[i])
				}
				if len(shown) > 0 {
					ex.output = strings.Join(shown, "\n") + "\n"
				}
			case !prompt && strings.HasPrefix(l, "openplaybook "):
				ex.command = l
			default:
				continue
			}
			ex.line = start + i + 1
			if m := exitComment.FindStringSubmatch(ex.command); m != nil {
				ex.exit, _ = strconv.Atoi(m[1])
			}
			out = append(out, ex)
		}
	}
	sc := bufio.NewScanner(f)
	n, in, lang := 0, false, ""
	for sc.Scan() {
		n++
		l := sc.Text()
		if strings.HasPrefix(l, "```") {
			if in && (lang == "" || lang == "sh" || lang == "console") {
				flush()
			}
			in, lang, block, start = !in, strings.TrimPrefix(l, "```"), nil, n
			continue
		}
		if in {
			block = append(block, l)
		}
	}
	return out
}

// TestDocExamplesRun: every command line of docs/cli.md that has no
// placeholder runs as written, from a copy of the repository's examples
// with a home of its own, and ends with the status the docs say (0, or
// the "# exit N" of its comment); an example that shows its output
// prints exactly that (unless cut with "..." or made by the build, as
// version's).
func TestDocExamplesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and runs the documented examples")
	}
	t.Parallel()
	examples := docExamples(t)
	var runnable []docExample
	for _, ex := range examples {
		cmd := exitComment.ReplaceAllString(ex.command, "")
		if i := strings.Index(cmd, " #"); i >= 0 {
			cmd = cmd[:i]
		}
		if !placeholder.MatchString(cmd) {
			runnable = append(runnable, ex)
		}
	}
	// What the docs must keep runnable: these are in docs/cli.md.
	for _, must := range []string{"openplaybook validate examples/", "openplaybook validate examples/broken/", "openplaybook rules",
		"openplaybook version --format json", "openplaybook check --harness examples/harness.yaml"} {
		found := false
		for _, ex := range runnable {
			found = found || strings.HasPrefix(ex.command, must+" ") || ex.command == must
		}
		if !found {
			t.Errorf("docs/cli.md has no runnable example %q; found %d of %d command lines runnable", must, len(runnable), len(examples))
		}
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "openplaybook"), "../../../cmd/openplaybook")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The examples, copied (a run's store stays in the copy), and the
	// npm packages the example harness's servers run from.
	work := filepath.Join(dir, "repo")
	if err := os.CopyFS(filepath.Join(work, "examples"), os.DirFS("../../../examples")); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(work, "examples", ".openplaybook"))
	if nm, err := filepath.Abs("../../../node_modules"); err == nil {
		if _, err := os.Stat(nm); err == nil {
			os.Symlink(nm, filepath.Join(work, "node_modules"))
		}
	}
	home := filepath.Join(dir, "home")
	os.MkdirAll(home, 0o755)
	// No credential of the environment reaches the examples.
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + home, "LC_ALL=C"}
	for _, ex := range runnable {
		c := exec.Command("bash", "--noprofile", "--norc", "-o", "pipefail", "-c", ex.command)
		c.Dir, c.Env = work, env
		var stdout, stderr strings.Builder
		c.Stdout, c.Stderr = &stdout, &stderr
		err := c.Run()
		t.Logf("docs/cli.md:%d: %s", ex.line, ex.command)
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != ex.exit {
			t.Errorf("docs/cli.md:%d: %s\nexit %d, the docs say %d\nstdout:\n%s\nstderr:\n%s", ex.line, ex.command, code, ex.exit, stdout.String(), stderr.String())
			continue
		}
		if ex.output != "" && !strings.Contains(ex.output, "...") && !strings.HasPrefix(ex.command, "openplaybook version") && stdout.String() != ex.output {
			t.Errorf("docs/cli.md:%d: %s\nprints\n%s\nthe docs show\n%s", ex.line, ex.command, stdout.String(), ex.output)
		}
	}
}
