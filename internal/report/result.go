// Package report renders a run: console lines, out/result.json and
// out/summary.md. Rendering is pure; reading and writing out/ is done by
// Write and Read.
package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/agree"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// Schema names the version of result.json.
const Schema = "npu-serve-smoke/v1"

// File names in out/.
const (
	ResultFile  = "result.json"
	SummaryFile = "summary.md"
	LogFile     = "serve.log"
)

// Verdicts.
const (
	Pass      = "pass"
	Fail      = "fail"
	Cancelled = "cancelled"
)

// Result is everything a run found: result.json.
type Result struct {
	Schema     string            `json:"schema"`
	Verdict    string            `json:"verdict"` // Pass, Fail or Cancelled
	Limits     judge.Limits      `json:"limits"`
	Assertions []judge.Assertion `json:"assertions"`
	Route      route.Evidence    `json:"route"`
	// Witness is what the serve's processes showed of the route while it
	// decoded, and its own account; none with --witness off, or in a run
	// made before witnesses (judged on the log alone).
	Witness   *route.Witness  `json:"witness,omitempty"`
	Replies   []measure.Reply `json:"replies"`
	Figures   []Figures       `json:"figures,omitempty"` // derived from Replies
	Warmups   []measure.Reply `json:"warmups,omitempty"`
	NoReplies string          `json:"no_replies,omitempty"` // why there are none
	// Unwritten is each reply or warm-up file the run could not make or
	// write, "reply_N.json: why" (a full disk, the out directory gone):
	// that reply is in Replies (or Warmups) all the same, without its
	// tokens, which only its file keeps. A recording with a reply file
	// unwritten cannot serve as a reference.
	Unwritten []string        `json:"unwritten,omitempty"`
	Baseline  *judge.Baseline `json:"baseline,omitempty"`
	// Reference is the trusted route's run the agreement is judged
	// against, and Agreement how far each reply agrees with it.
	Reference *Reference    `json:"reference,omitempty"`
	Agreement []agree.Reply `json:"agreement,omitempty"`
	Intervals Intervals     `json:"intervals"`
	// Signs are the sequential rule's sign counts (docs/measuring.md),
	// figured from Replies at Limits.Lead; none for a run made before the
	// rule.
	Signs *judge.Signs `json:"signs,omitempty"`
	// Load is --load N's rounds, each the N replies of streams started
	// together, and LoadRounds their figures (derived).
	Load       *judge.LoadRun `json:"load,omitempty"`
	LoadRounds []judge.Round  `json:"load_rounds,omitempty"`
	// Extra says how many replies were taken past --replies, and why.
	Extra Extra `json:"extra"`
	// Energy is what the runner's energy sensor said of the judged
	// window; absent with --energy off.
	Energy *judge.Energy `json:"energy,omitempty"`
	Run    RunFacts      `json:"run"`
	Serve  ServeFacts    `json:"serve"`
	Hold   HoldFacts     `json:"hold"`
	GitHub *GitHubFacts  `json:"github,omitempty"`
}

// Intervals are the medians' order-statistics intervals.
type Intervals struct {
	Rate       *stats.Interval `json:"rate,omitempty"`
	FirstToken *stats.Interval `json:"first_token,omitempty"`
}

// Extra is the replies taken because the verdict was in doubt: in a run made
// before the sequential rule, those past --replies while the median's
// interval held a limit. The rule keeps Max only.
type Extra struct {
	Replies int    `json:"replies"`
	Why     string `json:"why,omitempty"`
	Max     int    `json:"max"` // --max-replies as it applied
}

// SetIntervals figures the medians' intervals from the replies.
func (r *Result) SetIntervals() {
	rates, firstMS, _ := judge.Figures(r.Replies, r.Limits)
	r.Intervals = Intervals{}
	if iv, ok := stats.MedianInterval(rates); ok {
		r.Intervals.Rate = &iv
	}
	if iv, ok := stats.MedianInterval(firstMS); ok {
		r.Intervals.FirstToken = &iv
	}
	r.Signs = nil
	if r.Limits.Lead > 0 && len(r.Replies) > 0 {
		s, _ := judge.SignsOf(r.Replies, r.Limits, r.Limits.Lead)
		if r.Baseline != nil && !r.Baseline.TooFew() {
			b, _ := judge.BaselineSignsOf(r.Replies, r.Limits, *r.Baseline, r.Limits.Lead)
			s.Baseline = &b
		}
		r.Signs = &s
	}
}

// RunFacts say how the run was asked for.
type RunFacts struct {
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished"`
	Model     string    `json:"model,omitempty"`
	Replies   int       `json:"replies"` // --replies: asked at least
	Warmup    int       `json:"warmup"`
	MaxTokens int       `json:"max_tokens"`
	Thinking  string    `json:"thinking"`
	Prompts   string    `json:"prompts"` // "built-in" or the file
	Out       string    `json:"out"`
	CheckName string    `json:"check_name"`
	Tool      string    `json:"tool"` // the gate's version
	// Kind is KindReference for a run made by record: its replies are a
	// reference for other runs, its route and figures recorded, not judged.
	Kind string `json:"kind,omitempty"`
	// FirstRound is the prompts of the run's first round: every one of
	// them must be in a reference (`judge DIR --reference` checks it).
	FirstRound []string `json:"first_round,omitempty"`

	// OrderSeed is the seed of the order the prompts were asked in
	// (--order-seed); none in a run made before the order was drawn.
	OrderSeed *uint64 `json:"order_seed,omitempty"`
}

// ServeFacts say how the serve went.
type ServeFacts struct {
	Argv      []string `json:"argv"`
	Port      int      `json:"port"`
	PID       int      `json:"pid,omitempty"`
	ReadyPath string   `json:"ready_path,omitempty"`
	ReadyMS   float64  `json:"ready_ms,omitempty"`
	Exit      string   `json:"exit,omitempty"`
	Signal    string   `json:"signal,omitempty"` // the last signal it needed
	StopMS    float64  `json:"stop_ms,omitempty"`
	Swept     int      `json:"swept"`
	Survivors int      `json:"survivors"`
	Contain   string   `json:"contain,omitempty"` // what held the serve's tree: cgroup2, freezer or descendants
	// ContainWhy says why each mechanism auto tried before Contain was not
	// used ("cgroup2: ... not writable by uid 1001; freezer: ...").
	ContainWhy string `json:"contain_why,omitempty"`
	Cgroup     string `json:"cgroup,omitempty"` // the cgroup made for the serve, where one was
	LogBytes   int64  `json:"log_bytes"`
	// LogDropped is how many bytes of the log serve.log left out (its head
	// and tail are kept within --log-limit); the route was read on them all.
	LogDropped int64    `json:"log_dropped,omitempty"`
	LogTail    []string `json:"log_tail,omitempty"`
	// Left is what survived the stop, "pid command".
	Left []string `json:"left,omitempty"`
	// SupervisorStopped is how many times the serve's supervisor was found
	// stopped (SIGSTOP) at the serve's stop, and continued.
	SupervisorStopped int `json:"supervisor_stopped,omitempty"`
	// Polite says, on Windows, what the stop's polite request was ("CTRL_BREAK
	// to process group N", or why none could be sent) before the job was
	// ended; on Linux the TERM is in Signal.
	Polite string `json:"polite,omitempty"`
}

// HoldFacts say how the device was held.
type HoldFacts struct {
	Mode     string   `json:"mode"` // builtin, none, command:NAME
	Device   string   `json:"device"`
	Devices  []string `json:"devices,omitempty"` // the pool's devices held, when --device is a pool
	WaitedMS float64  `json:"waited_ms"`
	HeldMS   float64  `json:"held_ms"`
	// Lost says why the ticket's lock was not the run's own at the end of
	// the run (checked before it was released); "" when it was.
	Lost string `json:"lost,omitempty"`
	// Unhealthy says the device may be unhealthy, as its ticket found it:
	// processes an earlier run's stop could not end, still running (see
	// hold.Unhealthy); none when there were none.
	Unhealthy []string `json:"unhealthy,omitempty"`
}

// GitHubFacts is the Actions context of the run, when it ran in one.
type GitHubFacts struct {
	Repository string `json:"repository,omitempty"`
	SHA        string `json:"sha,omitempty"`
	Ref        string `json:"ref,omitempty"`
	Event      string `json:"event,omitempty"`
	PR         int    `json:"pr,omitempty"`
	RunURL     string `json:"run_url,omitempty"`
	Runner     string `json:"runner,omitempty"`
}

// Pass reports whether the verdict is a pass.
func (r *Result) Pass() bool { return r.Verdict == Pass }

// Judged sets the verdict and assertions from the judge, and the intervals.
// A reference's run (KindReference) is judged on its content and release
// only: NotJudged.
func (r *Result) Judged(v judge.Verdict) {
	r.SetIntervals()
	r.Figures = FiguresOf(r.Replies)
	r.LoadRounds = nil
	if r.Load != nil {
		r.LoadRounds = r.Load.Figures(judge.SingleOf(r.Replies, r.Limits.RateSource))
	}
	if r.Run.Kind == KindReference {
		v = NotJudged(v)
	}
	r.Assertions = v.Assertions
	r.Verdict = Fail
	if v.Pass {
		r.Verdict = Pass
	}
	r.Agreement = nil
	if r.Reference != nil {
		r.Agreement = judge.Agreements(r.Input())
	}
}

// NotJudgedWhy starts the detail of each assertion a reference's run records
// and does not judge.
const NotJudgedWhy = "recorded, not judged (a reference: the trusted route is slow by nature): "

// NotJudged is a reference's verdict: content and release judged, and the
// route, rate, first token and baseline recorded with their details, not
// judged.
func NotJudged(v judge.Verdict) judge.Verdict {
	out := judge.Verdict{Pass: true}
	for _, a := range v.Assertions {
		switch a.Name {
		case judge.Route, judge.Rate, judge.FirstToken, judge.Regression:
			a.OK, a.Detail = true, NotJudgedWhy+a.Detail
		}
		out.Pass = out.Pass && a.OK
		out.Assertions = append(out.Assertions, a)
	}
	return out
}

// Input is what the judge needs of the result.
func (r *Result) Input() judge.Input {
	return judge.Input{Route: r.Route, Witness: r.Witness, Replies: r.Replies, Limits: r.Limits, NoReplies: r.NoReplies, Baseline: r.Baseline,
		Reference: r.Reference.Judge(), Energy: r.Energy,
		Release: judge.Release{Survivors: r.Serve.Survivors, Left: r.Serve.Left, Lost: r.Hold.Lost, Stopped: r.Serve.SupervisorStopped},
		Load:    r.Load}
}

// Median is the median of the replies' figures that exist, for outputs and
// titles; ok is false when there are none.
func (r *Result) Median(f func(*measure.Reply) (float64, bool)) (float64, bool) {
	var xs []float64
	for i := range r.Replies {
		if v, ok := f(&r.Replies[i]); ok {
			xs = append(xs, v)
		}
	}
	return stats.Median(xs), len(xs) > 0
}

// Rate is the figure the rate assertion judges, for one reply.
func (r *Result) Rate(rep *measure.Reply) (float64, bool) {
	v, why := r.Limits.RateOf(rep)
	return v, why == ""
}

// WriteJSON writes v as indented JSON to path, atomically: a reader never
// sees half a file.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(path, append(b, '\n'))
}

func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// ReplyFile is the name of reply n's file; warm-ups have their own.
func ReplyFile(r *measure.Reply) string {
	if r.Warmup {
		return fmt.Sprintf("warmup_%d.json", r.N)
	}
	return fmt.Sprintf("reply_%d.json", r.N)
}

// Write writes result.json and summary.md into dir.
func Write(dir string, r *Result) error {
	if err := WriteResult(filepath.Join(dir, ResultFile), r); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, SummaryFile), []byte(Markdown(r, MarkdownLimit)))
}

// WriteResult writes r as result.json at path. The replies' tokens with
// their logprobs (measure.Reply.Generated) are kept in their reply files
// only, where Read takes them from: in result.json they would take hundreds
// of bytes a token for every reply at once (a recording of 15 replies of
// 2048 tokens, top 5, came to 27 MB, past what every reader takes), and
// Read overlays the reply files on result.json's replies. What is left is
// refused past MaxFile: the gate does not write a file its readers refuse.
func WriteResult(path string, r *Result) error {
	b, err := resultBytes(path, r)
	if err != nil {
		return err
	}
	return writeAtomic(path, b)
}

// resultBytes is result.json: r without its replies' tokens, refused past
// MaxFile. WriteResult and WriteIn write it.
func resultBytes(path string, r *Result) ([]byte, error) {
	out := *r
	out.Replies, out.Warmups = withoutTokens(r.Replies), withoutTokens(r.Warmups)
	b, err := json.MarshalIndent(&out, "", "  ")
	if err != nil {
		return nil, err
	}
	if len(b)+1 > MaxFile {
		return nil, fmt.Errorf("%s would be %d bytes, more than the %d a run's file may be; ask fewer --max-replies", path, len(b)+1, MaxFile)
	}
	return append(b, '\n'), nil
}

// WriteReply writes reply r to path (its reply file). A reply whose file
// would pass MaxFile keeps no tokens (Logprobs becomes
// measure.LogprobsGarbage, saying why), in r too, so the run judges what its
// file holds; one still past it is not written.
func WriteReply(path string, r *measure.Reply) error {
	b, err := ReplyBytes(path, r)
	if err != nil {
		return err
	}
	return writeAtomic(path, b)
}

// ReplyBytes is reply r's file, as WriteReply writes it: without its
// tokens when they would take it past MaxFile (and r then keeps none
// either), refused when still too large. WriteFileIn writes it into the
// run's out directory.
func ReplyBytes(path string, r *measure.Reply) ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	if len(b)+1 > MaxFile && r.Generated != nil {
		r.Logprobs, r.Generated = measure.LogprobsGarbage, nil
		r.LogprobsDetail = fmt.Sprintf("the tokens with their logprobs would take the reply's file to %d bytes, past the %d a run's file may be: none kept", len(b)+1, MaxFile)
		if b, err = json.MarshalIndent(r, "", "  "); err != nil {
			return nil, err
		}
	}
	if len(b)+1 > MaxFile {
		return nil, fmt.Errorf("%s would be %d bytes, more than the %d a run's file may be", path, len(b)+1, MaxFile)
	}
	return append(b, '\n'), nil
}

// withoutTokens is replies without their tokens (measure.Reply.Generated).
func withoutTokens(replies []measure.Reply) []measure.Reply {
	if replies == nil {
		return nil
	}
	out := make([]measure.Reply, len(replies))
	for i, rep := range replies {
		rep.Generated = nil
		out[i] = rep
	}
	return out
}

var replyName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^reply_(\d+)\.json$`) })

// Read reads a finished run's directory: result.json, with the replies taken
// from the reply_N.json files (the evidence) when there are any. Each is read
// with ReadBounded: a FIFO, a link or a file past MaxFile is an error; and
// the files together are bounded by MaxRunBytes and MaxRunObjects.
func Read(dir string) (*Result, error) {
	return read(dir, runBounds{bytes: MaxRunBytes, objects: MaxRunObjects})
}

// read is Read within the bounds b.
func read(dir string, b runBounds) (*Result, error) {
	u := newBudget(b)
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %v; pass the out directory of a run", dir, unwrapPath(err))
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory; pass the out directory of a run", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, ResultFile)); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s holds no %s, so it is not the out directory of a finished run; pass the directory named on a run's \"out:\" line", dir, ResultFile)
	}
	r, err := readResult(filepath.Join(dir, ResultFile), noFollow, u)
	if err != nil {
		return nil, err
	}
	replies, err := readReplies(dir, MaxReplies, u)
	if err != nil {
		return nil, err
	}
	r.Replies = merge(r.Replies, replies)
	// The reference's replies are in reference.json, read only when
	// result.json names a reference (one found missing has none), and only
	// as the run wrote it: without them the agreement has nothing to
	// compare, and its detail names the reference by File, which says why.
	if r.Reference != nil && r.Reference.Missing == "" {
		if r.Reference, err = readReference(dir, r.Reference, u); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// ReadFile reads one result.json, the file a user named (a link is
// followed): a regular file of at most MaxFile bytes and MaxRunObjects
// objects.
func ReadFile(path string) (*Result, error) {
	return readResult(path, 0, newBudget(runBounds{bytes: MaxRunBytes, objects: MaxRunObjects}))
}

func readResult(path string, flags int, u *budget) (*Result, error) {
	b, err := readBounded(path, flags)
	if err != nil {
		return nil, err
	}
	if err := u.spend(path, b); err != nil {
		return nil, err
	}
	if n := countReplies(b); n > MaxReplies {
		return nil, tooManyReplies(path, n, MaxReplies)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: not a result file (%v)", path, err)
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("%s: schema %q, want %q; it was written by another tool or version", path, r.Schema, Schema)
	}
	if bad := r.rangeErrors(); len(bad) > 0 {
		return nil, outOfRange(path, bad)
	}
	return &r, nil
}

// merge overlays the reply files on result.json's replies, by number: the
// files are the evidence, written as each reply completed, and a run that was
// cut short may have files that result.json never listed.
func merge(fromResult, fromFiles []measure.Reply) []measure.Reply {
	byN := map[int]measure.Reply{}
	for _, r := range fromResult {
		byN[r.N] = r
	}
	for _, r := range fromFiles {
		byN[r.N] = r
	}
	if len(byN) == 0 {
		return fromResult
	}
	out := slices.Collect(maps.Values(byN))
	slices.SortFunc(out, func(a, b measure.Reply) int { return a.N - b.N })
	return out
}

func readReplies(dir string, most int, u *budget) ([]measure.Reply, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	files := 0
	for _, e := range ents {
		if replyName().MatchString(e.Name()) {
			files++
		}
	}
	if files > most {
		return nil, tooManyReplies(dir, files, most)
	}
	var out []measure.Reply
	for _, e := range ents {
		m := replyName().FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		b, err := ReadBounded(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if err := u.spend(filepath.Join(dir, e.Name()), b); err != nil {
			return nil, err
		}
		var rep measure.Reply
		if err := json.Unmarshal(b, &rep); err != nil {
			return nil, fmt.Errorf("%s: not a reply file (%v)", filepath.Join(dir, e.Name()), err)
		}
		if bad := replyRangeErrors(&rep); len(bad) > 0 {
			return nil, outOfRange(filepath.Join(dir, e.Name()), bad)
		}
		if n, _ := strconv.Atoi(m[1]); n != rep.N {
			return nil, fmt.Errorf("%s holds reply %d; the file name and its content disagree", filepath.Join(dir, e.Name()), rep.N)
		}
		out = append(out, rep)
	}
	return out, nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
