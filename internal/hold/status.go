package hold

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Status is who holds the device (or the pool's devices) and who waits, as
// the grant sees it: every live holding file holds the devices the grant
// counts it as holding (see devicesOf).
type Status struct {
	Device string `json:"device"`
	Held   bool   `json:"held"`
	// Holder is the first holder; its Seen says whose its file is, which
	// process locked it, and why the grant doubts the devices it names.
	Holder *Facts  `json:"holder,omitempty"`
	Queue  []Facts `json:"queue"`
	// Devices are the pool's devices and their holders; only for a pool.
	Devices []DeviceStatus `json:"devices,omitempty"`
	// Lockers are the processes that have a holder's ticket open: a serve
	// that outlived its gate still holds it through an inherited descriptor.
	Lockers []int `json:"lockers,omitempty"`
}

// DeviceStatus is one device of a pool.
type DeviceStatus struct {
	Name   string `json:"name"`
	Index  string `json:"index,omitempty"`
	Holder *Facts `json:"holder,omitempty"`
}

// Status reads the device's state without waiting.
func (d *Device) Status() (*Status, error) {
	if err := CheckName(d.Name); err != nil {
		return nil, err
	}
	st := &Status{Device: d.Name, Queue: []Facts{}}
	dir, err := openLockDir(d.dirPath(), false)
	if errors.Is(err, unix.ENOENT) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	defer dir.close()
	holders := d.scan(dir, holding, math.MaxUint64)
	defer closeAll(holders)
	waiters := d.scan(dir, waiting, math.MaxUint64)
	closeAll(waiters)
	for _, w := range waiters {
		st.Queue = append(st.Queue, d.shown(w))
	}
	held := map[string]*Facts{}
	for _, h := range holders {
		f := d.shown(h)
		st.Held = true
		if st.Holder == nil {
			st.Holder = &f
		}
		devs, _ := d.devicesOf(h)
		for _, name := range devs {
			if held[name] == nil {
				held[name] = &f
			}
		}
		for _, pid := range openers(h.file) {
			if !slices.Contains(st.Lockers, pid) {
				st.Lockers = append(st.Lockers, pid)
			}
		}
	}
	slices.Sort(st.Lockers)
	if d.Pool != nil {
		for _, m := range d.Pool.Members {
			st.Devices = append(st.Devices, DeviceStatus{Name: m.Name, Index: m.Index, Holder: held[m.Name]})
		}
	}
	return st, nil
}

// shown is what is said of a live ticket: its facts, what the system says
// of its file, and, for a holder, why the grant doubts the devices it names.
func (d *Device) shown(e entry) Facts {
	f := Facts{Ticket: e.n, Device: d.Name}
	if e.facts != nil {
		f = *e.facts
	}
	seen := e.seen
	switch {
	case e.kind == holding:
		_, seen.Doubt = d.devicesOf(e)
	case e.facts == nil:
		seen.Doubt = "its facts cannot be read"
	}
	f.Seen = &seen
	return f
}

// fileID is a file, as /proc/locks names it.
type fileID struct{ dev, ino uint64 }

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

// TimeoutError is a wait that ran out.
type TimeoutError struct {
	Device string
	Waited time.Duration
	Holder *Facts
	// Keepers are processes other than the holder that have the ticket
	// open: what a holder started and left behind keeps the device held.
	Keepers []string
}

func (e *TimeoutError) Error() string {
	who := "a holder that left no facts"
	if e.Holder != nil {
		who = e.Holder.String()
		if e.Holder.running() == gone {
			who += ", which has exited"
		}
	}
	msg := fmt.Sprintf("gave up waiting for %s after %v: it is held by %s", e.Device, e.Waited.Round(time.Second), who)
	if len(e.Keepers) > 0 {
		msg += "; the ticket is kept open by " + strings.Join(e.Keepers, ", ") + ": stop what should not be running"
	}
	return msg
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
