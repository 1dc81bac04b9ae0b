package validate

import (
	"fmt"
	"regexp"
	"strings"
)

// slugPattern is the form of manifest.id: lowercase words of letters and
// digits joined by single hyphens.
var slugPattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// ruleManifestID reports a manifest.id that is not a slug (docs/format.md,
// "Envelope": "manifest (required): id (slug)"). A slug is
// ^[a-z0-9]+(-[a-z0-9]+)*$: lowercase ASCII letters and digits in words
// joined by single hyphens. The message suggests the slug the id was
// probably meant to be; nothing is rewritten.
type ruleManifestID struct{}

func (ruleManifestID) Name() string { return "manifest-id" }
func (ruleManifestID) Description() string {
	return "manifest.id is a slug: lowercase letters and digits in words joined by single hyphens"
}

func (ruleManifestID) Check(c *Context) {
	m := c.Doc.Manifest
	if m == nil || m.ID == nil || slugPattern.MatchString(m.ID.Value) {
		return
	}
	example := `such as "failed-charge-recovery"`
	if s := slugOf(m.ID.Value); s != "" {
		example = fmt.Sprintf("such as %q", s)
	}
	c.Errorf(m.ID.Node, "manifest id %+q is not a slug; write lowercase letters and digits in words joined by single hyphens (^[a-z0-9]+(-[a-z0-9]+)*$), %s", m.ID.Value, example)
}

// slugOf returns s as a slug: ASCII letters lowercased, every run of other
// characters a single hyphen, none at either end. It returns "" when no
// letter or digit is left.
func slugOf(s string) string {
	var b strings.Builder
	dash := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
			fallthrough
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteByte(c)
		default:
			dash = true
		}
	}
	return b.String()
}
