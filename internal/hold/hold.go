// Package hold gives one process at a time a device: an exclusive ticket,
// granted first come, first served, across processes, users and runner
// instances on one machine, and released by the kernel when its holder dies.
//
// The ticket is a queue of files in a shared directory, one per waiter,
// each flock(2)ed by its owner for as long as it waits or holds:
//
//	DIR/DEVICE/seq               the next ticket number (flocked while a number is taken)
//	DIR/DEVICE/queue/NNNNNNNNNN  one per waiter or holder; its facts as JSON
//	DIR/DEVICE/lock              flocked by the holder
//
// A waiter blocks on the flock of the live ticket just ahead of it, so it
// wakes when that one is released or its owner dies: the kernel drops the
// lock, no one polls. A ticket file nobody locks is a dead waiter's, and is
// passed over. A holder's descriptors are inherited by the serve it starts,
// so a serve that escaped its gate still holds the device.
package hold

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultDir is where tickets live unless said otherwise. It must be shared
// by everyone on the machine: mode 1777, like /tmp.
const DefaultDir = "/run/lock/npu-hold"

// Facts say who holds or waits: shown by status and to other waiters, and
// written to the token file while held.
type Facts struct {
	Ticket  uint64    `json:"ticket"`
	Device  string    `json:"device"`
	User    string    `json:"user"`
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	RunURL  string    `json:"run_url,omitempty"`
	Queued  time.Time `json:"queued"`
	Since   time.Time `json:"since,omitzero"` // held since; zero while waiting
}

// String is a one-line description for people.
func (f Facts) String() string {
	s := fmt.Sprintf("%s (pid %d, %s)", f.User, f.PID, strconv.Quote(f.Command))
	if !f.Since.IsZero() {
		s += fmt.Sprintf(" since %s (%s ago)", f.Since.Format("15:04:05"), time.Since(f.Since).Round(time.Second))
	}
	if f.RunURL != "" {
		s += ", run " + f.RunURL
	}
	return s
}

// Device is the ticket of one device.
type Device struct {
	Dir       string // the shared directory; "" is DefaultDir
	Name      string // the device, e.g. npu
	TokenFile string // written while held, removed at release; "" for none
	Command   string // what the ticket is for, for the facts
	RunURL    string

	Log   io.Writer     // progress while waiting; nil for none
	Every time.Duration // how often a waiter says where it stands; 0: 5 s
}

func (d *Device) dir() string {
	base := d.Dir
	if base == "" {
		base = DefaultDir
	}
	return filepath.Join(base, d.Name)
}

// Ticket is a held device.
type Ticket struct {
	d     *Device
	mine  *os.File // the ticket file, flocked
	lock  *os.File // the device lock, flocked
	path  string
	Facts Facts
}

// Files are the descriptors a serve inherits, so the device stays held for
// as long as anything started under the ticket runs.
func (t *Ticket) Files() []*os.File { return []*os.File{t.mine, t.lock} }

// Release gives the device to the next waiter.
func (t *Ticket) Release() error {
	var errs []error
	if t.d.TokenFile != "" {
		if err := os.Remove(t.d.TokenFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	os.Remove(t.path)
	errs = append(errs, t.lock.Close(), t.mine.Close())
	return errors.Join(errs...)
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
	return unix.Kill(pid, 0) == nil || errors.Is(unix.Kill(pid, 0), unix.EPERM)
}

// describe is "pid N (command line)" from /proc.
func describe(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	cmd := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	if len(cmd) > 120 {
		cmd = cmd[:120]
	}
	return fmt.Sprintf("pid %d (%s)", pid, cmd)
}

// Acquire waits for the device, first come first served, until ctx ends.
func (d *Device) Acquire(ctx context.Context) (*Ticket, error) {
	if err := d.setup(); err != nil {
		return nil, err
	}
	start := time.Now()
	t, err := d.enqueue()
	if err != nil {
		return nil, err
	}
	if err := d.wait(ctx, t, start); err != nil {
		os.Remove(t.path)
		t.mine.Close()
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(d.dir(), "lock"), os.O_RDONLY|os.O_CREATE, 0o644)
	if err == nil {
		err = flockWait(ctx, lock, unix.LOCK_EX)
	}
	if err != nil {
		os.Remove(t.path)
		t.mine.Close()
		if lock != nil {
			lock.Close()
		}
		return nil, d.giveUp(ctx, err, start)
	}
	t.lock = lock
	t.Facts.Since = time.Now()
	if err := rewrite(t.mine, t.Facts); err != nil {
		t.Release()
		return nil, err
	}
	if d.TokenFile != "" {
		b, _ := json.MarshalIndent(t.Facts, "", "  ")
		if err := os.WriteFile(d.TokenFile, append(b, '\n'), 0o644); err != nil {
			t.Release()
			return nil, fmt.Errorf("writing the token file %s: %w", d.TokenFile, err)
		}
	}
	return t, nil
}

// setup makes the shared directories, open to every user.
func (d *Device) setup() error {
	if d.Name == "" || strings.ContainsAny(d.Name, "/\x00") || d.Name == "." || d.Name == ".." {
		return fmt.Errorf("device %q: pass a plain name such as npu", d.Name)
	}
	for _, dir := range []string{filepath.Dir(d.dir()), d.dir(), filepath.Join(d.dir(), "queue")} {
		if err := os.Mkdir(dir, 0o777); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("the lock directory %s cannot be made (%v); create it mode 1777 (README: set up the runner)", dir, err)
		}
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("the lock directory %s is not a directory", dir)
		}
		if fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
			// Only its owner can open it up; others use it as it is.
			os.Chmod(dir, 0o777|os.ModeSticky)
		}
	}
	return nil
}

// enqueue takes the next number and puts a locked ticket file in the queue
// under it. Taking the number and publishing the file happen under one lock,
// so tickets appear in number order.
func (d *Device) enqueue() (*Ticket, error) {
	seqPath := filepath.Join(d.dir(), "seq")
	seq, err := os.OpenFile(seqPath, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("the ticket counter %s cannot be opened (%v); it must be writable by every user (mode 0666)", seqPath, err)
	}
	defer seq.Close()
	seq.Chmod(0o666)
	if err := flock(seq, unix.LOCK_EX); err != nil {
		return nil, err
	}
	defer flock(seq, unix.LOCK_UN)
	b, err := io.ReadAll(seq)
	if err != nil {
		return nil, err
	}
	n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	n++
	if _, err := seq.WriteAt([]byte(fmt.Sprintf("%020d\n", n)), 0); err != nil {
		return nil, fmt.Errorf("the ticket counter %s cannot be written: %v", seqPath, err)
	}

	facts := Facts{Ticket: n, Device: d.Name, User: userName(), PID: os.Getpid(), Command: d.Command, RunURL: d.RunURL, Queued: time.Now()}
	// The file is locked before it is visible: a ticket in the queue that is
	// not locked is always a dead one.
	tmp, err := os.CreateTemp(filepath.Join(d.dir(), "queue"), ".new-*")
	if err != nil {
		return nil, fmt.Errorf("a ticket cannot be made in %s: %v", filepath.Join(d.dir(), "queue"), err)
	}
	tmp.Chmod(0o644)
	if err := flock(tmp, unix.LOCK_EX); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	if err := rewrite(tmp, facts); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	path := filepath.Join(d.dir(), "queue", ticketName(n))
	if err := os.Rename(tmp.Name(), path); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	return &Ticket{d: d, mine: tmp, path: path, Facts: facts}, nil
}

func ticketName(n uint64) string { return fmt.Sprintf("%020d", n) }

// wait blocks until no live ticket is ahead of t.
func (d *Device) wait(ctx context.Context, t *Ticket, start time.Time) error {
	every := d.Every
	if every == 0 {
		every = 5 * time.Second
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		ahead := d.ahead(t.Facts.Ticket)
		if len(ahead) == 0 {
			return nil
		}
		d.say(ahead)
		for _, a := range ahead[:len(ahead)-1] {
			a.file.Close()
		}
		// Block on the ticket just ahead: the kernel releases it when its
		// owner releases it or dies. The ticker only says where we stand.
		next := ahead[len(ahead)-1]
		done := lockAsync(next.file, unix.LOCK_EX)
	waiting:
		for {
			select {
			case err := <-done:
				next.file.Close()
				if err != nil {
					return err
				}
				break waiting
			case <-ticker.C:
				now := d.ahead(t.Facts.Ticket)
				d.say(now)
				for _, a := range now {
					a.file.Close()
				}
			case <-ctx.Done():
				next.file.Close()
				return d.giveUp(ctx, ctx.Err(), start)
			}
		}
	}
}

func (d *Device) giveUp(ctx context.Context, err error, start time.Time) error {
	if errors.Is(err, context.DeadlineExceeded) {
		te := &TimeoutError{Device: d.Name, Waited: time.Since(start)}
		if st, serr := d.Status(); serr == nil {
			te.Holder = st.Holder
			// A holder that is gone while its ticket stays taken: name what
			// keeps it.
			if st.Holder == nil || !alive(st.Holder.PID) {
				for _, pid := range st.Lockers {
					if pid != os.Getpid() {
						te.Keepers = append(te.Keepers, describe(pid))
					}
				}
			}
		}
		return te
	}
	if ctx.Err() != nil {
		return fmt.Errorf("stopped waiting for %s: %w", d.Name, ctx.Err())
	}
	return err
}

func (d *Device) say(ahead []live) {
	if d.Log == nil || len(ahead) == 0 {
		return
	}
	holder := ahead[0].facts
	who := "a holder that left no facts"
	if holder != nil {
		who = holder.String()
	}
	fmt.Fprintf(d.Log, "npu-hold: waiting for %s: place %d in the queue (%d ahead); held by %s\n", d.Name, len(ahead)+1, len(ahead), who)
}

// live is a ticket whose owner is alive, with its file open.
type live struct {
	n     uint64
	file  *os.File
	facts *Facts
}

// ahead lists the live tickets before mine, oldest first, each opened; dead
// ones are removed where this user may remove them.
func (d *Device) ahead(mine uint64) []live {
	var out []live
	for _, n := range d.tickets() {
		if n >= mine {
			break
		}
		if l, ok := d.open(n); ok {
			out = append(out, l)
		}
	}
	return out
}

// tickets are the numbers in the queue, in order.
func (d *Device) tickets() []uint64 {
	ents, _ := os.ReadDir(filepath.Join(d.dir(), "queue"))
	var ns []uint64
	for _, e := range ents {
		if n, err := strconv.ParseUint(e.Name(), 10, 64); err == nil {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	return ns
}

// open opens ticket n if its owner still lives (its file is locked).
func (d *Device) open(n uint64) (live, bool) {
	path := filepath.Join(d.dir(), "queue", ticketName(n))
	f, err := os.Open(path)
	if err != nil {
		return live{}, false
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err == nil {
		// Nobody holds it: its owner died. Pass it over.
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		os.Remove(path)
		f.Close()
		return live{}, false
	}
	var facts Facts
	b, _ := io.ReadAll(f)
	l := live{n: n, file: f}
	if json.Unmarshal(b, &facts) == nil {
		l.facts = &facts
	}
	return l, true
}

// Status is who holds the device and who waits.
type Status struct {
	Device string  `json:"device"`
	Held   bool    `json:"held"`
	Holder *Facts  `json:"holder,omitempty"`
	Queue  []Facts `json:"queue"`
	// Lockers are the processes that have the device's lock open: a serve
	// that outlived its gate still holds it through an inherited descriptor.
	Lockers []int `json:"lockers,omitempty"`
}

// Status reads the device's state without waiting.
func (d *Device) Status() (*Status, error) {
	st := &Status{Device: d.Name, Queue: []Facts{}}
	lockPath := filepath.Join(d.dir(), "lock")
	if f, err := os.Open(lockPath); err == nil {
		if unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) != nil {
			st.Held = true
		} else {
			unix.Flock(int(f.Fd()), unix.LOCK_UN)
		}
		f.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, l := range d.ahead(^uint64(0)) {
		l.file.Close()
		if l.facts == nil {
			continue
		}
		if !l.facts.Since.IsZero() && st.Holder == nil {
			h := *l.facts
			st.Holder = &h
			continue
		}
		st.Queue = append(st.Queue, *l.facts)
	}
	if st.Held {
		st.Lockers = openers(lockPath)
	}
	return st, nil
}

// openers are the pids that have path open.
func openers(path string) []int {
	var fi unix.Stat_t
	if unix.Stat(path, &fi) != nil {
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
		if !slices.Contains(pids, pid) {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

func rewrite(f *os.File, facts Facts) error {
	b, err := json.Marshal(facts)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = f.WriteAt(append(b, '\n'), 0)
	return err
}

func userName() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Getuid())
}
