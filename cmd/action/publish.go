package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/console"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/evidence"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/publish"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// publishRun posts a finished run: the fork pull request pattern, where the
// job that measured has no token that can write and a workflow_run job
// posts for it. Everything in the run's directory was written by the run's
// code, so only its evidence is read: the check name, the limits, the load
// settings and the witness classes are this command's own (the gate's
// defaults unless given), and the serve log, the replies, the load rounds
// and what the witnesses saw are judged again here; the verdict in
// result.json is ignored.
func (e *env) publishRun(ctx context.Context, args []string) int {
	fs := e.flagSet("publish")
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: npu-serve-smoke publish DIR [flags]\n\nJudges the evidence in DIR (serve.log, reply files, load rounds, witnesses) with the limits,\nload settings and witness classes given here (the gate's defaults unless given; never the run's\nown) and posts the verdict as a check run and a sticky PR\ncomment, from inside GitHub Actions.\n\n")
		fs.PrintDefaults()
	}
	c := config.Default()
	fs.StringVar(&c.CheckName, "check-name", c.CheckName, "the check run's name (never taken from DIR)")
	fs.StringVar(&c.Preset, "preset", c.Preset, "a kind of serve, which sets its route patterns unless given here: "+strings.Join(config.PresetNames(), ", "))
	limitFlags(fs, &c)
	trustedFlags(fs, &c)
	fs.StringVar(&c.Comment, "comment", c.Comment, "on-pr or never")
	fs.IntVar(&c.PRNumber, "pr-number", 0, "the pull request (default: the event's, else the run's own, checked against its head)")
	tokenFlags(fs, &c.GitHubToken, &c.GitHubTokenFile, "the check run and the comment")
	dir, ok := e.parseDir(fs, args)
	if !ok {
		return exitUsage
	}
	if err := refused(fs); err != nil {
		fmt.Fprintf(e.stderr, "npu-serve-smoke publish: bad input, nothing was posted:\n%s\n", indent(err.Error()))
		return exitUsage
	}
	if problems := publishInput(&c, setFlags(fs)); problems != "" {
		fmt.Fprintf(e.stderr, "npu-serve-smoke publish: bad input, nothing was posted:\n%s\n", indent(problems))
		return exitUsage
	}
	if e.parseOnly {
		return exitPass
	}
	if e.getenv("GITHUB_ACTIONS") != "true" {
		fmt.Fprintf(e.stderr, "npu-serve-smoke publish: not inside GitHub Actions (GITHUB_ACTIONS is not true); run it in a workflow job\n")
		return exitUsage
	}
	token, err := e.githubToken(c.GitHubTokenFile)
	if err != nil {
		fmt.Fprintf(e.stderr, "npu-serve-smoke publish: bad input, nothing was posted:\n%s\n", indent(err.Error()))
		return exitUsage
	}
	c.GitHubToken = token
	a := newAction(e.getenv, e.raw)
	if c.GitHubToken != "" {
		a.AddMask(c.GitHubToken)
	}
	res, err := report.Read(dir)
	if err != nil {
		e.stderr.Printf("npu-serve-smoke publish: %v", err)
		return exitUsage
	}
	// The run's baseline is its own claim: only --baseline counts here.
	var bl *judge.Baseline
	if c.Baseline != "" {
		if bl, err = config.LoadBaseline(c.Baseline, c.Limits()); err != nil {
			fmt.Fprintf(e.stderr, "npu-serve-smoke publish: bad input, nothing was posted:\n%s\n", indent(err.Error()))
			return exitUsage
		}
	}
	// So is its kind: every artifact is judged here as a run.
	if claim := evidence.AsRun(res); claim != "" {
		a.Warningf("%s", console.Text(claim))
	}
	// So are its load limits and witness classes: this command's own
	// judge its load rounds and witnesses.
	if note := evidence.Trust(res, trustedOf(&c)); note != "" {
		a.Warningf("%s", console.Text(note))
	}
	// So is its reference.json: only --reference counts here.
	res.Reference = nil
	if c.Reference != "" {
		if res.Reference, err = referenceFor(res, c.Reference); err != nil {
			fmt.Fprintf(e.stderr, "npu-serve-smoke publish: bad input, nothing was posted:\n%s\n", indent(err.Error()))
			return exitUsage
		}
	}
	if err := rejudge(ctx, dir, res, &c, bl); err != nil {
		a.Warningf("%s", console.Text(err.Error()))
	}
	// The check name is this command's; the run's directory is the one
	// read here, not one the run claims.
	res.Run.CheckName, res.Run.Out = c.CheckName, dir
	gc, pub := e.publisher(a, c.GitHubToken, c.CheckName, c.Comment == "on-pr", c.PRNumber)
	if gc != nil && gc.EvidenceFrom != "" {
		a.Noticef("%s", console.Text(publish.Untrusted(gc.EvidenceFrom)))
		if e.getenv("GITHUB_STEP_SUMMARY") != "" {
			a.AddStepSummary(publish.UntrustedNote(gc.EvidenceFrom))
		}
	}
	if res.GitHub != nil && gc != nil {
		// The run's GitHub facts are its own claims: the commit shown is
		// the one the event names, the run linked the one GitHub links.
		res.GitHub.SHA, res.GitHub.RunURL = gc.SHA, gc.EvidenceRunURL
	}
	if pub == nil {
		return exitFail
	}
	// The step outputs name the verdict given here, in files of publish's
	// own: the run's result.json and summary.md are its claims.
	note := ""
	if gc.EvidenceFrom != "" {
		note = publish.UntrustedNote(gc.EvidenceFrom)
	}
	files, err := writeJudged(e.getenv, res, note)
	if err != nil {
		a.Warningf("%s", console.Text(fmt.Sprintf("the judged result.json and summary.md could not be written (%v); the outputs result-json and summary-md are empty", err)))
	}
	if gc.PR == 0 && res.GitHub != nil && res.GitHub.PR != 0 {
		// The run's own pull request: believed only when its head is the
		// commit this event reports on.
		gc.PR = res.GitHub.PR
		if err := pub.CheckPR(ctx); err != nil {
			a.Noticef("%s", console.Text("no PR comment: "+err.Error()))
			gc.PR = 0
		}
	}
	checkID := pub.Finish(ctx, res, report.Markdown(res, publish.CheckTextLimit))
	publish.Step(a, e.getenv, res, files, checkID)
	return exitPass
}

// writeJudged writes the result as judged here, result.json and summary.md
// (note above the report), into a fresh directory of its own under
// RUNNER_TEMP, and returns that directory, "" when it could not.
func writeJudged(getenv func(string) string, res *report.Result, note string) (string, error) {
	tmp := getenv("RUNNER_TEMP")
	if tmp == "" {
		tmp = os.TempDir()
	}
	dir, err := os.MkdirTemp(tmp, "npu-serve-smoke-publish-")
	if err != nil {
		return "", err
	}
	if err := report.WriteResult(filepath.Join(dir, report.ResultFile), res); err != nil {
		return "", err
	}
	md := note + report.Markdown(res, report.MarkdownLimit-len(note))
	if err := os.WriteFile(filepath.Join(dir, report.SummaryFile), []byte(md), 0o644); err != nil {
		return "", err
	}
	return dir, nil
}

// publishInput applies the preset and checks the limits and the check name,
// every problem at once, "" when there is none.
func publishInput(c *config.Config, set func(string) bool) string {
	var problems []string
	if err := c.ApplyPreset(set); err != nil {
		problems = append(problems, err.Error())
	}
	if err := c.CheckLimits(); err != nil {
		problems = append(problems, err.Error())
	}
	problems = append(problems, trustedInput(c)...)
	if strings.TrimSpace(c.CheckName) == "" {
		problems = append(problems, "--check-name is empty; pass the name the required status check matches, e.g. 'npu serve smoke'")
	}
	if c.Comment != "on-pr" && c.Comment != "never" {
		problems = append(problems, fmt.Sprintf("--comment %q: pass on-pr or never", c.Comment))
	}
	if err := config.CheckPRNumber(c.PRNumber); err != nil {
		problems = append(problems, err.Error())
	}
	return strings.Join(problems, "\n")
}

// trustedFlags defines the flags of the settings a run's result.json holds
// that publish and report take from no artifact (evidence.Trusted): the
// load settings and the witness classes, the gate's names and defaults.
func trustedFlags(fs *flag.FlagSet, c *config.Config) {
	fs.IntVar(&c.Load, "load", c.Load, "the streams the run's load rounds were asked with (the gate's --load): a run without such rounds fails its load row (0: none asked; rounds a run holds are judged all the same)")
	fs.StringVar(&c.LoadExpect, "load-expect", c.LoadExpect, "batch or serial: what the serve's load rounds are judged as (default: the preset's, serial for ovms and flm, else batch)")
	fs.Float64Var(&c.LoadEfficiency, "load-efficiency", c.LoadEfficiency, "batch: the least η of a round (0: the gate's default at the run's streams, 0.5, or 1.3/N where higher)")
	fs.Float64Var(&c.LoadFirstTokenMS, "load-first-token-ms", c.LoadFirstTokenMS, "batch: the most a round's worst first token may take, ms (0: twice --first-token-ms)")
	fs.StringVar(&c.Witness, "witness", c.Witness, "on or off: weigh what the run's witnesses saw of the serve's processes, against the classes given here")
	fs.Var(&patterns{list: &c.WitnessDevices}, "witness-device", "glob of a device node the fast route's processes hold open (repeatable; default: the preset's)")
	fs.Var(&patterns{list: &c.WitnessLibraries}, "witness-library", "glob of a backend library's file name the fast route's processes map (repeatable; default: the preset's)")
}

// trustedInput checks the load settings and the witness classes, every
// problem at once.
func trustedInput(c *config.Config) []string {
	var problems []string
	if c.Load != 0 && (c.Load < 2 || c.Load > config.MaxLoad) {
		problems = append(problems, fmt.Sprintf("--load %d: pass 0 (none asked) or 2 to %d, the streams the run was asked with", c.Load, config.MaxLoad))
	}
	if c.LoadExpect != "" && c.LoadExpect != judge.LoadBatch && c.LoadExpect != judge.LoadSerial {
		problems = append(problems, fmt.Sprintf("--load-expect %q: pass batch (the serve decodes the streams together) or serial (it takes one request at a time)", c.LoadExpect))
	}
	if e := c.LoadEfficiency; e != 0 && !(e > 0 && e <= 1) {
		problems = append(problems, fmt.Sprintf("--load-efficiency %v: pass a fraction above 0 and at most 1 of N single streams' rate, or 0 for the default at the run's streams (0.5, or 1.3/N where higher)", e))
	} else if why := config.SlicedFloor(e, c.Load); e != 0 && c.Load > 0 && why != "" && c.LoadExpect != judge.LoadSerial {
		problems = append(problems, why)
	}
	if !(c.LoadFirstTokenMS >= 0) || math.IsInf(c.LoadFirstTokenMS, 0) {
		problems = append(problems, fmt.Sprintf("--load-first-token-ms %v: pass a positive number of milliseconds, or 0 for twice --first-token-ms", c.LoadFirstTokenMS))
	}
	if err := c.CheckWitness(); err != nil {
		problems = append(problems, err.Error())
	}
	return problems
}

// trustedOf is c's load settings and witness classes, as evidence.Trust
// puts them into a run read from an artifact.
func trustedOf(c *config.Config) evidence.Trusted {
	return evidence.Trusted{Load: c.LoadLimits(), Witness: c.Witness == "on",
		Devices: c.WitnessDevices, Libraries: c.WitnessLibraries, Binary: c.WitnessBinary, SlowOnDevice: c.WitnessSlowOnDevice}
}
