package config

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
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

// exposed says why the token file file, st, is not this user's alone, or "", as ssh
// refuses a key others may read: a serve run as another user (nobody)
// finds the file's name on the gate's command line, which every user reads,
// and reads a file every user may read; a file its group or every user
// may write can be replaced; and a file another user owns is that user's
// to read, whatever its mode. Its group may read it (mode 0640, a group
// the serve's user is not in).
func exposed(file string, st os.FileInfo) string {
	if perm := st.Mode().Perm(); perm&0o026 != 0 {
		who := "others may write it, and put a token of theirs in it"
		if perm&0o004 != 0 {
			who = "every user of this machine may read it"
		}
		return fmt.Sprintf("mode %04o: %s; chmod 600 %s", perm, who, file)
	}
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		if me := os.Geteuid(); s.Uid != uint32(me) && s.Uid != 0 {
			return fmt.Sprintf("owned by uid %d, not this user (uid %d) nor root: its owner may read it; chown it to this user", s.Uid, me)
		}
	}
	return ""
}
