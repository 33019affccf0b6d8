//go:build unix

package config

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// sysfsMagic is sysfs's filesystem type (statfs's f_type): its files are
// the kernel's.
const sysfsMagic = 0x62656572

// SensorWritableBy says how a process of uid, the serve's user, could set
// what the sensor file at path reads, or "" when it could not: the file,
// and every directory from it up to /, along the path as given and the one
// it leads to, must belong to another user (root, or a sensor daemon's),
// the file be writable by its owner alone, and the directories by their
// owners alone or carry the sticky bit (no one may then replace another's
// file in them): the rule CheckPrivateDir applies to --out, turned round.
// Root can write any file, so to a serve that runs as root only a file the
// kernel serves (sysfs), writable by no one, is out of reach.
func SensorWritableBy(path string, uid uint32) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err.Error()
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err.Error()
	}
	fi, err := os.Stat(real)
	kernels := err == nil && fi.Mode().Perm()&0o222 == 0 && onSysfs(real)
	if uid == 0 {
		if !kernels {
			return "the serve runs as root, as the gate does, and root can write any file but those the kernel serves (sysfs)"
		}
		// Root could point a symlink outside sysfs at a file of its own.
		for p := abs; p != filepath.Dir(p); p = filepath.Dir(p) {
			if fi, err := os.Lstat(p); err != nil {
				return err.Error()
			} else if fi.Mode()&os.ModeSymlink != 0 && !onSysfs(filepath.Dir(p)) {
				return fmt.Sprintf("%s is a symlink outside sysfs, and the serve runs as root, as the gate does, which could replace it; name the kernel's file (%s)", p, real)
			}
		}
		return ""
	}
	paths := []string{abs}
	if real != abs && !kernels {
		paths = append(paths, real)
	}
	for _, path := range paths {
		for p := path; ; p = filepath.Dir(p) {
			// No one replaces what lies in sysfs, the kernel's.
			if kernels && p != filepath.Dir(p) && onSysfs(filepath.Dir(p)) {
				continue
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return err.Error()
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return p + ": cannot tell its owner"
			}
			perm := fi.Mode().Perm()
			if st.Uid == uid {
				if p == path {
					return fmt.Sprintf("%s belongs to %s, the serve's user", p, owner(uid))
				}
				return fmt.Sprintf("%s belongs to %s, the serve's user: the file in it could be replaced", p, owner(uid))
			}
			if fi.Mode().IsRegular() && perm&0o022 != 0 {
				return fmt.Sprintf("%s may be written by others than its owner (mode %04o)", p, perm)
			}
			if fi.IsDir() && perm&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
				return fmt.Sprintf("%s may be written by others (mode %04o) without the sticky bit: the file in it could be replaced", p, perm)
			}
			if p == filepath.Dir(p) {
				break
			}
		}
	}
	return ""
}

// onSysfs reports whether path, followed, lies in sysfs.
func onSysfs(path string) bool {
	var fs syscall.Statfs_t
	return syscall.Statfs(path, &fs) == nil && fs.Type == sysfsMagic
}
