//go:build unix

package config

import (
	"fmt"
	"os"
	"syscall"
)

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
