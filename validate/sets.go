package validate

import (
	"github.com/openplaybook/openplaybook/internal/suggest"
	"github.com/openplaybook/openplaybook/playbook"
)

// stringSet returns the values of l as a set (empty for a nil l), so that
// rules over large documents look names up in constant time.
func stringSet(l *playbook.StringList) map[string]bool {
	if l == nil {
		return map[string]bool{}
	}
	set := make(map[string]bool, len(l.Items))
	for _, s := range l.Items {
		set[s.Value] = true
	}
	return set
}

// maxSuggestions bounds how many "did you mean" searches one rule makes in
// one document. A search compares a name with every candidate, so a
// hostile document with thousands of unresolved names and thousands of
// candidates would otherwise take quadratic time; past the bound, messages
// go without a suggestion.
const maxSuggestions = 100

// suggester makes at most maxSuggestions "did you mean" searches.
type suggester struct{ n int }

// phrase is [suggest.Phrase] within the budget, else "".
func (s *suggester) phrase(got string, candidates []string) string {
	if s.n >= maxSuggestions {
		return ""
	}
	s.n++
	return suggest.Phrase(got, candidates)
}

// closest is [suggest.Closest] within the budget, else not found.
func (s *suggester) closest(got string, candidates []string) (string, bool) {
	if s.n >= maxSuggestions {
		return "", false
	}
	s.n++
	return suggest.Closest(got, candidates)
}
