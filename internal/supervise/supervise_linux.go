// Package supervise is the process between the gate and the serve, so that
// nothing the serve starts outlives the gate, even a gate killed with
// SIGKILL, which runs no code of its own.
//
// The supervisor is the gate's own binary in another mode. It is a child
// subreaper, so whatever the serve's tree leaves as an orphan comes back to
// it, holds the device ticket's descriptors (the serve never gets them)
// and starts the serve in a process group of its own, inside a cgroup made for it where the machine
// lets it make one. When the gate asks (a line on the control socket), when
// the gate dies (the socket's end of file, or its parent-death
// signal), it stops the serve: TERM to its group, a grace period, then KILL
// to everything it started, again until the kernel says it has no child
// left (ECHILD), reaping each. Then it reports and exits, which releases the
// ticket: the device is never free while a process the serve started runs.
//
// In the common case (a cgroup v2 it may make) the serve is started by the
// supervisor's first stage, package stage1, from an init that runs some
// fifty package inits sooner in the binary's start; Main takes over the
// serve it started.
//
// Only the supervisor's side is here; internal/serve starts it and reads
// what it says.
package supervise

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise/stage1"
)

// OrphanGrace is the grace period of a stop the gate did not ask for: it
// died, or something sent the supervisor TERM.
const OrphanGrace = 2 * time.Second

// Main runs the supervisor:
//
//	supervise [--contain auto|cgroup2|freezer|descendants] [--foreground] [--held N] -- ARGV...
//
// with the control socket on fd 3 (the gate's requests in, the events out)
// and N held files from fd 4, which the supervisor keeps and the serve does
// not inherit. It
// returns the supervisor's exit status: 0 once nothing it
// started is left.
func Main(args []string, getenv func(string) string, stderr io.Writer) int {
	WarmEvents()
	fs := flag.NewFlagSet(Command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	contain := fs.String("contain", "", "the mechanism that holds the serve's tree (default $"+ContainEnv+", else auto)")
	foreground := fs.Bool("foreground", false, "make the serve's group the terminal's foreground group (stdin is the terminal)")
	held := fs.Int("held", 0, "how many files from fd 4 the supervisor holds (the device's ticket) until nothing it started is left")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 || *held < 0 {
		fmt.Fprintln(stderr, "usage: supervise [--contain M] [--foreground] [--held N] -- ARGV...; started by the gate, not by hand")
		return 2
	}
	if *contain == "" {
		*contain = getenv(ContainEnv)
	}
	control := os.NewFile(ControlFD, "control")
	if control == nil || !isSocket(ControlFD) {
		fmt.Fprintln(stderr, "supervise: fd 3 is not a socket; it is started by the gate, not by hand")
		return 2
	}
	// None of the supervisor's own descriptors may reach the serve: a
	// serve holding the control socket would keep the gate from seeing the
	// supervisor's end, and one holding the ticket's descriptor shares its
	// lock, which flock(fd, LOCK_UN) in any process that shares it drops,
	// freeing the device for everyone while the gate measures. The
	// supervisor holds the ticket for the serve, and outlives its tree.
	for fd := ControlFD; fd < HeldFD+*held; fd++ {
		syscall.CloseOnExec(fd)
	}
	s := newSupervisor(control)
	return s.run(fs.Args(), *contain, *foreground, *held, control)
}

func newSupervisor(events *os.File) *supervisor {
	return &supervisor{self: os.Getpid(), events: events, exited: make(chan struct{}), told: make(chan struct{}), empty: make(chan struct{}), finished: make(chan struct{})}
}

// supervisor is one serve's supervisor.
type supervisor struct {
	self int

	mu     sync.Mutex
	events *os.File // nil once the gate is gone
	stop   string   // the last signal the stop sent: "", TERM or KILL

	c        container
	serve    int           // the serve's pid and process group
	exited   chan struct{} // closed when the serve has been reaped
	told     chan struct{} // closed once the gate has been told how the serve exited
	exit     syscall.WaitStatus
	empty    chan struct{} // closed when the supervisor has no child left
	tidied   chan struct{} // closed once the stale cgroups beside the serve's are removed; nil when the supervisor removed them before its start
	finished chan struct{} // closed when the supervisor is done
}

func (s *supervisor) run(argv []string, contain string, foreground bool, held int, control *os.File) int {
	defer close(s.finished)
	// Signals: TERM (the gate's parent-death signal, or anyone's) stops the
	// serve; INT and HUP are the terminal's, meant for the gate and the
	// serve, and do not stop the supervisor. Caught rather than ignored: an
	// ignored signal would stay ignored in the serve. The binary's start
	// caught them already (package stage1).
	sigs := stage1.Signals
	if sigs == nil {
		sigs = make(chan os.Signal, 4)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return s.fail(fmt.Errorf("cannot become a child subreaper: %w", err))
	}
	started, err := s.startServe(argv, contain, foreground)
	if s.c != nil {
		defer s.c.close()
	}
	if err != nil {
		return s.fail(err)
	}
	// Started goes first, before the serve's exit can be seen: a serve that
	// exits at once stays a zombie until the reaper runs.
	if started != nil {
		s.send(*started)
	}
	go s.reap()

	requests := make(chan time.Duration, 1)
	go readControl(control, requests)
	var grace time.Duration
	for wait := true; wait; {
		select {
		case g, ok := <-requests:
			grace, wait = g, false
			if !ok { // the gate is gone
				grace = OrphanGrace
			}
		case sig := <-sigs:
			if sig == syscall.SIGTERM {
				grace, wait = OrphanGrace, false
			}
		}
	}
	s.finish(grace)
	return 0
}

// finish stops the serve and reports the stop, after the serve's exit: the
// report is the supervisor's last word, and the gate counts a serve whose
// exit it was not told of before it as lost.
func (s *supervisor) finish(grace time.Duration) {
	r := s.stopAll(grace)
	<-s.told
	if s.tidied != nil {
		<-s.tidied
	}
	s.send(Event{Kind: Done, Report: &r})
}

// startServe starts the serve, or takes over the one the binary's start
// started (package stage1). It returns the Started event to send, nil when
// the first stage sent it.
func (s *supervisor) startServe(argv []string, contain string, foreground bool) (*Event, error) {
	if st := stage1.Started; st != nil {
		s.c = &cgroup{kind: "cgroup2", parent: st.Parent, dir: st.Dir}
		if st.LeaveErr != nil {
			return nil, fmt.Errorf("starting %s: leaving %s: %w", argv[0], st.Dir, st.LeaveErr)
		}
		s.serve = st.PID
		if !st.Sent {
			s.events = nil // the gate is gone
		}
		// What makeCgroup does first, beside the serve now: the stop waits
		// for it (finish), not the supervisor's loop.
		s.tidied = make(chan struct{})
		go func() {
			removeStale(st.Parent)
			close(s.tidied)
		}()
		return nil, nil
	}
	c, why, err := choose(contain, s.self)
	if err != nil {
		return nil, err
	}
	s.c = c
	at, err := s.start(argv, foreground)
	if err != nil {
		return nil, err
	}
	return &Event{Kind: Started, PID: s.serve, StartedNS: at.UnixNano(), Contain: c.name(), Cgroup: c.path(), Why: strings.Join(why, "; ")}, nil
}

// start starts the serve inside the container, from a goroutine locked to
// its OS thread for the supervisor's whole life: the serve's parent-death
// signal fires when that thread ends (go.dev/issue/27505), so only when the
// supervisor itself dies.
func (s *supervisor) start(argv []string, foreground bool) (time.Time, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return time.Time{}, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	attr := &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	if foreground {
		attr.Sys.Foreground, attr.Sys.Ctty = true, 0
	}
	type result struct {
		pid int
		at  time.Time
		err error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread lives until the supervisor exits.
		at := time.Now()
		pid, err := s.c.start(func() (int, error) { return syscall.ForkExec(path, argv, attr) })
		res <- result{pid, at, err}
		<-s.finished
	}()
	r := <-res
	if r.err != nil {
		return time.Time{}, fmt.Errorf("starting %s: %w", argv[0], r.err)
	}
	s.serve = r.pid
	return r.at, nil
}

// reap waits for every child: the serve, and each orphan that came back to
// the supervisor. ECHILD means none is left, and none can come: every
// process the serve started is gone.
func (s *supervisor) reap() {
	// Once reaped, the serve's pid can be a later orphan's (a runaway
	// that forks through the pids): only the first is the serve.
	reaped := false
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			close(s.empty)
			return
		}
		if pid == s.serve && !reaped {
			reaped = true
			s.mu.Lock()
			s.exit = ws
			exit := NewExit(ws, s.stop)
			s.mu.Unlock()
			// A serve that leaves nothing behind is the common end: when no
			// child is left at the moment the serve is reaped, empty is
			// closed first, so that the stop waiting on exited finds it
			// closed and runs no kill round (a freeze and a reading of
			// /proc, some 20 ms) for nothing.
			none := s.reapNoHang()
			if none {
				close(s.empty)
			}
			// Closed before the gate is told: a stop it asks for once it has
			// seen the exit finds the serve gone, and sends no TERM.
			close(s.exited)
			testHookBeforeExited()
			s.send(Event{Kind: Exited, Exit: &exit})
			close(s.told)
			if none {
				return
			}
		}
	}
}

// testHookBeforeExited runs between the serve's exit marked and the gate
// told of it (tests widen that moment).
var testHookBeforeExited = func() {}

// reapNoHang reaps, without waiting, every child that has exited, and
// reports whether none is left (ECHILD).
func (s *supervisor) reapNoHang() bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case err != nil:
			return true
		case pid == 0:
			return false
		}
	}
}

// stopAll stops the serve: TERM to its process group, up to grace for it to
// exit, then KILL to everything the supervisor started, again until nothing
// is left.
func (s *supervisor) stopAll(grace time.Duration) Report {
	r := Report{Contain: s.c.name()}
	select {
	case <-s.exited:
	default:
		s.setStop("TERM")
		r.Signal = "TERM"
		unix.Kill(-s.serve, unix.SIGTERM)
		t := time.NewTimer(grace)
		select {
		case <-s.exited:
			t.Stop()
		case <-t.C:
			s.setStop("KILL")
		}
	}
	start := time.Now()
	seen := map[key]bool{}
	r.Rounds = s.killAll(seen)
	r.KillMS = float64(time.Since(start)) / float64(time.Millisecond)
	<-s.exited
	if r.Signal != "" && s.exit.Signaled() && s.exit.Signal() == syscall.SIGKILL {
		r.Signal = "KILL"
	}
	for k := range seen {
		if k.pid != s.serve {
			r.Swept++
		}
	}
	return r
}

// killAll kills the container's members and the supervisor's descendants,
// round after round, until the supervisor has no child left and the
// container is empty. It returns the rounds it took.
func (s *supervisor) killAll(seen map[key]bool) int {
	var emptySince time.Time
	for round := 1; ; round++ {
		// Nothing is left to kill once every child is reaped (ECHILD: no
		// process below the supervisor, the subreaper, and none can come)
		// and the cgroup is empty: a serve that exited on TERM with nothing
		// of its own left costs no freeze and no reading of /proc.
		select {
		case <-s.empty:
			if s.c.members() == 0 {
				return round - 1
			}
		default:
		}
		before := len(seen)
		s.c.kill(seen)
		killBelow(s.self, seen)
		select {
		case <-s.empty:
			if s.c.members() == 0 {
				return round
			}
			// Nothing of the serve's is left, but a process someone else
			// put into the cgroup: give it a few seconds, not forever.
			if emptySince.IsZero() {
				emptySince = time.Now()
			} else if time.Since(emptySince) > 5*time.Second {
				return round
			}
		default:
		}
		if len(seen) == before {
			// Nothing new: let the killed die and be reaped.
			select {
			case <-s.empty:
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}

func (s *supervisor) setStop(sig string) {
	s.mu.Lock()
	s.stop = sig
	s.mu.Unlock()
}

// fail tells the gate why the serve could not be started.
func (s *supervisor) fail(err error) int {
	s.send(Event{Kind: Failed, Error: err.Error()})
	return 1
}

// send writes one event; once the gate is gone, nowhere.
func (s *supervisor) send(e Event) {
	b, _ := json.Marshal(e)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.events == nil {
		return
	}
	if _, err := s.events.Write(append(b, '\n')); err != nil {
		s.events = nil
	}
}

// readControl passes on each stop the gate asks for, and closes requests
// when the gate is gone.
func readControl(control *os.File, requests chan<- time.Duration) {
	defer close(requests)
	sc := bufio.NewScanner(control)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "stop" {
			if ns, err := strconv.ParseInt(f[1], 10, 64); err == nil && ns >= 0 {
				requests <- time.Duration(ns)
				return
			}
		}
	}
}

func isSocket(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK
}
