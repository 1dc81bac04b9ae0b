package validate

import (
	"regexp"
	"strings"
)

// semverPattern is the regular expression of Semantic Versioning 2.0.0
// (https://semver.org, "Is there a suggested regular expression"), with \d
// spelled [0-9] so that only ASCII digits match.
var semverPattern = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)` +
	`(?:-((?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// shortVersionPattern matches "1" and "1.2": a version missing numbers.
var shortVersionPattern = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// leadingZeroPattern matches a MAJOR.MINOR.PATCH whose numbers have a
// leading zero, such as "01.2.3" or "1.02.0".
var leadingZeroPattern = regexp.MustCompile(`^([0-9]+\.){0,2}0[0-9]`)

// ruleManifestVersion reports a manifest.version that is not a semantic
// version (docs/format.md, "Envelope": "manifest (required): ... version
// (semver)"): MAJOR.MINOR.PATCH without leading zeros, with an optional
// -prerelease and +build, as Semantic Versioning 2.0.0 defines.
type ruleManifestVersion struct{}

func (ruleManifestVersion) Name() string { return "manifest-version" }
func (ruleManifestVersion) Description() string {
	return "manifest.version is a semantic version (MAJOR.MINOR.PATCH, semver 2.0.0)"
}

func (ruleManifestVersion) Check(c *Context) {
	m := c.Doc.Manifest
	if m == nil || m.Version == nil || semverPattern.MatchString(m.Version.Value) {
		return
	}
	v := m.Version.Value
	why := ""
	switch {
	case strings.HasPrefix(v, "v") || strings.HasPrefix(v, "V"):
		why = " (drop the leading \"v\")"
	case strings.TrimSpace(v) != v:
		why = " (it has leading or trailing whitespace)"
	case shortVersionPattern.MatchString(v):
		why = " (it needs all three numbers)"
	case leadingZeroPattern.MatchString(v):
		why = " (numbers have no leading zeros)"
	}
	c.Errorf(m.Version.Node, "manifest version %+q is not a semantic version%s; write MAJOR.MINOR.PATCH with an optional -prerelease and +build, such as \"1.0.0\" or \"2.1.0-beta.1\" (Semantic Versioning 2.0.0)", v, why)
}
