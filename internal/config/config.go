// Package config holds the gate's settings and checks them, all at once,
// before anything is started.
package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/agree"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/energy"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/history"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/hold"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/logscan"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/probe"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/prompts"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/serveenv"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/vendortool"
)

// Config is the gate's settings, by the names of its flags and action inputs.
type Config struct {
	Preset string // a kind of serve whose needs set the defaults below
	Serve  string // the serve's command line, with {port} and {model}
	// ServeEnv (NAME=VALUE each) and ServeEnvPass (NAME each) give the
	// serve more than the allow-list of internal/serveenv.
	ServeEnv     []string
	ServeEnvPass []string
	Model        string
	Port         int // 0: pick a free one
	Health       string
	ChatPath     string
	StatsPath    string // the serve's figures of its last request, read after each reply; "" for none
	ReadyTimeout time.Duration
	Replies      int     // replies asked at least, before the sign counts may stop the run
	MaxReplies   int     // replies asked at most while a sign count has not decided
	Lead         int     // the lead by which a sign count decides (docs/measuring.md)
	OrderSeed    *uint64 // the seed of the prompts' order; nil: drawn from crypto/rand at the start of the run
	Warmup       int
	MaxTokens    int
	// TopLogprobs is the top_logprobs each request asks for, with
	// logprobs: true; 0 asks for none. The preset sets it by what its serve
	// returns.
	TopLogprobs int
	Floor       float64
	// FloorFromBaseline derives the floor from the baseline: this fraction
	// of its median rate. 0: the floor is --floor.
	FloorFromBaseline float64
	FloorWhy          string // set by Check when the floor is derived
	FirstTokenMS      float64
	FastRoute         []string
	SlowRoute         []string
	// Witness is "on" or "off": whether the serve's own processes witness
	// its route (internal/witness). WitnessDevices are globs of the fast
	// route's device nodes, WitnessLibraries globs of its backend
	// libraries' file names; the preset sets both.
	Witness          string
	WitnessDevices   []string
	WitnessLibraries []string
	// WitnessBinary: the serve's route is the device or nothing, so its
	// use of the device names the fast route where the log is silent (the
	// preset says so).
	WitnessBinary bool
	// WitnessSlowOnDevice says why the serve's slow route holds the
	// weights on the same device, so its memory names no fast route (the
	// preset says so); "" where memory may.
	WitnessSlowOnDevice string
	// WitnessAccount is the serve's own account of its placement the
	// preset names ("ollama": /api/ps; "vllm": /metrics); "" for none.
	WitnessAccount  string
	Prompts         string // a file; "" for the built-in set
	Thinking        string
	ThinkingControl string
	RateSource      string
	Baseline        string  // an earlier run's result.json, or github:PATTERN (resolved by the command)
	MaxRegression   float64 // percent the median rate may fall, or the first token rise, against it
	// Reference is a trusted route's run (its out directory or result.json)
	// or github:PATTERN (resolved by the command): adds the agreement
	// assertion.
	Reference string
	// ReferenceMissing is what a --reference github:PATTERN that finds no
	// usable recording does: ReferenceMissingFail (the agreement assertion
	// fails, saying why) or ReferenceMissingSkip (a notice; no assertion).
	ReferenceMissing   string
	AgreementTieMargin float64 // nats: agree.Bounds.TieMargin
	AgreementMaxKL     float64 // nats: agree.Bounds.MaxKL
	// Kind is report.KindReference for record: content and release judged,
	// the rest recorded.
	Kind string
	// Load is --load N: after the single-stream assertions, rounds of N
	// streams at once (0: off), judged as LoadExpect says; the preset sets
	// LoadExpect unless given ("": batch).
	Load             int
	LoadExpect       string
	LoadEfficiency   float64 // 0: judge.DefaultEfficiency(Load)
	LoadFirstTokenMS float64 // 0: twice FirstTokenMS
	LoadMaxRounds    int
	RequestTimeout   time.Duration
	Out              string // "" for a fresh directory
	LogLimit         int64  // bytes of serve.log kept on disk: its head and its tail
	Hold             string
	HoldTimeout      time.Duration
	Device           string
	Count            int // devices of the device's pool to hold
	CheckName        string
	Comment          string
	PRNumber         int // the pull request to comment on from a push; 0: the event's
	// GitHubToken is the token (from the environment: GITHUB_TOKEN or
	// the action's input), GitHubTokenFile a file holding it instead
	// (--github-token-file), read by Check. A token is never taken from
	// the command line, which every user of the machine reads.
	GitHubToken     string
	GitHubTokenFile string
	// Energy is the energy sensor read while the judged replies decode
	// (energy.ParseSpec: auto, off, nvml, hwmon, ...), EnergyIdle how long
	// the serve's idle power is read before and after them, and
	// MaxJoulesPerToken the gross joules per decoded token allowed (0: the
	// energy row is for people only).
	Energy            string
	EnergyIdle        time.Duration
	MaxJoulesPerToken float64
}

// DefaultFloor is the default decode-rate floor, tok/s, and DefaultFloorWhy why:
// the reference serve measured 1.9 tok/s on the per-op forward and 87-101 on
// the fast route, 45x apart; 60 sits in the empty space between, so it
// needs no calibration. A serve of another speed derives its floor from its
// baseline (--floor-from-baseline) or types one.
const (
	DefaultFloor    = 60
	DefaultFloorWhy = "the default 60 sits between 1.9 tok/s of the per-op forward and 87-101 of the fast route, 45x apart"
)

// DefaultTopLogprobs is the alternatives asked for at each token, with
// logprobs, where the serve returns them: enough for the agreement's
// near-tie and distance, a few hundred bytes a token.
const DefaultTopLogprobs = 5

// Upper bounds of the numeric inputs that have no natural one: each is far
// above any real use and keeps what a run writes within what its readers
// take.
const (
	// MaxMaxTokens is the most --max-tokens: a reply's tokens with their
	// logprobs are kept in its reply file, which readers take up to
	// report.MaxFile (docs/reference.md gives the sizes).
	MaxMaxTokens = 8192
	// MaxWarmup is the most warm-up requests.
	MaxWarmup = 1000
	// MaxLogLimit is the most --log-limit: serve.log's head and tail, 1 GiB.
	MaxLogLimit = 1 << 30
)

// notInPath reports whether r may not appear in a request path the gate
// sends: a control character would split or forge the request line, a space
// ends it.
func notInPath(r rune) bool {
	return r <= ' ' || r == 0x7f
}

// What --reference-missing takes.
const (
	ReferenceMissingFail = "fail" // no usable recording fails the agreement assertion
	ReferenceMissingSkip = "skip" // no usable recording yet: a notice, no assertion
)

// HealthAuto tries the health paths serves commonly answer on.
const HealthAuto = "auto"

// AutoHealthPaths are the paths HealthAuto tries, in order.
var AutoHealthPaths = []string{"/health", "/v1/health", "/api/v1/health"}

// Default is the configuration before any flag or input.
func Default() Config {
	return Config{
		Health:             HealthAuto,
		ChatPath:           "/v1/chat/completions",
		ReadyTimeout:       5 * time.Minute,
		Replies:            1,
		MaxReplies:         15,
		Lead:               stats.DefaultLead,
		Warmup:             1,
		MaxTokens:          128,
		TopLogprobs:        DefaultTopLogprobs,
		Floor:              DefaultFloor,
		LogLimit:           logscan.DefaultLimit,
		FirstTokenMS:       600,
		FastRoute:          DefaultFastRoute(),
		SlowRoute:          DefaultSlowRoute(),
		Witness:            "on",
		Thinking:           "off",
		ThinkingControl:    ThinkingKwargs,
		RateSource:         judge.RateClient,
		MaxRegression:      judge.DefaultMaxRegression * 100,
		ReferenceMissing:   ReferenceMissingFail,
		AgreementTieMargin: agree.DefaultTieMargin,
		AgreementMaxKL:     agree.DefaultMaxKL,
		LoadMaxRounds:      11,
		RequestTimeout:     2 * time.Minute,
		Hold:               "builtin",
		HoldTimeout:        30 * time.Minute,
		Device:             "npu",
		Count:              1,
		CheckName:          "npu serve smoke",
		Comment:            "on-pr",
		Energy:             energy.Auto,
		EnergyIdle:         DefaultEnergyIdle,
	}
}

// Plan is a checked Config, resolved into what the gate runs.
type Plan struct {
	Config
	Argv        []string // the serve's words, {model} filled in, {port} still to fill
	Executable  string   // the serve's executable as found
	Prompts     []prompts.Prompt
	HealthPaths []string
	HoldCommand string // for --hold command:NAME, NAME as found
	// Rules are --fast-route and --slow-route, compiled when they were
	// checked: the serve's log is read with them.
	Rules     *route.Rules    `json:"-"`
	RouteHint string          // how to make the serve print its route evidence, when it hides it
	Baseline  *judge.Baseline // the baseline's medians, when there is one
	// Reference is the trusted route's replies to the prompts this run can
	// ask, checked against this run's settings, when there is one.
	Reference *report.Reference
	// EnergySpec is --energy parsed, EnergyOrder the sensors auto tries,
	// and EnergyEnv where they are found.
	EnergySpec  energy.Spec
	EnergyOrder []string
	EnergyEnv   energy.Env
	// Tools are the vendors' tools the energy readings and the witnesses
	// run (nvidia-smi, npu-smi): found on PATH by Check, before any serve
	// starts, and run with the serve's allow-listed environment.
	Tools *vendortool.Set
}

// SetBaseline makes b the plan's baseline, taken from where (a file, or a
// run's link), and with --floor-from-baseline derives the floor from it. A
// baseline from GitHub's history is set this way once it is found, as a
// file's is by Check.
func (p *Plan) SetBaseline(b *judge.Baseline, from string) {
	p.Baseline = b
	if b != nil && p.FloorFromBaseline != 0 {
		p.Floor = p.FloorFromBaseline * b.Rate
		p.FloorWhy = fmt.Sprintf("%g of the baseline's median %.1f tok/s (%s)", p.FloorFromBaseline, b.Rate, from)
	}
}

// DefaultFastRoute and DefaultSlowRoute are the reference serve's own
// wording for its routes, fresh copies each call.
func DefaultFastRoute() []string { return slices.Clone(route.DefaultFast) }

// DefaultSlowRoute: see DefaultFastRoute.
func DefaultSlowRoute() []string { return slices.Clone(route.DefaultSlow) }

// Limits are the judging limits of the configuration.
func (c *Config) Limits() judge.Limits {
	regression := c.MaxRegression / 100
	l := judge.Limits{Floor: c.Floor, FirstTokenMS: c.FirstTokenMS, RateSource: c.RateSource, MaxRegression: &regression, Lead: c.Lead,
		Agreement: &agree.Bounds{TieMargin: c.AgreementTieMargin, MaxKL: c.AgreementMaxKL}, MaxJoulesPerToken: c.MaxJoulesPerToken}
	if c.Floor == DefaultFloor && c.FloorFromBaseline == 0 {
		l.FloorWhy = DefaultFloorWhy
	}
	if c.FloorWhy != "" {
		l.FloorWhy, l.FloorDerived = c.FloorWhy, true
	}
	return l
}

// LookPath finds an executable, as exec.LookPath does.
type LookPath func(file string) (string, error)

var deviceName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`) })

// Check checks every setting and gives the plan, or every problem at once.
// It creates the out directory (and only that) to prove it can be written.
func (c Config) Check(lookPath LookPath) (*Plan, error) {
	p := &Plan{Config: c}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	// The run's size is figured from a reply encoded as its file is, and
	// encoding/json builds that encoder on its first use (a millisecond
	// on a small machine): beside the checks before it, its error in its
	// place among the others.
	runSize := make(chan error, 1)
	go func() { runSize <- c.checkRunSize() }()

	// The serve.
	words, err := SplitWords(c.Serve)
	switch {
	case err != nil:
		bad("--serve: %v; quote as a shell would (the line is split into words, never run by a shell)", err)
	case len(words) == 0:
		bad("--serve is empty; give the serve's command line, e.g. --serve 'llama-server -m {model} --port {port}'")
	default:
		line := strings.Join(words, " ")
		if strings.Contains(line, "{model}") && c.Model == "" {
			bad("--serve uses {model} but --model is empty; pass --model")
		}
		if !strings.Contains(line, "{port}") && c.Port == 0 {
			bad("--serve has no {port} and --port is 0, so the gate cannot tell the serve its port; put {port} in --serve, or pass --port with the port the serve listens on")
		}
		for _, w := range words {
			p.Argv = append(p.Argv, strings.ReplaceAll(w, "{model}", c.Model))
		}
		exe, err := lookPath(p.Argv[0])
		if err != nil {
			bad("--serve: the executable %q was not found or cannot run (%v); install it, put it on PATH or give its full path", p.Argv[0], unwrapExec(err))
		}
		p.Executable = exe
		p.RouteHint = routeHint(c.Preset, p.Argv)
		if d := deviceChoice(p.Argv); d != "" && c.Preset == "ovms" {
			bad("--serve: --target_device %s starts on the CPU (AUTO serves from the CPU while the NPU compiles, and leaves the NPU out of its default list; HETERO splits the model): pass --target_device NPU", d)
		}
	}
	// The serve's environment: what it is given beyond the allow-list.
	if err := serveenv.Check(c.ServeEnv, c.ServeEnvPass, "--serve-env", "--serve-env-pass"); err != nil {
		errs = append(errs, err)
	}
	if c.Port < 0 || c.Port > 65535 {
		bad("--port %d is out of range; pass 1 to 65535, or 0 to pick a free port", c.Port)
	}

	// Health.
	switch {
	case c.Health == HealthAuto:
		p.HealthPaths = AutoHealthPaths
	case strings.HasPrefix(c.Health, "/"):
		p.HealthPaths = []string{c.Health}
	default:
		bad("--health %q: pass a path that starts with / (e.g. /health), or auto", c.Health)
	}

	// What to ask and how.
	if c.Replies < 1 || c.Replies > report.MaxReplies {
		bad("--replies %d: pass 1 to %d, the most replies a run's directory may hold", c.Replies, report.MaxReplies)
	}
	if c.MaxReplies < 1 || c.MaxReplies > report.MaxReplies {
		bad("--max-replies %d: pass 1 to %d, the most replies a run's directory may hold (it is raised to --replies when lower)", c.MaxReplies, report.MaxReplies)
	}
	if c.OrderSeed != nil && *c.OrderSeed > prompts.MaxSeed {
		bad("--order-seed %d: pass a seed from 0 to %d (2^53 - 1), e.g. the order_seed of a run's result.json", *c.OrderSeed, uint64(prompts.MaxSeed))
	}
	if c.Warmup < 0 || c.Warmup > MaxWarmup {
		bad("--warmup %d: pass 0 to %d", c.Warmup, MaxWarmup)
	}
	if c.MaxTokens < 2 || c.MaxTokens > MaxMaxTokens {
		bad("--max-tokens %d: pass 2 to %d; a decode rate needs at least two tokens, and a reply's file holds its tokens", c.MaxTokens, MaxMaxTokens)
	}
	if c.TopLogprobs < 0 || c.TopLogprobs > probe.MaxTopLogprobs {
		bad("--top-logprobs %d: pass 0 (ask for no logprobs) to %d, the most serves allow", c.TopLogprobs, probe.MaxTopLogprobs)
	}
	if rules, err := c.checkLimits(flagName); err != nil {
		errs = append(errs, err)
	} else {
		p.Rules = rules
	}
	if _, fromGitHub, err := history.Spec(c.Baseline); err != nil {
		errs = append(errs, err)
	} else if c.Baseline != "" && !fromGitHub {
		if p.Baseline, err = LoadBaseline(c.Baseline, c.Limits()); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Kind == report.KindReference && c.Baseline != "" {
		bad("--baseline %s: record makes a reference, whose rate and first token are recorded, not judged; leave --baseline out", c.Baseline)
	}
	if most := max(c.MaxReplies, c.Replies); c.Baseline != "" && most < c.Lead {
		// The baseline's counts decide at the lead, the rule's error; no
		// count of fewer replies can, and the few replies' median would
		// fail a serve that did not change as often as noise has it.
		asked := fmt.Sprint(most)
		if c.MaxReplies < c.Replies {
			asked = fmt.Sprintf("%d, raised to --replies %d", c.MaxReplies, c.Replies)
		}
		bad("--baseline with --max-replies %s: the baseline's sign counts need --lead %d replies to decide at the rule's error (docs/measuring.md); pass --max-replies %d or more", asked, c.Lead, c.Lead)
	}
	if c.FloorFromBaseline != 0 && c.Baseline == "" {
		bad("--floor-from-baseline %v needs --baseline: the floor is that fraction of the baseline's median rate", c.FloorFromBaseline)
	}
	p.SetBaseline(p.Baseline, c.Baseline)
	if c.Prompts == "" {
		p.Prompts = prompts.Builtin()
	} else if p.Prompts, err = prompts.Load(c.Prompts); err != nil {
		errs = append(errs, err)
	}
	if err := <-runSize; err != nil {
		errs = append(errs, err)
	}
	if err := c.checkReference(p); err != nil {
		errs = append(errs, err)
	}
	if c.ReferenceMissing != ReferenceMissingFail && c.ReferenceMissing != ReferenceMissingSkip {
		bad("--reference-missing %q: pass fail (a --reference github: that finds no usable recording fails the agreement assertion) or skip (it is left out, with a notice)", c.ReferenceMissing)
	}
	errs = append(errs, c.checkLoad(p)...)
	if c.LogLimit < logscan.MinLimit || c.LogLimit > MaxLogLimit {
		bad("--log-limit %d: pass %d to %d bytes (e.g. 64MiB); serve.log keeps its head and tail within it", c.LogLimit, logscan.MinLimit, int64(MaxLogLimit))
	}
	errs = append(errs, c.checkWitness()...)
	if c.Thinking != "on" && c.Thinking != "off" {
		bad("--thinking %q: pass on or off", c.Thinking)
	}
	if !slices.Contains([]string{ThinkingKwargs, ThinkingEffort, ThinkingBoth, ThinkingThink}, c.ThinkingControl) {
		bad("--thinking-control %q: pass %s, %s, %s or %s", c.ThinkingControl, ThinkingKwargs, ThinkingEffort, ThinkingBoth, ThinkingThink)
	}
	for name, path := range map[string]string{"--chat-path": c.ChatPath, "--stats-path": c.StatsPath, "--health": c.Health} {
		if strings.ContainsFunc(path, notInPath) {
			bad("%s %q: a path holds no spaces or control characters; pass a path such as /v1/chat/completions", name, path)
		} else if name != "--health" && (path != "" && !strings.HasPrefix(path, "/") || name == "--chat-path" && path == "") {
			bad("%s %q: pass a path that starts with /", name, path)
		}
	}
	for name, d := range map[string]time.Duration{"--ready-timeout": c.ReadyTimeout, "--request-timeout": c.RequestTimeout, "--hold-timeout": c.HoldTimeout} {
		if d <= 0 {
			bad("%s %v: pass a positive duration such as 5m or 30s", name, d)
		}
	}

	// The hold and the device.
	if !deviceName().MatchString(c.Device) {
		bad("--device %q: pass a device name of letters, digits, '.', '_' and '-' (e.g. npu)", c.Device)
	} else if err := hold.CheckName(c.Device); err != nil {
		bad("--%v", err)
	}
	if c.Count < 1 || c.Count > hold.MaxDevices {
		bad("--count %d: ask for 1 to %d devices", c.Count, hold.MaxDevices)
	} else if c.Count > 1 && c.Hold != "builtin" {
		bad("--count %d needs --hold builtin: the gate hands out a pool's devices itself", c.Count)
	}
	switch name, isCmd := strings.CutPrefix(c.Hold, "command:"); {
	case c.Hold == "none", c.Hold == "builtin":
	case isCmd && name != "":
		exe, err := lookPath(name)
		if err != nil {
			bad("--hold %s: %q was not found or cannot run (%v); install it or give its full path", c.Hold, name, unwrapExec(err))
		}
		p.HoldCommand = exe
	default:
		bad("--hold %q: pass builtin, none, or command:NAME", c.Hold)
	}

	p.Tools = vendortool.Find(os.Environ())
	errs = append(errs, c.checkEnergy(p)...)

	// Reporting.
	if strings.TrimSpace(c.CheckName) == "" {
		bad("--check-name is empty; pass the name the required status check matches, e.g. 'npu serve smoke'")
	}
	if c.Comment != "on-pr" && c.Comment != "never" {
		bad("--comment %q: pass on-pr or never", c.Comment)
	}
	if err := CheckPRNumber(c.PRNumber); err != nil {
		errs = append(errs, err)
	}
	if c.GitHubTokenFile != "" {
		token, err := ReadTokenFile(c.GitHubTokenFile)
		if err != nil {
			errs = append(errs, err)
		}
		p.GitHubToken = token
	}

	// The out directory last: only a good configuration creates it.
	if len(errs) == 0 {
		if err := checkOut(c.Out); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// CheckPRNumber checks --pr-number: a pull request's number, or 0 for the
// event's own.
func CheckPRNumber(n int) error {
	if n < 0 || n > math.MaxInt32 {
		return fmt.Errorf("--pr-number %d: pass a pull request number (1 to %d), or 0 for the event's own", n, math.MaxInt32)
	}
	return nil
}

// CheckLimits checks what the judge uses: the floor, the first-token limit,
// the rate source and the route patterns, every bad pattern at once.
func (c *Config) CheckLimits() error {
	return c.CheckLimitsFrom(flagName)
}

// flagName is a setting named by its flag.
func flagName(flag string) string { return "--" + flag }

// CheckLimitsFrom is CheckLimits with each limit named by name(flag):
// `judge DIR` names a limit read from result.json by its field there, not by
// a flag that was not given.
func (c *Config) CheckLimitsFrom(name func(flag string) string) error {
	_, err := c.checkLimits(name)
	return err
}

// checkLimits is CheckLimitsFrom, giving the route rules it compiled.
func (c *Config) checkLimits(name func(flag string) string) (*route.Rules, error) {
	var errs []error
	if !(c.Floor > 0) || math.IsInf(c.Floor, 0) {
		errs = append(errs, fmt.Errorf("%s %v: pass a positive number of tokens per second", name("floor"), c.Floor))
	}
	if !(c.FirstTokenMS > 0) || math.IsInf(c.FirstTokenMS, 0) {
		errs = append(errs, fmt.Errorf("%s %v: pass a positive number of milliseconds", name("first-token-ms"), c.FirstTokenMS))
	}
	if !(c.FloorFromBaseline >= 0 && c.FloorFromBaseline <= 1) {
		errs = append(errs, fmt.Errorf("--floor-from-baseline %v: pass a fraction of the baseline's median rate from 0 to 1, e.g. 0.8", c.FloorFromBaseline))
	}
	if c.RateSource != judge.RateClient && c.RateSource != judge.RateServer {
		errs = append(errs, fmt.Errorf("%s %q: pass client or server", name("rate-source"), c.RateSource))
	}
	if !(c.AgreementTieMargin >= 0) || math.IsInf(c.AgreementTieMargin, 0) {
		errs = append(errs, fmt.Errorf("%s %v: pass a margin in nats, 0 or more, e.g. %g", name("agreement-tie-margin"), c.AgreementTieMargin, agree.DefaultTieMargin))
	}
	if !(c.AgreementMaxKL >= 0) || math.IsInf(c.AgreementMaxKL, 0) {
		errs = append(errs, fmt.Errorf("%s %v: pass a distance in nats, 0 or more, e.g. %g", name("agreement-max-kl"), c.AgreementMaxKL, agree.DefaultMaxKL))
	}
	if !(c.MaxRegression >= 0 && c.MaxRegression < 100) {
		errs = append(errs, fmt.Errorf("%s %v: pass a percentage from 0 to under 100, e.g. 10", name("max-regression"), c.MaxRegression))
	}
	if !(c.MaxJoulesPerToken >= 0) || math.IsInf(c.MaxJoulesPerToken, 0) {
		errs = append(errs, fmt.Errorf("%s %v: pass the gross joules per decoded token allowed, above 0 (e.g. 0.5), or 0 for no ceiling", name("max-joules-per-token"), c.MaxJoulesPerToken))
	}
	if c.Lead < 1 || c.Lead > report.MaxReplies {
		errs = append(errs, fmt.Errorf("%s %d: pass 1 to %d; %d, the default, is Wald's test at alpha %g (docs/measuring.md)", name("lead"), c.Lead, report.MaxReplies, stats.DefaultLead, stats.Alpha))
	}
	// Every route rule the judge would refuse is a problem, so all of them
	// are fixed in one go: RE2 patterns, and count:, unless-fast:, heavier:,
	// load: and plan: rules (docs/presets.md).
	rules, err := route.Compile(name("fast-route"), name("slow-route"), c.FastRoute, c.SlowRoute)
	errs = append(errs, err)
	return rules, errors.Join(errs...)
}

// LoadBaseline reads an earlier run's result.json and gives its medians,
// figured as the limits would judge them now.
func LoadBaseline(path string, l judge.Limits) (*judge.Baseline, error) {
	r, err := report.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--baseline: %v; pass the result.json of an earlier run (e.g. the last release's artifact)", err)
	}
	if err := history.IsRun(r); err != nil {
		return nil, fmt.Errorf("--baseline %s: %v; pass the result.json of an earlier run of npu-serve-smoke run", path, err)
	}
	rates, firstMS, _ := judge.Figures(r.Replies, l)
	if len(rates) == 0 || len(firstMS) == 0 {
		return nil, fmt.Errorf("--baseline %s holds no decode rate and first token to compare with (verdict %s); pass a run that measured some", path, r.Verdict)
	}
	b := judge.BaselineOf(path, rates, firstMS)
	if why := b.NotFigures(); why != "" {
		return nil, fmt.Errorf("--baseline %s is no rate and first token to compare with: %s; pass the result.json of a run that measured them", path, why)
	}
	return &b, nil
}

// checkOut makes sure the out directory can be written and holds no earlier
// run, whose files would mix with this one's.
func checkOut(dir string) error {
	if dir == "" {
		return nil // the gate makes a fresh one
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out %s cannot be created (%v); pass a directory you can write", dir, unwrapPath(err))
	}
	if err := CheckPrivateDir(dir); err != nil {
		return fmt.Errorf("--out %s: %v; %s", dir, err, privateDirAdvice)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("--out %s cannot be written (%v); pass a directory you can write", dir, unwrapPath(err))
	}
	f.Close()
	os.Remove(f.Name())
	for _, pat := range []string{"result.json", "summary.md", "serve.log", "reply_*.json", "warmup_*.json", "reference.json"} {
		if m, _ := filepath.Glob(filepath.Join(dir, pat)); len(m) > 0 {
			return fmt.Errorf("--out %s already holds a run (%s); pass an empty or new directory, so two runs' files do not mix", dir, filepath.Base(m[0]))
		}
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func unwrapExec(err error) error {
	var inner interface{ Unwrap() error }
	if errors.As(err, &inner) && inner.Unwrap() != nil {
		return inner.Unwrap()
	}
	return err
}

// checkWitness checks --witness and the globs of the fast route's device
// nodes and backend libraries.
func (c Config) checkWitness() []error {
	var errs []error
	if c.Witness != "on" && c.Witness != "off" {
		errs = append(errs, fmt.Errorf("--witness %q: pass on (the serve's processes witness its route) or off", c.Witness))
	}
	for _, g := range c.WitnessDevices {
		if _, err := path.Match(g, ""); err != nil || !strings.HasPrefix(g, "/dev/") {
			errs = append(errs, fmt.Errorf("--witness-device %q: pass a glob of device node paths under /dev, e.g. '/dev/accel/accel*'", g))
		}
	}
	for _, g := range c.WitnessLibraries {
		if _, err := path.Match(g, ""); err != nil || g == "" || strings.Contains(g, "/") {
			errs = append(errs, fmt.Errorf("--witness-library %q: pass a glob of a library's file name, no directory, e.g. 'libggml-cann*.so*'", g))
		}
	}
	return errs
}
