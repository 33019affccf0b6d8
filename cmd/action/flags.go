package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/sethvargo/go-githubactions"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
)

// patterns is a repeatable flag: the first use replaces the default, each
// later use adds a pattern.
type patterns struct {
	list *[]string
	set  bool
}

func (p *patterns) String() string {
	if p.list == nil {
		return ""
	}
	return strings.Join(*p.list, "\n")
}

func (p *patterns) Set(v string) error {
	if !p.set {
		*p.list, p.set = nil, true
	}
	*p.list = append(*p.list, v)
	return nil
}

// runFlags defines the gate's flags on fs, writing into c. The names are the
// action's input names too.
func runFlags(fs *flag.FlagSet, c *config.Config) {
	fs.StringVar(&c.Preset, "preset", c.Preset, "a kind of serve, which sets what it needs unless set here: "+strings.Join(config.PresetNames(), ", "))
	fs.StringVar(&c.Serve, "serve", c.Serve, "the serve's command line, with {port} and {model}; split like a shell splits words, never run by a shell")
	fs.Var(&patterns{list: &c.ServeEnv}, "serve-env", "NAME=VALUE: a variable the serve gets besides the allow-list of docs/reference.md (repeatable; never a secret or file command of the runner)")
	fs.Var(&patterns{list: &c.ServeEnvPass}, "serve-env-pass", "NAME: a variable of the gate's environment the serve gets too, if set (repeatable; never a secret or file command of the runner)")
	fs.StringVar(&c.Model, "model", c.Model, "the model: fills {model} and the requests' \"model\"")
	fs.IntVar(&c.Port, "port", c.Port, "port the serve listens on (0: pick a free one)")
	fs.StringVar(&c.Health, "health", c.Health, "health path, or auto (tries "+strings.Join(config.AutoHealthPaths, ", ")+")")
	fs.StringVar(&c.ChatPath, "chat-path", c.ChatPath, "the chat completions path")
	fs.StringVar(&c.StatsPath, "stats-path", c.StatsPath, "a path with the serve's own figures of its last request (Lemonade's /api/v1/stats), read after each reply")
	fs.DurationVar(&c.ReadyTimeout, "ready-timeout", c.ReadyTimeout, "how long the serve may take to answer health")
	fs.IntVar(&c.Replies, "replies", c.Replies, "replies asked at least, before the sign counts may stop the run")
	fs.IntVar(&c.MaxReplies, "max-replies", c.MaxReplies, "replies asked at most while a sign count has not decided; then the median decides (raised to --replies when lower)")
	fs.IntVar(&c.Lead, "lead", c.Lead, "the lead by which the replies meeting the floor (or the first-token limit) outnumber those missing it, or the reverse, that decides and stops the run: Wald's test on the signs (docs/measuring.md)")
	fs.Var(&seed{&c.OrderSeed}, "order-seed", "the seed of the order the prompts are asked in (default: drawn afresh; result.json's run.order_seed repeats a run's order)")
	fs.IntVar(&c.Warmup, "warmup", c.Warmup, "warm-up requests, recorded and not judged")
	fs.IntVar(&c.MaxTokens, "max-tokens", c.MaxTokens, "max_tokens of each request")
	fs.IntVar(&c.TopLogprobs, "top-logprobs", c.TopLogprobs, "ask each request for logprobs and this many alternatives at each token (top_logprobs), 0 to 20; 0 asks for none (default: 5, or 0 for a preset whose serve returns none)")
	fs.Float64Var(&c.Floor, "floor", c.Floor, "median decode rate floor, tok/s; "+config.DefaultFloorWhy)
	fs.Float64Var(&c.FloorFromBaseline, "floor-from-baseline", c.FloorFromBaseline, "derive the floor from --baseline: this fraction of its median rate (e.g. 0.8)")
	fs.Float64Var(&c.FirstTokenMS, "first-token-ms", c.FirstTokenMS, "median first-token limit, ms")
	fs.Var(&patterns{list: &c.FastRoute}, "fast-route", "RE2 pattern of a serve log line naming the fast route, or 'count: RE' with two numbers captured, equal on the fast route (repeatable)")
	fs.Var(&patterns{list: &c.SlowRoute}, "slow-route", "RE2 pattern of a serve log line naming the slow route, or 'unless-fast: RE', the slow route when no line names the fast one (repeatable)")
	fs.StringVar(&c.Witness, "witness", c.Witness, "on or off: the serve's processes witness its route while it decodes (device nodes held, backend libraries mapped, device memory and engine time)")
	fs.Var(&patterns{list: &c.WitnessDevices}, "witness-device", "glob of a device node the fast route's processes hold open, e.g. '/dev/accel/accel*' (repeatable; default: the preset's)")
	fs.Var(&patterns{list: &c.WitnessLibraries}, "witness-library", "glob of a backend library's file name the fast route's processes map, e.g. 'libggml-cann*.so*' (repeatable; default: the preset's)")
	fs.StringVar(&c.Prompts, "prompts", c.Prompts, "file of prompts, one a line or JSON {\"prompt\",\"expect\"} (default: a built-in set of five)")
	fs.StringVar(&c.Thinking, "thinking", c.Thinking, "on or off: chat_template_kwargs.enable_thinking")
	fs.StringVar(&c.ThinkingControl, "thinking-control", c.ThinkingControl, "how thinking is turned on or off: chat-template-kwargs, reasoning-effort, both or think")
	fs.StringVar(&c.Baseline, "baseline", c.Baseline, "an earlier run's result.json: adds the baseline assertion")
	fs.Float64Var(&c.MaxRegression, "max-regression", c.MaxRegression, "percent the median rate may fall, or the median first token rise, against --baseline")
	referenceFlags(fs, c)
	fs.StringVar(&c.Energy, "energy", c.Energy, "the energy sensor read while the judged replies decode: auto, off, nvml[:N], npu-smi[:N], hwmon[:NAME], rapl[:N], emi[:N], counter:PATH[:uj|mj|j] or power:PATH[:uw|mw|w] (docs/measuring.md)")
	fs.DurationVar(&c.EnergyIdle, "energy-idle", c.EnergyIdle, "how long the serve's idle power is read before the first judged request and after the last (at least ten sensor periods; 0: no net figure)")
	fs.Float64Var(&c.MaxJoulesPerToken, "max-joules-per-token", c.MaxJoulesPerToken, "gross joules per decoded token allowed, idle included: makes the energy row an assertion (0: the row is for people only)")
	fs.StringVar(&c.ReferenceMissing, "reference-missing", c.ReferenceMissing, "fail or skip: what --reference github:PATTERN does when it finds no usable recording (fail: the agreement assertion fails, saying why)")
	fs.IntVar(&c.Load, "load", c.Load, "after the single-stream assertions passed, rounds of N streams started together, judged on --load-expect (0: off)")
	fs.StringVar(&c.LoadExpect, "load-expect", c.LoadExpect, "batch (the serve decodes the streams together) or serial (it takes one request at a time, first in first out) (default: the preset's, serial for ovms and flm, else batch)")
	fs.Float64Var(&c.LoadEfficiency, "load-efficiency", c.LoadEfficiency, "batch: the least η, a round's aggregate rate over N times the single-stream median, above 1/N, the η of a serve that time-slices one device (0: 0.5, and 0.65 at --load 2)")
	fs.Float64Var(&c.LoadFirstTokenMS, "load-first-token-ms", c.LoadFirstTokenMS, "batch: the most a round's worst first token may take, ms (0: twice --first-token-ms)")
	fs.IntVar(&c.LoadMaxRounds, "load-max-rounds", c.LoadMaxRounds, "rounds asked at most while a sign count has not decided (odd); then the median round decides")
	fs.StringVar(&c.RateSource, "rate-source", c.RateSource, "client (timed from the stream) or server (the serve's timings)")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", c.RequestTimeout, "limit for one whole reply")
	fs.Var((*byteSize)(&c.LogLimit), "log-limit", "bytes of serve.log kept on disk, its head and its tail (e.g. 64MiB); the route is read on the whole stream")
	fs.StringVar(&c.Out, "out", c.Out, "directory for serve.log, reply_N.json, result.json, summary.md (default: a fresh one)")
	fs.StringVar(&c.Hold, "hold", c.Hold, "builtin (take the device's ticket), none, or command:NAME (run the serve under NAME)")
	fs.DurationVar(&c.HoldTimeout, "hold-timeout", c.HoldTimeout, "how long to wait for the device's ticket")
	fs.StringVar(&c.Device, "device", c.Device, "the device whose ticket to hold, or the pool to take --count devices of")
	fs.IntVar(&c.Count, "count", c.Count, "how many devices of the --device pool to hold; the serve gets them as {devices}")
	fs.StringVar(&c.CheckName, "check-name", c.CheckName, "the check run's name (what a required status check matches)")
	fs.StringVar(&c.Comment, "comment", c.Comment, "on-pr (a sticky PR comment) or never")
	fs.IntVar(&c.PRNumber, "pr-number", c.PRNumber, "pull request to comment on when the event is not one (a push)")
	tokenFlags(fs, &c.GitHubToken, &c.GitHubTokenFile, "the check run and the comment")
}

// tokenFrom says where a token comes from, for an error that lacks one.
const tokenFrom = "set GITHUB_TOKEN in the environment (the action's github-token input does) or pass --github-token-file FILE"

// notPosted says that a token given outside GitHub Actions is not used.
const notPosted = "--github-token-file: not inside GitHub Actions (GITHUB_ACTIONS is not true), so no check run or comment is posted; they are posted from a workflow job"

// tokenFlags defines a command's token flags on fs: --github-token-file,
// into file, and --github-token, refused on the command line (refused),
// whose action input (INPUT_GITHUB-TOKEN, an environment variable) goes
// into token. what says what the token is for.
func tokenFlags(fs *flag.FlagSet, token, file *string, what string) {
	fs.Var(&secretFlag{input: token, instead: tokenFrom}, "github-token",
		"refused: a token on the command line is readable by every user of this machine; the token comes from $GITHUB_TOKEN or --github-token-file")
	fs.StringVar(file, "github-token-file", *file, "a file holding the token for "+what+", read once (default: $GITHUB_TOKEN; never printed)")
}

// githubToken is the token of a command that reads no action input: the
// file's (--github-token-file) when one is given, else $GITHUB_TOKEN.
func (e *env) githubToken(file string) (string, error) {
	if file != "" {
		return config.ReadTokenFile(file)
	}
	return e.getenv("GITHUB_TOKEN"), nil
}

// secretFlag is a flag that would carry a secret: given on the command
// line, which every user of the machine reads in /proc/PID/cmdline (a
// process that is not dumpable hides its environment, not its command
// line), it is refused by name (refused), its value neither kept nor
// shown (the flag package shows a value its Set refuses). The action's
// input of its name, an environment variable, fills input (fromInputs).
type secretFlag struct {
	input   *string
	instead string // what to do instead
	given   bool
}

func (s *secretFlag) String() string { return "" }

func (s *secretFlag) Set(string) error {
	s.given = true
	return nil
}

// refused says which secret flags of fs were given on the command line, and
// what to do instead, or nil.
func refused(fs *flag.FlagSet) error {
	var errs []string
	fs.VisitAll(func(f *flag.Flag) {
		if s, ok := f.Value.(*secretFlag); ok && s.given {
			errs = append(errs, fmt.Sprintf("--%s: a secret on the command line is readable by every user of this machine (/proc/PID/cmdline); %s", f.Name, s.instead))
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// referenceFlags defines the agreement's flags on fs, writing into c: the
// gate's, judge's and publish's.
func referenceFlags(fs *flag.FlagSet, c *config.Config) {
	fs.StringVar(&c.Reference, "reference", c.Reference, "a run on the trusted route (its out directory or result.json, e.g. made by record), or github:PATTERN: adds the agreement assertion")
	fs.Float64Var(&c.AgreementTieMargin, "agreement-tie-margin", c.AgreementTieMargin, "nats: a divergence from the reference is at a near-tie when this run's token is among the reference's top K there, at most this below the reference's most likely token")
	fs.Float64Var(&c.AgreementMaxKL, "agreement-max-kl", c.AgreementMaxKL, "nats: the mean KL distance from the reference's distributions allowed at the shared positions")
}

// fromInputs sets every flag of fs that has an action input (INPUT_NAME):
// the same names serve the command line and the action. A repeatable flag
// takes one value a line.
func fromInputs(fs *flag.FlagSet, a *githubactions.Action) error {
	var errs []string
	fs.VisitAll(func(f *flag.Flag) {
		v := a.GetInput(f.Name)
		if v == "" {
			return
		}
		if s, ok := f.Value.(*secretFlag); ok {
			*s.input = v
			return
		}
		values := []string{v}
		if _, ok := f.Value.(*patterns); ok {
			values = nil
			for line := range strings.SplitSeq(v, "\n") {
				if line = strings.TrimSpace(line); line != "" {
					values = append(values, line)
				}
			}
		}
		for _, v := range values {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Sprintf("input %s: %v", f.Name, err))
			}
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// setFlags reports which flags of fs were set, by the command line or an
// input.
func setFlags(fs *flag.FlagSet) func(string) bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return func(name string) bool { return set[name] }
}

// seed is a flag of a seed, unset until given.
type seed struct{ v **uint64 }

func (s *seed) String() string {
	if s.v == nil || *s.v == nil {
		return ""
	}
	return strconv.FormatUint(**s.v, 10)
}

func (s *seed) Set(v string) error {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not a seed; pass a whole number from 0 to 2^53 - 1", v)
	}
	*s.v = &n
	return nil
}

// byteSize is a flag of bytes: 65536, 64KiB, 64MiB, 1GiB (K, M, G mean the
// same powers of 1024).
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(v string) error {
	n, err := config.ParseSize(v)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}
