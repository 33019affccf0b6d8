package hold

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
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
	// Unhealthy are the markers on the device (the pool's devices):
	// processes a stop left, which could not be ended and still run.
	Unhealthy []Unhealthy `json:"unhealthy,omitempty"`
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
	if isNotExist(err) {
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
	var names []string
	for _, m := range d.members() {
		names = append(names, m.Name)
	}
	st.Unhealthy = dir.unhealthy(names)
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

// fileID is a file, as the system names it: device and inode on Unix,
// volume serial number and file index on Windows.
type fileID struct{ dev, ino uint64 }

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
