package hold

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Status is who holds the device (or the pool's devices) and who waits.
type Status struct {
	Device string  `json:"device"`
	Held   bool    `json:"held"`
	Holder *Facts  `json:"holder,omitempty"` // the first holder
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
		if w.facts != nil {
			st.Queue = append(st.Queue, *w.facts)
		}
	}
	for _, h := range holders {
		st.Held = true
		if h.facts != nil && st.Holder == nil {
			f := *h.facts
			st.Holder = &f
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
			ds := DeviceStatus{Name: m.Name, Index: m.Index}
			for _, h := range holders {
				if h.facts != nil && slices.Contains(h.facts.Devices, m.Name) {
					f := *h.facts
					ds.Holder = &f
					break
				}
			}
			st.Devices = append(st.Devices, ds)
		}
	}
	return st, nil
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
		if !alive(e.Holder.PID) {
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
