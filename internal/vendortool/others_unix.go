//go:build unix

package vendortool

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// othersWrite reports whether a user other than root and this one may
// write p (a file's path, its links resolved) or put another file in its
// place, or p or a directory above it cannot be looked at.
func othersWrite(p string) bool {
	me := uint32(os.Geteuid())
	uidMap, overflow := procText("/proc/self/uid_map"), procText("/proc/sys/kernel/overflowuid")
	for q, last := p, true; ; q, last = filepath.Dir(q), false {
		st, err := os.Stat(q)
		if err != nil {
			return true
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && sys.Uid != me && !outside(sys.Uid, uidMap, overflow) {
			return true
		}
		// The file and its directory: no user but their owner's may write
		// them. Above: what any user may write needs the sticky bit, so
		// that what is in it stays its owner's.
		anyone := st.Mode().Perm()&0o002 != 0
		if anyone && (last || q == filepath.Dir(p) || st.Mode()&os.ModeSticky == 0) {
			return true
		}
		if q == filepath.Dir(q) {
			return false
		}
	}
}

func procText(name string) string {
	b, _ := os.ReadFile(name)
	return string(b)
}

// outside reports whether a file owned by uid is owned outside this user
// namespace, by a user no process in it can be: in one, every owner
// uidMap (/proc/self/uid_map) does not map shows as the overflow uid
// (/proc/sys/kernel/overflowuid), as the driver's files mounted into a
// container of its own user namespace show (Kubernetes hostUsers:
// false). Where uidMap maps the overflow uid itself, a user inside is
// that uid too, and a file of it is that user's.
func outside(uid uint32, uidMap, overflow string) bool {
	o, err := strconv.ParseUint(strings.TrimSpace(overflow), 10, 32)
	if err != nil {
		o = 65534
	}
	if uint64(uid) != o {
		return false
	}
	lines := strings.Split(strings.TrimSpace(uidMap), "\n")
	if len(lines) == 0 || strings.TrimSpace(uidMap) == "" {
		return false
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) != 3 {
			return false
		}
		in, err1 := strconv.ParseUint(f[0], 10, 32)
		n, err2 := strconv.ParseUint(f[2], 10, 33)
		if err1 != nil || err2 != nil || o >= in && o-in < n {
			return false // mapped, or unreadable: a user inside may be it
		}
	}
	return true
}
