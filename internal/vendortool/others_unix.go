//go:build unix

package vendortool

import (
	"os"
	"path/filepath"
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
