// Package suggest finds the closest valid name for a "did you mean"
// suggestion.
package suggest

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Closest returns the candidate nearest to got by edit distance
// (Levenshtein over runes, ignoring case for the distance only) and true,
// when one is near enough to be a plausible typo: distance at most 1 for
// names up to 4 runes, 2 up to 8, else a third of the length. An exact
// match is never suggested.
func Closest(got string, candidates []string) (string, bool) {
	best, bestD := "", -1
	limit := maxDistance(utf8.RuneCountInString(got))
	lg := strings.ToLower(got)
	for _, c := range candidates {
		if c == got {
			continue
		}
		d := distance(lg, strings.ToLower(c), limit)
		if d <= limit && (bestD < 0 || d < bestD) {
			best, bestD = c, d
		}
	}
	return best, bestD >= 0
}

func maxDistance(n int) int {
	switch {
	case n <= 4:
		return 1
	case n <= 8:
		return 2
	default:
		return n / 3
	}
}

// distance is the Levenshtein distance between a and b, cut short at
// limit+1 once every path exceeds limit.
func distance(a, b string, limit int) int {
	ra, rb := []rune(a), []rune(b)
	if d := len(ra) - len(rb); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// Phrase returns ` (did you mean %q?)` for the closest candidate, or "".
// It follows the phrase it qualifies, before any "; ..." that goes on.
func Phrase(got string, candidates []string) string {
	if c, ok := Closest(got, candidates); ok {
		return " (did you mean " + strconv.Quote(c) + "?)"
	}
	return ""
}
