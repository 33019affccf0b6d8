// Package console makes text from elsewhere (the serve's log and replies,
// other processes' command lines, facts read from shared files) safe to print
// on a terminal or a GitHub Actions runner's log.
package console

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text makes s safe to print on one console line: control characters, line
// breaks and escape sequences among them, are shown escaped, so text from
// elsewhere can neither start a line of its own nor move the cursor.
func Text(s string) string {
	if !strings.ContainsFunc(s, IsControl) {
		return s
	}
	var b strings.Builder
	for _, c := range s {
		if IsControl(c) {
			q := strconv.QuoteRune(c)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// IsControl reports whether c would act on a terminal or split a line rather
// than show: control characters, the Unicode line and paragraph separators,
// and bytes that are not UTF-8.
func IsControl(c rune) bool {
	return c != ' ' && (unicode.IsControl(c) || c == '\u2028' || c == '\u2029' || c == utf8.RuneError)
}
