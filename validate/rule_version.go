package validate

import (
	"fmt"
	"strings"
)

// Format versions this runtime reads: 1.0 to 1.6 (docs/format.md,
// "Envelope").
const (
	readMajor    = 1
	readMaxMinor = 6
)

// ruleVersion reports an "openplaybook" member that is not a format version
// of the form "MAJOR.MINOR", or that names a version this runtime does not
// read (docs/format.md, "Envelope": "1.0 to 1.6 are read ... A major version
// other than 1, or a minor above 6: a clear error naming the versions this
// runtime reads"). A missing or non-string member is the required and type
// rules' concern.
type ruleVersion struct{}

func (ruleVersion) Name() string { return "version" }
func (ruleVersion) Description() string {
	return `"openplaybook" is a format version "MAJOR.MINOR" between "1.0" and "1.6"`
}

func (ruleVersion) Check(c *Context) {
	s := c.Doc.OpenPlaybook
	if s == nil {
		return
	}
	readable := fmt.Sprintf("this runtime reads format versions %q to %q", "1.0", fmt.Sprintf("%d.%d", readMajor, readMaxMinor))
	v, ok := formatVersion(c.Doc)
	if !ok {
		hint := ""
		if h := versionHint(s.Value); h != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", h)
		}
		c.Errorf(s.Node, "%+q is not a format version%s; write \"MAJOR.MINOR\" (two numbers without leading zeros joined by one dot, such as \"1.6\"); %s",
			s.Value, hint, readable)
		return
	}
	switch {
	case v.major != readMajor:
		c.Errorf(s.Node, "format version %+q has major version %d, which this runtime does not read; %s", s.Value, v.major, readable)
	case v.minor > readMaxMinor:
		c.Errorf(s.Node, "format version %+q is newer than this runtime; %s", s.Value, readable)
	}
}

// versionHint guesses the readable version a malformed one meant: "v1.6",
// "1.6.0" and " 1.6" give "1.6". It returns "" when there is no such
// guess.
func versionHint(s string) string {
	t := strings.TrimSpace(s)
	t = strings.TrimPrefix(strings.TrimPrefix(t, "v"), "V")
	parts := strings.Split(t, ".")
	if len(parts) < 2 || len(parts) > 3 || len(parts) == 3 && !isDigits(parts[2]) {
		return ""
	}
	if !isDigits(parts[0]) || !isDigits(parts[1]) {
		return ""
	}
	h := parts[0] + "." + parts[1]
	if h == s {
		return ""
	}
	var maj, min int
	if _, err := fmt.Sscanf(h, "%d.%d", &maj, &min); err != nil || maj != readMajor || min > readMaxMinor {
		return ""
	}
	return h
}
