//go:build unix

package scripttest

import (
	"os"
	"strings"
	"syscall"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/serve"
)

// KillProc is "killproc TEXT": it kills every process whose command line holds TEXT, with
// the rest of its session, and waits for them to go.
func KillProc(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: killproc TEXT")
	}
	all := serve.List()
	for _, p := range all {
		if p.PID == os.Getpid() || !strings.Contains(p.Command, args[0]) {
			continue
		}
		for _, q := range all {
			if q.PID == p.PID || (q.SID == p.SID && q.SID == p.PID) {
				syscall.Kill(q.PID, syscall.SIGKILL)
			}
		}
	}
	NoProc(ts, false, args)
}

// KillGroup is "killgroup TEXT": SIGKILL to the whole process group of the
// script's own child whose command line holds TEXT (one started with
// setsid, so its group is not the test's), as a terminal or a CI runner
// killing a job does.
func KillGroup(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: killgroup TEXT")
	}
	self := os.Getpid()
	mine := syscall.Getpgrp()
	n := 0
	for _, p := range serve.List() {
		if p.PPID != self || p.State == 'Z' || !strings.Contains(p.Command, args[0]) {
			continue
		}
		if p.PGID == mine {
			ts.Fatalf("killgroup: pid %d is in the test's own process group; start it with setsid", p.PID)
		}
		ts.Logf("killgroup: SIGKILL to process group %d (pid %d)", p.PGID, p.PID)
		syscall.Kill(-p.PGID, syscall.SIGKILL)
		n++
	}
	if n == 0 {
		ts.Fatalf("killgroup: no child of the test holds %q", args[0])
	}
}

// Signal is "signal SIG TEXT": it sends SIG (INT, TERM, KILL, ...) to every
// process whose command line holds TEXT; testscript's own kill knows only
// INT and KILL.
func Signal(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: signal SIG TEXT")
	}
	sig := unix.SignalNum("SIG" + args[0])
	if sig == 0 {
		ts.Fatalf("signal: unknown signal %s", args[0])
	}
	n := 0
	for _, p := range serve.List() {
		if p.PID != os.Getpid() && p.State != 'Z' && strings.Contains(p.Command, args[1]) {
			syscall.Kill(p.PID, sig)
			n++
		}
	}
	if n == 0 {
		ts.Fatalf("signal: no process holds %q", args[1])
	}
}
