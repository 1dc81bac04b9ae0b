package validate

import (
	"strconv"
	"strings"

	"github.com/openplaybook/openplaybook/playbook"
)

type version struct{ major, minor int }

// formatVersion parses the document's "openplaybook" member as
// MAJOR.MINOR. ok is false when it is absent or malformed.
func formatVersion(d *playbook.Document) (version, bool) {
	if d.OpenPlaybook == nil {
		return version{}, false
	}
	maj, min, found := strings.Cut(d.OpenPlaybook.Value, ".")
	if !found || !isDigits(maj) || !isDigits(min) {
		return version{}, false
	}
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if err1 != nil || err2 != nil {
		return version{}, false
	}
	return version{a, b}, true
}

func isDigits(s string) bool {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
