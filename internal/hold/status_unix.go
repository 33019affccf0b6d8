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
	"time"

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

// processStarted is when the process pid started, from /proc (its start in
// clock ticks after boot, /proc/stat's btime); ok is false where /proc does
// not say.
func processStarted(pid int) (t time.Time, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return time.Time{}, false
	}
	// The command, in parentheses, may hold spaces and parentheses: the
	// fields start after the last ')'. Starttime is field 22, the 20th
	// after it.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return time.Time{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return time.Time{}, false
	}
	ticks, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	boot := bootTime(procText("/proc/stat"))
	if boot.IsZero() {
		return time.Time{}, false
	}
	// USER_HZ is 100 on every architecture Linux exports to user space.
	return boot.Add(time.Duration(ticks) * (time.Second / 100)), true
}

// bootTime is the btime line of /proc/stat.
func bootTime(stat string) time.Time {
	for l := range strings.SplitSeq(stat, "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			if s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return time.Unix(s, 0)
			}
		}
	}
	return time.Time{}
}
