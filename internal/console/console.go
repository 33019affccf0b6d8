// Package console makes text from elsewhere (the serve's log and replies,
// other processes' command lines, facts read from shared files) safe to print
// on a terminal or a GitHub Actions runner's log: Text escapes one line, and
// a Printer prints every line through Text, inside the runner's
// stop-commands when in Actions.
package console

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text makes s safe to print on one console line: control characters, line
// breaks and escape sequences among them, and the invisible format
// characters (bidi overrides and isolates, zero-width spaces and joiners) are
// shown escaped, so text from elsewhere can neither start a line of its own,
// move the cursor, nor reorder or hide what a reader sees; and it
// cannot be read as a GitHub Actions workflow command, in either of the forms
// the runner reads: "::name::" at the start of a line (after white space) and
// "##[name]" anywhere in it.
func Text(s string) string {
	if !strings.ContainsFunc(s, IsControl) && !startsCommand(s) && !strings.Contains(s, legacyCommand) {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		switch {
		case c == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			// A byte that is not UTF-8 (a C1 control byte among them).
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case IsControl(c):
			q := strconv.QuoteRune(c)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(c)
		}
	}
	out := b.String()
	if startsCommand(out) {
		i := strings.IndexByte(out, ':')
		out = out[:i] + `\x3a` + out[i+1:]
	}
	// "##[" becomes "##\[", which no longer holds the runner's prefix.
	return strings.ReplaceAll(out, legacyCommand, `##\[`)
}

// legacyCommand is the prefix of the runner's first form of workflow
// commands, which it finds anywhere in a line.
const legacyCommand = "##["

// startsCommand reports whether s, after white space, starts as a workflow
// command does.
func startsCommand(s string) bool {
	return strings.HasPrefix(strings.TrimLeftFunc(s, unicode.IsSpace), "::")
}

// IsControl reports whether c would act on a terminal or on what a reader
// sees rather than show: control characters, the Unicode line and paragraph
// separators, format characters (category Cf: the bidi controls U+202A..202E
// and U+2066..2069 that reorder a line, U+200B..200F that hide in it, the
// byte order mark, the tag characters), and bytes that are not UTF-8.
func IsControl(c rune) bool {
	if c < utf8.RuneSelf {
		return c < ' ' || c == 0x7f // ASCII holds no format character
	}
	return unicode.IsControl(c) || c == '\u2028' || c == '\u2029' || c == utf8.RuneError ||
		unicode.Is(unicode.Cf, c)
}
