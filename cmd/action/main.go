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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
}
