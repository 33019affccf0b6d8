package config

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
)

// MaxTokenFile bounds what --github-token-file reads: a GitHub token is
// some 40 to 100 characters (ghs_, ghp_, github_pat_ tokens).
const MaxTokenFile = 4096

// ReadTokenFile reads the token in file (--github-token-file): one word,
// white space around it trimmed (a newline at its end). The error names
// the file and says what to do; it never shows what the file holds.
func ReadTokenFile(file string) (string, error) {
	bad := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("--github-token-file %s: %s", file, fmt.Sprintf(format, args...))
	}
	f, err := os.Open(file)
	if err != nil {
		return bad("%v; pass a file holding the token, readable by this user", unwrapPath(err))
	}
	defer f.Close()
	// Of the file opened, not of its name: a link (a Kubernetes secret's
	// volume) is judged by what it names.
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		if why := exposed(file, st); why != "" {
			return bad("%s", why)
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxTokenFile+1))
	if err != nil {
		return bad("%v; pass a file holding the token", unwrapPath(err))
	}
	if len(b) > MaxTokenFile {
		return bad("more than %d bytes: not a token; pass a file holding the token alone", MaxTokenFile)
	}
	// A byte order mark (a file saved by Windows' Notepad) is no part of
	// it; CR, LF and blanks around it are trimmed.
	token := strings.TrimSpace(strings.TrimPrefix(string(b), "\ufeff"))
	switch {
	case token == "":
		return bad("holds no token; write the token in it, or set GITHUB_TOKEN instead")
	case strings.IndexFunc(token, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r > unicode.MaxASCII }) >= 0:
		return bad("holds more than one word: a token is one word of printable ASCII; pass a file holding the token alone")
	}
	return token, nil
}
