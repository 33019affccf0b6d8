//go:build unix

package hold

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// flockers are the processes that took the exclusive flock(2) locks of the
// machine, by file, as /proc/locks says: the process that locked a ticket,
// which the kernel knows and the ticket only claims. Empty when /proc says
// nothing.
func flockers() map[fileID]int {
	out := map[fileID]int{}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return out
	}
	// 1: FLOCK  ADVISORY  WRITE 6118 fe:00:9977878 0 EOF
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" || f[3] != "WRITE" {
			continue // a blocked request ("->"), another kind, a shared lock
		}
		pid, err := strconv.Atoi(f[4])
		id := strings.Split(f[5], ":")
		if err != nil || pid <= 0 || len(id) != 3 {
			continue
		}
		major, err1 := strconv.ParseUint(id[0], 16, 32)
		minor, err2 := strconv.ParseUint(id[1], 16, 32)
		ino, err3 := strconv.ParseUint(id[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		out[fileID{unix.Mkdev(uint32(major), uint32(minor)), ino}] = pid
	}
	return out
}

// userNamed is a uid's name as a ticket of its own would say it.
func userNamed(uid uint32) string {
	if u, err := user.LookupId(strconv.Itoa(int(uid))); err == nil {
		return u.Username
	}
	return strconv.Itoa(int(uid))
}

// openers are the pids, other than this one, that have f's file open.
func openers(f *os.File) []int {
	var fi unix.Stat_t
	if unix.Fstat(int(f.Fd()), &fi) != nil {
		return nil
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	var pids []int
	for _, fd := range fds {
		var st unix.Stat_t
		if unix.Stat(fd, &st) != nil || st.Ino != fi.Ino || st.Dev != fi.Dev {
			continue
		}
		pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
		if pid != os.Getpid() && !slices.Contains(pids, pid) {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// describe is "pid N (command line)" from /proc, safe to print.
func describe(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	cmd := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	return fmt.Sprintf("pid %d (%s)", pid, clip(cmd, 120))
}
