package scripttest

import (
	"os"
	"slices"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/windows"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/serve"
)

// KillProc is "killproc TEXT": it ends (TerminateProcess) every process
// whose command line holds TEXT, with every process it started (Windows
// has no sessions to kill: its tree, by parent pid), and waits for them to
// go.
func KillProc(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: killproc TEXT")
	}
	all := serve.List()
	for _, p := range all {
		if p.PID != os.Getpid() && strings.Contains(p.Command, args[0]) {
			for _, pid := range tree(all, p.PID) {
				terminate(pid)
			}
		}
	}
	NoProc(ts, false, args)
}

// KillGroup is "killgroup TEXT": it ends the script's own child whose
// command line holds TEXT and every process it started, by parent pid, as
// a CI runner cancelling a job on Windows does (actions/runner's
// WindowsKillProcessTree).
func KillGroup(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: killgroup TEXT")
	}
	all := serve.List()
	n := 0
	for _, p := range all {
		if p.PPID != os.Getpid() || !strings.Contains(p.Command, args[0]) {
			continue
		}
		ts.Logf("killgroup: TerminateProcess to pid %d and what it started", p.PID)
		for _, pid := range tree(all, p.PID) {
			terminate(pid)
		}
		n++
	}
	if n == 0 {
		ts.Fatalf("killgroup: no child of the test holds %q", args[0])
	}
}

// Signal is "signal SIG TEXT": KILL ends (TerminateProcess) every process
// whose command line holds TEXT; INT and BREAK send CTRL_C_EVENT or
// CTRL_BREAK_EVENT to the process group each leads (a console's); Windows
// has no other signals.
func Signal(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: signal SIG TEXT")
	}
	var send func(pid int) error
	switch args[0] {
	case "KILL":
		send = func(pid int) error { terminate(pid); return nil }
	case "INT":
		send = func(pid int) error { return windows.GenerateConsoleCtrlEvent(windows.CTRL_C_EVENT, uint32(pid)) }
	case "BREAK", "TERM":
		send = func(pid int) error { return windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(pid)) }
	default:
		ts.Fatalf("signal: %s has no meaning on Windows (KILL, INT, BREAK or TERM)", args[0])
	}
	n := 0
	for _, p := range serve.List() {
		if p.PID != os.Getpid() && strings.Contains(p.Command, args[1]) {
			if err := send(p.PID); err != nil {
				ts.Fatalf("signal %s to pid %d: %v", args[0], p.PID, err)
			}
			n++
		}
	}
	if n == 0 {
		ts.Fatalf("signal: no process holds %q", args[1])
	}
}

// tree is root and every process all shows started by it or by one of its
// own, by parent pid.
func tree(all []serve.Proc, root int) []int {
	pids := []int{root}
	for grew := true; grew; {
		grew = false
		for _, q := range all {
			if slices.Contains(pids, q.PPID) && !slices.Contains(pids, q.PID) {
				pids = append(pids, q.PID)
				grew = true
			}
		}
	}
	return pids
}

// terminate ends pid, if it may.
func terminate(pid int) {
	h, err := windows.OpenProcess(windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		return
	}
	windows.TerminateProcess(h, 1)
	windows.CloseHandle(h)
}
