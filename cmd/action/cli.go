package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/sethvargo/go-githubactions"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakellm"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/gate"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/hold"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/logscan"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/publish"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/serve"
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
  npu-serve-smoke judge DIR [flags]     re-judge a finished run's out directory; flags override its limits
  npu-serve-smoke demo [--route fast|slow] [--out DIR]
                                        the gate against the built-in simulated serve
  npu-serve-smoke publish DIR [flags]   post a finished run to GitHub (a workflow_run job, for fork PRs)

Run 'npu-serve-smoke run -h' for the gate's flags.
Exit status: 0 PASS, 1 FAIL, 2 bad input (nothing was started).
`

// env is the process environment the commands see.
type env struct {
	getenv         func(string) string
	stdout, stderr io.Writer
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	e := &env{getenv: getenv, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return e.run(ctx, args[1:])
	case "judge":
		return e.judge(args[1:])
	case "demo":
		return e.demo(ctx, args[1:])
	case "publish":
		return e.publishRun(ctx, args[1:])
	case "fakellm": // the simulated serve, started by demo
		return fakellm.Command(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitPass
	default:
		fmt.Fprintf(stderr, "npu-serve-smoke: unknown command %q\n%s", args[0], usage)
		return exitUsage
	}
}

func (e *env) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("npu-serve-smoke "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return fs
}

func (e *env) run(ctx context.Context, args []string) int {
	c := config.Default()
	fs := e.flagSet("run")
	runFlags(fs, &c)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "npu-serve-smoke run: unexpected argument %q; the serve's command line goes in --serve '...'\n", fs.Arg(0))
		return exitUsage
	}
	var a *githubactions.Action
	if e.getenv("GITHUB_ACTIONS") == "true" {
		a = newAction(e.getenv, e.stdout)
		if len(args) == 0 {
			if err := fromInputs(fs, a); err != nil {
				fmt.Fprintf(e.stderr, "npu-serve-smoke: bad input:\n%s\n", indent(err.Error()))
				return exitUsage
			}
		}
	}
	if err := c.ApplyPreset(setFlags(fs)); err != nil {
		fmt.Fprintf(e.stderr, "npu-serve-smoke: bad input, nothing was started:\n%s\n", indent(err.Error()))
		return exitUsage
	}
	return e.gate(ctx, c, a)
}

// gate checks c and runs the gate once. Inside GitHub Actions (a is not nil)
// it also reports to the job, the check run and the pull request.
func (e *env) gate(ctx context.Context, c config.Config, a *githubactions.Action) int {
	if a != nil && c.GitHubToken != "" {
		a.AddMask(c.GitHubToken)
	}
	plan, err := c.Check(exec.LookPath)
	if err != nil {
		fmt.Fprintf(e.stderr, "npu-serve-smoke: bad input, nothing was started:\n%s\n", indent(err.Error()))
		if a != nil {
			a.WithFieldsMap(map[string]string{"title": "npu serve smoke: bad input"}).Errorf("%s", err)
		}
		return exitUsage
	}
	if err := serve.BecomeSubreaper(); err != nil {
		fmt.Fprintf(e.stderr, "npu-serve-smoke: warning: cannot become a child subreaper (%v); detached helpers of the serve may escape the sweep\n", err)
	}
	tmp := e.getenv("RUNNER_TEMP")
	if tmp == "" {
		tmp = os.TempDir()
	}
	g := &gate.Gate{Plan: plan, Log: e.stderr, TempDir: tmp, Tool: version()}
	if plan.Hold == "builtin" {
		d := &hold.Device{Dir: e.getenv("NPU_HOLD_DIR"), Name: plan.Device, Command: "npu-serve-smoke run: " + strings.Join(plan.Argv, " "), Log: e.stderr}
		if home := e.getenv("HOME"); home != "" {
			d.TokenFile = filepath.Join(home, "NPU-TOKEN")
		}
		g.Hold = deviceHold{d}
	}
	var pub *publish.Publisher
	if a != nil {
		var gc *publish.Context
		gc, pub = e.publisher(a, plan.GitHubToken, plan.CheckName, plan.Comment == "on-pr", plan.PRNumber)
		if gc != nil {
			g.GitHub = gc.Facts()
			if dh, ok := g.Hold.(deviceHold); ok {
				dh.d.RunURL = gc.RunURL()
			}
		}
	}
	if pub != nil {
		pub.Start(ctx, time.Now())
	}

	resume := func() {}
	if a != nil {
		// From here on the console carries the serve's text.
		resume = publish.StopCommands(a)
	}
	res, err := g.Run(ctx)
	if err != nil {
		resume()
		fmt.Fprintf(e.stderr, "npu-serve-smoke: nothing was started: %v\n", err)
		if a != nil {
			a.WithFieldsMap(map[string]string{"title": "npu serve smoke: not started"}).Errorf("%s", err)
		}
		if pub != nil {
			pctx, cancel := publish.Timeout(ctx)
			pub.Abort(pctx, err.Error())
			cancel()
		}
		var se *gate.SetupError
		if errors.As(err, &se) {
			return exitUsage
		}
		return exitFail
	}
	e.print(res)
	resume()
	if a != nil {
		var checkID int64
		if pub != nil {
			pctx, cancel := publish.Timeout(ctx)
			checkID = pub.Finish(pctx, res, report.Markdown(res, publish.CheckTextLimit))
			cancel()
		}
		publish.Step(a, e.getenv, res, checkID)
	}
	if res.Pass() {
		return exitPass
	}
	return exitFail
}

// publisher is the GitHub side of a run in Actions: nil when there is no
// token or no readable context, said in a notice.
func (e *env) publisher(a *githubactions.Action, token, checkName string, comment bool, pr int) (*publish.Context, *publish.Publisher) {
	gc, err := publish.FromEnv(e.getenv)
	if err != nil {
		a.Warningf("the GitHub context cannot be read (%v); the check run and the PR comment are skipped", err)
		return nil, nil
	}
	if pr != 0 {
		gc.PR = pr
	}
	if token == "" {
		a.Noticef("no github-token: the check run and the PR comment are skipped; pass github-token: ${{ github.token }} with checks: write and pull-requests: write")
		return gc, nil
	}
	client, err := publish.NewClient(gc, token, publish.DefaultRetry(), nil)
	if err != nil {
		a.Warningf("%v; the check run and the PR comment are skipped", err)
		return gc, nil
	}
	return gc, &publish.Publisher{
		Client: client, Ctx: gc, CheckName: checkName, Comment: comment,
		Notice: func(format string, args ...any) { a.Noticef(format, args...) },
	}
}

// publishRun posts a finished run: the fork pull request pattern, where the
// job that measured has no token that can write and a workflow_run job
// posts for it.
func (e *env) publishRun(ctx context.Context, args []string) int {
	fs := e.flagSet("publish")
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: npu-serve-smoke publish DIR [flags]\n\nPosts the run in DIR as a check run and a sticky PR comment, from inside GitHub Actions.\n\n")
		fs.PrintDefaults()
	}
	checkName := fs.String("check-name", "", "the check run's name (default: the run's own)")
	comment := fs.String("comment", "on-pr", "on-pr or never")
	pr := fs.Int("pr-number", 0, "the pull request (default: the event's, else the run's own, checked against its head)")
	token := fs.String("github-token", e.getenv("GITHUB_TOKEN"), "token (default: $GITHUB_TOKEN; never printed)")
	var dir string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if dir == "" && fs.NArg() == 1 {
		dir = fs.Arg(0)
	}
	if dir == "" || (*comment != "on-pr" && *comment != "never") {
		fs.Usage()
		return exitUsage
	}
	if e.getenv("GITHUB_ACTIONS") != "true" {
		fmt.Fprintf(e.stderr, "npu-serve-smoke publish: not inside GitHub Actions (GITHUB_ACTIONS is not true); run it in a workflow job\n")
		return exitUsage
	}
	a := newAction(e.getenv, e.stdout)
	if *token != "" {
		a.AddMask(*token)
	}
	res, err := report.Read(dir)
	if err != nil {
		fmt.Fprintf(e.stderr, "npu-serve-smoke publish: %v\n", err)
		return exitUsage
	}
	name := *checkName
	if name == "" {
		name = res.Run.CheckName
	}
	if name == "" {
		name = config.Default().CheckName
	}
	gc, pub := e.publisher(a, *token, name, *comment == "on-pr", *pr)
	if pub == nil {
		return exitFail
	}
	if gc.SHA == "" && res.GitHub != nil {
		gc.SHA = res.GitHub.SHA
	}
	if gc.PR == 0 && res.GitHub != nil && res.GitHub.PR != 0 {
		// The run's own pull request: believed only when its head is the
		// commit this event reports on.
		gc.PR = res.GitHub.PR
		if err := pub.CheckPR(ctx); err != nil {
			a.Noticef("no PR comment: %v", err)
			gc.PR = 0
		}
	}
	checkID := pub.Finish(ctx, res, report.Markdown(res, publish.CheckTextLimit))
	publish.Step(a, e.getenv, res, checkID)
	return exitPass
}

// print writes the verdict, and what a person needs to see when there were no
// replies: why, and the end of the serve's log.
func (e *env) print(res *report.Result) {
	if res.NoReplies != "" {
		fmt.Fprintf(e.stderr, "no replies: %s\n", report.ConsoleText(res.NoReplies))
		tail := res.Serve.LogTail
		if len(tail) > 15 {
			tail = tail[len(tail)-15:]
		}
		if len(tail) > 0 {
			fmt.Fprintf(e.stderr, "the last %d lines of %s:\n", len(tail), filepath.Join(res.Run.Out, report.LogFile))
			for _, l := range tail {
				fmt.Fprintf(e.stderr, "  | %s\n", report.ConsoleText(l))
			}
		}
	}
	report.Console(e.stdout, res)
	if iv := res.Intervals.Rate; iv != nil {
		fmt.Fprintf(e.stderr, "median rate %.1f tok/s, %.1f%% interval %.1f–%.1f, over %d replies\n", iv.Median, iv.Coverage*100, iv.Lo, iv.Hi, iv.N)
	}
	if res.Extra.Replies > 0 {
		fmt.Fprintf(e.stderr, "%d replies more than --replies: %s\n", res.Extra.Replies, res.Extra.Why)
	}
}

// judge re-judges a finished run from its out directory: the serve log and
// the reply files, against the limits it ran with or the ones given here.
func (e *env) judge(args []string) int {
	fs := e.flagSet("judge")
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: npu-serve-smoke judge DIR [flags]\n\nRe-judges the run in DIR; flags not given keep the run's own.\n\n")
		fs.PrintDefaults()
	}
	d := config.Default()
	fs.Float64Var(&d.Floor, "floor", d.Floor, "median decode rate floor, tok/s")
	fs.Float64Var(&d.FirstTokenMS, "first-token-ms", d.FirstTokenMS, "median first-token limit, ms")
	fs.StringVar(&d.RateSource, "rate-source", d.RateSource, "client or server")
	fs.StringVar(&d.Baseline, "baseline", "", "an earlier run's result.json to compare with")
	fs.Float64Var(&d.MaxRegression, "max-regression", d.MaxRegression, "percent the median rate may fall, or the first token rise, against the baseline")
	fs.Var(&patterns{list: &d.FastRoute}, "fast-route", "RE2 pattern naming the fast route (repeatable)")
	fs.Var(&patterns{list: &d.SlowRoute}, "slow-route", "RE2 pattern naming the slow route (repeatable)")
	// The directory may come before or after the flags.
	var dir string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if dir == "" && fs.NArg() > 0 {
		dir = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "npu-serve-smoke judge: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if dir == "" {
		fs.Usage()
		return exitUsage
	}
	res, err := report.Read(dir)
	if err != nil {
		fmt.Fprintf(e.stderr, "npu-serve-smoke judge: %v\n", err)
		return exitUsage
	}
	fast, slow := res.Route.FastPatterns, res.Route.SlowPatterns
	var problems []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "floor":
			res.Limits.Floor = d.Floor
		case "first-token-ms":
			res.Limits.FirstTokenMS = d.FirstTokenMS
		case "rate-source":
			res.Limits.RateSource = d.RateSource
		case "max-regression":
			res.Limits.MaxRegression = d.MaxRegression / 100
		case "fast-route":
			fast = d.FastRoute
		case "slow-route":
			slow = d.SlowRoute
		}
	})
	// The limits given here get the same checks as the gate's.
	c := config.Default()
	c.Floor, c.FirstTokenMS, c.RateSource, c.FastRoute, c.SlowRoute = res.Limits.Floor, res.Limits.FirstTokenMS, res.Limits.RateSource, fast, slow
	c.MaxRegression = res.Limits.MaxRegression * 100
	if err := c.CheckLimits(); err != nil {
		problems = append(problems, err.Error())
	}
	if d.Baseline != "" {
		b, err := config.LoadBaseline(d.Baseline, res.Limits)
		if err != nil {
			problems = append(problems, err.Error())
		}
		res.Baseline = b
		if res.Limits.MaxRegression == 0 && !setFlags(fs)("max-regression") {
			res.Limits.MaxRegression = config.Default().MaxRegression / 100
		}
	}
	if len(problems) > 0 {
		fmt.Fprintf(e.stderr, "npu-serve-smoke judge: bad input:\n%s\n", indent(strings.Join(problems, "\n")))
		return exitUsage
	}
	m, _ := judge.NewRouteMatcher(fast, slow)
	scan, err := logscan.ScanFile(filepath.Join(dir, report.LogFile), m)
	if err != nil {
		fmt.Fprintf(e.stderr, "npu-serve-smoke judge: %v; the route is judged on an empty log\n", err)
	}
	res.Route = scan.Route
	res.Judged(judge.Judge(res.Input()))
	report.Console(e.stdout, res)
	if res.Pass() {
		return exitPass
	}
	return exitFail
}

// demo runs the gate against the simulated serve, started as a child of this
// same binary, so the whole pipeline runs: process group, health, stream,
// stop and judging.
func (e *env) demo(ctx context.Context, args []string) int {
	fs := e.flagSet("demo")
	route := fs.String("route", "fast", "the route the simulated serve takes: fast or slow (the silent fallback)")
	out := fs.String("out", "", "out directory (default: a fresh one)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *route != fakellm.RouteFast && *route != fakellm.RouteSlow {
		fmt.Fprintf(e.stderr, "npu-serve-smoke demo: --route %q: pass fast or slow\n", *route)
		return exitUsage
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(e.stderr, "npu-serve-smoke demo: cannot find this program (%v)\n", err)
		return exitFail
	}
	c := config.Default()
	c.Serve = config.QuoteWords(self, "fakellm", "--port", "{port}", "--route", *route, "--model", "{model}")
	c.Model = "sim-0.6B"
	c.Replies, c.Warmup, c.MaxTokens = 3, 1, 16
	c.Out = *out
	c.Hold = "none" // the simulated serve needs no device
	fmt.Fprintf(e.stderr, "demo: the gate against the simulated serve on the %s route\n", *route)
	return e.gate(ctx, c, nil)
}

// newAction is the Actions environment of a command.
func newAction(getenv func(string) string, w io.Writer) *githubactions.Action {
	return githubactions.New(githubactions.WithGetenv(getenv), githubactions.WithWriter(w))
}

// deviceHold is the builtin hold: the device's ticket, taken in the gate.
type deviceHold struct{ d *hold.Device }

func (h deviceHold) Acquire(ctx context.Context) (gate.Ticket, error) {
	t, err := h.d.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return t, nil
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// version is the module version, or the VCS revision of a local build.
func version() string {
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
