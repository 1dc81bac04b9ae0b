package cli

import (
	"encoding/json"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// TestVersionFlagAndJSON: --version prints what version prints; --format
// json (and -f json) has exactly version, commit, date, go and formats.
func TestVersionFlagAndJSON(t *testing.T) {
	t.Parallel()
	_, text, _ := run(t, nil, "version")
	code, flag, _ := run(t, nil, "--version")
	if code != ExitOK || flag != text || !strings.HasPrefix(flag, "openplaybook v9.9.9-test\n") || !strings.HasSuffix(flag, "reads OpenPlaybook 1.0 to 1.6\n") {
		t.Errorf("--version: exit %d, %q; version: %q", code, flag, text)
	}
	for _, f := range []string{"--format", "-f"} {
		code, out, _ := run(t, nil, "version", f, "json")
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); code != ExitOK || err != nil {
			t.Fatalf("version %s json: exit %d, %q (%v)", f, code, out, err)
		}
		var keys []string
		for k := range got {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, []string{"commit", "date", "formats", "go", "version"}) || got["version"] != "v9.9.9-test" ||
			!strings.HasPrefix(got["go"].(string), "go") {
			t.Errorf("version %s json: %v", f, got)
		}
		fs := got["formats"].([]any)
		if len(fs) != 7 || fs[0] != "1.0" || fs[6] != "1.6" {
			t.Errorf("formats: %v", fs)
		}
	}
	if code, _, stderr := run(t, nil, "version", "-f", "yaml"); code != ExitUsage || !strings.Contains(stderr, "text, json") {
		t.Errorf("version -f yaml: exit %d, %q", code, stderr)
	}
}

// TestVersionBuildInfo: commit and date come from the vcs settings the go
// command stamps, unless the ldflags variables are set.
func TestVersionBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
	}}
	c := &CLI{Version: "v1.2.3"}
	if b := c.buildInfoFrom(bi); b.Commit != "0123abcd" || b.Date != "2026-01-02T03:04:05Z" || b.Version != "v1.2.3" {
		t.Errorf("from vcs settings: %+v", b)
	}
	if b := c.buildInfoFrom(nil); b.Commit != Commit || b.Date != Date {
		t.Errorf("without build information: %+v", b)
	}
	// Not parallel: it sets the package variables release builds set.
	Commit, Date = "feedface", "2026-02-03T00:00:00Z"
	defer func() { Commit, Date = "", "" }()
	if b := c.buildInfoFrom(bi); b.Commit != "feedface" || b.Date != "2026-02-03T00:00:00Z" {
		t.Errorf("ldflags do not win: %+v", b)
	}
}
