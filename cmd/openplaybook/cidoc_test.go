package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCIDocWorksBeforeARelease: docs/ci.md says how to use openplaybook in
// CI before any release exists (the action and @vX.Y.Z need one): a
// section that builds it from a pinned commit, linked from the top, ahead
// of every example that needs a release.
func TestCIDocWorksBeforeARelease(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "ci.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	const heading = "\n## Before the first release\n"
	at := strings.Index(doc, heading)
	if at < 0 {
		t.Fatal("docs/ci.md has no \"Before the first release\" section")
	}
	section, _, _ := strings.Cut(doc[at+len(heading):], "\n## ")
	if !regexp.MustCompile(`go install github\.com/openplaybook/openplaybook/cmd/openplaybook@[0-9a-f]{40}\b`).MatchString(section) {
		t.Error("the section does not go install from a pinned commit")
	}
	if !strings.Contains(section, "go build") {
		t.Error("the section does not build from a checkout")
	}
	intro, _, _ := strings.Cut(doc, "\n## ")
	if !strings.Contains(intro, "(#before-the-first-release)") {
		t.Error("the introduction does not link the section")
	}
	if first := regexp.MustCompile(`@v[0-9]+\.[0-9]+\.[0-9]+|version: latest`).FindStringIndex(doc); first != nil && first[0] < at {
		t.Errorf("an example needing a release (%q) comes before the section", doc[first[0]:first[1]])
	}
}
