package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/evidence"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/history"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// Row states.
const (
	Pass    = "pass"
	Fail    = "fail"
	Missing = "missing"
)

// Limits are the merge's own limits, from its flags. A job's matrix values
// floor and first-token-ms replace the figures, and its preset the route
// patterns unless the flags gave them.
type Limits struct {
	Judge     judge.Limits
	FastRoute []string
	SlowRoute []string
	RoutesSet bool // the route patterns came from flags
	// Trusted are the merge's load settings and witness classes
	// (evidence.Trusted), never an artifact's. A job's preset gives its
	// witness classes and its load expectation unless the flags did, and
	// a job's first-token-ms its load first-token limit (twice it) unless
	// the flags gave one.
	Trusted                          evidence.Trusted
	DevicesSet, LibrariesSet         bool
	LoadExpectSet, LoadFirstTokenSet bool
}

// TrustedFor is the load settings and witness classes of one job.
func (l Limits) TrustedFor(j Job) evidence.Trusted {
	t := l.Trusted
	jl, _, _ := l.For(j)
	if !l.LoadFirstTokenSet {
		t.Load.FirstTokenMS = 2 * jl.FirstTokenMS
	}
	p, ok := config.Presets[j.Preset()]
	if !ok {
		return t
	}
	w := config.PresetWitnesses[j.Preset()]
	if !l.DevicesSet {
		t.Devices = w.Devices
	}
	if !l.LibrariesSet {
		t.Libraries = w.Libraries
	}
	t.Binary, t.SlowOnDevice = w.Binary, w.SlowOnDevice
	if !l.LoadExpectSet {
		t.Load.Expect = judge.LoadBatch
		if p.Serial {
			t.Load.Expect = judge.LoadSerial
		}
	}
	return t
}

// For is the limits of one job.
func (l Limits) For(j Job) (judge.Limits, []string, []string) {
	jl, fast, slow := l.Judge, l.FastRoute, l.SlowRoute
	if v, err := strconv.ParseFloat(j[KeyFloor], 64); err == nil {
		jl.Floor = v
	}
	if v, err := strconv.ParseFloat(j[KeyFirstTokenMS], 64); err == nil {
		jl.FirstTokenMS = v
	}
	if p, ok := config.Presets[j.Preset()]; ok && !l.RoutesSet {
		fast, slow = p.FastRoute, p.SlowRoute
	}
	return jl, fast, slow
}

// Baseline is the earlier run a row is compared with, or why it has none.
type Baseline struct {
	Result *report.Result // nil: none
	From   string         // where it came from, e.g. the run's link
	Note   string         // why there is none ("" when none was asked for)
}

// Row is one expected job, judged.
type Row struct {
	Job       Job
	CheckName string
	Artifact  string
	State     string   // Pass, Fail or Missing
	Why       []string // what failed, or why the row is missing
	Result    *report.Result
	Baseline  *judge.Baseline // the earlier run's medians, judged as this row
	Note      string          // why there is no baseline, when one was asked for
	BadInput  string          // the baseline cannot be one (another model): exit 2
}

// Median figures of the row's replies, ok false when there are none.
func (r *Row) Rate() (float64, bool) {
	if r.Result == nil {
		return 0, false
	}
	return r.Result.Median(r.Result.Rate)
}

// FirstToken is the row's median first token.
func (r *Row) FirstToken() (float64, bool) {
	if r.Result == nil {
		return 0, false
	}
	return r.Result.Median((*measure.Reply).FirstTokenMS)
}

// Merged is the fleet's verdict.
type Merged struct {
	Base       string // the check name the jobs' names start with
	Rows       []Row
	Unexpected []string // directories no job of the matrix names
	RunURL     string   // the merging run's link, from its own context
}

// BadInput is every row's baseline that cannot be one.
func (m *Merged) BadInput() []string {
	var out []string
	for _, r := range m.Rows {
		if r.BadInput != "" {
			out = append(out, r.BadInput)
		}
	}
	return out
}

// Pass reports whether every expected job passed.
func (m *Merged) Pass() bool {
	for _, r := range m.Rows {
		if r.State != Pass {
			return false
		}
	}
	return len(m.Rows) > 0
}

// Count is how many rows are in each state.
func (m *Merged) Count() (pass, fail, missing int) {
	for _, r := range m.Rows {
		switch r.State {
		case Pass:
			pass++
		case Missing:
			missing++
		default:
			fail++
		}
	}
	return pass, fail, missing
}

// Artifacts is dirs by artifact name (a directory's base name). A name
// given by two different directories is an error naming both: which one is
// the job's cannot be told, and the other could hide a failing run.
func Artifacts(dirs []string) (map[string][]string, error) {
	byName := map[string][]string{}
	var dup []string
	for _, d := range dirs {
		name := filepath.Base(filepath.Clean(d))
		if slices.ContainsFunc(byName[name], func(o string) bool { return sameDir(o, d) }) {
			continue
		}
		byName[name] = append(byName[name], d)
		if len(byName[name]) == 2 {
			dup = append(dup, name)
		}
	}
	var msgs []string
	for _, name := range dup {
		msgs = append(msgs, twice(name, byName[name]))
	}
	if len(msgs) > 0 {
		return byName, errors.New(strings.Join(msgs, "; "))
	}
	return byName, nil
}

func twice(name string, dirs []string) string {
	return fmt.Sprintf("the artifact %s is in %d directories (%s); pass each job's artifact once (download-artifact puts each in PATH/NAME: give one PATH)", name, len(dirs), strings.Join(dirs, ", "))
}

// sameDir reports whether a and b name one directory.
func sameDir(a, b string) bool {
	if fa, err := os.Stat(a); err == nil {
		if fb, err := os.Stat(b); err == nil {
			return os.SameFile(fa, fb)
		}
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// Merge judges each job of jobs from the directory named by its artifact
// among dirs, with the limits l and the baselines by check name. A job with
// no directory is Missing; a directory no job names is listed, not judged;
// a job whose artifact is in two directories fails, naming both (Artifacts
// says so before a merge). Once ctx is done, the jobs left fail unjudged.
func Merge(ctx context.Context, base string, jobs []Job, dirs []string, l Limits, baselines map[string]Baseline) *Merged {
	byName, _ := Artifacts(dirs)
	m := &Merged{Base: base}
	for _, j := range jobs {
		row := Row{Job: j, CheckName: j.CheckName(base), Artifact: j.Artifact(base)}
		bl := baselines[row.CheckName]
		row.Note = bl.Note
		found := byName[row.Artifact]
		delete(byName, row.Artifact)
		switch {
		case len(found) == 0:
			row.State = Missing
			row.Why = []string{fmt.Sprintf("no artifact %s: the job did not run to its upload (see its log), or uploaded under another name", row.Artifact)}
		case len(found) > 1:
			row.State, row.Why = Fail, []string{twice(row.Artifact, found)}
		case ctx.Err() != nil:
			row.State, row.Why = Fail, []string{fmt.Sprintf("not judged: the merge was cancelled (%v)", context.Cause(ctx))}
		}
		if row.State != "" {
			m.Rows = append(m.Rows, row)
			continue
		}
		dir := found[0]
		jl, fast, slow := l.For(j)
		row.Baseline, row.BadInput = baselineOf(bl, dir, jl)
		res, note, err := Rejudge(ctx, dir, jl, fast, slow, l.TrustedFor(j), row.Baseline)
		row.Result = res
		switch {
		case ctx.Err() != nil:
			row.State, row.Why = Fail, []string{fmt.Sprintf("not judged: the merge was cancelled (%v)", context.Cause(ctx))}
		case row.BadInput != "":
			row.State, row.Why = Fail, []string{row.BadInput}
		case err != nil:
			row.State, row.Why = Fail, []string{err.Error()}
		case res.Run.CheckName != row.CheckName:
			row.State = Fail
			row.Why = []string{fmt.Sprintf("the artifact %s holds a run of check %q, not %q; give the job check-name %q", row.Artifact, res.Run.CheckName, row.CheckName, row.CheckName)}
		case res.Verdict == report.Cancelled:
			row.State, row.Why = Fail, []string{"the run was cancelled"}
		case !res.Pass():
			row.State = Fail
			for _, a := range res.Assertions {
				if !a.OK {
					row.Why = append(row.Why, a.Name+": "+a.Detail)
				}
			}
			if note != "" {
				row.Why = append(row.Why, note)
			}
		default:
			row.State = Pass
		}
		letGo(row.Result)
		m.Rows = append(m.Rows, row)
	}
	for _, d := range dirs {
		if _, left := byName[filepath.Base(filepath.Clean(d))]; left {
			m.Unexpected = append(m.Unexpected, d)
		}
	}
	return m
}

// letGo drops what a judged row no longer needs of its run: each reply's
// tokens with their alternatives (most of a run's memory; the agreement is
// judged by now), the warm-ups, the reference's replies. A merge of many
// jobs, each at a run directory's bounds (report.MaxRunObjects), would
// otherwise hold them all until the table is posted. The figures the table
// shows (rates, first tokens, route, agreement) stay.
func letGo(res *report.Result) {
	if res == nil {
		return
	}
	for i := range res.Replies {
		res.Replies[i].Generated = nil
	}
	res.Warmups = nil
	if res.Reference != nil {
		res.Reference.Replies = nil
	}
}

// baselineOf is the earlier run's medians as the row's limits judge them,
// once it is known to be a run of the same model as the one in dir.
func baselineOf(bl Baseline, dir string, l judge.Limits) (*judge.Baseline, string) {
	if bl.Result == nil {
		return nil, ""
	}
	now, err := report.Read(dir)
	if err == nil && now.Run.Model != bl.Result.Run.Model {
		return nil, fmt.Sprintf("the baseline %s is a run of model %q, this job's of %q; a baseline must be a run of the same job", bl.From, bl.Result.Run.Model, now.Run.Model)
	}
	b, err := history.Baseline(bl.Result, bl.From, l)
	if err != nil {
		return nil, err.Error()
	}
	return b, ""
}

// Rejudge reads the run in dir and judges it from its evidence alone
// (evidence.Judge) with the limits and route patterns given, and the load
// settings and witness classes t (evidence.Trust), as a run whatever kind
// it claims (evidence.AsRun). A run that was cancelled stays cancelled.
// note is what could not be read, and a kind claimed, if any.
func Rejudge(ctx context.Context, dir string, l judge.Limits, fast, slow []string, t evidence.Trusted, b *judge.Baseline) (res *report.Result, note string, err error) {
	res, err = report.Read(dir)
	if err != nil {
		return nil, "", err
	}
	cancelled := res.Verdict == report.Cancelled
	var notes []string
	if claim := evidence.AsRun(res); claim != "" {
		notes = append(notes, claim)
	}
	if n := evidence.Trust(res, t); n != "" {
		notes = append(notes, n)
	}
	if err := evidence.Judge(ctx, dir, res, l, fast, slow, b); err != nil {
		notes = append(notes, err.Error())
	}
	note = strings.Join(notes, "; ")
	if cancelled {
		res.Verdict = report.Cancelled
	}
	return res, note, nil
}

// Title is the merged check run's title.
func (m *Merged) Title() string {
	pass, fail, missing := m.Count()
	word := "FAIL"
	if m.Pass() {
		word = "PASS"
	}
	t := fmt.Sprintf("%s: %d of %d jobs passed", word, pass, len(m.Rows))
	var bad []string
	if fail > 0 {
		bad = append(bad, fmt.Sprintf("%d failed", fail))
	}
	if missing > 0 {
		bad = append(bad, fmt.Sprintf("%d missing", missing))
	}
	if len(bad) > 0 {
		t += " (" + strings.Join(bad, ", ") + ")"
	}
	return t
}
