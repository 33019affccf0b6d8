package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/sethvargo/go-githubactions"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/console"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fleet"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/history"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/publish"
)

// reportRuns merges the runs of a job matrix: a row per expected job,
// re-judged from its artifact directory with the limits given here, one
// summary, one sticky comment and one check run, the release branch's
// required status check.
func (e *env) reportRuns(ctx context.Context, args []string) int {
	started := time.Now()
	o, ok := e.reportFlags(args)
	if !ok {
		return exitUsage
	}
	if e.parseOnly {
		return exitPass
	}
	// The token is read after parsing, so that -h never prints it.
	token, err := e.githubToken(o.c.GitHubTokenFile)
	if err != nil {
		fmt.Fprintf(e.stderr, "npu-serve-smoke report: bad input, nothing was posted:\n%s\n", indent(err.Error()))
		return exitUsage
	}
	o.token = token
	inActions := e.getenv("GITHUB_ACTIONS") == "true"
	if !inActions && o.c.GitHubTokenFile != "" {
		fmt.Fprintf(e.stderr, "npu-serve-smoke report: %s\n", notPosted)
	}
	jobs, problems := o.check(inActions)
	if len(problems) > 0 {
		return e.reportBadInput(ctx, inActions, o.token, o.c.CheckName, started, problems)
	}
	if !inActions {
		return e.reportDone(fleet.Merge(ctx, o.c.CheckName, jobs, o.dirs, o.limits, nil), nil, o.summary)
	}
	return e.reportInActions(ctx, o, jobs, started)
}

// reportOptions are report's flags and arguments.
type reportOptions struct {
	c        config.Config // the limits, check name, comment and baseline
	limits   fleet.Limits
	matrix   string
	expect   []string
	releases int // --history
	summary  string
	token    string
	dirs     []string
	set      func(string) bool
}

func (e *env) reportFlags(args []string) (*reportOptions, bool) {
	o := &reportOptions{c: config.Default()}
	d := &o.c
	fs := e.flagSet("report")
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: npu-serve-smoke report --matrix JSON | --expect model=M,device=D... [flags] DIR...\n\n"+
			"Merges the out/ artifacts of a job matrix (each DIR named as its artifact) into one verdict.\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.matrix, "matrix", "", "the jobs' matrix as strategy.matrix takes it (JSON): every job is an expected row")
	fs.Func("expect", "an expected job, model=M,device=D[,preset=P][,floor=F][,first-token-ms=T] (repeatable)", func(s string) error { o.expect = append(o.expect, s); return nil })
	fs.StringVar(&d.CheckName, "check-name", d.CheckName, "the merged check run's name; job J's is 'NAME (MODEL, DEVICE[, PRESET])'")
	fs.Float64Var(&d.Floor, "floor", d.Floor, "median decode rate floor, tok/s (a job's matrix value floor wins)")
	fs.Float64Var(&d.FirstTokenMS, "first-token-ms", d.FirstTokenMS, "median first-token limit, ms (a job's matrix value first-token-ms wins)")
	fs.StringVar(&d.RateSource, "rate-source", d.RateSource, "client or server")
	fs.StringVar(&d.Preset, "preset", "", "the jobs' serve preset, whose route patterns judge them (a job's matrix value preset wins): "+strings.Join(config.PresetNames(), ", "))
	fs.Var(&patterns{list: &d.FastRoute}, "fast-route", "RE2 pattern naming the fast route (repeatable; default: the job's preset's, else the gate's)")
	fs.Var(&patterns{list: &d.SlowRoute}, "slow-route", "RE2 pattern naming the slow route (repeatable)")
	trustedFlags(fs, d)
	fs.StringVar(&d.Baseline, "baseline", "", "github:PATTERN: each job against its artifact in the latest successful run of this workflow on a branch or tag matching PATTERN")
	fs.Float64Var(&d.MaxRegression, "max-regression", d.MaxRegression, "percent the median rate may fall, or the first token rise, against the baseline")
	fs.IntVar(&o.releases, "history", 0, "with --baseline: chart the median rates of the last N releases (N runs' artifacts are downloaded)")
	fs.StringVar(&o.summary, "summary", "", "also write the merged Markdown to this file")
	fs.StringVar(&d.Comment, "comment", d.Comment, "on-pr or never")
	fs.IntVar(&d.PRNumber, "pr-number", 0, "a pull request to comment on when the event is not one")
	tokenFlags(fs, &o.token, &d.GitHubTokenFile, "the check run and the comment")
	if err := fs.Parse(args); err != nil {
		return nil, false
	}
	if err := refused(fs); err != nil {
		fmt.Fprintf(e.stderr, "npu-serve-smoke report: bad input, nothing was posted:\n%s\n", indent(err.Error()))
		return nil, false
	}
	o.dirs, o.set = fs.Args(), setFlags(fs)
	return o, true
}

// check gives the expected jobs, or every problem of the options at once.
func (o *reportOptions) check(inActions bool) ([]fleet.Job, []string) {
	d := &o.c
	var problems []string
	jobs, err := expected(o.matrix, o.expect)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if err := d.ApplyPreset(o.set); err != nil {
		problems = append(problems, err.Error())
	}
	if err := d.CheckLimits(); err != nil {
		problems = append(problems, err.Error())
	}
	problems = append(problems, trustedInput(d)...)
	_, fromGitHub, err := history.Spec(d.Baseline)
	switch {
	case err != nil:
		problems = append(problems, err.Error())
	case d.Baseline != "" && !fromGitHub:
		problems = append(problems, fmt.Sprintf("--baseline %s: report takes github:PATTERN (each job has its own baseline); pass e.g. github:release/**", d.Baseline))
	case fromGitHub && !inActions:
		problems = append(problems, "--baseline github: reads this workflow's history, so it runs inside GitHub Actions only")
	}
	if o.releases < 0 || o.releases > 20 || o.releases > 0 && !fromGitHub {
		problems = append(problems, fmt.Sprintf("--history %d: pass 0 to 20, with --baseline github:PATTERN", o.releases))
	}
	if d.Comment != "on-pr" && d.Comment != "never" {
		problems = append(problems, fmt.Sprintf("--comment %q: pass on-pr or never", d.Comment))
	}
	if err := config.CheckPRNumber(d.PRNumber); err != nil {
		problems = append(problems, err.Error())
	}
	for _, dir := range o.dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			problems = append(problems, fmt.Sprintf("%s is not a directory; pass the downloaded artifacts' directories (download-artifact puts each in PATH/NAME)", dir))
		}
	}
	if _, err := fleet.Artifacts(o.dirs); err != nil {
		problems = append(problems, err.Error())
	}
	o.limits = fleet.Limits{Judge: d.Limits(), FastRoute: d.FastRoute, SlowRoute: d.SlowRoute, RoutesSet: o.set("fast-route") || o.set("slow-route"),
		Trusted: trustedOf(d), DevicesSet: o.set("witness-device"), LibrariesSet: o.set("witness-library"),
		LoadExpectSet: o.set("load-expect"), LoadFirstTokenSet: d.LoadFirstTokenMS > 0}
	return jobs, problems
}

// reportInActions merges with the baselines from history, and posts.
func (e *env) reportInActions(ctx context.Context, o *reportOptions, jobs []fleet.Job, started time.Time) int {
	a := newAction(e.getenv, e.raw)
	if o.token != "" {
		a.AddMask(o.token)
	}
	gc, pub := e.publisher(a, o.token, o.c.CheckName, o.c.Comment == "on-pr", o.c.PRNumber)
	var baselines map[string]fleet.Baseline
	var hist *fleet.History
	if pattern, fromGitHub, _ := history.Spec(o.c.Baseline); fromGitHub {
		src, err := e.historySource(gc, o.token, pattern)
		if err == nil {
			baselines, hist, err = e.baselines(ctx, src, o.c.CheckName, jobs, o.limits, o.releases, func(why string) {
				msg := console.Text(why)
				fmt.Fprintf(e.stderr, "baseline skipped: %s; the next older run is tried\n", msg)
				a.Noticef("baseline skipped: %s; the next older run is tried", msg)
			})
		}
		if err != nil {
			return e.reportBadInput(ctx, true, o.token, o.c.CheckName, started, []string{err.Error()})
		}
		for _, b := range baselines {
			if b.Note != "" {
				a.Noticef("no baseline: %s; that job is judged without the baseline assertion", b.Note)
			}
		}
	}
	m := fleet.Merge(ctx, o.c.CheckName, jobs, o.dirs, o.limits, baselines)
	if gc != nil {
		m.RunURL = gc.RunURL()
	}
	e.reportPost(ctx, a, pub, m, hist, started)
	return e.reportDone(m, hist, o.summary)
}

// reportPost posts the merged verdict: the check run and the sticky comment,
// the job summary, the outputs and an error annotation per failed row.
func (e *env) reportPost(ctx context.Context, a *githubactions.Action, pub *publish.Publisher, m *fleet.Merged, hist *fleet.History, started time.Time) {
	md := m.Markdown(publish.CommentLimit-200, hist)
	if pub != nil {
		pctx, cancel := publish.Timeout(ctx)
		pub.Post(pctx, publish.Outcome{Pass: m.Pass(), Title: m.Title(), Summary: md, Started: started, Finished: time.Now()})
		cancel()
	}
	if e.getenv("GITHUB_STEP_SUMMARY") != "" {
		a.AddStepSummary(md)
	}
	if e.getenv("GITHUB_OUTPUT") != "" {
		pass, fail, missing := m.Count()
		a.SetOutput("result", map[bool]string{true: "pass", false: "fail"}[m.Pass()])
		a.SetOutput("passed", fmt.Sprint(pass))
		a.SetOutput("failed", fmt.Sprint(fail))
		a.SetOutput("missing", fmt.Sprint(missing))
	}
	for _, r := range m.Rows {
		if r.State != fleet.Pass {
			a.WithFieldsMap(map[string]string{"title": r.CheckName}).Errorf("%s", strings.Join(r.Why, "; "))
		}
	}
}

// reportBadInput says what is wrong and exits 2. Inside Actions it also
// completes the merged check run as a failure: the required check must not
// stay missing, nor keep an earlier attempt's success on this commit.
func (e *env) reportBadInput(ctx context.Context, inActions bool, token, checkName string, started time.Time, problems []string) int {
	text := strings.Join(problems, "\n")
	fmt.Fprintf(e.stderr, "npu-serve-smoke report: bad input:\n%s\n", indent(text))
	if !inActions {
		return exitUsage
	}
	a := newAction(e.getenv, e.raw)
	if token != "" {
		a.AddMask(token)
	}
	a.WithFieldsMap(map[string]string{"title": checkName + ": bad input"}).Errorf("%s", text)
	if _, pub := e.publisher(a, token, checkName, false, 0); pub != nil {
		pctx, cancel := publish.Timeout(ctx)
		defer cancel()
		pub.Post(pctx, publish.Outcome{Title: "FAIL: bad input, no job was judged",
			Summary: "The merge could not judge the jobs:\n\n```text\n" + strings.ReplaceAll(text, "`", "'") + "\n```\n", Started: started, Finished: time.Now()})
	}
	return exitUsage
}

// reportDone prints the rows, writes --summary, and gives the exit code.
func (e *env) reportDone(m *fleet.Merged, hist *fleet.History, summary string) int {
	// The rows quote the jobs' evidence: no workflow command in it.
	resume := e.cmds.Stop(e.raw)
	m.Console(e.stdout)
	resume()
	if summary != "" {
		if err := os.WriteFile(summary, []byte(m.Markdown(publish.StepSummaryLimit, hist)), 0o644); err != nil {
			fmt.Fprintf(e.stderr, "npu-serve-smoke report: --summary: %v\n", err)
		}
	}
	if bad := m.BadInput(); len(bad) > 0 {
		fmt.Fprintf(e.stderr, "npu-serve-smoke report: bad input:\n%s\n", indent(strings.Join(bad, "\n")))
		return exitUsage
	}
	if m.Pass() {
		return exitPass
	}
	return exitFail
}

// expected is the jobs of --matrix and --expect.
func expected(matrix string, expect []string) ([]fleet.Job, error) {
	var jobs []fleet.Job
	var errs []error
	if matrix != "" {
		js, err := fleet.ParseMatrix(matrix)
		if err != nil {
			errs = append(errs, fmt.Errorf("--matrix: %v", err))
		}
		jobs = append(jobs, js...)
	}
	for _, s := range expect {
		j, err := fleet.ParseExpect(s)
		if err != nil {
			errs = append(errs, err)
		}
		jobs = append(jobs, j)
	}
	if matrix == "" && len(expect) == 0 {
		errs = append(errs, errors.New("no expected job: pass --matrix (the jobs' matrix) or --expect, so that a job that never uploaded is a failed row, not a silent absence"))
	}
	if len(errs) == 0 && len(expect) > 0 {
		// --expect's jobs beside the matrix's and each other.
		if err := fleet.Distinct(jobs); err != nil {
			errs = append(errs, fmt.Errorf("--matrix and --expect: %v", err))
		}
	}
	return jobs, errors.Join(errs...)
}

// historySource is this workflow's history in this repository.
func (e *env) historySource(gc *publish.Context, token, pattern string) (*history.Source, error) {
	if gc == nil {
		return nil, errors.New("--baseline github: needs the GitHub context (GITHUB_REPOSITORY)")
	}
	if token == "" {
		return nil, errors.New("--baseline github: needs a token with actions: read; " + tokenFrom)
	}
	wf, err := history.WorkflowFile(e.getenv("GITHUB_WORKFLOW_REF"))
	if err != nil {
		return nil, err
	}
	client, err := publish.NewClient(gc, token, publish.DefaultRetry(), history.APITransport(nil))
	if err != nil {
		return nil, err
	}
	var this int64
	fmt.Sscan(gc.RunID, &this)
	return &history.Source{Client: client, Owner: gc.Owner, Repo: gc.Repo, Workflow: wf, Pattern: pattern, ThisRun: this}, nil
}

// baselines finds each job's artifact in the latest successful run on the
// pattern that this repository's own code made: a candidate that cannot
// serve is a notice (through skipped) and the next older of the newest
// history.Candidates is tried. With releases > 0 it also gives the medians
// of that many earlier runs. Everything shares one deadline. Only a failure
// to read GitHub at all is an error; a job with no baseline is its row's
// note.
func (e *env) baselines(ctx context.Context, src *history.Source, base string, jobs []fleet.Job, lim fleet.Limits, releases int, skipped func(why string)) (map[string]fleet.Baseline, *fleet.History, error) {
	out := map[string]fleet.Baseline{}
	tmp, err := os.MkdirTemp(e.getenv("RUNNER_TEMP"), "npu-serve-smoke-baselines-*")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := src.Deadline(ctx)
	defer cancel()
	runs, err := src.Runs(ctx, max(history.Candidates, releases))
	var nf *history.NotFound
	switch {
	case errors.As(err, &nf):
	case err != nil:
		return nil, nil, err
	case len(runs) == 0:
		nf = &history.NotFound{Why: fmt.Sprintf("no successful run of %s on %s", src.Workflow, src.Pattern)}
	}
	if nf != nil {
		for _, j := range jobs {
			out[j.CheckName(base)] = fleet.Baseline{Note: nf.Why}
		}
		return out, nil, nil
	}
	candidates := runs[:min(len(runs), history.Candidates)]
	for _, j := range jobs {
		name := j.CheckName(base)
		jl, _, _ := lim.For(j)
		out[name] = fleet.Baseline{Note: fmt.Sprintf("none of the %d newest successful runs of %s on %s holds a baseline that can serve", len(candidates), src.Workflow, src.Pattern)}
		for _, run := range candidates {
			res, err := src.Result(ctx, run, j.Artifact(base), tmp, history.Want{Model: j[fleet.KeyModel], CheckName: name})
			if err == nil {
				if _, err = history.Serves(res, run.URL, jl); err != nil {
					err = &history.Unusable{Why: fmt.Sprintf("artifact %s of run %d (%s on %s): %v", j.Artifact(base), run.ID, run.URL, run.Branch, err)}
				}
			}
			var un *history.Unusable
			var none *history.NotFound
			if err == nil {
				out[name] = fleet.Baseline{Result: res, From: run.URL}
				break
			}
			if ctx.Err() != nil {
				why := fmt.Sprintf("the look through GitHub's history was stopped (%v)", context.Cause(ctx))
				if errors.As(context.Cause(ctx), &none) {
					why = none.Why
				}
				out[name] = fleet.Baseline{Note: why}
				break
			}
			if !errors.As(err, &un) && !errors.As(err, &none) {
				return nil, nil, err
			}
			skipped(err.Error())
		}
	}
	if releases == 0 {
		return out, nil, nil
	}
	hist := &fleet.History{Medians: map[string][]float64{}}
	chart := runs[:min(len(runs), releases)]
	for i := len(chart) - 1; i >= 0; i-- {
		hist.Releases = append(hist.Releases, chart[i].Branch)
		for _, j := range jobs {
			name := j.CheckName(base)
			v := math.NaN()
			res, err := out[name].Result, error(nil)
			if res == nil || out[name].From != chart[i].URL {
				res, err = src.Result(ctx, chart[i], j.Artifact(base), tmp, history.Want{CheckName: name})
			}
			if err == nil && res != nil {
				jl, _, _ := lim.For(j)
				if b, err := history.Baseline(res, "", jl); err == nil {
					v = b.Rate
				}
			}
			hist.Medians[name] = append(hist.Medians[name], v)
		}
	}
	return out, hist, nil
}
