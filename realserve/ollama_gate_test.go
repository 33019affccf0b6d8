package realserve

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// maxTokens is what each reply decodes, in the gate and on Ollama's own API.
const maxTokens = 64

// firstTokenMS is the gate's first-token limit in these runs: the machine
// running the tests may be loaded, and the limit is not what they check.
const firstTokenMS = "30000"

// realOllama is what the tests need: the Ollama binary, the gate built
// from this repository, and the tiny model created in an Ollama of dir.
type realOllama struct {
	dir    string
	ollama string
	gate   string
	// serveEnv are more NAME=VALUE words for the serve's env, before
	// ollama serve (OLLAMA_NUM_PARALLEL=4).
	serveEnv string
}

// setUp finds Ollama (or fails saying how to install it; skips only when
// told to), builds the gate, and creates the tiny model and its variants
// in a models directory of the test's own.
func setUp(t *testing.T) *realOllama {
	t.Helper()
	if skip(t) {
		return nil
	}
	ollama, err := findOllama()
	if err != nil {
		t.Fatal(err)
	}
	o := &realOllama{dir: t.TempDir(), ollama: ollama}
	o.gate = buildGate(t, o.dir)
	s, err := startOllama(ollama, o.dir, "create.log")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []Variant{F32, F16, Perturbed} {
		gguf := filepath.Join(o.dir, v.String()+".gguf")
		if err = WriteTinyVariant(gguf, v); err != nil {
			break
		}
		if err = s.createModel(variantModel(v), gguf); err != nil {
			break
		}
	}
	s.stop()
	if err != nil {
		t.Fatal(err)
	}
	if left := leftBehind(o.dir); len(left) > 0 {
		t.Fatalf("the Ollama that created the model left processes behind: %s", strings.Join(left, "; "))
	}
	return o
}

// buildGate builds the gate from this repository into dir.
func buildGate(t *testing.T, dir string) string {
	t.Helper()
	gate := filepath.Join(dir, "npu-serve-smoke")
	build := exec.Command("go", "build", "-o", gate, "github.com/npu-serve-smoke/npu-serve-smoke/cmd/action")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the gate: %v\n%s", err, out)
	}
	return gate
}

// skip skips the test when told to (skipVar=skip), saying so on the console
// too; it fails the test on any other value.
func skip(t *testing.T) bool {
	t.Helper()
	if v := os.Getenv(skipVar); v == "skip" {
		fmt.Printf("SKIP %s: the real-serve tests did not run (%s=skip)\n", t.Name(), skipVar)
		t.Skipf("%s=skip: the gate was not run against a real serve", skipVar)
		return true
	} else if v != "" {
		t.Fatalf("%s=%q: the only value it takes is skip", skipVar, v)
	}
	return false
}

// gateRun is one run of the gate: its exit status, console and out/.
type gateRun struct {
	code    int
	console string
	out     string
	res     *report.Result
}

// run runs the gate against a real Ollama serving the tiny model with
// --preset ollama on port, then checks it left nothing behind: no survivor
// in result.json, no Ollama process of the test's, the port free.
func (o *realOllama) run(t *testing.T, name string, port int, args ...string) gateRun {
	t.Helper()
	return o.command(t, "run", modelName, name, port, args...)
}

// command runs the gate's command (run, record) against a real Ollama serving
// model, as run does.
func (o *realOllama) command(t *testing.T, command, model, name string, port int, args ...string) gateRun {
	t.Helper()
	out := filepath.Join(o.dir, name)
	serveLine := fmt.Sprintf("env OLLAMA_HOST=127.0.0.1:{port} OLLAMA_MODELS='%s' OLLAMA_DEBUG=1 %sollama serve", filepath.Join(o.dir, "models"), o.serveEnv)
	args = append([]string{command, "--preset", "ollama", "--serve", serveLine, "--model", model,
		"--hold", "none", "--port", strconv.Itoa(port), "--max-tokens", strconv.Itoa(maxTokens),
		"--first-token-ms", firstTokenMS, "--out", out}, args...)
	g := runGate(t, o.gate, o.dir, ollamaEnv(o.dir), port, out, args)
	// Ollama serves from a runner process of its own: the stop had to reach
	// it too.
	log, err := os.ReadFile(filepath.Join(out, report.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(log, []byte(`msg="llama runner started`)) {
		t.Errorf("serve.log does not say Ollama started its runner (`msg=\"llama runner started`): the stop was not tested on a serve with a child")
	}
	return g
}

// runGate runs the gate (args, its out/ at out) with env, then checks it
// left nothing behind: no survivor in result.json, no process whose
// command line or environment names dir, port free.
func runGate(t *testing.T, gate, dir string, env []string, port int, out string, args []string) gateRun {
	t.Helper()
	console, err := os.Create(out + ".console")
	if err != nil {
		t.Fatal(err)
	}
	defer console.Close()
	cmd := exec.Command(gate, args...)
	cmd.Env = env
	// The console goes to a file, not a pipe, and the gate is cancelled
	// (SIGTERM) if the test dies: a gate whose reader died would die of
	// SIGPIPE before stopping its serve. Pdeathsig fires when the thread
	// that started the gate exits, so the test holds that thread.
	cmd.Stdout, cmd.Stderr = console, console
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	runtime.LockOSThread()
	err = cmd.Run()
	runtime.UnlockOSThread()
	text, _ := os.ReadFile(console.Name())
	g := gateRun{console: string(text), out: out}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		g.code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("running the gate: %v", err)
	}
	t.Logf("npu-serve-smoke %s: exit %d\n%s", strings.Join(args, " "), g.code, g.console)
	res, err := report.Read(out)
	if err != nil {
		t.Fatalf("the run left no result: %v", err)
	}
	g.res = res
	t.Logf("stop: %s after %.0f ms, %d swept, %d survivors", res.Serve.Exit, res.Serve.StopMS, res.Serve.Swept, res.Serve.Survivors)
	if res.Serve.Survivors != 0 {
		t.Errorf("result.json: serve.survivors = %d, want 0", res.Serve.Survivors)
	}
	if left := leftBehind(dir); len(left) > 0 {
		t.Errorf("after the gate exited, the serve's processes are left: %s", strings.Join(left, "; "))
	}
	if err := portFree(port); err != nil {
		t.Errorf("after the gate exited, port %d is not free: %v", port, err)
	}
	return g
}

// assertion is the named assertion of a run.
func (g gateRun) assertion(t *testing.T, name string) judge.Assertion {
	t.Helper()
	for _, a := range g.res.Assertions {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("result.json has no %s assertion: %+v", name, g.res.Assertions)
	return judge.Assertion{}
}

// highestRate is the run's highest reply rate.
func (g gateRun) highestRate(t *testing.T) float64 {
	t.Helper()
	var top float64
	for _, r := range g.res.Replies {
		v, ok := g.res.Rate(&r)
		if !ok {
			t.Fatalf("reply %d has no rate: %s", r.N, g.assertion(t, judge.Rate).Detail)
		}
		top = max(top, v)
	}
	return top
}

// cpuIsExpected are route patterns for a machine where the CPU is the
// route the user expects: this test's. Ollama prints one line a device
// that holds weights when it loads a model (ml/device.go, BackendMemory.Log:
// slog "model weights" "device" NAME "size" ...): with nothing on a device,
// the CPU's alone. The witnesses are off: they hold the CPU to be no fast
// route (no device held, Ollama's /api/ps puts none of the model in device
// memory).
var cpuIsExpected = []string{
	"--witness", "off",
	"--fast-route", `msg="model weights" device=CPU `,
	"--slow-route", `msg="model weights" device=(?:CUDA|ROCm|Vulkan|Metal)`,
}

// TestOllama runs the gate with --preset ollama against a real Ollama
// serving a tiny model on the CPU, the way a user would, and checks the
// verdict, the figures and the clean-up against Ollama itself.
func TestOllama(t *testing.T) {
	o := setUp(t)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}

	var pass gateRun
	t.Run("a floor below its rate passes", func(t *testing.T) {
		pass = o.run(t, "pass", port, append([]string{"--floor", "1"}, cpuIsExpected...)...)
		if pass.code != 0 || !pass.res.Pass() {
			t.Fatalf("exit %d, verdict %q, want 0 and pass: %+v", pass.code, pass.res.Verdict, pass.res.Assertions)
		}
		if got := pass.res.Serve.Port; got != port {
			t.Errorf("result.json: serve.port = %d, want %d", got, port)
		}
		for _, r := range pass.res.Replies {
			if n, src := r.Tokens(); n != maxTokens || src != measure.SourceUsage {
				t.Errorf("reply %d: %d tokens from %s, want %d from usage (the tiny model never stops early)", r.N, n, src, maxTokens)
			}
		}
	})
	if pass.res == nil {
		t.FailNow()
	}

	t.Run("a floor above its rate fails on the rate alone, on the same port", func(t *testing.T) {
		floor := 10 * pass.highestRate(t)
		fail := o.run(t, "fail", port, append([]string{"--floor", fmt.Sprintf("%.0f", floor)}, cpuIsExpected...)...)
		if fail.code != 1 || fail.res.Pass() {
			t.Fatalf("exit %d, verdict %q, want 1 and fail", fail.code, fail.res.Verdict)
		}
		if got := fail.res.Serve.Port; got != port {
			t.Errorf("result.json: serve.port = %d, want %d (the first run must leave it free)", got, port)
		}
		for _, a := range fail.res.Assertions {
			if want := a.Name != judge.Rate; a.OK != want {
				t.Errorf("assertion %s ok = %v, want %v: %s", a.Name, a.OK, want, a.Detail)
			}
		}
	})

	t.Run("the preset names the CPU route slow, and quotes the line", func(t *testing.T) {
		g := o.run(t, "preset", port, "--floor", "1")
		ra := g.assertion(t, judge.Route)
		quoted := strings.Contains(ra.Detail, "CPU model buffer size")
		if ra.OK || !strings.Contains(ra.Detail, "slow route") || !quoted {
			t.Errorf("route: ok %v, %q; want the slow route, quoting the `load_tensors: CPU model buffer size` line of Ollama's runner (llama.cpp's)", ra.OK, ra.Detail)
		}
		if g.code != 1 {
			t.Errorf("exit %d, want 1 (the slow route fails the gate)", g.code)
		}
		// What Ollama's processes and its own account witness on the CPU:
		// no device node held, no GPU backend mapped, none of the model in
		// device memory (/api/ps).
		w := g.res.Witness
		if w == nil || w.NotRead != "" || w.Processes < 1 || len(w.Held) != 0 || len(w.Mapped) != 0 {
			t.Fatalf("witness = %+v, want Ollama's processes read, holding no device and mapping no GPU backend", w)
		}
		t.Logf("witness: %d processes read, held %q, mapped %q, usage %+v, no usage %q", w.Processes, w.Held, w.Mapped, w.Usage, w.NoUsage)
		if a := w.Account; a == nil || a.Route != route.RouteSlow || !strings.Contains(a.Text, "size_vram 0") {
			t.Errorf("account = %+v, want /api/ps naming the slow route, size_vram 0", a)
		} else {
			t.Logf("account: %s: %s (%s)", a.Source, a.Text, a.Why)
		}
		if !strings.Contains(ra.Detail, "witnessed: the serve's processes") {
			t.Errorf("route detail %q does not say what was witnessed", ra.Detail)
		}
	})

	t.Run("the fast route's words from Ollama on the CPU fail on its processes and its own account", func(t *testing.T) {
		// cpuIsExpected without --witness off: the CPU's line taken for
		// the fast route, while no process holds a device.
		g := o.run(t, "words", port, append([]string{"--floor", "1"}, cpuIsExpected[2:]...)...)
		route := g.assertion(t, judge.Route)
		if route.OK || g.code != 1 {
			t.Errorf("exit %d, route ok %v, want 1 and the route failed: %s", g.code, route.OK, route.Detail)
		}
		t.Logf("route: %s", route.Detail)
	})

	t.Run("judged replies are cold: none is answered from Ollama's prompt cache", func(t *testing.T) {
		coldReplies(t, pass)
	})

	t.Run("the rate agrees with Ollama's own figures", func(t *testing.T) {
		agreesWithOllama(t, o, pass)
	})
}

// cacheSlot is Ollama's runner's debug line for each completion: how many of
// the prompt's tokens it took from its cache (used) and evaluated
// (remaining) (runner/llamarunner/cache.go, LoadCacheSlot).
var cacheSlot = regexp.MustCompile(`msg="loading cache slot" .*\bprompt=(\d+) used=(\d+) remaining=(\d+)`)

// coldReplies checks in the serve's log that Ollama evaluated each judged
// reply's prompt rather than answering it from its prompt cache, so the
// first token is a cold one. The runner logs one cache-slot line per
// request, in the order the gate asks: warm-ups, then replies.
func coldReplies(t *testing.T, g gateRun) {
	log, err := os.ReadFile(filepath.Join(g.out, report.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	slots := cacheSlot.FindAllStringSubmatch(string(log), -1)
	warmups := len(g.res.Warmups)
	if want := warmups + len(g.res.Replies); len(slots) != want {
		t.Fatalf("serve.log has %d cache-slot lines, want one a request (%d warm-ups, %d replies)", len(slots), warmups, len(g.res.Replies))
	}
	for i, r := range g.res.Replies {
		s := slots[warmups+i]
		prompt, _ := strconv.Atoi(s[1])
		used, _ := strconv.Atoi(s[2])
		t.Logf("reply %d: first token %.1f ms; Ollama took %d of its %d prompt tokens from its cache", r.N, deref(r.FirstMS), used, prompt)
		if 2*used >= prompt {
			t.Errorf("reply %d (first token %.1f ms) was answered from Ollama's prompt cache: %s; "+
				"a judged reply's prompt must not be one the serve has just seen (the warm-up's, or the reply before)", r.N, deref(r.FirstMS), s[0])
		}
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

// agreesWithOllama asks Ollama's native /api/chat the prompts the gate
// asked, in the same order after a warm-up, and compares the gate's rate
// with Ollama's own (eval_count/eval_duration, and the same on the gate's
// definition, (n-1)/span).
func agreesWithOllama(t *testing.T, o *realOllama, g gateRun) {
	s, err := startOllama(o.ollama, o.dir, "native.log")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		s.stop()
		if left := leftBehind(o.dir); len(left) > 0 {
			t.Errorf("the Ollama asked for its own figures left processes behind: %s", strings.Join(left, "; "))
		}
	}()
	if _, err := s.chat("Say a few words to warm up.", 8); err != nil {
		t.Fatal(err)
	}
	var gate, own, ownN1 []float64
	t.Logf("%-5s %12s %12s %14s %14s %12s %14s %14s", "reply", "gate tok/s", "gate first", "ollama n/span", "ollama n-1/sp", "native cli", "native first", "prompt eval")
	for _, r := range g.res.Replies {
		rate, ok := g.res.Rate(&r)
		if !ok {
			t.Fatalf("reply %d has no rate", r.N)
		}
		f, err := s.chat(r.Prompt, maxTokens)
		if err != nil {
			t.Fatal(err)
		}
		if f.EvalCount != maxTokens {
			t.Errorf("native reply to %d: eval_count %d, want %d", r.N, f.EvalCount, maxTokens)
		}
		gate, own, ownN1 = append(gate, rate), append(own, f.Rate()), append(ownN1, f.RateNMinus1())
		t.Logf("%-5d %12.1f %10.1fms %14.1f %14.1f %12.1f %12.1fms %12.1fms", r.N, rate, deref(r.FirstMS),
			f.Rate(), f.RateNMinus1(), f.ClientRate, f.FirstMS, ms(f.PromptEvalDuration))
	}
	mg, mo := stats.Median(gate), stats.Median(ownN1)
	t.Logf("median: the gate %.1f tok/s; Ollama's own %.1f tok/s as it prints it (eval_count/eval_duration), %.1f on (n-1)/span: the gate is %+.1f%% of the latter",
		mg, stats.Median(own), mo, 100*(mg/mo-1))
	// The two were measured by two serve processes one after the other on a
	// shared machine; a fault of measurement (a burst, a miscount, a stall
	// on the connection) is a factor, not a few percent.
	if mg < mo/2 || mg > mo*2 {
		t.Errorf("the gate's median rate %.1f tok/s is not within a factor 2 of Ollama's own %.1f ((eval_count-1)/eval_duration)", mg, mo)
	}
}
