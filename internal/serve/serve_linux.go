package serve

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise/stage1"
)

// Process is a started serve, seen through its supervisor.
type Process struct {
	pid     int    // the serve's, and its process group's
	super   int    // the supervisor's
	since   uint64 // the supervisor's start time (clock ticks after boot)
	started time.Time
	contain supervise.Event // the started event: how the serve is held

	ctl      *os.File              // the control socket: requests to the supervisor, its events back
	done     chan struct{}         // closed when the serve has exited
	exit     supervise.Exit        // how, once done
	report   chan supervise.Report // the supervisor's report of its stop
	gone     chan struct{}         // closed when the supervisor has exited and been reaped
	ended    chan struct{}         // closed once the supervisor is gone and all it said was read
	gonehow  string                // how the supervisor ended
	stopOnce sync.Once
	stopped  Stopped
	// leaveStopped keeps the stop from continuing a stopped supervisor
	// (tests of what is counted when the supervisor cannot act).
	leaveStopped bool
}

// Start starts the serve under its supervisor. It returns once the serve is
// running, or with the reason it could not be started.
func Start(o Options) (*Process, error) {
	if len(o.Argv) == 0 {
		return nil, errors.New("no serve command")
	}
	// The serve runs as this user, and could read this process's
	// environment (the token and the inputs inside a step) and memory from
	// /proc, or trace it: a process that is not dumpable is root's there.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("hiding the environment from the serve (prctl PR_SET_DUMPABLE): %w", err)
	}
	cmd := supervisorCommand(o)
	ctl, theirs, err := controlSocket()
	if err != nil {
		return nil, err
	}
	cmd.ExtraFiles = append([]*os.File{theirs}, o.ExtraFiles...)
	p := &Process{ctl: ctl, done: make(chan struct{}), report: make(chan supervise.Report, 1), gone: make(chan struct{}), ended: make(chan struct{})}
	spawned := make(chan error, 1)
	// Pdeathsig fires when the thread that forked the child ends, not the
	// process (go.dev/issue/27505). This goroutine stays locked to its thread
	// and lives until the supervisor has exited, so the signal fires only
	// when the gate itself dies.
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread is torn down with this goroutine, after
		// the supervisor is gone.
		// Started and counted as a supervisor in one step: a look for
		// orphans (another serve's stop, in the same gate) never sees it
		// in between.
		if err := supervisors.start(cmd.Start, func() int { return cmd.Process.Pid }); err != nil {
			spawned <- err
			return
		}
		p.super = cmd.Process.Pid
		spawned <- nil
		cmd.Wait()
		supervisors.remove(p.super)
		p.gonehow = describe(cmd.ProcessState)
		close(p.gone)
	}()
	err = <-spawned
	// The supervisor's end is its own now: the gate's reads its end of
	// file when the supervisor exits.
	theirs.Close()
	if err != nil {
		ctl.Close()
		return nil, fmt.Errorf("starting the supervisor of %s: %w", o.Argv[0], err)
	}
	started := make(chan supervise.Event, 1)
	go p.listen(ctl, started)
	ev := <-started
	if ev.Kind != supervise.Started {
		// Whatever it started, if anything, it stops at the end of its
		// control socket.
		ctl.Close()
		<-p.gone
		if ev.Error == "" {
			ev.Error = "its supervisor " + p.gonehow
		}
		return nil, errors.New(ev.Error)
	}
	p.pid, p.contain = ev.PID, ev
	if pr, ok := stat(p.super); ok {
		p.since = pr.Start
	}
	p.started = time.Unix(0, ev.StartedNS)
	return p, nil
}

// closeWrite ends the gate's side of the control socket: the supervisor
// reads its end of file, and its events can still be read.
func (p *Process) closeWrite() {
	if rc, err := p.ctl.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.Shutdown(int(fd), unix.SHUT_WR) })
	}
}

// controlSocket is the gate's end and the supervisor's of the socket they
// talk on: the gate's requests one way, the supervisor's events the other.
// A socket, not pipes: a process of the same user (the serve) can open
// another's pipe through /proc/PID/fd/N, and read the gate's stop or write
// events in the supervisor's name; a socket cannot be opened that way
// (where the serve may trace its supervisor it can still take a copy,
// pidfd_getfd: listen takes each event once, and nothing forged passes a
// run, see docs/runner.md). The
// gate's end is in Go's poller, so that closing it (the end of file that
// tells the supervisor the gate is done) is not held up by its reader.
func controlSocket() (ctl, theirs *os.File, err error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("the supervisor's control socket: %w", err)
	}
	if err := unix.SetNonblock(pair[0], true); err != nil {
		unix.Close(pair[0])
		unix.Close(pair[1])
		return nil, nil, fmt.Errorf("the supervisor's control socket: %w", err)
	}
	return os.NewFile(uintptr(pair[0]), "control"), os.NewFile(uintptr(pair[1]), "control"), nil
}

// supervisorCommand is the command that starts the supervisor of o.
func supervisorCommand(o Options) *exec.Cmd {
	args := []string{supervise.Command, "--held", strconv.Itoa(len(o.ExtraFiles))}
	if m := os.Getenv(supervise.ContainEnv); m != "" {
		args = append(args, "--contain", m)
	}
	if o.Foreground && o.Stdin != nil {
		args = append(args, "--foreground")
	}
	args = append(append(args, "--"), o.Argv...)
	// This binary, whatever its name or path: /proc/self/exe is the file
	// running now, even if it was replaced since. Its name stays the one it
	// was run by (a test binary's commands go by it).
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Args[0] = os.Args[0]
	cmd.Stdout, cmd.Stderr = o.Log, o.Log
	if o.Stdin != nil {
		cmd.Stdin = o.Stdin
	}
	if o.Stdout != nil {
		cmd.Stdout = o.Stdout
	}
	if o.Stderr != nil {
		cmd.Stderr = o.Stderr
	}
	cmd.Env = o.Env
	// TERM is the supervisor's cue to stop the serve; the gate's death sends
	// it, as does the control socket's end of file. The supervisor is in a
	// process group of its own, so a SIGKILL to the gate's group (a
	// terminal's or a CI runner's kill of the job) does not reach it: it
	// sees the gate die and stops the serve's tree. It keeps the gate's
	// session, so it can still make the serve the terminal's foreground
	// group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	return cmd
}

// listen reads the supervisor's events: the first goes to started, the
// serve's exit closes done, the stop's report goes to p.report. When the
// supervisor is gone without having said how the serve ended, the serve
// counts as lost with it.
func (p *Process) listen(r *os.File, started chan<- supervise.Event) {
	defer close(p.ended)
	defer r.Close()
	first, exited, reported := true, false, false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var ev supervise.Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if first {
			first = false
			started <- ev
			continue
		}
		// Each taken once, the first: a serve that may trace its
		// supervisor (no Yama, or ptrace_scope 0) can take a copy of its
		// end of the socket (pidfd_getfd) and write there too. A forged
		// exit or report can end the run sooner, not pass it: the stop
		// counts survivors from /proc.
		switch ev.Kind {
		case supervise.Exited:
			if ev.Exit != nil && !exited {
				exited = true
				p.exit = *ev.Exit
				close(p.done)
			}
		case supervise.Done:
			if ev.Report != nil && !reported {
				reported = true
				p.report <- *ev.Report
			}
		}
	}
	<-p.gone
	if first {
		started <- supervise.Event{}
		return
	}
	if !exited {
		p.exit = supervise.Exit{Code: -1, Lost: "its supervisor (pid " + strconv.Itoa(p.super) + ") " + p.gonehow}
		close(p.done)
	}
}

// PID is the serve's process id, and its process group's.
func (p *Process) PID() int { return p.pid }

// SupervisorPID is the process id of the serve's supervisor, its parent.
func (p *Process) SupervisorPID() int { return p.super }

// Contain names the mechanism that holds the serve's tree (cgroup2,
// freezer, descendants), the cgroup when there is one, and why the
// mechanisms before it were not used.
func (p *Process) Contain() (mechanism, cgroup, why string) {
	return p.contain.Contain, p.contain.Cgroup, p.contain.Why
}

// Early is true when the supervisor's first stage, at the binary's start,
// started the serve (package stage1); false when the supervisor did.
func (p *Process) Early() bool { return p.contain.Early }

// Done is closed once the serve has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit describes how the serve ended: "exited with status 3", "killed by
// signal 11 (segmentation fault)", "stopped by the gate (TERM)"; "" while it
// runs.
func (p *Process) Exit() string {
	select {
	case <-p.done:
		return p.exit.String()
	default:
		return ""
	}
}

// ExitCode is the serve's exit status, or -1 when a signal ended it or it
// still runs.
func (p *Process) ExitCode() int {
	select {
	case <-p.done:
		return p.exit.Code
	default:
		return -1
	}
}

// Signal is the signal that ended the serve; 0 when it exited, or still
// runs.
func (p *Process) Signal() syscall.Signal {
	select {
	case <-p.done:
		return syscall.Signal(p.exit.Signal)
	default:
		return 0
	}
}

func describe(s *os.ProcessState) string {
	ws, ok := s.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return s.String()
	case ws.Signaled():
		return fmt.Sprintf("was killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	default:
		return fmt.Sprintf("exited with status %d", ws.ExitStatus())
	}
}

func (p *Process) stop(grace, within time.Duration) Stopped {
	start := time.Now()
	st := Stopped{Contain: p.contain.Contain}
	// Who to look for afterwards: the tree as it is now.
	tree := Descendants(p.super)
	// A stopped supervisor (SIGSTOP: anything the serve started, running
	// as the same user, can send it) stops nothing and keeps the device:
	// it is continued, now and while the stop goes on.
	p.resume(&st)
	// A supervisor that is gone already cannot read it: its end of file is
	// on its way.
	p.ctl.WriteString(supervise.StopRequest(grace))
	bound := time.NewTimer(grace + within)
	defer bound.Stop()
	look := time.NewTicker(20 * time.Millisecond)
	defer look.Stop()
	reported := false
wait:
	for {
		select {
		case r := <-p.report:
			// Nothing of the serve's is left, in the supervisor's word; its
			// exit is waited for below, once /proc is read for survivors.
			st.Signal, st.Swept, st.Contain = r.Signal, r.Swept, r.Contain
			reported = true
			break wait
		case <-p.ended:
			select {
			case r := <-p.report:
				st.Signal, st.Swept, st.Contain = r.Signal, r.Swept, r.Contain
			default:
				// The supervisor died before it could report: kill what
				// it left, and what came back to the gate, the subreaper,
				// when it died. It has the rest of the stop's bound, and two
				// seconds at least: a runaway that forks as fast as the
				// sweep reads /proc takes rounds to catch.
				until := start.Add(grace + within)
				if least := time.Now().Add(2 * time.Second); until.Before(least) {
					until = least
				}
				// Swept counts what the serve left, not the serve: one
				// whose supervisor died is killed by its parent-death
				// signal, and may still be dying when the sweep begins.
				killed := sweep(p.pid, tree, p.contain.Cgroup, p.since, until)
				delete(killed, p.pid)
				st.Swept = len(killed)
			}
			break wait
		case <-look.C:
			p.resume(&st)
			p.thaw(&st)
		case <-bound.C:
			break wait
		}
	}
	// The end of what the gate asks (the supervisor reads its end of
	// file), not of what it is told: events still to come are read.
	p.closeWrite()
	st.StopMS = float64(time.Since(start)) / float64(time.Millisecond)
	select {
	case <-p.done:
		st.Exit = p.Exit()
	default:
		st.Exit = "still running after " + time.Since(start).Round(time.Millisecond).String()
	}
	for _, pr := range p.survivors(tree) {
		st.Left = append(st.Left, fmt.Sprintf("%d %s", pr.PID, pr.Command))
		st.Survived = append(st.Survived, pr)
	}
	st.Survivors = len(st.Left)
	if reported {
		// The supervisor exits once it has reported (it holds the ticket
		// until then), within what is left of the stop's bound.
		rest := time.NewTimer(time.Until(start.Add(grace + within)))
		defer rest.Stop()
		select {
		case <-p.gone:
		case <-rest.C:
		}
	}
	return st
}

// resume continues the supervisor when it is stopped (state T), and counts
// it in st.
func (p *Process) resume(st *Stopped) {
	if !p.tending() {
		return
	}
	if pr, ok := stat(p.super); ok && pr.State == 'T' && pr.Start == p.since {
		unix.Kill(p.super, unix.SIGCONT)
		st.SupervisorStopped++
	}
}

// tending is true while the supervisor is there to be continued or thawed
// (a test may ask that it be left stopped).
func (p *Process) tending() bool {
	select {
	case <-p.gone:
		return false
	default:
	}
	return !p.leaveStopped
}

// thaw thaws the cgroup v2 freezer over the supervisor, and counts it in st
// as a stop (it is one: the supervisor does nothing while frozen). The
// serve's user owns the cgroup above the serve's on a delegated machine:
// the serve can make a cgroup of its own there, move its supervisor into
// it and freeze it, which SIGCONT does not undo. It is looked for while a
// stop waits past its first look, not on the way of every stop.
func (p *Process) thaw(st *Stopped) {
	if !p.tending() {
		return
	}
	if pr, ok := stat(p.super); !ok || pr.Start != p.since {
		return
	}
	if thawAbove(p.super) {
		st.SupervisorStopped++
	}
}

// thawAbove writes 0 to each cgroup.freeze that says 1 in the cgroup v2 of
// process pid and the cgroups above it (freezing one freezes everything
// below), and reports whether it found one. Where the cgroup cannot be read
// as the supervisor's first stage reads its own (no cgroup v2, a mount
// showing a subtree), it does nothing.
func thawAbove(pid int) bool {
	cg, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	dir, why := stage1.CgroupParent(string(cg), string(mi))
	if why != "" {
		return false
	}
	found := false
	// The root cgroup has no cgroup.freeze: the walk ends there.
	for ; dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.freeze"))
		if err != nil {
			break
		}
		if strings.TrimSpace(string(b)) == "1" {
			if stage1.WriteCgroupFile(filepath.Join(dir, "cgroup.freeze"), "0") == nil {
				found = true
			}
		}
	}
	return found
}

// SupervisorRunning reports whether the serve's supervisor still runs, and
// is not stopped: it then keeps killing what is left of the serve's, and
// keeps the device held until nothing is.
func (p *Process) SupervisorRunning() bool {
	select {
	case <-p.gone:
		return false
	default:
	}
	pr, ok := stat(p.super)
	return ok && pr.State != 'T' && pr.State != 'Z'
}

// survivors is what is alive of the serve's, read from /proc rather than
// taken from the supervisor's word: what is in the serve's cgroup, the
// supervisor's descendants while it runs, the serve's process group and
// session, and what was in its tree when the stop began. The cgroup is read
// first and each of its processes looked up at once, so a process that
// keeps forking is seen there even when a walk of /proc misses it.
func (p *Process) survivors(tree []Proc) []Proc {
	seen := map[int]bool{os.Getpid(): true, p.super: true} // the supervisor is no survivor: it holds the device until they are gone
	var out []Proc
	add := func(pr Proc) {
		if !seen[pr.PID] && pr.State != 'Z' {
			seen[pr.PID] = true
			out = append(out, pr)
		}
	}
	for _, pid := range cgroupPIDs(p.contain.Cgroup) {
		if pr, ok := stat(pid); ok {
			add(pr)
		}
	}
	// One reading of /proc for the rest, taken as a look for orphans
	// takes it (under the supervisors' lock).
	supervisors.mu.Lock()
	all := snapshot()
	orphaned := orphansIn(all, p.since)
	supervisors.mu.Unlock()
	select {
	case <-p.gone:
	default:
		for _, pr := range below(all, p.super) {
			add(pr)
		}
	}
	for _, pr := range all {
		if pr.PGID == p.pid || pr.SID == p.pid || inTree(tree, pr) {
			add(pr)
		}
	}
	for _, pr := range orphaned {
		add(pr)
	}
	for i := range out {
		out[i] = withCommand(out[i])
	}
	return out
}

// sweep kills what a supervisor that died left of the serve: its process
// group and session, its cgroup, and what was in its tree, until none of
// them is left or until has passed. Orphans come back to the gate, a
// subreaper (BecomeSubreaper): it reaps them. It returns the processes it
// killed.
func sweep(pgid int, tree []Proc, cgroup string, since uint64, until time.Time) map[int]bool {
	self := os.Getpid()
	killed := map[int]bool{}
	quiet := 0
	for ; time.Now().Before(until); time.Sleep(10 * time.Millisecond) {
		inCgroup := map[int]bool{}
		for _, pid := range cgroupPIDs(cgroup) {
			inCgroup[pid] = true
		}
		orphaned := map[int]bool{}
		for _, pr := range orphans(since) {
			orphaned[pr.PID] = true
		}
		var alive []Proc
		for _, pr := range snapshot() {
			theirs := pr.PGID == pgid || pr.SID == pgid || inCgroup[pr.PID] || orphaned[pr.PID] || inTree(tree, pr)
			switch {
			case pr.PID == self || !theirs:
			case pr.State == 'Z':
				if pr.PPID == self {
					unix.Wait4(pr.PID, nil, unix.WNOHANG, nil)
				}
			default:
				alive = append(alive, pr)
			}
		}
		// A runaway in the middle of its fork can be missed by one
		// reading of /proc (the parent gone, the child not yet listed):
		// none seen three rounds running is none left.
		if len(alive) == 0 {
			if quiet++; quiet == 3 {
				break
			}
			continue
		}
		quiet = 0
		for _, pr := range alive {
			killed[pr.PID] = true
			unix.Kill(pr.PID, unix.SIGKILL)
		}
	}
	return killed
}

// cgroupPIDs is the processes in a cgroup directory; none for "".
func cgroupPIDs(dir string) []int {
	if dir == "" {
		return nil
	}
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

func inTree(tree []Proc, pr Proc) bool {
	for _, t := range tree {
		if t.PID == pr.PID && t.Start == pr.Start {
			return true
		}
	}
	return false
}

// Prepare starts, in the background, what the process's first Start does
// before its fork: Go's check, once a process, that pidfds work (package
// os: pidfd_open, waitid, pidfd_send_signal and a vfork'd child that exits
// at once; 0.4-0.6 ms on a small virtual machine), and the decoding of the
// supervisor's events (supervise.WarmEvents). The gate calls it as it
// begins to read its configuration, so the supervisor's start and its
// first event do not wait for them.
func Prepare() {
	supervise.WarmEvents()
	go func() {
		// os.FindProcess takes a pidfd, after that check.
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			p.Release()
		}
	}()
}

// BecomeSubreaper makes the calling process a child subreaper: should a
// supervisor die, what it held is re-parented to the gate rather than to
// init, so Stop can find and reap it.
func BecomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// supervisors is the set of this process's live supervisors: the only
// children the gate starts. Any other process below the gate came back to
// it, the subreaper, from a supervisor that died.
var supervisors = pidSet{m: map[int]bool{}}

type pidSet struct {
	mu sync.Mutex
	m  map[int]bool
}

// start starts a child and adds its pid, under the set's lock, which a
// look for orphans holds too.
func (s *pidSet) start(start func() error, pid func() int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := start(); err != nil {
		return err
	}
	s.m[pid()] = true
	return nil
}

func (s *pidSet) remove(pid int) {
	s.mu.Lock()
	delete(s.m, pid)
	s.mu.Unlock()
}

// orphans is every live process below this one, but for its live
// supervisors and their trees, that started no earlier than since (the
// dead supervisor's start): what a supervisor that died left, re-parented to
// the gate because it is a child subreaper (BecomeSubreaper).
func orphans(since uint64) []Proc {
	if since == 0 {
		return nil
	}
	// The set is held while /proc is read: a supervisor started meanwhile
	// waits, rather than show up as a child of the gate that is none of
	// its supervisors.
	supervisors.mu.Lock()
	defer supervisors.mu.Unlock()
	return orphansIn(snapshot(), since)
}

// orphansIn is orphans, from all, a reading of /proc taken while the
// supervisors' lock was held.
func orphansIn(all []Proc, since uint64) []Proc {
	if since == 0 {
		return nil
	}
	self := os.Getpid()
	children := map[int][]Proc{}
	for _, pr := range all {
		children[pr.PPID] = append(children[pr.PPID], pr)
	}
	var out []Proc
	for queue := children[self]; len(queue) > 0; {
		pr := queue[0]
		queue = queue[1:]
		if pr.PPID == self && supervisors.m[pr.PID] {
			continue // a live supervisor holds its own tree
		}
		queue = append(queue, children[pr.PID]...)
		if pr.State != 'Z' && pr.Start >= since {
			out = append(out, pr)
		}
	}
	return out
}

// Tree is the serve's processes now, as the supervisor holds them: the
// members of its cgroup where it has one, else the supervisor's
// descendants (the supervisor itself left out: it is not the serve).
func (p *Process) Tree() []int {
	if pids := cgroupPIDs(p.contain.Cgroup); len(pids) > 0 {
		return pids
	}
	var out []int
	for _, pr := range Descendants(p.super) {
		if pr.PID != p.super && pr.State != 'Z' {
			out = append(out, pr.PID)
		}
	}
	return out
}
