// Package gate runs the pipeline once: hold the device, start the serve,
// probe it, stop it, release the device, judge, and write out/.
package gate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/agree"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/console"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/hold"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/quote"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/logscan"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/probe"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/prompts"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/serve"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/serveenv"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/witness"
)

// Grace periods between TERM and KILL: a serve with a stream still open can
// take tens of seconds to honour TERM (llama-server waits for its SSE ping),
// so the wait is bounded. A cancelled run has less time: the runner sends
// SIGTERM 7.5 s after SIGINT, and the ticket must be free well before.
const (
	StopGrace   = 5 * time.Second
	CancelGrace = 2 * time.Second
)

// Gate is one run of the pipeline.
type Gate struct {
	Plan    *config.Plan
	Log     io.Writer // progress lines, for people watching
	TempDir string    // where a fresh out directory goes when --out is not set
	Tool    string    // the gate's version, for result.json
	GitHub  *report.GitHubFacts
	Hold    Holder // nil: --hold none

	// lines, while set, writes the replies' files and prints the
	// console's lines (replyFiles); it is set and read by Run's goroutine
	// only.
	lines *replyFiles
	// outDir is the out directory, opened once at the start of Run: the
	// run's files are created in it by name, whatever its path leads to
	// after the wait for the device.
	outDir *os.Root
}

// Holder gives the gate the device for the length of a run.
type Holder interface {
	// Acquire waits for the device's ticket. Files are held by the serve's
	// supervisor too, so the ticket is held until nothing the serve
	// started is left.
	Acquire(ctx context.Context) (Ticket, error)
}

// Ticket is a held device.
type Ticket interface {
	Files() []*os.File
	// Held is nil while the ticket's lock is still the holder's, else
	// why not.
	Held() error
	Release() error
}

// survivorNoter is a ticket that records a stop's survivors beside it, so
// that status and the next run say the device may be unhealthy.
type survivorNoter interface {
	NoteSurvivors([]hold.Survivor) error
}

// poolTicket is a ticket of devices of a pool: the serve is told which.
type poolTicket interface {
	Names() []string // the devices' names
	Env() []string   // NPU_HOLD_DEVICES and the vendor's variable
}

// lease is what the serve gets of the held devices: the ticket's
// descriptors, the devices' names for {device} and {devices}, and its
// environment (serveenv.Build: the allow-list, what it was given, its
// devices).
type lease struct {
	files   []*os.File
	devices []string
	env     []string
}

// SetupError is a fault found before anything was started: the run is bad
// input, exit 2.
type SetupError struct{ Err error }

func (e *SetupError) Error() string { return e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

// Run runs the pipeline. The error is a SetupError when nothing was started;
// any later fault is in the result, which is then a FAIL.
func (g *Gate) Run(ctx context.Context) (*report.Result, error) {
	p := g.Plan
	out := p.Out
	if out == "" {
		var err error
		if out, err = os.MkdirTemp(g.TempDir, "npu-serve-smoke-"); err != nil {
			return nil, &SetupError{fmt.Errorf("cannot make an out directory in %s (%v); pass --out", g.TempDir, err)}
		}
		if err := config.CheckPrivateDir(out); err != nil {
			os.Remove(out)
			return nil, &SetupError{fmt.Errorf("the out directory %s: %v; pass --out a directory only you (or root) can write", out, err)}
		}
	}
	dir, err := os.OpenRoot(out)
	if err != nil {
		return nil, &SetupError{fmt.Errorf("cannot open the out directory %s (%v); pass --out", out, err)}
	}
	defer dir.Close()
	g.outDir = dir
	res := &report.Result{
		Schema: report.Schema,
		Limits: p.Limits(),
		Run: report.RunFacts{
			Started: time.Now(), Model: p.Model, Replies: p.Replies, Warmup: p.Warmup,
			MaxTokens: p.MaxTokens, Thinking: p.Thinking, Prompts: orBuiltin(p.Config.Prompts), Out: out,
			CheckName: p.CheckName, Tool: g.Tool, Kind: p.Kind, FirstRound: p.ReferenceWant().FirstRound,
		},
		Serve:     report.ServeFacts{Argv: wrap(p.HoldCommand, p.Argv), Port: p.Port},
		Hold:      report.HoldFacts{Mode: p.Hold, Device: p.Device},
		GitHub:    g.GitHub,
		Baseline:  p.Baseline,
		Reference: p.Reference,
		Extra:     report.Extra{Max: max(p.MaxReplies, p.Replies)},
	}
	if p.Kind == report.KindReference {
		// A reference's rate is not judged: no reply is taken for a
		// verdict in doubt.
		res.Extra.Max = p.Replies
	}
	seed := prompts.NewSeed()
	if p.OrderSeed != nil {
		seed = *p.OrderSeed
	}
	res.Run.OrderSeed = &seed
	g.logf("out: %s", out)
	g.logf("prompt order: seed %d (--order-seed %d asks them in this order again)", seed, seed)
	if ref := p.Reference; ref != nil && ref.Missing != "" {
		g.logf("reference: none usable at %s: %s; the agreement assertion fails", ref.File, ref.Missing)
	} else if ref != nil {
		g.logf("reference: %s", referenceLine(ref))
	}

	// The route is read on the serve's output as it is written, before
	// serve.log is cut to its limit.
	// config.Check compiled the rules; a plan made otherwise has them
	// compiled here.
	rules := p.Rules
	if rules == nil {
		var err error
		if rules, err = route.Compile("--fast-route", "--slow-route", p.FastRoute, p.SlowRoute); err != nil {
			return nil, &SetupError{err}
		}
	}
	m := rules.Matcher()
	res.Route = m.Evidence()
	if err := g.measure(ctx, res, out, m); err != nil {
		return nil, err
	}
	res.Route.Hint = p.RouteHint
	if res.NoReplies != "" && res.Serve.Exit != "" && !strings.Contains(res.NoReplies, res.Serve.Exit) {
		res.NoReplies += "; the serve then " + res.Serve.Exit
	}
	res.Judged(judge.Judge(res.Input()))
	if p.Kind == report.KindReference {
		g.servesAsReference(res)
	}
	if ctx.Err() != nil {
		res.Verdict = report.Cancelled
	}
	res.Run.Finished = time.Now()
	if err := g.writeReference(res); err != nil {
		g.logf("error: writing the reference's replies to %s: %v", out, err)
		res.Verdict = report.Fail
	}
	if err := report.WriteIn(g.outDir, res); err != nil {
		g.logf("error: writing the result to %s: %v", out, err)
		res.Verdict = report.Fail
	}
	return res, nil
}

// writeReference keeps the reference's replies beside the run's,
// out/reference.json, so `judge DIR` judges the agreement again with no
// other file. It is written once the run is over, after every setup check
// and with the serve stopped, and result.json records its digest (a copy of
// the plan's reference, so the plan is left as it was). A reference asked
// for and found missing has no replies to keep: no file, result.json says
// why.
func (g *Gate) writeReference(res *report.Result) error {
	if res.Reference == nil || res.Reference.Missing != "" {
		return nil
	}
	ref := *res.Reference
	res.Reference = &ref
	return report.WriteReferenceIn(g.outDir, &ref)
}

// measure holds the device, runs the serve, probes it and stops it, filling
// in res. Each stage is a function of its own, in the order README.md's
// "What happens, in order" gives. Whatever goes wrong ends up in
// res.NoReplies or the replies, but for a port that cannot be had: a
// SetupError, with nothing started.
func (g *Gate) measure(ctx context.Context, res *report.Result, out string, m *route.Matcher) error {
	ticket, ok := g.takeDevice(ctx, res)
	if !ok {
		return nil
	}
	held := lease{devices: []string{g.Plan.Device}}
	var devEnv []string
	if ticket != nil {
		defer g.releaseDevice(ticket, res, time.Now())
		held.files = ticket.Files()
		if pt, ok := ticket.(poolTicket); ok {
			held.devices, devEnv = pt.Names(), pt.Env()
			if g.Plan.Count > 1 {
				res.Hold.Devices = held.devices
			}
		}
	}
	// The serve gets the allow-list, what it was given, and its devices:
	// never the token, the inputs or the runner's file commands.
	held.env = serveenv.Build(os.Environ(), g.Plan.ServeEnv, g.Plan.ServeEnvPass, devEnv)

	// The port, once the device is ours: a port held by the run before this
	// one is free by now.
	port, err := choosePort(g.Plan.Port)
	if err != nil {
		return &SetupError{err}
	}
	// The replies' files are written, and from the serve's ready on the
	// console's lines printed, by a goroutine of their own: all of them
	// written and printed once the serve is stopped, before the device is
	// released.
	files := startReplyFiles(g.outDir, g.println)
	defer func() {
		g.lines = nil
		res.Unwritten = files.close()
	}()
	proc, stop := g.startServe(ctx, res, out, port, held, m)
	if proc == nil {
		return nil
	}
	defer stop()

	base, ok := g.waitReady(ctx, res, proc)
	if !ok {
		return nil
	}
	g.lines = files
	a := &asker{g: g, ctx: ctx, res: res, proc: proc, out: out, prober: g.prober(base), base: base, order: prompts.NewOrder(g.Plan.Prompts, *res.Run.OrderSeed),
		listener: checkListener(proc, res.Serve.Port), files: files}
	e := g.askAll(res, a)
	if !a.listening() {
		return nil
	}
	g.loadRounds(res, a, base)
	g.finishEnergy(ctx, res, e)
	return nil
}

// takeDevice waits for the device's ticket, at most --hold-timeout. With
// --hold none it returns a nil ticket. When the device was not had, the
// reason is in res and ok is false.
func (g *Gate) takeDevice(ctx context.Context, res *report.Result) (t Ticket, ok bool) {
	if g.Hold == nil {
		return nil, true
	}
	p := g.Plan
	g.logf("hold: taking the %s ticket", p.Device)
	t0 := time.Now()
	hctx, cancel := context.WithTimeout(ctx, p.HoldTimeout)
	ticket, err := g.Hold.Acquire(hctx)
	cancel()
	res.Hold.WaitedMS = msSince(t0)
	if err != nil {
		res.NoReplies = "the device was not held: " + err.Error()
		g.logf("hold: %v", err)
		return nil, false
	}
	g.logf("hold: %s held after %s", p.Device, time.Since(t0).Round(time.Millisecond))
	if ht, ok := ticket.(*hold.Ticket); ok {
		for _, u := range ht.Unhealthy {
			res.Hold.Unhealthy = append(res.Hold.Unhealthy, u.Device+": "+u.String())
		}
	}
	return ticket, true
}

// releaseDevice gives the ticket back, once the serve is stopped. Before,
// it checks that the ticket is still this run's: a ticket lost on the way
// fails the run (judge: release), as another run may have had the device.
func (g *Gate) releaseDevice(t Ticket, res *report.Result, held time.Time) {
	if err := t.Held(); err != nil {
		res.Hold.Lost = err.Error()
		g.logf("hold: %s was not held to the end: %v", g.Plan.Device, err)
	}
	if n, ok := t.(survivorNoter); ok && len(res.Serve.Left) > 0 {
		if err := n.NoteSurvivors(hold.ParseSurvivors(res.Serve.Left)); err != nil {
			g.logf("hold: %v", err)
		} else {
			g.logf("hold: %s marked as maybe unhealthy: %d process(es) of the serve could not be ended; npu-hold status and the next run say so while they run", g.Plan.Device, len(res.Serve.Left))
		}
	}
	if err := t.Release(); err != nil {
		g.logf("hold: release: %v", err)
	}
	res.Hold.HeldMS = msSince(held)
	g.logf("hold: %s released", g.Plan.Device)
}

// startServe starts the serve on port, its output read for route evidence
// as it comes and kept in out/serve.log within --log-limit. It returns nil
// when it could not start (the reason is in res), else the process and the
// function that stops it and records how, and what its output held.
func (g *Gate) startServe(ctx context.Context, res *report.Result, out string, port int, held lease, m *route.Matcher) (*serve.Process, func()) {
	p := g.Plan
	res.Serve.Argv, res.Serve.Port = wrap(p.HoldCommand, fill(p.Argv, port, held.devices)), port
	capture, stdout, stderr, err := logscan.NewCaptureIn(g.outDir, report.LogFile, p.LogLimit, m)
	if err != nil {
		res.NoReplies = "the serve log could not be created: " + err.Error()
		return nil, nil
	}
	proc, err := serve.Start(serve.Options{Argv: res.Serve.Argv, Env: held.env, Log: stdout, Stderr: stderr, ExtraFiles: held.files})
	// The serve holds them now: the capture ends when the serve's last
	// process closes them.
	stdout.Close()
	stderr.Close()
	if err != nil {
		g.readLog(res, capture)
		res.NoReplies = "the serve did not start: " + err.Error()
		return nil, nil
	}
	res.Serve.PID = proc.PID()
	g.logf("serve: pid %d on port %d: %s", proc.PID(), res.Serve.Port, report.ConsoleText(strings.Join(res.Serve.Argv, " ")))
	mechanism, cgroup, why := proc.Contain()
	res.Serve.Contain, res.Serve.Cgroup, res.Serve.ContainWhy = mechanism, cgroup, why
	g.logf("serve: held by its supervisor, pid %d, with %s", proc.SupervisorPID(), report.ConsoleText(containText(mechanism, cgroup, why)))
	return proc, func() {
		g.stopServe(ctx, res, proc)
		g.readLog(res, capture)
	}
}

// LogDrain bounds the wait for the serve's output to end once the serve is
// stopped: a process that escaped the stop may hold it open.
const LogDrain = 2 * time.Second

// readLog finishes reading the serve's output and records what it held.
func (g *Gate) readLog(res *report.Result, c *logscan.Capture) {
	got, err := c.Wait(LogDrain)
	if err != nil {
		g.logf("serve: log: %v", err)
		if res.NoReplies == "" {
			res.NoReplies = "the serve log could not be written: " + err.Error()
		}
	}
	res.Route, res.Serve.LogTail, res.Serve.LogBytes = got.Route, got.Tail, got.Bytes
	res.Serve.LogDropped = got.Dropped
	if got.Dropped > 0 {
		g.logf("serve: log: %d bytes, %d cut from serve.log (--log-limit %d); the route was read on all of them", got.Bytes, got.Dropped, g.Plan.LogLimit)
	}
}

// stopServe stops the serve with nothing left behind: TERM, a grace period
// (shorter when cancelled), KILL, then the sweep.
func (g *Gate) stopServe(ctx context.Context, res *report.Result, proc *serve.Process) {
	grace := StopGrace
	if ctx.Err() != nil {
		grace = CancelGrace
	}
	st := proc.Stop(grace)
	res.Serve.Exit, res.Serve.Signal, res.Serve.StopMS = st.Exit, st.Signal, st.StopMS
	res.Serve.Swept, res.Serve.Survivors, res.Serve.Contain = st.Swept, st.Survivors, st.Contain
	res.Serve.Left, res.Serve.SupervisorStopped, res.Serve.Polite = st.Left, st.SupervisorStopped, st.Polite
	if st.Polite != "" {
		g.logf("serve: the polite stop: %s", report.ConsoleText(st.Polite))
	}
	if st.SupervisorStopped > 0 {
		g.logf("serve: its supervisor, pid %d, was found stopped (SIGSTOP) or frozen (a cgroup freezer) %d time(s) during the stop and continued", proc.SupervisorPID(), st.SupervisorStopped)
	}
	g.logf("serve: stop took %s: the serve %s; %d swept, %d survivors (%s)", time.Duration(st.StopMS*float64(time.Millisecond)).Round(time.Millisecond), st.Exit, st.Swept, st.Survivors, st.Contain)
	for _, l := range st.Left {
		g.logf("serve: survivor %s", report.ConsoleText(l))
	}
	switch {
	case st.Survivors == 0:
	case proc.SupervisorRunning():
		g.logf("serve: its supervisor, pid %d, keeps killing them and keeps the device held until they are gone", proc.SupervisorPID())
	default:
		g.logf("serve: its supervisor, pid %d, is gone or stopped: nothing kills them, and nothing of the device's ticket holds them off it", proc.SupervisorPID())
	}
}

// containText says how the serve's tree is held, for the log.
func containText(mechanism, cgroup, why string) string {
	text := mechanism
	if cgroup != "" {
		text += " (" + cgroup + ")"
	}
	if why != "" {
		text += "; not used: " + why
	}
	return text
}

// waitReady waits for the serve's health path. It returns the serve's base
// URL, or ok false with the reason in res.
func (g *Gate) waitReady(ctx context.Context, res *report.Result, proc *serve.Process) (base string, ok bool) {
	p := g.Plan
	base = "http://127.0.0.1:" + strconv.Itoa(res.Serve.Port)
	// While the serve loads, the first rendering of a reply and a report,
	// and the heap the rest of the run allocates from (prepare).
	prepared := make(chan struct{})
	go func() {
		defer close(prepared)
		prepareAhead()
	}()
	ready, err := proc.WaitReady(ctx, base, p.HealthPaths, p.ReadyTimeout)
	if err != nil {
		res.NoReplies = notReady(err, ctx)
		g.logf("serve: %s", res.NoReplies)
		return "", false
	}
	<-prepared
	res.Serve.ReadyPath, res.Serve.ReadyMS = ready.Path, ready.MS
	g.logf("serve: ready after %s (%s)", time.Duration(ready.MS*float64(time.Millisecond)).Round(time.Millisecond), ready.Path)
	return base, true
}

// listenerCheck is the check that what listens on the serve's port is the
// serve this run started (a stale server is never measured), run beside
// the first request: CheckListener reads the descriptors of every process
// the gate can see, milliseconds on an idle runner and many more on a
// machine of thousands, and the first request's exchange is time the gate
// waits anyway. Nothing the serve answers is kept, written, shown or judged
// before the check has passed (asker.listening), and a request still
// running when it fails is cut short (asker.ask): a stranger that never
// answers holds nothing up. The request itself carries a prompt of the
// run's prompt set, and no secret.
type listenerCheck struct {
	done chan struct{} // closed when err is set
	err  error
}

func checkListener(proc *serve.Process, port int) *listenerCheck {
	c := &listenerCheck{done: make(chan struct{})}
	go func() {
		c.err = proc.CheckListener(port)
		close(c.done)
	}()
	return c
}

// prober is the streamed chat client for the serve at base.
func (g *Gate) prober(base string) *probe.Prober {
	p := g.Plan
	pr := &probe.Prober{
		URL: base + p.ChatPath, Model: p.Model, MaxTokens: p.MaxTokens,
		Thinking: p.Thinking == "on", ThinkingControl: p.ThinkingControl,
		RequestTimeout: p.RequestTimeout, TopLogprobs: p.TopLogprobs,
	}
	if p.StatsPath != "" {
		pr.StatsURL = base + p.StatsPath
	}
	return pr
}

// askAll asks the warm-up requests, then judged replies until the
// sequential rule stops: at least --replies, then until the rate's and the
// first token's sign counts have both decided (one side leads the other by
// --lead), and with --baseline their counts against the baseline's bounds
// too, and neither drifts toward its limit, or a reply failed, or
// --max-replies were asked. A serve far from its limits costs --lead
// replies.
func (g *Gate) askAll(res *report.Result, a *asker) (e *energyRun) {
	p := g.Plan
	for n := 1; n <= p.Warmup; n++ {
		r, ok := a.ask(n, true)
		if !ok {
			return nil
		}
		res.Warmups = append(res.Warmups, r)
	}
	// Nothing of the serve's is read (its power, its devices, a judged
	// reply) before the check of its listener has passed: with no warm-up,
	// it is waited for here.
	if !a.listening() {
		return nil
	}
	// The energy sensor is read from here to the last judged reply's
	// end, with the idle power before and after (and on through the load
	// rounds, if any: finishEnergy stops it).
	e = g.startEnergy(a.ctx, res)
	defer g.idleAfter(a.ctx, res, e)
	rule := judge.Rule{Lead: p.Lead, Min: p.Replies, Max: res.Extra.Max, Baseline: res.Baseline}
	w := g.witnessFirst(a)
	defer g.witnessLast(res, a, w)
	for n := 1; ; n++ {
		if stop, _ := rule.Stop(res.Replies, res.Limits); stop {
			break
		}
		r, ok := a.ask(n, false)
		if !ok {
			return e
		}
		res.Replies = append(res.Replies, r)
	}
	if p.Kind == report.KindReference {
		// A reference's rate and first token are not judged: its signs
		// say nothing, and it asks every request a run can make.
		g.logf("asked %s: a reference asks every one, whatever its replies", report.Replies(len(res.Replies)))
		return e
	}
	g.logf("%s", stopText(res.Replies, res.Limits, rule))
	return e
}

// Recording is the assertion record adds: the recording can serve as a
// reference for a run of the same settings (a reply with content to every
// prompt of its first round; its replies within what out/reference.json
// holds).
const Recording = "recording"

// servesAsReference checks that res, a recording, can serve as the reference
// of a run made with the same settings, as such a run will check it
// (config.UseReference): AddRecording with the plan's own want.
func (g *Gate) servesAsReference(res *report.Result) {
	AddRecording(res, g.Plan.ReferenceWant())
}

// AddRecording adds the recording assertion to res, a recording, checked
// against w, what a run of the recording's settings asks of its reference:
// a recording that cannot serve fails, saying why, rather than pass and be
// refused by every run. `judge DIR` adds it again to the recording it
// judges.
func AddRecording(res *report.Result, w config.ReferenceWant) {
	if _, err := config.UseReference("this recording", "", res, w); err != nil {
		RecordingFailed(res, err)
		return
	}
	res.Assertions = append(res.Assertions, judge.Assertion{Name: Recording, OK: true, Detail: "it can serve as the reference of a run of the same --prompts, --max-tokens, --thinking and --max-replies"})
}

// RecordingFailed adds a failed recording assertion to res, saying why the
// recording cannot serve as a reference, and fails it.
func RecordingFailed(res *report.Result, why error) {
	res.Assertions = append(res.Assertions, judge.Assertion{Name: Recording, Detail: "it cannot serve as a reference: " + why.Error()})
	res.Verdict = report.Fail
}

// stopText says why the gate stopped asking, for the log.
func stopText(replies []measure.Reply, l judge.Limits, rule judge.Rule) string {
	s, complete := judge.SignsOf(replies, l, rule.Lead)
	counts := fmt.Sprintf("rate %d meet the floor, %d miss it; first token %d meet the limit, %d miss it",
		s.Rate.Meet, s.Rate.Miss, s.FirstToken.Meet, s.FirstToken.Miss)
	decided, which := s.Rate.Decided && s.FirstToken.Decided, "both sign counts"
	if b := rule.Baseline; b != nil && !b.TooFew() {
		bs, _ := judge.BaselineSignsOf(replies, l, *b, rule.Lead)
		counts += fmt.Sprintf("; against the baseline, rate %d meet its bound, %d miss it; first token %d meet its bound, %d miss it",
			bs.Rate.Meet, bs.Rate.Miss, bs.FirstToken.Meet, bs.FirstToken.Miss)
		decided, which = decided && bs.Rate.Decided && bs.FirstToken.Decided, "the four sign counts"
	}
	drift := ""
	if len(replies) >= rule.Max {
		drift = judge.Drifts(replies, l, len(replies))
	}
	switch {
	case !complete:
		return fmt.Sprintf("stopped after %s: a reply failed", report.Replies(len(replies)))
	case drift != "":
		return fmt.Sprintf("stopped at --max-replies %d: %s; judged where it settled (%s; --lead %d)", rule.Max, drift, counts, rule.Lead)
	case decided:
		return fmt.Sprintf("stopped after %s: %s decided (%s; --lead %d)", report.Replies(len(replies)), which, counts, rule.Lead)
	case rule.Max < rule.Lead:
		return fmt.Sprintf("stopped at --max-replies %d, fewer than --lead %d: no count could decide, the median decides (%s)", rule.Max, rule.Lead, counts)
	default:
		return fmt.Sprintf("stopped at --max-replies %d: close to a limit, the median decides (%s; --lead %d)", rule.Max, counts, rule.Lead)
	}
}

// asker asks the serve one request at a time and writes each reply to out/
// as it completes.
type asker struct {
	g      *Gate
	ctx    context.Context
	res    *report.Result
	proc   *serve.Process
	out    string
	prober *probe.Prober
	base   string // the serve's URL
	order  prompts.Order
	// toldRefusal: the console said the serve refused the logprobs fields.
	toldRefusal bool
	// listener is the check of the port's listener (checkListener);
	// listened is its outcome, once waited for.
	listener *listenerCheck
	listened *bool
	// files writes each reply's file.
	files *replyFiles
}

// listening waits for the check of the port's listener, the first time,
// and reports whether what listens is the serve. When it is not, the run
// has no replies, and res says why. A serve that has exited meanwhile (on
// the first request, say: its socket was read as it closed) is no
// stranger: its exit is the run's story, as when the check ran alone.
func (a *asker) listening() bool {
	if a.listened == nil {
		<-a.listener.done
		ok := true
		if err := a.listener.err; err != nil {
			select {
			case <-a.proc.Done():
			case <-time.After(exitSeen):
				ok = false
				a.res.NoReplies = err.Error()
				a.g.logf("serve: %s", report.ConsoleText(err.Error()))
			}
		}
		a.listened = &ok
	}
	return *a.listened
}

// exitSeen bounds the wait for a serve's exit to be seen, once something
// says it may have exited: a failed reply, a failed check of its listener.
const exitSeen = time.Second

// askContext is the context of a request: the run's, cut short when the
// check of the port's listener fails while the request runs. done ends it
// once the request is over.
func (a *asker) askContext() (ctx context.Context, done context.CancelFunc) {
	if a.listened != nil {
		return a.ctx, func() {}
	}
	ctx, cancel := context.WithCancel(a.ctx)
	go func() {
		select {
		case <-a.listener.done:
			if a.listener.err == nil {
				return
			}
			// A serve that exited is no stranger (listening): its own
			// request ends by itself.
			select {
			case <-a.proc.Done():
			case <-time.After(exitSeen):
				cancel()
			case <-ctx.Done():
			}
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// ask asks request n (a warm-up or a judged reply). ok is false when the run
// was cancelled and nothing was asked, or when what answered is not the
// serve (asker.listening): the reply is then dropped.
func (a *asker) ask(n int, warmup bool) (measure.Reply, bool) {
	p := a.g.Plan
	// Cold prompts: the warm-up asks none of the judged prompts, and no
	// judged request repeats an earlier one.
	prompt := a.order.Request(n)
	if warmup {
		prompt = prompts.Warmup(p.Prompts)
	}
	var r measure.Reply
	select {
	case <-a.proc.Done():
		r = measure.Reply{N: n, Warmup: warmup, Prompt: prompt.Prompt, Expect: prompt.Expect, Error: "not asked: the serve " + a.proc.Exit()}
	default:
		if a.ctx.Err() != nil {
			return r, false
		}
		ctx, done := a.askContext()
		r = a.prober.Ask(ctx, n, warmup, prompt)
		done()
	}
	if !a.listening() {
		return r, false
	}
	if r.Error != "" && a.ctx.Err() == nil {
		// A reply that failed may mean the serve died: give its exit a
		// moment to be seen, so the next reply says so rather than
		// "connection refused".
		select {
		case <-a.proc.Done():
		case <-time.After(exitSeen):
		}
	}
	line := progress(&r)
	if ref := p.Reference; ref != nil && ref.Missing == "" && !r.Warmup && r.Error == "" {
		// How it agrees, as the judge will compare it: the reply with
		// the reference's to the same prompt.
		ag := agree.CompareAll([]measure.Reply{r}, ref.Replies, a.g.Plan.Limits().Agreement.OrDefault())[0]
		line += ", agrees: " + report.AgreesText(ag)
	}
	// Its line once its file is written.
	a.files.write(&r, console.Text(line))
	if r.Logprobs == measure.LogprobsRefused && !a.toldRefusal {
		a.toldRefusal = true
		a.g.logf("%s", refusalLine(&r))
	}
	return r, true
}

// choosePort is port when it is free, or a free one for 0.
func choosePort(port int) (int, error) {
	if port != 0 {
		return port, serve.CheckPortFree(port)
	}
	port, err := serve.FreePort()
	if err != nil {
		return 0, fmt.Errorf("no free port on 127.0.0.1 (%v); pass --port", err)
	}
	return port, nil
}

func notReady(err error, ctx context.Context) string {
	var nr *serve.NotReadyError
	switch {
	case errors.As(err, &nr) && nr.Exited != "":
		return "the serve never became ready: it " + nr.Exited
	case errors.As(err, &nr):
		return "the serve never became ready: " + strings.TrimPrefix(nr.Error(), "the serve ")
	case ctx.Err() != nil:
		return "cancelled before the serve was ready"
	default:
		return "the serve never became ready: " + err.Error()
	}
}

// refusalLine says, once a run, that the serve refused the logprobs fields.
func refusalLine(r *measure.Reply) string {
	return fmt.Sprintf("logprobs: the serve refused logprobs/top_logprobs (%s); asked again without them, and every later request goes without: agreement can compare text only",
		quote.Cut(r.LogprobsDetail, 200))
}

// progress is one console line about a reply.
func progress(r *measure.Reply) string {
	name := "reply"
	if r.Warmup {
		name = "warm-up"
	}
	if r.Error != "" {
		return fmt.Sprintf("%s %d: error: %s", name, r.N, quote.Cut(r.Error, 200))
	}
	var parts []string
	if v, ok := r.FirstTokenMS(); ok {
		parts = append(parts, fmt.Sprintf("first token %.0f ms", v))
	}
	if v, why := r.DecodeRate(); why == "" {
		parts = append(parts, fmt.Sprintf("%.1f tok/s", v))
	} else {
		parts = append(parts, "no rate ("+why+")")
	}
	if v, why := r.ServerRate(); why == "" {
		parts = append(parts, fmt.Sprintf("the serve's own %.1f tok/s", v))
	}
	n, src := r.Tokens()
	parts = append(parts, fmt.Sprintf("%d tokens (%s)", n, src))
	if c, ok := r.Cache(); ok && c.Hit {
		parts = append(parts, fmt.Sprintf("a prompt cache hit (%d of %d prompt tokens)", c.Cached, c.Prompt))
	}
	if r.Retried != "" {
		parts = append(parts, "asked twice: the first attempt failed before any answer: "+quote.Cut(r.Retried, 200))
	}
	switch r.Logprobs {
	case measure.LogprobsSent:
		parts = append(parts, fmt.Sprintf("logprobs for %d tokens", len(r.Generated)))
	case measure.LogprobsNone:
		parts = append(parts, "no logprobs sent")
	case measure.LogprobsGarbage:
		parts = append(parts, "logprobs dropped: "+quote.Cut(r.LogprobsDetail, 200))
	}
	return fmt.Sprintf("%s %d: %s", name, r.N, strings.Join(parts, ", "))
}

// logf prints one progress line, made safe whole by console.Text: its
// arguments may hold text from elsewhere (the serve's words and errors,
// other processes' command lines).
func (g *Gate) logf(format string, args ...any) {
	line := console.Text(fmt.Sprintf(format, args...))
	if g.lines != nil {
		g.lines.say(line)
		return
	}
	g.println(line)
}

// println prints a line made safe (console.Text).
func (g *Gate) println(line string) {
	if g.Log != nil {
		fmt.Fprintln(g.Log, line)
	}
}

// fill puts the port and the held devices into the serve's words: {device}
// is the first device, {devices} all of them, comma-separated.
func fill(argv []string, port int, devices []string) []string {
	r := strings.NewReplacer("{port}", strconv.Itoa(port), "{devices}", strings.Join(devices, ","), "{device}", devices[0])
	out := make([]string, len(argv))
	for i, w := range argv {
		out[i] = r.Replace(w)
	}
	return out
}

// wrap runs the serve under an external hold command, when there is one: the
// command gets the serve's words as its arguments.
func wrap(holdCommand string, argv []string) []string {
	if holdCommand == "" {
		return argv
	}
	return append([]string{holdCommand}, argv...)
}

func orBuiltin(file string) string {
	if file == "" {
		return "built-in"
	}
	return file
}

func msSince(t time.Time) float64 { return float64(time.Since(t)) / float64(time.Millisecond) }

// referenceLine says what the run is compared with, and what was checked.
func referenceLine(ref *report.Reference) string {
	return fmt.Sprintf("%s (%s, %s): %d replies kept, %d with logprobs; max_tokens %d, thinking %s and the %d first-round prompts the same as this run's",
		ref.File, ref.Kind, verdictOr(ref.Verdict), ref.Checked.Replies, ref.Checked.Logprobs, ref.Checked.MaxTokens, ref.Checked.Thinking, ref.Checked.Prompts)
}

func verdictOr(v string) string {
	switch v {
	case report.Pass, report.Fail, report.Cancelled:
		return "verdict " + v
	}
	return "no verdict"
}

// witnessing is a witness reading in progress: the first sample, taken
// before the first judged request, and the serve's own account.
type witnessing struct {
	r       *witness.Reader
	first   witness.Sample
	account *route.Account
	outside string // why the serve's processes are not the tree's, if they are not
	// weights is the size of the model file the serve command names,
	// for the device's account of its memory to be weighed against.
	weights route.Memory
}

// witnessFirst asks the serve for its own account of its placement, then
// samples its processes, before the first judged request is written; nil
// with --witness off.
func (g *Gate) witnessFirst(a *asker) *witnessing {
	p := g.Plan
	if p.Witness != "on" {
		g.logf("witness: off (--witness off): the route rests on the log")
		return nil
	}
	w := &witnessing{r: &witness.Reader{Proc: "/proc", Devices: p.WitnessDevices, Libraries: p.WitnessLibraries, Alive: witness.Alive, Tools: p.Tools}}
	if p.WitnessAccount != "" {
		w.account = witness.Ask(a.ctx, http.DefaultClient, a.base, p.WitnessAccount, p.Model)
		g.logf("witness: the serve's own account, %s: %s %s", w.account.Source, quote.Cut(w.account.Text, 200), w.account.Why)
	}
	w.weights = witness.Weights(p.Argv)
	if w.outside = witness.Outside(p.Argv); w.outside == "" {
		w.first = w.r.Sample(a.ctx, a.proc.Tree())
	}
	return w
}

// witnessLast samples the serve's processes once the last judged reply
// is read, while the serve still runs, and records what the two samples
// witnessed.
func (g *Gate) witnessLast(res *report.Result, a *asker, w *witnessing) {
	if w == nil {
		return
	}
	var rec route.Witness
	if w.outside != "" {
		rec = route.Witness{Devices: w.r.Devices, Libraries: w.r.Libraries, Binary: g.Plan.WitnessBinary, NotRead: w.outside, SlowOnDevice: g.Plan.WitnessSlowOnDevice}
	} else {
		last := w.r.Sample(a.ctx, a.proc.Tree())
		rec = w.r.Witness(w.first, last, g.Plan.WitnessBinary)
		rec.SlowOnDevice = g.Plan.WitnessSlowOnDevice
		rec.Memory = witness.DeviceMemory(w.first, last, w.weights)
	}
	rec.Account = w.account
	res.Witness = &rec
	g.logf("witness: %s", witnessLine(&rec))
	if rec.Memory != nil {
		g.logf("witness: memory: %s", witness.MemoryLine(rec.Memory))
	}
}

// witnessLine says what the witnesses saw, for the console.
func witnessLine(w *route.Witness) string {
	if w.NotRead != "" {
		return "not witnessed: " + w.NotRead
	}
	held, mapped := "none", "none"
	if len(w.Held) > 0 {
		held = strings.Join(w.Held, ", ")
	}
	if len(w.Mapped) > 0 {
		mapped = strings.Join(w.Mapped, ", ")
	}
	line := fmt.Sprintf("%d processes read; devices held: %s; backends mapped: %s", w.Processes, held, mapped)
	for _, u := range w.Usage {
		line += fmt.Sprintf("; %s: engine %d ns of %d ns, memory %d bytes", u.Source, u.EngineNS, u.SpanNS, u.MemoryBytes)
	}
	for _, why := range w.NoUsage {
		line += "; " + why
	}
	if len(w.Unread) > 0 {
		line += "; unread: " + strings.Join(w.Unread, ", ")
	}
	if w.Cut != "" {
		line += "; cut: " + w.Cut
	}
	if len(w.Excess) > 0 {
		line += "; past a healthy serve's size: " + strings.Join(w.Excess, "; ")
	}
	return line
}
