package main

// The tests of how the command ships: the goreleaser configuration
// (.goreleaser.yaml), the container image (Dockerfile) and the GitHub
// Action (action.yml) at the repository root, and their agreement: the
// action downloads exactly the assets the release produces. `goreleaser
// check` (run by .ci/run) validates the configuration against goreleaser
// itself; these tests hold what openplaybook needs of it.

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/template"

	"github.com/goccy/go-yaml"

	"github.com/openplaybook/openplaybook/cmd/openplaybook/cli"
)

// root is the repository root, from this package's directory.
const root = "../.."

// goreleaserConfig is the part of .goreleaser.yaml these tests read.
type goreleaserConfig struct {
	Version     int    `yaml:"version"`
	ProjectName string `yaml:"project_name"`
	Before      struct {
		Hooks []string `yaml:"hooks"`
	} `yaml:"before"`
	Builds []struct {
		ID      string   `yaml:"id"`
		Main    string   `yaml:"main"`
		Binary  string   `yaml:"binary"`
		Env     []string `yaml:"env"`
		Goos    []string `yaml:"goos"`
		Goarch  []string `yaml:"goarch"`
		Flags   []string `yaml:"flags"`
		Ldflags []string `yaml:"ldflags"`
	} `yaml:"builds"`
	Archives []struct {
		IDs             []string `yaml:"ids"`
		NameTemplate    string   `yaml:"name_template"`
		Formats         []string `yaml:"formats"`
		FormatOverrides []struct {
			Goos    string   `yaml:"goos"`
			Formats []string `yaml:"formats"`
		} `yaml:"format_overrides"`
		Files []any `yaml:"files"`
	} `yaml:"archives"`
	Checksum struct {
		NameTemplate string `yaml:"name_template"`
		Algorithm    string `yaml:"algorithm"`
	} `yaml:"checksum"`
	SBOMs []struct {
		Artifacts string   `yaml:"artifacts"`
		Cmd       string   `yaml:"cmd"`
		Documents []string `yaml:"documents"`
		Args      []string `yaml:"args"`
	} `yaml:"sboms"`
	Release struct {
		GitHub struct {
			Owner string `yaml:"owner"`
			Name  string `yaml:"name"`
		} `yaml:"github"`
	} `yaml:"release"`
}

func readGoreleaser(t *testing.T) *goreleaserConfig {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c goreleaserConfig
	if err := yaml.Unmarshal(src, &c); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	return &c
}

// tmplData is what goreleaser's name templates may use here; a template
// naming anything else fails to render, so the tests notice it.
type tmplData struct {
	ProjectName, Version, Os, Arch, Tag, FullCommit, CommitDate, CommitTimestamp, ArtifactName string
}

func render(t *testing.T, text string, d tmplData) string {
	t.Helper()
	tm, err := template.New("").Option("missingkey=error").Parse(text)
	if err != nil {
		t.Fatalf("template %q: %v", text, err)
	}
	var b strings.Builder
	if err := tm.Execute(&b, d); err != nil {
		t.Fatalf("template %q: %v", text, err)
	}
	return b.String()
}

// target is one os/arch the release builds, with its asset name.
type target struct {
	goos, goarch, archive string
}

// releaseAssets returns, for release version (without the v), the
// archive of each target and the checksum file's name, as goreleaser
// names them.
func releaseAssets(t *testing.T, c *goreleaserConfig, version string) ([]target, string) {
	t.Helper()
	b, a := c.Builds[0], c.Archives[0]
	var out []target
	for _, goos := range b.Goos {
		for _, goarch := range b.Goarch {
			format := a.Formats[0]
			for _, o := range a.FormatOverrides {
				if o.Goos == goos {
					format = o.Formats[0]
				}
			}
			name := render(t, a.NameTemplate, tmplData{ProjectName: c.ProjectName, Version: version, Os: goos, Arch: goarch})
			out = append(out, target{goos, goarch, name + "." + format})
		}
	}
	return out, render(t, c.Checksum.NameTemplate, tmplData{ProjectName: c.ProjectName, Version: version})
}

// TestGoreleaserConfig: the release builds ./cmd/openplaybook statically
// (CGO_ENABLED=0: modernc.org/sqlite is pure Go) for linux, darwin and
// windows on amd64 and arm64, sets the variables `openplaybook version`
// reads, packs archives (zip on Windows) with the license and the man
// pages, writes a SHA-256 checksum file and an SBOM of each archive.
func TestGoreleaserConfig(t *testing.T) {
	c := readGoreleaser(t)
	if c.Version != 2 || c.ProjectName != "openplaybook" || len(c.Builds) != 1 || len(c.Archives) != 1 {
		t.Fatalf("want goreleaser v2, project openplaybook, one build and one archive; got %+v", c)
	}
	b := c.Builds[0]
	if b.Main != "./cmd/openplaybook" || b.Binary != "openplaybook" || !slices.Contains(b.Env, "CGO_ENABLED=0") || !slices.Contains(b.Flags, "-trimpath") {
		t.Errorf("build = %+v", b)
	}
	if !slices.Equal(b.Goos, []string{"linux", "darwin", "windows"}) || !slices.Equal(b.Goarch, []string{"amd64", "arm64"}) {
		t.Errorf("targets %v x %v, want linux, darwin, windows x amd64, arm64", b.Goos, b.Goarch)
	}
	pkg := reflect.TypeOf(cli.CLI{}).PkgPath()
	_, _, _ = cli.Version, cli.Commit, cli.Date // the variables exist
	ld := strings.Join(b.Ldflags, " ")
	for _, v := range []string{"Version", "Commit", "Date"} {
		if !strings.Contains(ld, "-X "+pkg+"."+v+"=") {
			t.Errorf("ldflags %q do not set %s.%s", ld, pkg, v)
		}
	}
	a := c.Archives[0]
	if !slices.Contains(a.IDs, b.ID) || !slices.Equal(a.Formats, []string{"tar.gz"}) || len(a.FormatOverrides) != 1 ||
		a.FormatOverrides[0].Goos != "windows" || !slices.Equal(a.FormatOverrides[0].Formats, []string{"zip"}) {
		t.Errorf("archives = %+v", a)
	}
	files := fmt.Sprint(a.Files)
	for _, f := range []string{"LICENSE", "dist-man/*.1"} {
		if !strings.Contains(files, f) {
			t.Errorf("archives do not carry %s: %s", f, files)
		}
	}
	if !slices.ContainsFunc(c.Before.Hooks, func(h string) bool { return strings.Contains(h, "docs man dist-man") }) {
		t.Errorf("no before hook writes the man pages into dist-man: %q", c.Before.Hooks)
	}
	if c.Checksum.Algorithm != "sha256" || c.Checksum.NameTemplate == "" {
		t.Errorf("checksum = %+v", c.Checksum)
	}
	if len(c.SBOMs) != 1 || c.SBOMs[0].Artifacts != "archive" || c.SBOMs[0].Cmd != "syft" {
		t.Errorf("sboms = %+v, want one SBOM of each archive, by syft", c.SBOMs)
	}
	if c.Release.GitHub.Owner != "openplaybook" || c.Release.GitHub.Name != "openplaybook" {
		t.Errorf("release.github = %+v", c.Release.GitHub)
	}
	targets, sums := releaseAssets(t, c, "1.2.3")
	if len(targets) != 6 || targets[0].archive != "openplaybook_1.2.3_linux_amd64.tar.gz" ||
		targets[5].archive != "openplaybook_1.2.3_windows_arm64.zip" || sums != "openplaybook_1.2.3_checksums.txt" {
		t.Errorf("asset names %v, %s", targets, sums)
	}
}

// TestGoreleaserLdflags: a binary built with the configuration's ldflags
// reports the version, commit and date given, as `version -f json`.
func TestGoreleaserLdflags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	c := readGoreleaser(t)
	d := tmplData{Version: "1.2.3", FullCommit: "4f2c9a1b0d8e7f66a5d2a23e4b278f7d00b37fed", CommitDate: "2026-11-30T18:04:05Z"}
	var flags []string
	for _, f := range c.Builds[0].Ldflags {
		flags = append(flags, render(t, f, d))
	}
	bin := filepath.Join(t.TempDir(), "openplaybook")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", strings.Join(flags, " "), "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "-f", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Version, Commit, Date string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if v.Version != "v1.2.3" || v.Commit != d.FullCommit || v.Date != d.CommitDate {
		t.Errorf("version -f json = %s", out)
	}
}

// TestDockerfile: the image is built in a golang stage of go.mod's Go
// version with CGO_ENABLED=0 (a static binary: the final image has no
// libc), and runs from distroless static as the nonroot user, with
// openplaybook as its entry point. There is no Docker engine here: the
// file's shape is checked, not a build.
func TestDockerfile(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Instructions, continuation lines joined, comments dropped.
	var ins []string
	var cur string
	for _, l := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") && cur == "" {
			continue
		}
		cur += strings.TrimSpace(l)
		if strings.HasSuffix(cur, `\`) {
			cur = strings.TrimSuffix(cur, `\`) + " "
			continue
		}
		if cur != "" {
			ins = append(ins, cur)
		}
		cur = ""
	}
	var stages [][]string
	for _, in := range ins {
		if strings.HasPrefix(in, "FROM ") {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("instruction before the first FROM: %q", in)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	if len(stages) != 2 {
		t.Fatalf("want two stages (build, final), got %d", len(stages))
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	build, final := stages[0], stages[1]
	if !regexp.MustCompile(`^FROM golang:` + regexp.QuoteMeta(string(goVersion[1])) + `[-.\w]* AS build$`).MatchString(build[0]) {
		t.Errorf("build stage %q: want FROM golang:%s... AS build (go.mod's Go)", build[0], goVersion[1])
	}
	var goBuild string
	for _, in := range build {
		if strings.Contains(in, "go build") {
			goBuild = in
		}
	}
	if !strings.Contains(goBuild, "CGO_ENABLED=0") || !strings.HasSuffix(goBuild, "./cmd/openplaybook") || !strings.Contains(goBuild, "-o /out/openplaybook") {
		t.Errorf("build: %q, want CGO_ENABLED=0 go build ... -o /out/openplaybook ./cmd/openplaybook", goBuild)
	}
	for _, v := range []string{"Version", "Commit", "Date"} {
		if !strings.Contains(goBuild, "-X github.com/openplaybook/openplaybook/cmd/openplaybook/cli."+v+"=") {
			t.Errorf("build does not set cmd/openplaybook/cli.%s", v)
		}
	}
	want := []string{
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"COPY --from=build /out/openplaybook /usr/local/bin/openplaybook",
		"USER nonroot",
	}
	for i, w := range want {
		if i >= len(final) || final[i] != w {
			t.Errorf("final stage: instruction %d is %q, want %q", i, at(final, i), w)
		}
	}
	var user, entry string
	for _, in := range final {
		switch {
		case strings.HasPrefix(in, "USER "):
			user = in
		case strings.HasPrefix(in, "ENTRYPOINT "):
			entry = in
		}
	}
	if user != "USER nonroot" || entry != `ENTRYPOINT ["/usr/local/bin/openplaybook"]` {
		t.Errorf("final stage runs as %q with %q, want USER nonroot and ENTRYPOINT [\"/usr/local/bin/openplaybook\"]", user, entry)
	}
	ignore, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".git", "node_modules", "examples/.env"} {
		if !slices.Contains(strings.Split(string(ignore), "\n"), p) {
			t.Errorf(".dockerignore does not leave out %s", p)
		}
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return ""
}

// actionFile is the part of action.yml these tests read.
type actionFile struct {
	Inputs map[string]struct {
		Required bool    `yaml:"required"`
		Default  *string `yaml:"default"`
	} `yaml:"inputs"`
	Outputs map[string]struct {
		Value string `yaml:"value"`
	} `yaml:"outputs"`
	Runs struct {
		Using string `yaml:"using"`
		Steps []struct {
			ID    string            `yaml:"id"`
			If    string            `yaml:"if"`
			Shell string            `yaml:"shell"`
			Env   map[string]string `yaml:"env"`
			Run   string            `yaml:"run"`
			Uses  string            `yaml:"uses"`
			With  map[string]string `yaml:"with"`
		} `yaml:"steps"`
	} `yaml:"runs"`
}

func readAction(t *testing.T) *actionFile {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var a actionFile
	if err := yaml.Unmarshal(src, &a); err != nil {
		t.Fatalf("action.yml: %v", err)
	}
	return &a
}

// TestActionShape: a composite action with the documented inputs whose
// scripts take every value through env (no ${{ }} inside a script, so an
// input cannot inject shell), installing, validating, uploading the SARIF
// with github/codeql-action/upload-sarif and failing on problems.
func TestActionShape(t *testing.T) {
	a := readAction(t)
	if a.Runs.Using != "composite" {
		t.Fatalf("runs.using = %q, want composite", a.Runs.Using)
	}
	if !a.Inputs["paths"].Required {
		t.Errorf("input paths must be required")
	}
	for name, def := range map[string]string{"version": "latest", "strict": "false", "upload": "true", "category": "openplaybook",
		"sarif-file": "openplaybook.sarif", "fail-on-problems": "true", "repository": "openplaybook/openplaybook"} {
		in, ok := a.Inputs[name]
		if !ok || in.Default == nil || *in.Default != def {
			t.Errorf("input %s: want default %q", name, def)
		}
	}
	c := readGoreleaser(t)
	if r := c.Release.GitHub; *a.Inputs["repository"].Default != r.Owner+"/"+r.Name {
		t.Errorf("input repository defaults to %q; goreleaser releases to %s/%s", *a.Inputs["repository"].Default, r.Owner, r.Name)
	}
	var ids []string
	for _, s := range a.Runs.Steps {
		ids = append(ids, s.ID)
		if strings.Contains(s.Run, "${{") {
			t.Errorf("step %q: its script holds ${{ }}; pass values through env", s.ID)
		}
		if s.Run != "" && s.Shell != "bash" {
			t.Errorf("step %q: shell %q, want bash (on every runner OS)", s.ID, s.Shell)
		}
	}
	if !slices.Equal(ids[:2], []string{"install", "validate"}) || len(a.Runs.Steps) != 4 {
		t.Fatalf("steps %q: want install, validate, the upload, the failure", ids)
	}
	up := a.Runs.Steps[2]
	if !strings.HasPrefix(up.Uses, "github/codeql-action/upload-sarif@") || up.With["sarif_file"] != "${{ inputs.sarif-file }}" ||
		up.With["category"] != "${{ inputs.category }}" || up.If != "inputs.upload == 'true'" {
		t.Errorf("upload step = %+v", up)
	}
	if fail := a.Runs.Steps[3]; !strings.Contains(fail.If, "steps.validate.outputs.exit-code == '1'") || !strings.Contains(fail.If, "inputs.fail-on-problems == 'true'") {
		t.Errorf("failure step runs if %q", fail.If)
	}
	if a.Outputs["exit-code"].Value != "${{ steps.validate.outputs.exit-code }}" || a.Outputs["version"].Value != "${{ steps.install.outputs.version }}" {
		t.Errorf("outputs = %+v", a.Outputs)
	}
}

// release is a fake GitHub release server: for one tag, every archive
// goreleaser's configuration names (each holding a stub openplaybook)
// and the checksum file, at /OWNER/NAME/releases/download/TAG/; the
// latest release's page redirects to the tag's. It records the paths
// asked for.
type release struct {
	srv    *httptest.Server
	mu     sync.Mutex
	asked  []string
	assets map[string][]byte
}

// stub is the openplaybook the fake release ships: it records its
// arguments in $STUB_ARGS, writes a SARIF log and exits $STUB_EXIT.
const stub = `#!/bin/sh
printf '%s\n' "$@" > "$STUB_ARGS"
echo '{"version": "2.1.0", "runs": []}'
exit "${STUB_EXIT:-0}"
`

func newRelease(t *testing.T, repo, tag string) *release {
	t.Helper()
	c := readGoreleaser(t)
	targets, sums := releaseAssets(t, c, strings.TrimPrefix(tag, "v"))
	r := &release{assets: map[string][]byte{}}
	var lines strings.Builder
	for _, tg := range targets {
		var b []byte
		if strings.HasSuffix(tg.archive, ".zip") {
			b = zipOf(t, map[string]string{"openplaybook.exe": stub, "LICENSE": "license"})
		} else {
			b = tarGzOf(t, map[string]string{"openplaybook": stub, "LICENSE": "license"})
		}
		r.assets[tg.archive] = b
		sum := sha256.Sum256(b)
		fmt.Fprintf(&lines, "%s  %s\n", hex.EncodeToString(sum[:]), tg.archive)
	}
	r.assets[sums] = []byte(lines.String())
	prefix := "/" + repo + "/releases/"
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.asked = append(r.asked, req.URL.Path)
		r.mu.Unlock()
		name, isAsset := strings.CutPrefix(req.URL.Path, prefix+"download/"+tag+"/")
		switch p := req.URL.Path; {
		case p == prefix+"latest":
			http.Redirect(w, req, prefix+"tag/"+tag, http.StatusFound)
		case p == prefix+"tag/"+tag:
			fmt.Fprintln(w, "the release page")
		case isAsset && r.get(name) != nil:
			w.Write(r.get(name))
		default:
			http.NotFound(w, req)
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func tarGzOf(t *testing.T, files map[string]string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(files[name]))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(files[name]))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func zipOf(t *testing.T, files map[string]string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(files[name]))
	}
	zw.Close()
	return buf.Bytes()
}

// set replaces the asset name's content; get returns it.
func (r *release) set(name string, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.assets[name] = b
}

func (r *release) get(name string) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.assets[name]
}

// runner runs the scripts of action.yml's steps as the Actions runner
// does (bash --noprofile --norc -eo pipefail), with the runner's
// variables, the step's env (its ${{ }} expressions replaced by the
// inputs, their defaults, and github.server_url) and GITHUB_OUTPUT and
// GITHUB_PATH files.
type runner struct {
	t          *testing.T
	a          *actionFile
	os, arch   string
	inputs     map[string]string
	serverURL  string
	dir, temp  string
	path       string // PATH, with what GITHUB_PATH added
	outputFile string
	pathFile   string
}

func newRunner(t *testing.T, serverURL, runnerOS, arch string, inputs map[string]string) *runner {
	for _, tool := range []string{"bash", "curl", "tar", "unzip", "awk", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the action's scripts need %s: %v", tool, err)
		}
	}
	base := t.TempDir()
	r := &runner{t: t, a: readAction(t), os: runnerOS, arch: arch, inputs: inputs, serverURL: serverURL,
		dir: filepath.Join(base, "work"), temp: filepath.Join(base, "runner-temp"), path: os.Getenv("PATH")}
	for _, d := range []string{r.dir, r.temp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.outputFile, r.pathFile = filepath.Join(base, "output"), filepath.Join(base, "path")
	return r
}

var expr = regexp.MustCompile(`\$\{\{\s*([^}]*?)\s*\}\}`)

// step runs the step with the id and returns its exit code, its
// combined output and the outputs it set.
func (r *runner) step(id string, env ...string) (int, string, map[string]string) {
	r.t.Helper()
	for _, s := range r.a.Runs.Steps {
		if s.ID != id {
			continue
		}
		os.WriteFile(r.outputFile, nil, 0o644)
		os.WriteFile(r.pathFile, nil, 0o644)
		cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", s.Run)
		cmd.Dir = r.dir
		cmd.Env = append([]string{"PATH=" + r.path, "HOME=" + r.temp, "RUNNER_OS=" + r.os, "RUNNER_ARCH=" + r.arch,
			"RUNNER_TEMP=" + r.temp, "GITHUB_OUTPUT=" + r.outputFile, "GITHUB_PATH=" + r.pathFile}, env...)
		for k, v := range s.Env {
			val := expr.ReplaceAllStringFunc(v, func(m string) string {
				e := expr.FindStringSubmatch(m)[1]
				if e == "github.server_url" {
					return r.serverURL
				}
				name, ok := strings.CutPrefix(e, "inputs.")
				in, declared := r.a.Inputs[name]
				if !ok || !declared {
					r.t.Fatalf("step %s: env %s uses %q, which is neither an input nor github.server_url", id, k, e)
				}
				if v, given := r.inputs[name]; given {
					return v
				}
				if in.Default != nil {
					return *in.Default
				}
				return ""
			})
			cmd.Env = append(cmd.Env, k+"="+val)
		}
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			r.t.Fatal(err)
		}
		outputs := map[string]string{}
		b, _ := os.ReadFile(r.outputFile)
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				outputs[k] = v
			}
		}
		b, _ = os.ReadFile(r.pathFile)
		for _, p := range strings.Fields(string(b)) {
			r.path = p + string(os.PathListSeparator) + r.path
		}
		return code, string(out), outputs
	}
	r.t.Fatalf("action.yml has no step %q", id)
	return 0, "", nil
}

// TestActionInstallsEveryReleaseAsset: on each runner OS and architecture
// the release has a build for, the install step downloads the archive
// goreleaser's configuration names and its checksum file, verifies it and
// puts openplaybook on PATH; "latest" resolves to the latest release's tag.
func TestActionInstallsEveryReleaseAsset(t *testing.T) {
	rel := newRelease(t, "openplaybook/openplaybook", "v1.2.3")
	runnerOS := map[string]string{"linux": "Linux", "darwin": "macOS", "windows": "Windows"}
	runnerArch := map[string]string{"amd64": "X64", "arm64": "ARM64"}
	targets, sums := releaseAssets(t, readGoreleaser(t), "1.2.3")
	for _, tg := range targets {
		for _, version := range []string{"v1.2.3", "latest"} {
			rel.mu.Lock()
			rel.asked = nil
			rel.mu.Unlock()
			r := newRunner(t, rel.srv.URL, runnerOS[tg.goos], runnerArch[tg.goarch], map[string]string{"version": version, "paths": "x"})
			code, out, outputs := r.step("install")
			if code != 0 {
				t.Errorf("%s/%s %s: install exit %d:\n%s", tg.goos, tg.goarch, version, code, out)
				continue
			}
			dl := "/openplaybook/openplaybook/releases/download/v1.2.3/"
			rel.mu.Lock()
			got := slices.DeleteFunc(slices.Clone(rel.asked), func(p string) bool { return !strings.HasPrefix(p, dl) })
			rel.mu.Unlock()
			if !slices.Equal(got, []string{dl + tg.archive, dl + sums}) {
				t.Errorf("%s/%s: downloaded %q, want %s and %s", tg.goos, tg.goarch, got, tg.archive, sums)
			}
			bin := "openplaybook"
			if tg.goos == "windows" {
				bin += ".exe"
			}
			installed := strings.SplitN(r.path, string(os.PathListSeparator), 2)[0]
			if outputs["version"] != "v1.2.3" || !strings.HasPrefix(installed, r.temp) {
				t.Errorf("%s/%s %s: outputs %v, PATH starts %q", tg.goos, tg.goarch, version, outputs, installed)
			}
			if b, err := os.ReadFile(filepath.Join(installed, bin)); err != nil || string(b) != stub {
				t.Errorf("%s/%s: %s not installed: %v", tg.goos, tg.goarch, bin, err)
			}
		}
	}
}

// TestActionRefusesABadDownload: an archive that does not match the
// checksum file, a release the checksum file does not list, a version
// that is not a tag and a runner with no build fail the install step,
// saying why, and install nothing.
func TestActionRefusesABadDownload(t *testing.T) {
	rel := newRelease(t, "openplaybook/openplaybook", "v1.2.3")
	_, sums := releaseAssets(t, readGoreleaser(t), "1.2.3")
	linux := "openplaybook_1.2.3_linux_amd64.tar.gz"
	good, goodSums := rel.get(linux), rel.get(sums)
	for _, tc := range []struct {
		name, os, arch, version, want string
		tamper                        func()
	}{
		{"tampered archive", "Linux", "X64", "v1.2.3", "does not match its checksum", func() {
			rel.set(linux, tarGzOf(t, map[string]string{"openplaybook": "#!/bin/sh\necho evil\n"}))
		}},
		{"archive not in the checksum file", "Linux", "X64", "v1.2.3", "has no checksum for " + linux, func() {
			rel.set(sums, []byte(strings.ReplaceAll(string(goodSums), linux, "other.tar.gz")))
		}},
		{"no such release", "Linux", "X64", "v9.9.9", "cannot download", nil},
		{"not a tag", "Linux", "X64", "1.2.3", "must be a release tag", nil},
		{"no build for the runner", "Linux", "X86", "v1.2.3", "no openplaybook release for the runner architecture X86", nil},
	} {
		if tc.tamper != nil {
			tc.tamper()
		}
		r := newRunner(t, rel.srv.URL, tc.os, tc.arch, map[string]string{"version": tc.version, "paths": "x"})
		code, out, outputs := r.step("install")
		if code == 0 || !strings.Contains(out, tc.want) || outputs["version"] != "" || r.path != os.Getenv("PATH") {
			t.Errorf("%s: exit %d, outputs %v, want a failure saying %q and nothing installed:\n%s", tc.name, code, outputs, tc.want, out)
		}
		rel.set(linux, good)
		rel.set(sums, goodSums)
	}
}

// TestActionValidates: the validate step runs the installed openplaybook
// as `validate --format sarif [--strict] -- PATHS...` (globs expanded, **
// included), writes its SARIF to the sarif-file input, sets exit-code, and
// passes on 0 and 1 (the upload and the failure step come after) but
// fails on 2.
func TestActionValidates(t *testing.T) {
	rel := newRelease(t, "openplaybook/openplaybook", "v1.2.3")
	for _, tc := range []struct {
		strict   string
		exit     int
		wantCode int
	}{{"false", 0, 0}, {"true", 1, 0}, {"false", 2, 2}} {
		r := newRunner(t, rel.srv.URL, "Linux", "X64", map[string]string{"version": "v1.2.3", "strict": tc.strict,
			"paths": "a.json\n  docs/**/*.json", "sarif-file": "out.sarif"})
		for _, f := range []string{"a.json", "docs/x/y/b.json", "docs/c.json"} {
			p := filepath.Join(r.dir, f)
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte("{}"), 0o644)
		}
		if code, out, _ := r.step("install"); code != 0 {
			t.Fatalf("install: exit %d\n%s", code, out)
		}
		argsFile := filepath.Join(r.temp, "args")
		code, out, outputs := r.step("validate", "STUB_ARGS="+argsFile, fmt.Sprintf("STUB_EXIT=%d", tc.exit))
		if code != tc.wantCode || outputs["exit-code"] != fmt.Sprint(tc.exit) {
			t.Errorf("strict %s, validate exits %d: step exit %d, outputs %v\n%s", tc.strict, tc.exit, code, outputs, out)
		}
		b, _ := os.ReadFile(argsFile)
		want := "validate\n--format\nsarif\n"
		if tc.strict == "true" {
			want += "--strict\n"
		}
		want += "--\na.json\ndocs/c.json\ndocs/x/y/b.json\n"
		if string(b) != want {
			t.Errorf("openplaybook ran with\n%s\nwant\n%s", b, want)
		}
		if sarif, err := os.ReadFile(filepath.Join(r.dir, "out.sarif")); err != nil || !strings.Contains(string(sarif), `"runs"`) {
			t.Errorf("no SARIF in the sarif-file input's path: %v %q", err, sarif)
		}
	}
}
