// Package hold gives one process at a time a device, or a few devices of a
// pool: tickets granted first come, first served, across processes, users
// and runner instances on one machine, and released by the kernel when
// their holder dies.
//
// A ticket is a file in a shared directory, flock(2)ed by its owner for as
// long as it waits or holds (see queue.go for the files). A waiter blocks on
// the flock of the live ticket just ahead of it, or, first in line, on those
// of the holders, so it wakes when one is released or its owner dies: the
// kernel drops the lock, no one polls. A ticket file nobody locks is a dead
// one, and is passed over. A holder's descriptor is held for the serve by
// the serve's supervisor, which outlives everything the serve starts, and
// never by the serve itself: a process that shares the descriptor can drop
// the lock (flock LOCK_UN) for everyone.
//
// The directory is shared with every local user and nothing in it is
// trusted (see files.go).
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
	"strconv"
	"strings"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/console"
)

// Facts say who holds or waits: shown by status and to other waiters, and
// written to the token file while held. Facts read from a ticket are
// another user's words, kept as they are (status --json gives them so);
// String makes them safe to print, and shows the system's word where it
// has one.
type Facts struct {
	Ticket  uint64    `json:"ticket"`
	Device  string    `json:"device"`
	User    string    `json:"user"`
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	RunURL  string    `json:"run_url,omitempty"`
	Count   int       `json:"count,omitempty"`   // devices asked for, when more than one
	Devices []string  `json:"devices,omitempty"` // the devices held; none while waiting
	Queued  time.Time `json:"queued"`
	Since   time.Time `json:"since,omitzero"` // held since; zero while waiting

	// Seen is what the system says of the ticket's file, where the rest
	// is what the file says of itself; set only when a ticket is read.
	Seen *Seen `json:"seen,omitempty"`
}

// Seen is what the system says of a ticket's file: whose it is (fstat), and
// which process took its lock (/proc/locks), beside the claims inside it;
// and why the grant does not take the devices it names at their word.
type Seen struct {
	UID     uint32 `json:"uid"`
	User    string `json:"user"`
	LockPID int    `json:"lock_pid,omitempty"` // 0 when /proc/locks does not say
	Doubt   string `json:"doubt,omitempty"`
	// Changed is the file's last status change (fstat ctime): when it was
	// published, or later. Its owner can set its mtime and write any
	// "since" in it, but cannot set this back.
	Changed time.Time `json:"changed,omitzero"`
}

// Bounds on what is shown of another ticket's facts.
const (
	maxShown   = 200 // a command line, a URL
	maxName    = 64  // a user or device name
	maxDevices = 256
	maxCommand = 4096 // a command line, as written in one's own ticket
)

// MaxDevices is the most devices one ticket holds (--count).
const MaxDevices = maxDevices

// clip is s escaped for the console and cut to n characters, with an
// ellipsis where it was cut.
func clip(s string, n int) string {
	s = console.Text(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// String is a one-line description for people, safe to print whatever the
// facts say. Where the system says who owns the ticket and which process
// locked it, that is shown, and the file's claims are marked when they
// differ.
func (f Facts) String() string {
	user, pid := clip(f.User, maxName), f.PID
	var says []string
	if s := f.Seen; s != nil {
		if s.User != "" && s.User != f.User {
			if f.User != "" {
				says = append(says, "user "+quote(clip(f.User, maxName)))
			}
			user = clip(s.User, maxName)
		}
		if s.LockPID > 0 && s.LockPID != f.PID {
			if f.PID != 0 {
				says = append(says, fmt.Sprintf("pid %d", f.PID))
			}
			pid = s.LockPID
		}
	}
	s := fmt.Sprintf("%s (pid %d", user, pid)
	switch f.running() {
	case gone:
		// The holder died; what keeps its ticket is a process that
		// inherited the descriptor (status lists the pids that have it open).
		s += ", exited"
	case unseen:
		s += ", " + unseenText
	}
	if f.Command != "" {
		s += ", " + quote(clip(f.Command, maxShown))
	}
	s += ")"
	if len(f.Devices) > 1 {
		s += " on " + clip(strings.Join(f.Devices, ","), maxShown)
	}
	if since, claim := f.when(f.Since); !since.IsZero() {
		s += fmt.Sprintf(" since %s (%s ago)", since.Format("15:04:05"), time.Since(since).Round(time.Second))
		if claim != "" {
			says = append(says, "since "+claim)
		}
	}
	if f.RunURL != "" {
		s += ", run " + clip(f.RunURL, maxShown)
	}
	if len(says) > 0 {
		s += " [its ticket says " + strings.Join(says, ", ") + "]"
	}
	if f.Seen != nil && f.Seen.Doubt != "" {
		s += " [" + clip(f.Seen.Doubt, maxShown) + "]"
	}
	return s
}

// when is the time a ticket claims (its since, or when it was queued) as
// the system says it where it can: the ticket file's change time, which
// its writer cannot set back. A claim more than a second from it is given
// as claim, to be marked.
func (f Facts) when(claimed time.Time) (t time.Time, claim string) {
	if claimed.IsZero() || f.Seen == nil || f.Seen.Changed.IsZero() {
		return claimed, ""
	}
	if d := claimed.Sub(f.Seen.Changed); d > time.Second || d < -time.Second {
		claim = claimed.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	return f.Seen.Changed, claim
}

// QueuedAt is when a waiter joined the queue, as its file's change time
// says where it is known, else as it claims.
func (f Facts) QueuedAt() time.Time {
	t, _ := f.when(f.Queued)
	return t
}

// quote puts text already escaped for the console (clip) in double quotes,
// with the double quotes inside it escaped.
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// Whether a ticket's process runs, as far as this process can see.
const (
	runs = iota
	gone
	unseen // in another PID namespace: a container's, or the host's seen from one
)

// unseenText says why a holder cannot be looked at.
const unseenText = "not visible from here: its lock is not in this PID namespace's /proc/locks (another container's, or the host's)"

// running tells whether the ticket's process runs. The kernel shows in
// /proc/locks only the locks of processes this PID namespace can see: a
// held ticket whose lock it does not show, and whose pid is not one here,
// belongs to another namespace, where that pid means something else.
func (f Facts) running() int {
	pid := f.pid()
	if pid <= 0 {
		return gone
	}
	if !processGone(pid) {
		return runs
	}
	if f.Seen != nil && f.Seen.LockPID == 0 {
		return unseen
	}
	return gone
}

// pid is the holder's process: the one that took the ticket's lock where
// the system says, else the one the ticket names.
func (f Facts) pid() int {
	if f.Seen != nil && f.Seen.LockPID > 0 {
		return f.Seen.LockPID
	}
	return f.PID
}

// Device is the ticket of one device, or of count devices of a pool.
type Device struct {
	Dir       string // the shared directory; "" is DefaultDir
	Name      string // the device, or the pool, e.g. npu
	Pool      *Pool  // the pool Name names; nil: Name is one device
	Count     int    // devices wanted from the pool; 0 is 1
	TokenFile string // written while held, removed at release (see token.go); "" for none
	Command   string // what the ticket is for, for the facts
	RunURL    string

	Log    io.Writer     // progress while waiting; nil for none
	Every  time.Duration // how often a waiter looks where it stands; 0: 5 s
	Remind time.Duration // how often an unchanged place is said again; 0: 1 min
}

func (d *Device) dirPath() string {
	if d.Dir == "" {
		return DefaultDir()
	}
	return d.Dir
}

func (d *Device) count() int { return max(d.Count, 1) }

// members are the devices a ticket can be granted.
func (d *Device) members() []Member {
	if d.Pool == nil {
		return []Member{{Name: d.Name}}
	}
	return d.Pool.Members
}

// Ticket is a held device, or held devices of a pool.
type Ticket struct {
	d       *Device
	dir     *lockDir
	file    *os.File // the holding file, flocked
	name    string
	ctime   time.Time  // the holding file's change time once published
	token   *tokenFile // nil when none was written
	Facts   Facts
	Devices []Member // the devices held, in the pool's order
	// Unhealthy are the markers on the held devices when they were
	// granted: processes a stop before left that still run.
	Unhealthy []Unhealthy
}

// Files are the descriptors a serve's supervisor holds, so the device stays
// held for as long as anything started under the ticket runs.
func (t *Ticket) Files() []*os.File { return []*os.File{t.file} }

// Names are the held devices' names.
func (t *Ticket) Names() []string {
	var names []string
	for _, m := range t.Devices {
		names = append(names, m.Name)
	}
	return names
}

// Env is what a command run under the ticket is told of its devices:
// NPU_HOLD_DEVICES, the devices' names, and the pool's vendor variable with
// their indexes when the pool names one.
func (t *Ticket) Env() []string {
	var idx []string
	for _, m := range t.Devices {
		idx = append(idx, m.Index)
	}
	env := []string{"NPU_HOLD_DEVICES=" + strings.Join(t.Names(), ",")}
	if t.d.Pool != nil && t.d.Pool.Env != "" {
		env = append(env, t.d.Pool.Env+"="+strings.Join(sortIndexes(idx), ","))
	}
	return env
}

// Release gives the devices to the next waiter.
func (t *Ticket) Release() error {
	if t.token != nil {
		t.token.remove()
	}
	t.dir.remove(t.name, t.file)
	err := t.file.Close()
	t.dir.close()
	return err
}

// CheckDir fails, saying how to mend it, when no ticket can be made in the
// lock directory: a run checks before it starts anything.
func (d *Device) CheckDir() error {
	dir, err := openLockDir(d.dirPath(), true)
	if err != nil {
		return err
	}
	dir.close()
	return nil
}

// Acquire waits for the device, or count devices of the pool, first come
// first served, until ctx ends.
func (d *Device) Acquire(ctx context.Context) (*Ticket, error) {
	if err := CheckName(d.Name); err != nil {
		return nil, err
	}
	if n := len(d.members()); d.count() > n {
		return nil, fmt.Errorf("%d devices asked of %s, which has %d", d.count(), d.Name, n)
	}
	start := time.Now()
	dir, err := openLockDir(d.dirPath(), true)
	if err != nil {
		return nil, err
	}
	// Facts are small, so every waiter reads them whole.
	facts := Facts{Device: d.Name, User: userName(), PID: os.Getpid(), Command: clip(d.Command, maxCommand), RunURL: clip(d.RunURL, maxShown), Queued: time.Now()}
	if d.count() > 1 {
		facts.Count = d.count()
	}
	q, n, err := d.enqueue(ctx, dir, facts)
	if err != nil {
		dir.close()
		return nil, d.giveUp(ctx, err, start)
	}
	facts.Ticket = n
	qname := entryName(d.Name, waiting, facts.Ticket)
	leave := func() {
		dir.remove(qname, q)
		q.Close()
	}
	devices, err := d.wait(ctx, dir, facts.Ticket, start)
	if err != nil {
		leave()
		dir.close()
		return nil, err
	}
	t := &Ticket{d: d, dir: dir, Devices: devices}
	facts.Since = time.Now()
	for _, m := range devices {
		facts.Devices = append(facts.Devices, m.Name)
	}
	t.Facts = facts
	// The holding file is published before the waiting one goes: whoever
	// sees this waiter gone sees what it holds.
	b, _ := json.Marshal(facts)
	t.name = entryName(d.Name, holding, facts.Ticket)
	t.file, err = dir.publish(t.name, append(b, '\n'))
	for i := 0; errors.Is(err, os.ErrExist) && i < 10; i++ {
		// The name was taken by someone outside the queue.
		t.name = entryName(d.Name, holding, facts.Ticket) + "." + randomName()
		t.file, err = dir.publish(t.name, append(b, '\n'))
	}
	leave()
	if err != nil {
		dir.close()
		return nil, err
	}
	// Nothing changes the holding file after its rename into place but
	// someone taking its name away (see Held).
	if t.ctime, err = changeTime(t.file); err != nil {
		t.Release()
		return nil, fmt.Errorf("the ticket %s cannot be checked: %v", t.name, err)
	}
	d.writeToken(t)
	t.Unhealthy = dir.unhealthy(t.Names())
	warnUnhealthy(d.Log, t.Unhealthy)
	return t, nil
}

// writeToken writes the token file of a held ticket. The token is a
// convenience for the holder's tools, the ticket is the lock: a token that
// cannot be written is a warning.
func (d *Device) writeToken(t *Ticket) {
	if d.TokenFile == "" {
		return
	}
	lockDir, err := filepath.Abs(t.dir.path)
	if err == nil {
		t.token, err = writeToken(d.TokenFile, token{Facts: t.Facts, LockDir: lockDir, TicketFile: t.name})
	}
	if err != nil && d.Log != nil {
		fmt.Fprintf(d.Log, "npu-hold: warning: the token file %s is not written: %s; the ticket holds the device all the same\n", console.Text(d.TokenFile), console.Text(err.Error()))
	}
}

func userName() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Getuid())
}
