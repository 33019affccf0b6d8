package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/sethvargo/go-githubactions"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/console"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/gate"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/hold"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/publish"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/serve"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise"
)

func (e *env) run(ctx context.Context, args []string) int {
	return e.runAs(ctx, "run", report.KindRun, args)
}

// record is run on the trusted route (the CPU build, the per-op forward,
// the last release, another device): a reference for --reference. It judges
// content and release only, and records the route, rate and first token.
// Its --replies defaults to --max-replies: a run takes up to that many
// replies, and a reply whose prompt the reference lacks is not compared, so
// the reference holds an answer to every request a run can make.
func (e *env) record(ctx context.Context, args []string) int {
	return e.runAs(ctx, "record", report.KindReference, args)
}

// gcPercent is the gate's GOGC in a run (debug.SetGCPercent).
const gcPercent = 400

// runAs is run or record (kind), by the same flags.
func (e *env) runAs(ctx context.Context, name, kind string, args []string) int {
	// A run allocates a few MB and keeps little of it (its replies): the
	// collector waits for five times the live heap rather than twice, so a
	// short run collects nothing. Its first collection came in the middle
	// of the serve's stop, some 3 ms of the gate's own time there.
	debug.SetGCPercent(gcPercent)
	c := config.Default()
	c.Kind = kind
	fs := e.flagSet(name)
	runFlags(fs, &c)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "npu-serve-smoke %s: unexpected argument %q; the serve's command line goes in --serve '...'\n", name, fs.Arg(0))
		return exitUsage
	}
	if err := refused(fs); err != nil {
		fmt.Fprintf(e.stderr, "npu-serve-smoke %s: bad input, nothing was started:\n%s\n", name, indent(err.Error()))
		return exitUsage
	}
	var a *githubactions.Action
	if e.getenv("GITHUB_ACTIONS") == "true" {
		a = newAction(e.getenv, e.raw)
		if len(args) == 0 {
			if err := fromInputs(fs, a); err != nil {
				fmt.Fprintf(e.stderr, "npu-serve-smoke: bad input:\n%s\n", indent(err.Error()))
				return exitUsage
			}
		}
	}
	if c.GitHubToken == "" {
		c.GitHubToken = e.getenv("GITHUB_TOKEN")
	}
	if kind == report.KindReference && !setFlags(fs)("replies") {
		c.Replies = max(c.Replies, c.MaxReplies)
	}
	if err := c.ApplyPreset(setFlags(fs)); err != nil {
		fmt.Fprintf(e.stderr, "npu-serve-smoke: bad input, nothing was started:\n%s\n", indent(err.Error()))
		return exitUsage
	}
	if e.parseOnly {
		return exitPass
	}
	return e.gate(ctx, c, a)
}

// gate checks c and runs the gate once. Inside GitHub Actions (a is not nil)
// it also reports to the job, the check run and the pull request.
func (e *env) gate(ctx context.Context, c config.Config, a *githubactions.Action) int {
	serve.Prepare()
	if a != nil && c.GitHubToken != "" {
		a.AddMask(c.GitHubToken)
	}
	if err := supervise.CheckContain(e.getenv(supervise.ContainEnv)); err != nil {
		fmt.Fprintf(e.stderr, "npu-serve-smoke: bad input, nothing was started:\n%s\n", indent(err.Error()))
		return exitUsage
	}
	plan, err := c.Check(exec.LookPath)
	if err != nil {
		fmt.Fprintf(e.stderr, "npu-serve-smoke: bad input, nothing was started:\n%s\n", indent(err.Error()))
		if a != nil {
			a.WithFieldsMap(map[string]string{"title": "npu serve smoke: bad input"}).Errorf("%s", console.Text(err.Error()))
		}
		return exitUsage
	}
	if a != nil && c.GitHubTokenFile != "" {
		a.AddMask(plan.GitHubToken)
	}
	if a == nil && c.GitHubTokenFile != "" {
		fmt.Fprintf(e.stderr, "npu-serve-smoke: %s\n", notPosted)
	}
	if code, ok := e.historyBaseline(ctx, plan, a); !ok {
		return code
	}
	if code, ok := e.historyReference(ctx, plan, a); !ok {
		return code
	}
	if plan.Kind == report.KindReference {
		e.stderr.Printf("record: a reference of %s to %d prompts; content and release are judged, route, rate and first token recorded, not judged (the trusted route is slow by nature)",
			report.Replies(plan.Replies), len(plan.Prompts))
	}
	if err := serve.BecomeSubreaper(); err != nil {
		e.stderr.Printf("npu-serve-smoke: warning: cannot become a child subreaper (%v); detached helpers of the serve may escape the sweep", err)
	}
	tmp := e.getenv("RUNNER_TEMP")
	if tmp == "" {
		tmp = os.TempDir()
	}
	g := &gate.Gate{Plan: plan, Log: e.stderr, TempDir: tmp, Tool: version()}
	if plan.Hold == "builtin" {
		pool, err := e.pool(plan.Device, plan.Count)
		if err != nil {
			fmt.Fprintf(e.stderr, "npu-serve-smoke: bad input, nothing was started:\n%s\n", indent(err.Error()))
			return exitUsage
		}
		dir := e.getenv("NPU_HOLD_DIR")
		if dir != "" {
			if err := hold.CheckDirPath("NPU_HOLD_DIR", dir); err != nil {
				fmt.Fprintf(e.stderr, "npu-serve-smoke: bad input, nothing was started:\n%s\n", indent(err.Error()))
				if a != nil {
					a.WithFieldsMap(map[string]string{"title": "npu serve smoke: bad input"}).Errorf("%s", console.Text(err.Error()))
				}
				return exitUsage
			}
		}
		d := &hold.Device{Dir: dir, Name: plan.Device, Pool: pool, Count: plan.Count, Command: "npu-serve-smoke " + command(plan.Kind) + ": " + strings.Join(plan.Argv, " "), Log: e.stderr}
		if err := d.CheckDir(); err != nil {
			fmt.Fprintf(e.stderr, "npu-serve-smoke: the device cannot be held, nothing was started:\n%s\n", indent(err.Error()))
			if a != nil {
				a.WithFieldsMap(map[string]string{"title": "npu serve smoke: the device cannot be held"}).Errorf("%s", console.Text(err.Error()))
			}
			return exitUsage
		}
		if home := e.getenv("HOME"); home != "" {
			d.TokenFile = filepath.Join(home, "NPU-TOKEN")
		} else {
			e.stderr.Printf("npu-serve-smoke: warning: HOME is not set, so ~/NPU-TOKEN is not written while the device is held; set HOME to the runner user's home (the ticket holds the device all the same)")
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
		if pub != nil && plan.Kind == report.KindReference {
			pub = nil
			a.Noticef("record: no check run and no PR comment: a reference is not a verdict on the code; its report is in the job summary and %s", report.ResultFile)
		}
	}
	if pub != nil {
		pub.Start(ctx, time.Now())
	}

	resume := func() {}
	if a != nil {
		// From here on the console carries the serve's text: the runner
		// reads no workflow commands until the run is printed. Lines
		// printed after that get a stop of their own (console.Printer).
		resume = e.cmds.Stop(e.raw)
	}
	res, err := g.Run(ctx)
	if err != nil {
		resume()
		e.stderr.Printf("npu-serve-smoke: nothing was started: %v", err)
		if a != nil {
			a.WithFieldsMap(map[string]string{"title": "npu serve smoke: not started"}).Errorf("%s", console.Text(err.Error()))
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
		publish.Step(a, e.getenv, res, res.Run.Out, checkID)
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
		a.Warningf("%s", console.Text(fmt.Sprintf("the GitHub context cannot be read (%v); the check run and the PR comment are skipped", err)))
		return nil, nil
	}
	if pr != 0 {
		gc.PR = pr
	}
	if token == "" {
		// run as the action takes the input; publish and report, run:
		// steps, take the step's environment.
		a.Noticef("no token: the check run and the PR comment are skipped; give the action github-token: ${{ github.token }}, or a run: step env: GITHUB_TOKEN: ${{ github.token }} (or --github-token-file FILE), with checks: write and pull-requests: write")
		return gc, nil
	}
	client, err := publish.NewClient(gc, token, publish.DefaultRetry(), nil)
	if err != nil {
		a.Warningf("%s", console.Text(fmt.Sprintf("%v; the check run and the PR comment are skipped", err)))
		return gc, nil
	}
	return gc, &publish.Publisher{
		Client: client, Ctx: gc, CheckName: checkName, Comment: comment,
		Notice: func(format string, args ...any) { a.Noticef("%s", console.Text(fmt.Sprintf(format, args...))) },
	}
}

// print writes the verdict, and what a person needs to see when there were no
// replies: why, and the end of the serve's log.
func (e *env) print(res *report.Result) {
	if res.NoReplies != "" {
		e.stderr.Printf("no replies: %s", res.NoReplies)
		tail := res.Serve.LogTail
		if len(tail) > 15 {
			tail = tail[len(tail)-15:]
		}
		if len(tail) > 0 {
			e.stderr.Printf("the last %d lines of %s:", len(tail), filepath.Join(res.Run.Out, report.LogFile))
			for _, l := range tail {
				e.stderr.Printf("  | %s", l)
			}
		}
	}
	report.Console(e.stdout, res)
	if iv := res.Intervals.Rate; iv != nil {
		fmt.Fprintf(e.stderr, "median rate %.1f tok/s, %s, over %s\n", iv.Median, report.IntervalText(iv, 1), report.Replies(iv.N))
	}
	if res.Extra.Replies > 0 {
		e.stderr.Printf("%s more than --replies: %s", report.Replies(res.Extra.Replies), res.Extra.Why)
	}
}

// pool is the pool --device names on this host (NPU_HOLD_POOLS, else
// npu-hold's file), checked against --count; nil for one device.
func (e *env) pool(device string, count int) (*hold.Pool, error) {
	file := e.getenv("NPU_HOLD_POOLS")
	if file == "" {
		file = hold.DefaultPools
	}
	pools, err := hold.LoadPools(file)
	if err != nil {
		return nil, err
	}
	return pools.Resolve(device, count, "--count")
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

// command is the subcommand that makes a run of kind.
func command(kind string) string {
	if kind == report.KindReference {
		return "record"
	}
	return "run"
}
