package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// SplitWords splits a command line into words the way a POSIX shell splits
// them, with quotes and backslashes, and does nothing else: no variables, no
// globs, no command substitution, no operators. "$HOME" stays "$HOME". The
// words are run directly, never through a shell.
func SplitWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	const (
		plain = iota
		single
		double
	)
	state := plain
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch state {
		case single:
			if c == '\'' {
				state = plain
			} else {
				w.WriteRune(c)
			}
		case double:
			switch {
			case c == '"':
				state = plain
			case c == '\\' && i+1 < len(rs) && strings.ContainsRune("\"\\$`\n", rs[i+1]):
				i++
				if rs[i] != '\n' {
					w.WriteRune(rs[i])
				}
			default:
				w.WriteRune(c)
			}
		default:
			switch {
			case c == ' ' || c == '\t' || c == '\n' || c == '\r':
				if inWord {
					words = append(words, w.String())
					w.Reset()
					inWord = false
				}
			case c == '\\':
				if i+1 == len(rs) {
					return nil, errors.New("it ends with a lone backslash")
				}
				i++
				if rs[i] != '\n' { // a backslash-newline joins lines
					w.WriteRune(rs[i])
					inWord = true
				}
			case c == '\'':
				state, inWord = single, true
			case c == '"':
				state, inWord = double, true
			default:
				w.WriteRune(c)
				inWord = true
			}
		}
	}
	switch state {
	case single:
		return nil, errors.New("a single quote (') is not closed")
	case double:
		return nil, errors.New(`a double quote (") is not closed`)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// QuoteWords joins words into a line that SplitWords splits back into the
// same words.
func QuoteWords(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		if w != "" && !strings.ContainsFunc(w, func(c rune) bool { return !safe(c) }) {
			q[i] = w
			continue
		}
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func safe(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./:=,+@%{}", c)
}

// ParseSize reads a size in bytes: a whole number, with an optional unit
// K, KiB, M, MiB, G or GiB (all powers of 1024) or B.
func ParseSize(v string) (int64, error) {
	s := strings.TrimSpace(v)
	i := len(s)
	for i > 0 && (s[i-1] < '0' || s[i-1] > '9') {
		i--
	}
	units := map[string]int64{"": 1, "B": 1, "K": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GIB": 1 << 30}
	mult, ok := units[strings.ToUpper(strings.TrimSpace(s[i:]))]
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if !ok || err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size; pass bytes, or a number with KiB, MiB or GiB (e.g. 64MiB)", v)
	}
	return n * mult, nil
}
