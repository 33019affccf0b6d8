package console

import (
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// JSON is JSON text (as encoding/json writes it) made safe to print: the
// same JSON, which decodes to the same values, with every character inside
// a string that a terminal would act on or not show as itself (IsControl:
// bidi overrides, C1 controls, line separators; encoding/json already
// escapes those below U+0020) and every '#' and '[' written as a \u escape,
// so that no line of it holds "##[", which a GitHub Actions runner reads as
// a workflow command anywhere in a line. Outside strings JSON holds no '#'
// and no character that is not ASCII, and a line of indented JSON never
// starts with "::"; its '[' there are arrays', left as they are.
func JSON(b []byte) []byte {
	var out strings.Builder
	out.Grow(len(b))
	inString, escaped := false, false
	for _, r := range string(b) {
		switch {
		case !inString:
			inString = r == '"'
		case escaped:
			escaped = false
		case r == '\\':
			escaped = true
		case r == '"':
			inString = false
		case r == '#' || r == '[' || r >= utf8.RuneSelf && IsControl(r):
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(&out, `\u%04x`, u)
			}
			continue
		}
		out.WriteRune(r)
	}
	return []byte(out.String())
}
