//go:build unix

package hold

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultDir is where tickets live unless said otherwise. It must be shared
// by everyone on the machine: mode 1777, owned by root, like /tmp.
func DefaultDir() string { return "/run/lock/npu-hold" }

// processGone tells whether no process has the pid, as far as this PID
// namespace can see.
func processGone(pid int) bool { return errors.Is(unix.Kill(pid, 0), unix.ESRCH) }

// changeTime is f's last status change, which no one can set back.
func changeTime(f *os.File) (time.Time, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return time.Time{}, err
	}
	return time.Unix(st.Ctim.Unix()), nil
}

// DefaultPools is where a host declares its device pools.
const DefaultPools = "/etc/npu-hold/pools"

// checkPoolsOwner is nil: /etc is root's.
func checkPoolsOwner(string, *os.File) error { return nil }
