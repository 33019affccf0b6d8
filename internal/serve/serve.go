// Package serve starts a serve so that it cannot outlive the gate, waits for
// it to answer its health path, and stops it with nothing left behind.
//
// The serve runs in a process group of its own, with a parent-death signal
// set from an OS thread that lives as long as the serve. The gate is a child
// subreaper (see BecomeSubreaper), so helpers that detach into a session of
// their own come back to it when their parent dies. Stop signals the group,
// waits a bounded grace period, kills the group, then kills every descendant
// that is left and counts the survivors.
package serve

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Options say what to start.
type Options struct {
	Argv []string // the serve's words, placeholders filled
	Log  *os.File // the serve's stdout and stderr, unless Stdout or Stderr are set
	// Stdin, Stdout and Stderr, when set, are given to the serve as they are
	// (npu-hold runs a person's command on their terminal).
	Stdin, Stdout, Stderr *os.File
	// Foreground makes the serve's process group the terminal's foreground
	// group (Stdin must be the terminal), so a command run at a shell can
	// read from it and gets its ^C.
	Foreground bool
	Env        []string // nil: the gate's own
	// ExtraFiles are inherited by the serve as fds 3, 4, ... (the device
	// ticket's lock, so a serve that escaped its gate still holds it).
	ExtraFiles []*os.File
}

// Process is a started serve.
type Process struct {
	pid     int
	started time.Time
	done    chan struct{} // closed when the serve has exited and been reaped
	state   *os.ProcessState
}

// Start starts the serve. It returns once the serve is running, or with the
// reason it could not be started.
func Start(o Options) (*Process, error) {
	if len(o.Argv) == 0 {
		return nil, errors.New("no serve command")
	}
	cmd := exec.Command(o.Argv[0], o.Argv[1:]...)
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
	cmd.ExtraFiles = o.ExtraFiles
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if o.Foreground && o.Stdin != nil {
		// The child's fd 0 is the terminal: it becomes its foreground group.
		cmd.SysProcAttr.Foreground = true
		cmd.SysProcAttr.Ctty = 0
	}
	p := &Process{done: make(chan struct{})}
	started := make(chan error, 1)
	// Pdeathsig fires when the thread that forked the child ends, not the
	// process (go.dev/issue/27505). This goroutine stays locked to its thread
	// and lives until the serve has exited, so the signal fires only when the
	// gate itself dies.
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread is torn down with this goroutine, after
		// the serve is gone.
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		p.pid = cmd.Process.Pid
		p.started = time.Now()
		started <- nil
		cmd.Wait()
		p.state = cmd.ProcessState
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %s: %w", o.Argv[0], err)
	}
	return p, nil
}

// PID is the serve's process id, and its process group's.
func (p *Process) PID() int { return p.pid }

// Done is closed once the serve has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit describes how the serve ended: "exited with status 3", "killed by
// signal 9 (killed)"; "" while it runs.
func (p *Process) Exit() string {
	select {
	case <-p.done:
	default:
		return ""
	}
	return describe(p.state)
}

// ExitCode is the serve's exit status, or -1 when a signal ended it or it
// still runs.
func (p *Process) ExitCode() int {
	select {
	case <-p.done:
		return p.state.ExitCode()
	default:
		return -1
	}
}

func describe(s *os.ProcessState) string {
	ws, ok := s.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return s.String()
	case ws.Signaled():
		return fmt.Sprintf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	default:
		return fmt.Sprintf("exited with status %d", ws.ExitStatus())
	}
}

// Stopped says how a stop went.
type Stopped struct {
	Exit      string   `json:"exit"`           // how the serve ended
	Signal    string   `json:"signal"`         // the last signal the group needed: "" (had exited), TERM or KILL
	StopMS    float64  `json:"stop_ms"`        // from the first signal to nothing left
	Swept     int      `json:"swept"`          // descendants killed after the group
	Survivors int      `json:"survivors"`      // processes still alive at the end: the goal is 0
	Left      []string `json:"left,omitempty"` // what survived, "pid command"
}

// Stop ends the serve and everything it started: TERM to its process group,
// up to grace for it to exit, KILL to the group, then KILL to every
// descendant that is left (those that made sessions of their own included).
func (p *Process) Stop(grace time.Duration) Stopped {
	start := time.Now()
	var st Stopped
	// Who to hunt down afterwards: the serve's tree as it is now.
	tree := Descendants(p.pid)
	select {
	case <-p.done:
	default:
		st.Signal = "TERM"
		unix.Kill(-p.pid, unix.SIGTERM)
		t := time.NewTimer(grace)
		select {
		case <-p.done:
			t.Stop()
		case <-t.C:
		}
	}
	// What is still there besides the leader was left behind: count it.
	before := leftBehind(tree, p.pid)
	// KILL the group whether or not the leader has gone: its members may not
	// have.
	if err := unix.Kill(-p.pid, unix.SIGKILL); err == nil {
		select {
		case <-p.done:
			if st.Signal == "TERM" && p.state != nil && signaledBy(p.state, syscall.SIGKILL) {
				st.Signal = "KILL"
			}
		case <-time.After(5 * time.Second):
		}
	}
	st.Exit = p.Exit()
	swept, left := sweep(tree, p.pid, 2*time.Second)
	for pid := range swept {
		before[pid] = true
	}
	st.Swept, st.Left = len(before), left
	st.Survivors = len(st.Left)
	st.StopMS = float64(time.Since(start)) / float64(time.Millisecond)
	return st
}

func signaledBy(s *os.ProcessState, sig syscall.Signal) bool {
	ws, ok := s.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// BecomeSubreaper makes the calling process a child subreaper: orphaned
// descendants are re-parented to it rather than to init, so Stop can find and
// reap them.
func BecomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// leftBehind is what is alive of the serve's group and tree besides the
// leader itself.
func leftBehind(tree []Proc, pgid int) map[int]bool {
	out := map[int]bool{}
	for _, pr := range List() {
		if pr.PID != pgid && pr.PID != os.Getpid() && pr.State != 'Z' && (pr.PGID == pgid || inTree(tree, pr)) {
			out[pr.PID] = true
		}
	}
	return out
}

// sweep kills what is left of a serve: the processes of tree still alive,
// anything still in its process group, and orphans re-parented to this
// process (a subreaper). It reaps the ones that are its children and returns
// the ones it killed and what survived.
func sweep(tree []Proc, pgid int, within time.Duration) (killed map[int]bool, left []string) {
	self := os.Getpid()
	deadline := time.Now().Add(within)
	seen := map[int]bool{}
	for {
		var alive []Proc
		for _, pr := range List() {
			switch {
			case pr.PID == self:
			case pr.PID == pgid:
				// The serve itself is reaped by its own Wait, never here.
				if pr.State != 'Z' {
					alive = append(alive, pr)
				}
			case pr.State == 'Z':
				if pr.PPID == self {
					unix.Wait4(pr.PID, nil, unix.WNOHANG, nil)
				}
			case pr.PGID == pgid || pr.PPID == self || inTree(tree, pr):
				alive = append(alive, pr)
			}
		}
		if len(alive) == 0 || time.Now().After(deadline) {
			for _, pr := range alive {
				left = append(left, fmt.Sprintf("%d %s", pr.PID, pr.Command))
			}
			return seen, left
		}
		for _, pr := range alive {
			if pr.PID != pgid {
				seen[pr.PID] = true
			}
			unix.Kill(pr.PID, unix.SIGKILL)
			if pr.PPID == self && pr.PID != pgid {
				unix.Wait4(pr.PID, nil, 0, nil)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func inTree(tree []Proc, pr Proc) bool {
	for _, t := range tree {
		if t.PID == pr.PID && t.Start == pr.Start {
			return true
		}
	}
	return false
}

// State is how the serve ended; nil while it runs.
func (p *Process) State() *os.ProcessState {
	select {
	case <-p.done:
		return p.state
	default:
		return nil
	}
}
