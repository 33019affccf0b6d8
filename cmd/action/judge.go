package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/evidence"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/gate"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/history"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// judge re-judges a finished run from its out directory: the serve log and
// the reply files, against the limits it ran with or the ones given here.
func (e *env) judge(ctx context.Context, args []string) int {
	fs := e.flagSet("judge")
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: npu-serve-smoke judge DIR [flags]\n\nRe-judges the run in DIR; flags not given keep the run's own.\n\n")
		fs.PrintDefaults()
	}
	d := config.Default()
	limitFlags(fs, &d)
	fs.StringVar(&d.LoadExpect, "load-expect", "", "judge the run's load rounds as batch or serial (default: the run's own)")
	fs.Float64Var(&d.LoadEfficiency, "load-efficiency", d.LoadEfficiency, "batch: the least η of a round, above 1/N (default: the run's own; 0: 0.5, and 0.65 at --load 2)")
	fs.Float64Var(&d.LoadFirstTokenMS, "load-first-token-ms", d.LoadFirstTokenMS, "batch: the most a round's worst first token may take, ms (default: the run's own)")
	dir, ok := e.parseDir(fs, args)
	if !ok {
		return exitUsage
	}
	if e.parseOnly {
		return exitPass
	}
	res, err := report.Read(dir)
	if err != nil {
		e.stderr.Printf("npu-serve-smoke judge: %v", err)
		return exitUsage
	}
	c, name := limitsOf(res, dir, fs, d)
	var problems []string
	if err := c.CheckLimitsFrom(name); err != nil {
		problems = append(problems, err.Error())
	}
	bl := res.Baseline
	if strings.HasPrefix(d.Baseline, history.Prefix) {
		problems = append(problems, fmt.Sprintf("--baseline %s: judge compares with a file; pass an earlier run's result.json (run and report read github: history)", d.Baseline))
	} else if d.Baseline != "" {
		if bl, err = config.LoadBaseline(d.Baseline, c.Limits()); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if d.Reference != "" {
		// The reference given here replaces the one the run kept in
		// reference.json.
		if ref, err := referenceFor(res, d.Reference); err != nil {
			problems = append(problems, err.Error())
		} else {
			res.Reference = ref
		}
	}
	problems = append(problems, loadLimitsOf(res, dir, fs, d)...)
	if len(problems) > 0 {
		fmt.Fprintf(e.stderr, "npu-serve-smoke judge: bad input:\n%s\n", indent(strings.Join(problems, "\n")))
		return exitUsage
	}
	runRoute := res.Route
	if err := rejudge(ctx, dir, res, &c, bl); err != nil {
		e.stderr.Printf("npu-serve-smoke judge: %v", err)
	}
	// Cancelled, the log was read in part: the verdict stays Cancelled,
	// never one judged on what was read.
	if ctx.Err() == nil {
		keepRunRoute(res, runRoute, setFlags(fs))
		if res.Run.Kind == report.KindReference {
			judgeRecording(res)
		}
	}
	// The report quotes the serve's log: the runner reads no workflow
	// commands while it is printed.
	resume := e.cmds.Stop(e.raw)
	report.Console(e.stdout, res)
	resume()
	if res.Pass() {
		return exitPass
	}
	return exitFail
}

// limitsOf is the run's own limits, where no flag given replaces them (d
// holds the flags' values), and the name of each limit where it came from: a
// flag, or a field of result.json, so a message about a limit the run holds
// does not blame a flag that was not given.
func limitsOf(res *report.Result, dir string, fs *flag.FlagSet, d config.Config) (config.Config, func(flag string) string) {
	// The run's own limits, where no flag replaces them.
	c := config.Default()
	c.Floor, c.FirstTokenMS, c.RateSource = res.Limits.Floor, res.Limits.FirstTokenMS, res.Limits.RateSource
	// A run made before it kept the bound keeps the default.
	c.MaxRegression = res.Limits.Regression() * 100
	c.MaxJoulesPerToken = res.Limits.MaxJoulesPerToken
	// A run made before the sequential rule has no lead: its replies are
	// counted at the default.
	if res.Limits.Lead > 0 {
		c.Lead = res.Limits.Lead
	}
	c.FastRoute, c.SlowRoute = res.Route.FastPatterns, res.Route.SlowPatterns
	// A run made before the agreement keeps the defaults; bounds of 0 are
	// exact.
	b := res.Limits.Agreement.OrDefault()
	c.AgreementTieMargin, c.AgreementMaxKL = b.TieMargin, b.MaxKL
	if res.Limits.FloorDerived {
		c.FloorWhy = res.Limits.FloorWhy
	}
	fromRun := map[string]string{
		"floor": "limits.floor", "first-token-ms": "limits.first_token_ms", "rate-source": "limits.rate_source",
		"max-regression": "limits.max_regression (in percent)", "lead": "limits.lead", "fast-route": "route.fast_patterns", "slow-route": "route.slow_patterns",
		"agreement-tie-margin": "limits.agreement.tie_margin", "agreement-max-kl": "limits.agreement.max_kl",
		"max-joules-per-token": "limits.max_joules_per_token",
	}
	fs.Visit(func(f *flag.Flag) {
		delete(fromRun, f.Name)
		switch f.Name {
		case "floor":
			c.Floor, c.FloorWhy = d.Floor, ""
		case "first-token-ms":
			c.FirstTokenMS = d.FirstTokenMS
		case "rate-source":
			c.RateSource = d.RateSource
		case "max-regression":
			c.MaxRegression = d.MaxRegression
		case "lead":
			c.Lead = d.Lead
		case "fast-route":
			c.FastRoute = d.FastRoute
		case "slow-route":
			c.SlowRoute = d.SlowRoute
		case "agreement-tie-margin":
			c.AgreementTieMargin = d.AgreementTieMargin
		case "agreement-max-kl":
			c.AgreementMaxKL = d.AgreementMaxKL
		case "max-joules-per-token":
			c.MaxJoulesPerToken = d.MaxJoulesPerToken
		}
	})
	return c, func(flag string) string {
		if field, ok := fromRun[flag]; ok {
			return fmt.Sprintf("%s's %s", filepath.Join(dir, report.ResultFile), field)
		}
		return "--" + flag
	}
}

// loadLimitsOf puts the load flags given into the run's load limits, and
// says what is wrong with them.
func loadLimitsOf(res *report.Result, dir string, fs *flag.FlagSet, d config.Config) []string {
	set := setFlags(fs)
	var problems []string
	given := set("load-expect") || set("load-efficiency") || set("load-first-token-ms")
	if res.Load == nil {
		if given {
			problems = append(problems, fmt.Sprintf("--load-expect, --load-efficiency and --load-first-token-ms judge a run's load rounds, and %s asked none (--load 0); leave them out", filepath.Join(dir, report.ResultFile)))
		}
		return problems
	}
	l := &res.Load.Limits
	if set("load-expect") {
		if d.LoadExpect != judge.LoadBatch && d.LoadExpect != judge.LoadSerial {
			problems = append(problems, fmt.Sprintf("--load-expect %q: pass batch or serial", d.LoadExpect))
		}
		l.Expect = d.LoadExpect
	}
	if set("load-efficiency") {
		e, def := d.LoadEfficiency, judge.DefaultEfficiency(max(l.Streams, 2))
		if e == 0 {
			e = def
		}
		if !(e > 0 && e <= 1) {
			problems = append(problems, fmt.Sprintf("--load-efficiency %v: pass a fraction above 0 and at most 1, e.g. %.2f, the default at --load %d, or 0 for it", d.LoadEfficiency, def, l.Streams))
		} else if why := config.SlicedFloor(e, l.Streams); why != "" && l.Expect == judge.LoadBatch && l.Streams >= 2 {
			problems = append(problems, why)
		}
		l.Efficiency = e
	}
	if set("load-first-token-ms") {
		if !(d.LoadFirstTokenMS > 0) || math.IsInf(d.LoadFirstTokenMS, 0) {
			problems = append(problems, fmt.Sprintf("--load-first-token-ms %v: pass a positive number of milliseconds", d.LoadFirstTokenMS))
		}
		l.FirstTokenMS = d.LoadFirstTokenMS
	}
	return problems
}

// limitFlags defines the judging limits' flags (the gate's names and
// defaults) on fs, writing into c.
func limitFlags(fs *flag.FlagSet, c *config.Config) {
	fs.Float64Var(&c.Floor, "floor", c.Floor, "median decode rate floor, tok/s")
	fs.Float64Var(&c.FirstTokenMS, "first-token-ms", c.FirstTokenMS, "median first-token limit, ms")
	fs.StringVar(&c.RateSource, "rate-source", c.RateSource, "client or server")
	fs.StringVar(&c.Baseline, "baseline", c.Baseline, "an earlier run's result.json to compare with")
	fs.Float64Var(&c.MaxRegression, "max-regression", c.MaxRegression, "percent the median rate may fall, or the first token rise, against the baseline")
	fs.IntVar(&c.Lead, "lead", c.Lead, "the lead of the sign counts that decides (docs/measuring.md)")
	fs.Var(&patterns{list: &c.FastRoute}, "fast-route", "RE2 pattern, or count rule, naming the fast route (repeatable)")
	fs.Var(&patterns{list: &c.SlowRoute}, "slow-route", "RE2 pattern, or unless-fast rule, naming the slow route (repeatable)")
	fs.Float64Var(&c.MaxJoulesPerToken, "max-joules-per-token", c.MaxJoulesPerToken, "gross joules per decoded token allowed, idle included, judged on the energy figures the run recorded (0: the row is for people only)")
	referenceFlags(fs, c)
}

// referenceFor reads the reference at path (a file or a directory, never
// github:, which is read in run) and checks it against the finished run res:
// its max_tokens, thinking, and the prompts of its first round (as the run
// recorded them; a run made before it recorded them: every prompt it asked).
func referenceFor(res *report.Result, path string) (*report.Reference, error) {
	if strings.HasPrefix(path, history.Prefix) {
		return nil, fmt.Errorf("--reference %s: a finished run is compared with a file; pass the reference's out directory or result.json (run reads github: history)", path)
	}
	ref, err := config.LoadReference(path)
	if err != nil {
		return nil, err
	}
	return config.UseReference("--reference "+path, path, ref, askedOf(res))
}

// judgeRecording adds the recording assertion to res, a recording judged
// again: whether it can serve as a reference, against what it recorded of
// its own asking. Every recording keeps the prompts of its first round
// (run.first_round): one without them cannot be checked, and fails.
func judgeRecording(res *report.Result) {
	if len(res.Run.FirstRound) == 0 {
		gate.RecordingFailed(res, fmt.Errorf("%s names no prompt of its first round (run.first_round), which every recording keeps: the file was edited; record the reference again", report.ResultFile))
		return
	}
	gate.AddRecording(res, askedOf(res))
}

// askedOf is what the finished run res asks of a reference: its
// max_tokens, thinking, and the prompts of its first round (as the run
// recorded them; a run made before it recorded them: every prompt it
// asked), among every prompt it asked, each once.
func askedOf(res *report.Result) config.ReferenceWant {
	w := config.ReferenceWant{MaxTokens: res.Run.MaxTokens, Thinking: res.Run.Thinking, FirstRound: res.Run.FirstRound}
	for i := range res.Replies {
		w.Asked = append(w.Asked, res.Replies[i].Prompt)
	}
	if len(w.FirstRound) == 0 {
		w.FirstRound = w.Asked
	}
	w.FirstRound = once(w.FirstRound)
	w.Asked = once(append(slices.Clone(w.FirstRound), w.Asked...))
	return w
}

// once is ps with each prompt at its first place only.
func once(ps []string) []string {
	seen := map[string]bool{}
	return slices.DeleteFunc(slices.Clone(ps), func(p string) bool {
		dup := seen[p]
		seen[p] = true
		return dup
	})
}

// parseDir parses a subcommand's flags around its one DIR argument, which
// may come before or after them.
func (e *env) parseDir(fs *flag.FlagSet, args []string) (string, bool) {
	var dir string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return "", false
	}
	if dir == "" && fs.NArg() > 0 {
		dir = fs.Arg(0)
		fs.Parse(fs.Args()[1:])
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return "", false
	}
	if dir == "" {
		fs.Usage()
		return "", false
	}
	return dir, true
}

// rejudge judges the evidence of the run in dir, its serve.log and the reply
// files res was read with, against c's limits and route patterns and the
// baseline bl. Whatever verdict, assertions, limits, route and baseline
// result.json claimed are replaced, and so are the log's tail and size the
// report shows: they are the serve.log judged, as read here. `judge` and
// `publish` both judge here, and `report` judges each job of a matrix with the
// same evidence.Judge. An unreadable log is judged as empty, shown with no
// tail, and said in the error.
func rejudge(ctx context.Context, dir string, res *report.Result, c *config.Config, bl *judge.Baseline) error {
	return evidence.Judge(ctx, dir, res, c.Limits(), c.FastRoute, c.SlowRoute, bl)
}

// keepRunRoute puts back the route evidence the run read, when serve.log
// was cut to --log-limit and no other route rule is given: the run read the
// whole stream as it was written, so its evidence in result.json stands and
// `judge` agrees with the run. The run's hint is kept too. (`publish` reads
// a fork's artifact, whose result.json it does not trust, and judges on the
// log as kept.)
func keepRunRoute(res *report.Result, run route.Evidence, set func(string) bool) {
	res.Route.Hint = run.Hint
	if res.Serve.LogDropped > 0 && !set("fast-route") && !set("slow-route") {
		res.Route = run
	}
	res.Judged(judge.Judge(res.Input()))
}
