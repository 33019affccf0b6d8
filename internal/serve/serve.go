// Package serve starts a serve so that nothing it starts can outlive the
// gate, waits for it to answer its health path, and stops it with nothing
// left behind.
//
// The serve is not the gate's child: between them runs a supervisor (the
// gate's own binary in its supervise mode, see internal/supervise), a child
// subreaper started with a parent-death signal from an OS thread that lives
// as long as it does. The supervisor starts the serve in a process group of
// its own, inside a cgroup made for it where the machine offers one, holds
// the device ticket, and stops the whole tree when the gate asks or dies.
// This package is the gate's side: it starts the supervisor, reads what it
// says (the serve's pid, its exit, how the stop went) and checks from /proc
// that nothing survived.
//
// On Windows there is no supervisor (serve_windows.go): the gate's own
// process starts the serve suspended, puts it in a kill-on-close Job Object
// whose one handle the gate holds, and only then lets it run, so that
// everything the serve starts is in the job and ends with it, a killed gate
// included. The stop is a CTRL_BREAK to the serve's process group, the
// grace, TerminateJobObject, and a bounded wait; survivors are counted from
// the job.
package serve

import (
	"os"
	"time"
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
	// read from it and gets its ^C. On Windows the serve shares the
	// console, in a process group of its own, which Windows keeps from the
	// console's Ctrl+C (Ctrl+Break still reaches it): the caller hands a
	// Ctrl+C on as a CTRL_BREAK to the serve's group.
	Foreground bool
	// Env is the serve's environment, and its supervisor's: nil for the
	// gate's own. The supervisor is told the containment the gate was asked
	// for ($NPU_SERVE_SMOKE_CONTAIN) by its flag, so Env need not hold it.
	Env []string
	// ExtraFiles are held by the supervisor until nothing the serve started
	// is left (the device ticket's lock). The serve does not inherit them:
	// a process that shares a flock(2)ed descriptor can unlock it. On
	// Windows the gate's own process holds them (the Process keeps them
	// until its Stop), and the serve is handed its standard handles alone.
	ExtraFiles []*os.File
}

// StopBound is how long Stop waits, past the grace period, for the
// supervisor to say that nothing is left. A process stuck in a driver can
// take longer to die; the supervisor keeps killing it, and keeps the device
// held, after Stop has counted it a survivor.
const StopBound = 10 * time.Second

// Stopped says how a stop went.
type Stopped struct {
	Exit      string   `json:"exit"`              // how the serve ended
	Signal    string   `json:"signal"`            // the last signal the serve needed: "" (had exited), TERM or KILL; on Windows CTRL_BREAK or TERMINATE (TerminateJobObject)
	StopMS    float64  `json:"stop_ms"`           // from the first signal to nothing left
	Swept     int      `json:"swept"`             // processes besides the serve still alive when the kill began
	Survivors int      `json:"survivors"`         // processes of the serve's still alive at the end, read from /proc (on Windows, from the job): the goal is 0
	Left      []string `json:"left,omitempty"`    // what survived, "pid command" (on Windows "pid image")
	Contain   string   `json:"contain,omitempty"` // the mechanism that killed them
	// SupervisorStopped is how many times the supervisor was found stopped
	// (SIGSTOP, by the serve's tree, say) or frozen (a cgroup v2 freezer)
	// during the stop and continued or thawed.
	SupervisorStopped int `json:"supervisor_stopped,omitempty"`
	// Polite says, on Windows, what the polite stop was: "CTRL_BREAK to
	// process group N", or why none could be sent (no console shared with
	// the serve). Empty on Linux, where Signal says it.
	Polite string `json:"polite,omitempty"`
	// Survived is what survived, as Left says it, one Proc each (on
	// Windows Command is the image's path): a process that does not die,
	// stuck in a driver, is named by its pid and image here, so the caller
	// can say the device may be unhealthy.
	Survived []Proc `json:"-"`
}

// Stop ends the serve and everything it started: the supervisor sends TERM
// to the serve's process group, waits up to grace for it to exit, then
// kills everything the serve started, again until nothing is left. Stop
// waits for that up to grace plus StopBound, then counts from /proc what is
// still alive. Calling it again returns the first result. On Windows: a
// CTRL_BREAK to the serve's process group, up to grace for the serve to
// exit, TerminateJobObject, then up to StopBound for the job to be empty;
// survivors are the job's members then.
func (p *Process) Stop(grace time.Duration) Stopped {
	return p.stopWithin(grace, StopBound)
}

func (p *Process) stopWithin(grace, bound time.Duration) Stopped {
	p.stopOnce.Do(func() { p.stopped = p.stop(grace, bound) })
	return p.stopped
}
