package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/sethvargo/go-githubactions"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/console"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakellm"
)

// Exit codes.
const (
	exitPass  = 0
	exitFail  = 1
	exitUsage = 2
)

const usage = `usage:
  npu-serve-smoke run [flags]           start the serve, probe it, judge it (in GitHub Actions with no
                                        arguments, the flags come from the action's inputs)
  npu-serve-smoke record [flags]        the run's flags, on the trusted route: records a reference for
                                        --reference (content and release judged; route, rate and first
                                        token recorded, not judged)
  npu-serve-smoke judge DIR [flags]     re-judge a finished run's out directory; flags override its limits
  npu-serve-smoke demo [--route fast|slow] [--max-tokens N] [--out DIR]
                                        the gate against the built-in simulated serve
  npu-serve-smoke publish DIR [flags]   post a finished run to GitHub (a workflow_run job, for fork PRs)
  npu-serve-smoke report --matrix JSON [flags] DIR...
                                        merge a job matrix's runs (each DIR an artifact) into one
                                        table, one sticky comment and one check run

Run 'npu-serve-smoke run -h' for the gate's flags.
Exit status: 0 PASS, 1 FAIL, 2 bad input (nothing was started).
`

// env is the process environment the commands see.
type env struct {
	getenv func(string) string
	// stdout and stderr print every line through console.Text: the one way
	// to the console for text that may come from elsewhere.
	stdout, stderr *console.Printer
	// raw is stdout itself, for the workflow commands the gate means to
	// issue (go-githubactions writes there).
	raw io.Writer
	// cmds is the runner's reading of workflow commands; nil outside
	// GitHub Actions.
	cmds *console.Commands
	// parseOnly stops each command once its flags and arguments are
	// parsed, with exitPass: the docs test reads every command line in
	// README.md and docs/ with the real flag sets.
	parseOnly bool
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "fakellm": // the simulated serve, started by demo
			return fakellm.Command(args[1:], stdout, stderr)
		}
	}
	return newEnv(getenv, stdout, stderr).command(ctx, args)
}

func newEnv(getenv func(string) string, stdout, stderr io.Writer) *env {
	var cmds *console.Commands
	if getenv("GITHUB_ACTIONS") == "true" {
		cmds = &console.Commands{}
	}
	return &env{getenv: getenv, stdout: console.NewPrinter(stdout, cmds), stderr: console.NewPrinter(stderr, cmds), raw: stdout, cmds: cmds}
}

// command runs the subcommand args name.
func (e *env) command(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return e.run(ctx, args[1:])
	case "record":
		return e.record(ctx, args[1:])
	case "judge":
		return e.judge(ctx, args[1:])
	case "demo":
		return e.demo(ctx, args[1:])
	case "publish":
		return e.publishRun(ctx, args[1:])
	case "report":
		return e.reportRuns(ctx, args[1:])
	case "-h", "-help", "--help", "help":
		fmt.Fprint(e.stdout, usage)
		return exitPass
	default:
		fmt.Fprintf(e.stderr, "npu-serve-smoke: unknown command %q\n%s", args[0], usage)
		return exitUsage
	}
}

func (e *env) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("npu-serve-smoke "+name, flag.ContinueOnError)
	fs.SetOutput(untab{e.stderr})
	return fs
}

// untab writes to w with each tab a space: the flag package indents each
// flag's help with a tab, which the console printer shows escaped ("\t").
type untab struct{ w io.Writer }

func (u untab) Write(b []byte) (int, error) {
	if _, err := u.w.Write(bytes.ReplaceAll(b, []byte("\t"), []byte(" "))); err != nil {
		return 0, err
	}
	return len(b), nil
}

// newAction is the Actions environment of a command.
func newAction(getenv func(string) string, w io.Writer) *githubactions.Action {
	return githubactions.New(githubactions.WithGetenv(getenv), githubactions.WithWriter(w))
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// releaseVersion is a released binary's version, set by the linker
// (internal/release.BuildFlags).
var releaseVersion string

// version is the release's version, the module version, or the VCS revision
// of a local build.
func version() string {
	if releaseVersion != "" {
		return "npu-serve-smoke " + releaseVersion
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "npu-serve-smoke (unknown)"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && (v == "" || v == "(devel)") {
			v = s.Value
		}
	}
	return "npu-serve-smoke " + v
}
