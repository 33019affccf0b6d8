// Package quote quotes text from elsewhere (a serve's log and replies, its
// errors) for a report: as a Go string, so control characters and line
// breaks are visible and harmless, and cut to a bound.
package quote

import (
	"strconv"
	"unicode/utf8"
)

// Cut quotes s as a Go string, cut to at most n runes with "..." after the
// cut, so control characters and line breaks from the serve are visible and
// harmless in every report.
func Cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return strconv.Quote(s)
	}
	r := []rune(s)
	return strconv.Quote(string(r[:n])) + "..."
}
