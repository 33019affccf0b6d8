package config

import (
	"errors"
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
