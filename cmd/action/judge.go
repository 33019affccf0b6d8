package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/logscan"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

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
