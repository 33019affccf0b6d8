package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/probe"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/prompts"
)

// found finds only the executables named here.
func found(names ...string) LookPath {
	return func(file string) (string, error) {
		for _, n := range names {
			if file == n {
				return "/usr/bin/" + n, nil
			}
		}
		return "", &os.PathError{Op: "exec", Path: file, Err: errors.New("executable file not found in $PATH")}
	}
}

func good(t *testing.T) Config {
	c := Default()
	c.Serve = "llama-server -m {model} --port {port} --host 127.0.0.1"
	c.Model = "/models/Qwen3-0.6B.gguf"
	c.Out = filepath.Join(t.TempDir(), "out")
	return c
}

func TestCheckGood(t *testing.T) {
	c := good(t)
	p, err := c.Check(found("llama-server"))
	if err != nil {
		t.Fatalf("Check() error = %v", err)
	}
	wantArgv := []string{"llama-server", "-m", "/models/Qwen3-0.6B.gguf", "--port", "{port}", "--host", "127.0.0.1"}
	if diff := cmp.Diff(wantArgv, p.Argv); diff != "" {
		t.Errorf("Argv (-want +got):\n%s", diff)
	}
	if p.Executable != "/usr/bin/llama-server" {
		t.Errorf("Executable = %q", p.Executable)
	}
	if diff := cmp.Diff(AutoHealthPaths, p.HealthPaths); diff != "" {
		t.Errorf("HealthPaths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(prompts.Builtin(), p.Prompts); diff != "" {
		t.Errorf("Prompts (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(c.Out); err != nil || !fi.IsDir() {
		t.Errorf("Check() did not create --out: %v", err)
	}
	// The route rules, compiled once, here: the gate reads the log with them.
	if p.Rules == nil {
		t.Fatal("Check() gave no compiled route rules")
	}
	m := p.Rules.Matcher()
	m.Line([]byte(route.DefaultSlow[0]))
	if ev := m.Evidence(); ev.Slow == nil || !slices.Equal(ev.FastPatterns, c.FastRoute) || !slices.Equal(ev.SlowPatterns, c.SlowRoute) {
		t.Errorf("the plan's rules read %q as %+v; want the slow route, by the settings' patterns", route.DefaultSlow[0], ev)
	}
	if l := c.Limits(); l.Floor != 60 || l.FirstTokenMS != 600 || l.RateSource != "client" {
		t.Errorf("Limits() = %+v", l)
	}
}

func TestCheckOptions(t *testing.T) {
	c := good(t)
	c.Health = "/api/v1/health"
	pf := filepath.Join(t.TempDir(), "prompts.txt")
	os.WriteFile(pf, []byte("one\n{\"prompt\":\"two\",\"expect\":\"x\"}\n"), 0o644)
	c.Prompts = pf
	c.Hold = "command:npu-hold"
	c.Out = ""
	p, err := c.Check(found("llama-server", "npu-hold"))
	if err != nil {
		t.Fatalf("Check() error = %v", err)
	}
	if diff := cmp.Diff([]string{"/api/v1/health"}, p.HealthPaths); diff != "" {
		t.Errorf("HealthPaths (-want +got):\n%s", diff)
	}
	if len(p.Prompts) != 2 || p.Prompts[1].Expect != "x" {
		t.Errorf("Prompts = %+v, want the file's two", p.Prompts)
	}
	if p.HoldCommand != "/usr/bin/npu-hold" {
		t.Errorf("HoldCommand = %q", p.HoldCommand)
	}
}

func TestCheckBad(t *testing.T) {
	readOnly := filepath.Join(t.TempDir(), "ro")
	os.Mkdir(readOnly, 0o555)
	used := t.TempDir()
	os.WriteFile(filepath.Join(used, "reply_1.json"), []byte("{}"), 0o644)
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	// A FIFO no one writes: opened for reading the way a file is, it
	// blocks for ever.
	fifo := filepath.Join(t.TempDir(), "prompts.fifo")
	mkfifo(t, fifo)

	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"empty serve", func(c *Config) { c.Serve = "  " }, "--serve is empty"},
		{"unbalanced quotes", func(c *Config) { c.Serve = `llama-server -m '{model}` }, "--serve: a single quote (') is not closed"},
		{"executable not found", func(c *Config) { c.Serve = "llama-serverx --port {port}" }, `--serve: the executable "llama-serverx" was not found`},
		{"model missing for {model}", func(c *Config) { c.Model = "" }, "--serve uses {model} but --model is empty"},
		{"no {port} with port 0", func(c *Config) { c.Serve = "llama-server -m {model}" }, "--serve has no {port} and --port is 0"},
		{"port too high", func(c *Config) { c.Port = 70000 }, "--port 70000 is out of range"},
		{"port negative", func(c *Config) { c.Port = -1 }, "--port -1 is out of range"},
		{"health without slash", func(c *Config) { c.Health = "health" }, `--health "health": pass a path that starts with /`},
		{"replies below 1", func(c *Config) { c.Replies = 0 }, "--replies 0: pass 1 to 65536"},
		{"warmup negative", func(c *Config) { c.Warmup = -1 }, "--warmup -1: pass 0 to 1000"},
		{"max-tokens below 2", func(c *Config) { c.MaxTokens = 1 }, "--max-tokens 1: pass 2 to 8192"},
		{"witness neither on nor off", func(c *Config) { c.Witness = "yes" }, `--witness "yes": pass on`},
		{"witness-device outside /dev", func(c *Config) { c.WitnessDevices = []string{"/dev/accel/*", "accel*"} }, `--witness-device "accel*": pass a glob of device node paths under /dev`},
		{"witness-device a bad glob", func(c *Config) { c.WitnessDevices = []string{"/dev/accel["} }, `--witness-device "/dev/accel[": pass a glob`},
		{"witness-library with a directory", func(c *Config) { c.WitnessLibraries = []string{"lib*.so", "/lib/x.so"} }, `--witness-library "/lib/x.so": pass a glob of a library's file name, no directory`},
		{"witness-library a bad glob", func(c *Config) { c.WitnessLibraries = []string{"lib["} }, `--witness-library "lib[": pass a glob`},
		{"witness-library empty", func(c *Config) { c.WitnessLibraries = []string{""} }, `--witness-library "": pass a glob`},
		{"top-logprobs negative", func(c *Config) { c.TopLogprobs = -1 }, "--top-logprobs -1: pass 0 (ask for no logprobs) to 20"},
		{"top-logprobs above 20", func(c *Config) { c.TopLogprobs = 21 }, "--top-logprobs 21: pass 0"},
		{"floor zero", func(c *Config) { c.Floor = 0 }, "--floor 0: pass a positive number"},
		{"floor negative", func(c *Config) { c.Floor = -5 }, "--floor -5: pass a positive number"},
		{"floor infinite", func(c *Config) { c.Floor = inf() }, "--floor +Inf: pass a positive number"},
		{"floor NaN", func(c *Config) { c.Floor = nan() }, "--floor NaN: pass a positive number"},
		{"first-token zero", func(c *Config) { c.FirstTokenMS = 0 }, "--first-token-ms 0: pass a positive number"},
		{"first-token infinite", func(c *Config) { c.FirstTokenMS = inf() }, "--first-token-ms +Inf"},
		{"invalid route pattern", func(c *Config) { c.FastRoute = []string{"route ("} }, `--fast-route "route (" is not a valid RE2 pattern`},
		{"missing prompts file", func(c *Config) { c.Prompts = "/nonexistent/p.txt" }, "--prompts: open /nonexistent/p.txt"},
		{"thinking", func(c *Config) { c.Thinking = "maybe" }, `--thinking "maybe": pass on or off`},
		{"rate source", func(c *Config) { c.RateSource = "both" }, `--rate-source "both": pass client or server`},
		{"ready timeout", func(c *Config) { c.ReadyTimeout = 0 }, "--ready-timeout 0s: pass a positive duration"},
		{"request timeout", func(c *Config) { c.RequestTimeout = -time.Second }, "--request-timeout -1s"},
		{"hold timeout", func(c *Config) { c.HoldTimeout = 0 }, "--hold-timeout 0s"},
		{"device with a slash", func(c *Config) { c.Device = "../etc" }, `--device "../etc"`},
		{"device read as another's ticket", func(c *Config) { c.Device = "npu.h.00000000000000000001" }, `--device "npu.h.00000000000000000001": a device name may not hold ".h.": ticket files are named DEVICE.q.N and DEVICE.h.N, so its tickets would read as those of "npu"; rename it, e.g. npu-h-00000000000000000001`},
		{"count below 1", func(c *Config) { c.Count = 0 }, "--count 0: ask for 1 to 256 devices"},
		{"count without the builtin hold", func(c *Config) { c.Count, c.Hold = 2, "none" }, "--count 2 needs --hold builtin: the gate hands out a pool's devices itself"},
		{"hold unknown", func(c *Config) { c.Hold = "maybe" }, `--hold "maybe": pass builtin, none, or command:NAME`},
		{"hold command empty", func(c *Config) { c.Hold = "command:" }, `--hold "command:"`},
		{"hold command not found", func(c *Config) { c.Hold = "command:nohold" }, `--hold command:nohold: "nohold" was not found`},
		{"check name empty", func(c *Config) { c.CheckName = " " }, "--check-name is empty"},
		{"comment", func(c *Config) { c.Comment = "always" }, `--comment "always": pass on-pr or never`},
		{"out not writable", func(c *Config) { c.Out = readOnly }, "--out " + readOnly + " cannot be written"},
		{"out is a file", func(c *Config) { c.Out = file + "/sub" }, "--out " + file + "/sub cannot be created"},
		{"out holds a run", func(c *Config) { c.Out = used }, "already holds a run (reply_1.json)"},
		{"max-replies below 1", func(c *Config) { c.MaxReplies = 0 }, "--max-replies 0: pass 1 to 65536"},
		{"thinking control", func(c *Config) { c.ThinkingControl = "prompt" }, `--thinking-control "prompt": pass chat-template-kwargs, reasoning-effort, both or think`},
		{"chat path without slash", func(c *Config) { c.ChatPath = "v1/chat" }, `--chat-path "v1/chat": pass a path that starts with /`},
		{"chat path empty", func(c *Config) { c.ChatPath = "" }, `--chat-path "": pass a path`},
		{"stats path without slash", func(c *Config) { c.StatsPath = "stats" }, `--stats-path "stats": pass a path`},
		{"max-regression negative", func(c *Config) { c.MaxRegression = -1 }, "--max-regression -1: pass a percentage from 0 to under 100"},
		{"max-regression 100", func(c *Config) { c.MaxRegression = 100 }, "--max-regression 100"},
		{"max-regression NaN", func(c *Config) { c.MaxRegression = nan() }, "--max-regression NaN"},
		{"baseline missing", func(c *Config) { c.Baseline = "/nonexistent/result.json" }, "--baseline: /nonexistent/result.json: no such file or directory; pass the result.json of an earlier run"},
		{"baseline foreign", func(c *Config) { c.Baseline = file }, "not a result file"},
		{"baseline with fewer replies than the lead", func(c *Config) { c.Baseline, c.Replies, c.MaxReplies = file, 1, 2 }, "--baseline with --max-replies 2: the baseline's sign counts need --lead 3 replies to decide at the rule's error (docs/measuring.md); pass --max-replies 3 or more"},
		{"baseline with --replies at --max-replies below the lead", func(c *Config) { c.Baseline, c.Replies, c.MaxReplies = file, 2, 2 }, "--baseline with --max-replies 2: the baseline's sign counts"},
		{"baseline with --replies below a larger lead", func(c *Config) { c.Baseline, c.Replies, c.MaxReplies, c.Lead = file, 4, 1, 5 }, "--baseline with --max-replies 1, raised to --replies 4: the baseline's sign counts need --lead 5 replies to decide at the rule's error (docs/measuring.md); pass --max-replies 5 or more"},
		// Absurd numbers: each bounded, named, with what to pass.
		{"max-tokens at the int64 maximum", func(c *Config) { c.MaxTokens = math.MaxInt64 }, "--max-tokens 9223372036854775807: pass 2 to 8192"},
		{"max-tokens one above its bound", func(c *Config) { c.MaxTokens = MaxMaxTokens + 1 }, "--max-tokens 8193: pass 2 to 8192"},
		{"replies beyond a run's directory", func(c *Config) { c.Replies = 65537 }, "--replies 65537: pass 1 to 65536, the most replies a run's directory may hold"},
		{"max-replies beyond a run's directory", func(c *Config) { c.MaxReplies = 65537 }, "--max-replies 65537: pass 1 to 65536"},
		{"warmup absurd", func(c *Config) { c.Warmup = MaxWarmup + 1 }, "--warmup 1001: pass 0 to 1000"},
		{"lead absurd", func(c *Config) { c.Lead = math.MaxInt }, "--lead 9223372036854775807: pass 1 to 65536"},
		{"lead 0", func(c *Config) { c.Lead = 0 }, "--lead 0: pass 1 to 65536"},
		{"count absurd", func(c *Config) { c.Count = 257 }, "--count 257: ask for 1 to 256 devices"},
		{"pr-number absurd", func(c *Config) { c.PRNumber = math.MaxInt32 + 1 }, "--pr-number 2147483648: pass a pull request number (1 to 2147483647)"},
		{"log-limit absurd", func(c *Config) { c.LogLimit = math.MaxInt64 }, "--log-limit 9223372036854775807: pass 4096 to 1073741824 bytes"},
		{"log-limit too small", func(c *Config) { c.LogLimit = 1 }, "--log-limit 1: pass 4096 to 1073741824 bytes"},
		{"agreement-tie-margin infinite", func(c *Config) { c.AgreementTieMargin = inf() }, "--agreement-tie-margin +Inf: pass a margin in nats"},
		{"agreement-max-kl NaN", func(c *Config) { c.AgreementMaxKL = nan() }, "--agreement-max-kl NaN: pass a distance in nats"},
		// Control characters and spaces in a request path.
		{"chat path with a line break", func(c *Config) { c.ChatPath = "/v1/chat\r\nX-Forged: 1" }, `--chat-path "/v1/chat\r\nX-Forged: 1": a path holds no spaces or control characters`},
		{"chat path with a space", func(c *Config) { c.ChatPath = "/v1/chat HTTP/1.0" }, `--chat-path "/v1/chat HTTP/1.0": a path holds no spaces`},
		{"chat path with DEL", func(c *Config) { c.ChatPath = "/v1/\x7f" }, `--chat-path "/v1/\x7f": a path holds no spaces`},
		{"chat path with a NUL", func(c *Config) { c.ChatPath = "/v1/\x00" }, `--chat-path "/v1/\x00": a path holds no spaces`},
		{"stats path with a tab", func(c *Config) { c.StatsPath = "/stats\t" }, `--stats-path "/stats\t": a path holds no spaces`},
		{"health with a line break", func(c *Config) { c.Health = "/health\n" }, `--health "/health\n": a path holds no spaces`},
		{"prompts a FIFO", func(c *Config) { c.Prompts = fifo }, "--prompts " + fifo + " is not a regular file"},
		{"prompts a directory", func(c *Config) { c.Prompts = t.TempDir() }, "is not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "out not writable" && os.Geteuid() == 0 {
				t.Skip("root writes to any directory")
			}
			c := good(t)
			tt.edit(&c)
			p, err := c.Check(found("llama-server"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check() = %v, %v; want an error containing %q", p, err, tt.want)
			}
		})
	}
}

func TestCheckListsEveryProblem(t *testing.T) {
	c := good(t)
	c.Replies, c.MaxTokens, c.Floor, c.Serve = 0, 1, -1, ""
	_, err := c.Check(found())
	for _, want := range []string{"--replies", "--max-tokens", "--floor", "--serve is empty"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check() error = %v, want it to list %s", err, want)
		}
	}
	if _, serr := os.Stat(c.Out); serr == nil {
		t.Errorf("Check() created --out %s for a bad configuration", c.Out)
	}
}

func inf() float64 { var z float64; return 1 / z }
func nan() float64 { var z float64; return z / z }

func TestBaselineLoads(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	goodFile := write("good.json", `{"schema": "npu-serve-smoke/v1", "verdict": "pass", "replies": [
		{"n": 1, "first_ms": 250, "last_ms": 1520, "completion_tokens": 128, "content": "x"},
		{"n": 2, "first_ms": 300, "last_ms": 1570, "completion_tokens": 128, "content": "x"},
		{"n": 3, "first_ms": 350, "last_ms": 2890, "completion_tokens": 128, "content": "x"}]}`)
	c := Default()
	b, err := LoadBaseline(goodFile, c.Limits())
	if err != nil {
		t.Fatal(err)
	}
	if b.File != goodFile || b.Rate != 100 || b.FirstTokenMS != 300 {
		t.Errorf("LoadBaseline() = %+v, want the medians 100 tok/s and 300 ms", b)
	}
	if b.Replies != 3 || b.Coverage != 0.75 || b.FirstTokenHiMS != 350 {
		t.Errorf("LoadBaseline() = %+v, want its 3 replies' range at 75%%, the first token's high end 350 ms", b)
	}
	// An edited file's first token below 0 would hold every reply's: the
	// file is refused when it is read (report.Read's ranges).
	negative := write("negative.json", `{"schema": "npu-serve-smoke/v1", "verdict": "pass", "replies": [
		{"n": 1, "first_ms": -5, "last_ms": 1265, "completion_tokens": 128, "content": "x"}]}`)
	if _, err := LoadBaseline(negative, c.Limits()); err == nil || !strings.Contains(err.Error(), "replies[0].first_ms is -5, below 0; it is not a file the gate wrote, refused") {
		t.Errorf("LoadBaseline(a first token of -5 ms) = %v", err)
	}
	empty := write("empty.json", `{"schema": "npu-serve-smoke/v1", "verdict": "fail", "replies": []}`)
	if _, err := LoadBaseline(empty, c.Limits()); err == nil || !strings.Contains(err.Error(), "holds no decode rate and first token to compare with (verdict fail)") {
		t.Errorf("LoadBaseline(no replies) = %v", err)
	}
	// A recording passed on its content and release alone: its slow
	// route's rate would lower the bar.
	recording := write("recording.json", strings.Replace(readFile(t, goodFile), `"verdict": "pass",`, `"verdict": "pass", "run": {"kind": "reference"},`, 1))
	if _, err := LoadBaseline(recording, c.Limits()); err == nil || !strings.Contains(err.Error(), `it is a recording (run.kind "reference")`) {
		t.Errorf("LoadBaseline(a recording) = %v, want it refused as a recording", err)
	}
	other := write("other.json", `{"schema": "other/v2"}`)
	if _, err := LoadBaseline(other, c.Limits()); err == nil || !strings.Contains(err.Error(), `schema "other/v2"`) {
		t.Errorf("LoadBaseline(foreign) = %v", err)
	}
	cfg := good(t)
	cfg.Baseline = goodFile
	p, err := cfg.Check(found("llama-server"))
	if err != nil || p.Baseline == nil || p.Baseline.Rate != 100 {
		t.Errorf("Check() with a baseline = %+v, %v", p, err)
	}
	// As many replies as the lead can decide the baseline's counts, and
	// --replies raises --max-replies to itself.
	for _, n := range [][2]int{{1, 3}, {3, 1}} {
		cfg := cfg
		cfg.Out = filepath.Join(t.TempDir(), "out")
		cfg.Replies, cfg.MaxReplies = n[0], n[1]
		if _, err := cfg.Check(found("llama-server")); err != nil {
			t.Errorf("Check(--baseline --replies %d --max-replies %d) = %v, want no error at --lead 3", n[0], n[1], err)
		}
	}
	if l := cfg.Limits(); l.Regression() != 0.10 {
		t.Errorf("Limits().Regression() = %v, want 0.10 from 10%%", l.Regression())
	}
}

func TestApplyPreset(t *testing.T) {
	c := Default()
	c.Preset = "ollama"
	set := map[string]bool{"fast-route": true}
	c.FastRoute = []string{"mine"}
	if err := c.ApplyPreset(func(f string) bool { return set[f] }); err != nil {
		t.Fatal(err)
	}
	if c.Health != "/" || c.ChatPath != "/v1/chat/completions" || c.ThinkingControl != ThinkingEffort || c.StatsPath != "" {
		t.Errorf("ApplyPreset(ollama) = health %q chat %q thinking %q stats %q", c.Health, c.ChatPath, c.ThinkingControl, c.StatsPath)
	}
	if diff := cmp.Diff([]string{"mine"}, c.FastRoute); diff != "" {
		t.Errorf("a fast-route the user set was replaced (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Presets["ollama"].SlowRoute, c.SlowRoute); diff != "" {
		t.Errorf("slow-route (-want +got):\n%s", diff)
	}

	c = Default()
	c.Preset = "lemonade"
	c.Health = "/mine"
	if err := c.ApplyPreset(func(f string) bool { return f == "health" }); err != nil {
		t.Fatal(err)
	}
	if c.Health != "/mine" || c.ChatPath != "/v1/chat/completions" || c.StatsPath != "/v1/stats" {
		t.Errorf("ApplyPreset(lemonade) with --health set = %q %q %q", c.Health, c.ChatPath, c.StatsPath)
	}

	// --top-logprobs follows the preset's serve unless set.
	for _, tt := range []struct {
		preset string
		set    bool
		want   int
	}{
		{"llama.cpp", false, 5}, {"vllm", false, 5}, {"ollama", false, 5}, {"lemonade", false, 5},
		{"ovms", false, 0}, {"flm", false, 0}, {"flm", true, 3},
	} {
		c := Default()
		c.Preset, c.TopLogprobs = tt.preset, 3
		c.ApplyPreset(func(f string) bool { return tt.set && f == "top-logprobs" })
		if c.TopLogprobs != tt.want {
			t.Errorf("ApplyPreset(%s), --top-logprobs 3 set %v: TopLogprobs = %d, want %d", tt.preset, tt.set, c.TopLogprobs, tt.want)
		}
	}
	if c := Default(); c.TopLogprobs != 5 {
		t.Errorf("Default().TopLogprobs = %d, want 5", c.TopLogprobs)
	}

	c = Default()
	c.Preset = "tgi"
	if err := c.ApplyPreset(func(string) bool { return false }); err == nil || !strings.Contains(err.Error(), `--preset "tgi": pass one of 1bit, flm, lemonade, llama.cpp, ollama, ovms, vllm, vllm-ascend`) {
		t.Errorf("ApplyPreset(tgi) = %v", err)
	}
	c = Default()
	before := c
	if err := c.ApplyPreset(func(string) bool { return false }); err != nil || !cmp.Equal(before, c) {
		t.Errorf("ApplyPreset() with no preset changed the config: %v", err)
	}
	// Every preset's patterns compile, and its paths pass the checks.
	for name := range Presets {
		c := good(t)
		c.Preset = name
		c.ApplyPreset(func(string) bool { return false })
		if _, err := c.Check(found("llama-server")); err != nil {
			t.Errorf("preset %s does not check: %v", name, err)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCheckRunSize: a run whose replies its own readers would refuse
// (report.MaxRunBytes, report.MaxRunObjects) is bad input, naming the
// three inputs; the defaults, and a long run of a few replies, are not.
func TestCheckRunSize(t *testing.T) {
	tests := []struct {
		name                    string
		replies, tokens, top, w int
		bad                     bool
	}{
		{"defaults", Default().MaxReplies, Default().MaxTokens, DefaultTopLogprobs, 1, false},
		{"a long answer, top 5", 15, 4096, 5, 1, false},
		{"many replies of 2048, top 5", 100, 2048, 5, 1, true},
		{"the most replies", 65536, 128, 5, 1, true},
		{"the most replies, no logprobs", 65536, 2, 0, 0, true},
		{"top 20 of 2048", 10, 2048, 20, 1, false},
		{"top 20 of 2048, more replies", 40, 2048, 20, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good(t)
			c.Replies, c.MaxReplies, c.MaxTokens, c.TopLogprobs, c.Warmup = 1, tt.replies, tt.tokens, tt.top, tt.w
			err := c.checkRunSize()
			want := fmt.Sprintf("--max-replies %d (or --replies), --max-tokens %d and --top-logprobs %d: the run's replies would come to about", tt.replies, tt.tokens, tt.top)
			if tt.bad != (err != nil) || err != nil && !strings.Contains(err.Error(), want) {
				size, objects := runSize(tt.replies, tt.w, tt.tokens, tt.top)
				t.Errorf("checkRunSize() = %v (about %.0f bytes, %.0f objects); want bad %v", err, size, objects, tt.bad)
			}
		})
	}
	// Its figures are the gate's own encoding: a reply file of top 20
	// written by the gate is about 2,300 bytes and 21 objects a token.
	size, objects := runSize(1, 0, 1000-probe.ExtraTokens, 20)
	if size/2000 < 1800 || size/2000 > 2800 || objects/2000 < 21 || objects/2000 > 23 {
		t.Errorf("runSize of top 20 = %.0f bytes, %.0f objects a token; want about 2,300 and 22", size/2000, objects/2000)
	}
}

func TestApplyPresetWitnesses(t *testing.T) {
	c := Default()
	c.Preset = "ovms"
	if err := c.ApplyPreset(func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(c.WitnessDevices, []string{"/dev/accel/accel*"}) || !cmp.Equal(c.WitnessLibraries, []string{"libopenvino_intel_npu_plugin.so*"}) || !c.WitnessBinary || c.WitnessAccount != "" {
		t.Errorf("ApplyPreset(ovms): witnesses %q %q binary %v account %q", c.WitnessDevices, c.WitnessLibraries, c.WitnessBinary, c.WitnessAccount)
	}
	for preset, account := range map[string]string{"vllm": "vllm", "vllm-ascend": "", "llama.cpp": ""} {
		c = Default()
		c.Preset = preset
		if err := c.ApplyPreset(func(string) bool { return false }); err != nil {
			t.Fatal(err)
		}
		if c.WitnessAccount != account {
			t.Errorf("ApplyPreset(%s): account %q, want %q", preset, c.WitnessAccount, account)
		}
		// vLLM's slow route, eager mode, holds its weights on the same
		// device: its memory names no fast route
		if eager := preset != "llama.cpp"; (c.WitnessSlowOnDevice != "") != eager {
			t.Errorf("ApplyPreset(%s): slow route on the device %q, want it said: %v", preset, c.WitnessSlowOnDevice, eager)
		}
	}
	c = Default()
	c.Preset = "ollama"
	c.WitnessDevices = []string{"/dev/mine"}
	if err := c.ApplyPreset(func(f string) bool { return f == "witness-device" }); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(c.WitnessDevices, []string{"/dev/mine"}) || !cmp.Equal(c.WitnessLibraries, PresetWitnesses["ollama"].Libraries) || c.WitnessBinary || c.WitnessAccount != "ollama" {
		t.Errorf("ApplyPreset(ollama) with --witness-device set: %q %q binary %v account %q", c.WitnessDevices, c.WitnessLibraries, c.WitnessBinary, c.WitnessAccount)
	}
	c = Default()
	c.Preset = "1bit"
	c.WitnessLibraries = []string{"libmine.so"}
	if err := c.ApplyPreset(func(f string) bool { return f == "witness-library" }); err != nil {
		t.Fatal(err)
	}
	if c.WitnessDevices != nil || !cmp.Equal(c.WitnessLibraries, []string{"libmine.so"}) {
		t.Errorf("ApplyPreset(1bit): %q %q, want no devices and the library set", c.WitnessDevices, c.WitnessLibraries)
	}
	// Every preset's globs pass the check the flags get.
	for name, w := range PresetWitnesses {
		c := Default()
		c.WitnessDevices, c.WitnessLibraries = w.Devices, w.Libraries
		if errs := c.checkWitness(); len(errs) > 0 {
			t.Errorf("preset %s: %v", name, errs)
		}
	}
}
