package supervise

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise/stage1"
)

// The supervisor's descriptors, as its parent hands them over: the control
// socket, both ways (the gate's requests, one a line; the supervisor's
// events, JSON lines), then the files the supervisor holds until nothing it
// started is left (the device ticket), which the serve does not inherit.
const (
	ControlFD = stage1.ControlFD
	HeldFD    = stage1.HeldFD
)

// Event kinds, in the order they come.
const (
	Started = "started" // the serve runs: PID, StartedNS, Contain, Cgroup, Why, Early
	Failed  = "failed"  // the serve could not be started: Error
	Exited  = "exited"  // the serve itself ended: Exit
	Done    = "stopped" // nothing the supervisor started is left: Report
)

// Event is one line the supervisor writes on the control socket.
type Event struct {
	Kind      string  `json:"kind"`
	PID       int     `json:"pid,omitempty"`        // the serve's pid, also its process group
	StartedNS int64   `json:"started_ns,omitempty"` // when the serve was started, Unix nanoseconds
	Contain   string  `json:"contain,omitempty"`    // the mechanism that holds the serve's tree
	Cgroup    string  `json:"cgroup,omitempty"`     // the cgroup it runs in, when there is one
	Why       string  `json:"why,omitempty"`        // why the mechanisms before Contain were not used
	Early     bool    `json:"early,omitempty"`      // the serve was started by the binary's start (package stage1)
	Error     string  `json:"error,omitempty"`
	Exit      *Exit   `json:"exit,omitempty"`
	Report    *Report `json:"report,omitempty"`
}

// WarmEvents builds, in the background, what encoding/json builds for the
// events on its first use (the encoder and decoder of Event and the types
// it holds): the first event, Started, is on the way from the gate's start
// to the serve's, its encoding in the supervisor and its decoding in the
// gate. Each calls it while it has other work, or none, to wait on.
func WarmEvents() {
	go func() {
		b, err := json.Marshal(Event{Kind: Started, Exit: &Exit{}, Report: &Report{}})
		if err == nil {
			var ev Event
			json.Unmarshal(b, &ev)
		}
	}()
}

// Exit is how the serve ended, and what the stop had sent it by then.
type Exit struct {
	Code   int `json:"code"`   // exit status; -1 when a signal ended it
	Signal int `json:"signal"` // the signal that ended it; 0 when it exited
	// Stop is what the stop had sent when the serve ended: "" nothing,
	// "TERM", or "KILL" (after TERM).
	Stop string `json:"stop,omitempty"`
	// Lost, set by the gate, says why nobody saw the serve end: its
	// supervisor died first.
	Lost string `json:"lost,omitempty"`
}

// NewExit reads a wait status; stop is the last signal the stop had sent.
func NewExit(ws syscall.WaitStatus, stop string) Exit {
	if ws.Signaled() {
		return Exit{Code: -1, Signal: int(ws.Signal()), Stop: stop}
	}
	return Exit{Code: ws.ExitStatus(), Stop: stop}
}

// String says how the serve ended, and whether it was the stop's doing:
// "exited with status 3", "killed by signal 11 (segmentation fault)",
// "stopped by the gate (TERM)", "exited with status 0 on the gate's TERM".
func (e Exit) String() string {
	sig := syscall.Signal(e.Signal)
	switch {
	case e.Lost != "":
		return "ended unseen: " + e.Lost
	case sig == syscall.SIGTERM && e.Stop != "", sig == syscall.SIGKILL && e.Stop == "KILL":
		return fmt.Sprintf("stopped by the gate (%s)", SignalName(sig))
	case e.Signal != 0:
		return fmt.Sprintf("killed by signal %d (%v)", e.Signal, sig)
	case e.Stop != "":
		return fmt.Sprintf("exited with status %d on the gate's %s", e.Code, e.Stop)
	default:
		return fmt.Sprintf("exited with status %d", e.Code)
	}
}

// Report says how a stop went, as the supervisor saw it.
type Report struct {
	Signal  string  `json:"signal"`  // the last signal the serve needed: "" (had exited), TERM or KILL
	Swept   int     `json:"swept"`   // processes besides the serve still alive when the kill began
	Rounds  int     `json:"rounds"`  // kill rounds until nothing was left
	KillMS  float64 `json:"kill_ms"` // from the kill to nothing left
	Contain string  `json:"contain"` // the mechanism that killed them
}

// StopRequest is the control line asking for a stop with a grace period.
func StopRequest(grace time.Duration) string {
	return fmt.Sprintf("stop %d\n", grace.Nanoseconds())
}

// SignalName is TERM for SIGTERM, KILL for SIGKILL.
func SignalName(s syscall.Signal) string {
	return strings.TrimPrefix(unix.SignalName(s), "SIG")
}
