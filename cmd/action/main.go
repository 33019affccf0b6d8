// Command npu-serve-smoke is a release gate for LLM inference serves: it
// starts the serve, asks it a few questions, measures it from the stream and
// fails when the serve took the slow route or decodes below a floor.
//
//	npu-serve-smoke run [flags]          the gate (in GitHub Actions, inputs from INPUT_*)
//	npu-serve-smoke judge DIR [flags]    re-judge a finished run's out directory
//	npu-serve-smoke demo [--route slow]  the gate against the built-in simulated serve
//
// Exit status: 0 PASS, 1 FAIL, 2 bad input (nothing was started).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	// The supervisor runs from its init, before the packages it does not use.
	_ "github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise/early"
)

func main() {
	os.Exit(mainCode())
}

// mainCode runs the command with this process's arguments, environment and
// streams. SIGINT and SIGTERM (the runner's cancel) cancel the run's context:
// the gate stops the serve, releases the device and reports the run as
// cancelled.
func mainCode() int {
	if err := hideTokenCommand(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "npu-serve-smoke: hiding the environment from other processes of this user (%s): %v\n", hideHow, err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
}

// hideTokenCommand hides this process's environment and memory from the
// other processes of its user (hideProcess: on Linux not dumpable, prctl
// PR_SET_DUMPABLE 0, so /proc/PID/environ and memory are root's alone; on
// Windows a process DACL that gives them no memory access) when args name
// a command that holds the token (run, record, publish, report), from its
// start. Any process of this user reads them otherwise: one a serve left
// behind, or the serve of another job on the same runner machine (runners
// of one user), which read publish's and report's environment, and the
// gate's until it started its serve. The simulated serve stays readable
// (the witness reads a serve's memory maps), and so do judge and demo,
// which hold none.
func hideTokenCommand(args []string) error {
	if len(args) == 0 {
		return nil
	}
	switch args[0] {
	case "run", "record", "publish", "report":
		return hideProcess()
	}
	return nil
}
