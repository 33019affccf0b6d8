//go:build unix

package config

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// privateDirAdvice says what --out to pass instead of one CheckPrivateDir
// refused.
const privateDirAdvice = "pass a directory that only you (or root) can write, under directories that only you or root can write or that carry the sticky bit, such as one in $RUNNER_TEMP"

// CheckPrivateDir says why another user could change what is written in
// dir, or nil. Every directory from dir up to /, along the path as given
// and along the one it leads to, must belong to this user or root and be
// writable by its owner alone, or, dir's parents, carry the sticky bit (as
// /tmp does: no one may then move or replace what another made in it); a
// symlink on the way must belong to this user or root. This is the rule
// ssh applies to its key files. A directory another user may write can be
// swapped for theirs, or be given a symlink where the gate will write, at
// any time: after the wait for the device the serve's log would be written
// into a private file of the runner's user.
func CheckPrivateDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	paths := []string{abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		paths = append(paths, real)
	}
	me := uint32(os.Geteuid())
	for _, path := range paths {
		for p := path; ; p = filepath.Dir(p) {
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return fmt.Errorf("%s: cannot tell its owner", p)
			}
			if st.Uid != me && st.Uid != 0 {
				return fmt.Errorf("%s belongs to %s, who could replace what the gate writes there", p, owner(st.Uid))
			}
			if fi.IsDir() && fi.Mode().Perm()&0o022 != 0 {
				if p == path {
					return fmt.Errorf("%s is writable by other users (mode %04o), who could put a symlink where the gate writes", p, fi.Mode().Perm())
				}
				if fi.Mode()&os.ModeSticky == 0 {
					return fmt.Errorf("%s is writable by other users (mode %04o) without the sticky bit, so any of them could replace the directory in it", p, fi.Mode().Perm())
				}
			}
			if p == filepath.Dir(p) {
				break
			}
		}
	}
	return nil
}

// owner names uid: its user's name and the number.
func owner(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return u.Username + " (uid " + id + ")"
	}
	return "uid " + id
}
