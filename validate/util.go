package validate

import (
	"fmt"
	"slices"
	"strings"
)

func contains(list []string, s string) bool { return slices.Contains(list, s) }

// quoteList renders list as "a", "b", "c".
func quoteList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
