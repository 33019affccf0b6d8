package realserve

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
)

// llamaServerVar names the llama-server binary the llama.cpp tests run;
// unset, they run the one on PATH, and skip where there is none.
const llamaServerVar = "NPU_SERVE_SMOKE_LLAMA_SERVER"

// llamaBuild says how to get the llama-server these tests need.
const llamaBuild = "build one on the CPU as docs/development.md says (\"A real llama-server\") and set " +
	llamaServerVar + " to it, or put it on PATH"

// claimsGPU is a wrapper that runs the llama-server it is given and
// rewrites its log into what a full offload to a GPU prints: every layer
// offloaded, the weights in a CUDA0 buffer rather than a host one. The
// serve computes on the CPU as before; only its words change.
const claimsGPU = `#!/bin/sh
"$@" 2>&1 | sed -u \
	-e 's|offloaded [0-9]*/\([0-9]*\) layers to GPU|offloaded \1/\1 layers to GPU|' \
	-e 's|load_tensors: *CPU\(_Mapped\)\{0,1\} model buffer size|load_tensors:        CUDA0 model buffer size|'
`

// realLlama is what the llama.cpp tests need: a llama-server, the gate
// built from this repository, and the tiny model.
type realLlama struct {
	dir, server, gate, model string
	// claimsGPU is the path of the claimsGPU wrapper.
	claimsGPU string
}

// findLlamaServer returns the llama-server to run: $NPU_SERVE_SMOKE_LLAMA_SERVER
// (a bad one fails the test), else the one on PATH; with neither, the test
// is skipped, saying so on the console too.
func findLlamaServer(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(llamaServerVar); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			t.Fatalf("%s=%q: %v: name a llama-server binary (%s), or unset it", llamaServerVar, p, err, llamaBuild)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	path, err := exec.LookPath("llama-server")
	if err != nil {
		fmt.Printf("SKIP %s: no llama-server (%s is unset and none is on PATH): %s\n", t.Name(), llamaServerVar, llamaBuild)
		t.Skipf("no llama-server (%s is unset and none is on PATH): %s", llamaServerVar, llamaBuild)
		return ""
	}
	return path
}

// setUpLlama finds llama-server (or skips), builds the gate, and writes the
// tiny model and the claimsGPU wrapper into a directory of the test's own.
func setUpLlama(t *testing.T) *realLlama {
	t.Helper()
	if skip(t) {
		return nil
	}
	server := findLlamaServer(t)
	if server == "" {
		return nil
	}
	l := &realLlama{dir: t.TempDir(), server: server}
	l.gate = buildGate(t, l.dir)
	l.model = filepath.Join(l.dir, "tiny.gguf")
	if err := WriteTinyModel(l.model); err != nil {
		t.Fatal(err)
	}
	l.claimsGPU = filepath.Join(l.dir, "claims-gpu")
	if err := os.WriteFile(l.claimsGPU, []byte(claimsGPU), 0o755); err != nil {
		t.Fatal(err)
	}
	return l
}

// run runs the gate with --preset llama.cpp against llama-server serving
// the tiny model on one thread at verbosity 4 (its load lines), through
// the claimsGPU wrapper when words is set, and checks it left nothing
// behind, as the Ollama runs do.
func (l *realLlama) run(t *testing.T, name string, port int, words bool, args ...string) gateRun {
	t.Helper()
	out := filepath.Join(l.dir, name)
	// One thread: see createModel (ggml's threads meet at a barrier after
	// every operation of a model this small).
	serveLine := fmt.Sprintf("'%s' -m {model} --host 127.0.0.1 --port {port} -t 1 -tb 1 -lv 4", l.server)
	if words {
		serveLine = fmt.Sprintf("'%s' %s", l.claimsGPU, serveLine)
	}
	args = append([]string{"run", "--preset", "llama.cpp", "--serve", serveLine, "--model", l.model,
		"--hold", "none", "--port", strconv.Itoa(port), "--max-tokens", strconv.Itoa(maxTokens),
		"--first-token-ms", firstTokenMS, "--floor", "1", "--out", out}, args...)
	return runGate(t, l.gate, l.dir, os.Environ(), port, out, args)
}

// TestLlamaServer runs the gate with --preset llama.cpp against a real
// llama-server built for the CPU, and checks what its processes witness:
// no device of the fast route's classes held and none of its backends
// mapped; so the CPU route is the slow route, and a log that claims a full
// GPU offload from that serve fails on the witnesses, saying both. With
// --witness off the same words pass: the log alone decides.
func TestLlamaServer(t *testing.T) {
	l := setUpLlama(t)
	if l == nil {
		return
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("on the CPU: the slow route, its processes holding no device", func(t *testing.T) {
		g := l.run(t, "cpu", port, false)
		route := g.assertion(t, judge.Route)
		if route.OK || g.code != 1 || !strings.Contains(route.Detail, "slow route") || !strings.Contains(route.Detail, "CPU_Mapped model buffer size") {
			t.Errorf("exit %d, route ok %v, %q; want 1, the slow route, quoting llama-server's `load_tensors: CPU_Mapped model buffer size` line", g.code, route.OK, route.Detail)
		}
		w := cpuWitness(t, g)
		if !strings.Contains(route.Detail, "; witnessed: the serve's processes ("+strconv.Itoa(w.Processes)+" read) hold no device of the fast route's classes") {
			t.Errorf("route detail %q does not say what was witnessed", route.Detail)
		}
		for _, a := range g.res.Assertions {
			if want := a.Name != judge.Route; a.OK != want {
				t.Errorf("assertion %s ok = %v, want %v (the route alone fails): %s", a.Name, a.OK, want, a.Detail)
			}
		}
	})

	t.Run("the fast route's words from a serve on the CPU fail on its processes", func(t *testing.T) {
		g := l.run(t, "words", port, true)
		route := g.assertion(t, judge.Route)
		for _, want := range []string{
			"the serve log names the fast route",
			"CUDA0 model buffer size",
			"; but the serve's processes (",
			"hold no device of the fast route's classes (/dev/nvidia[0-9]*, /dev/kfd, /dev/dri/renderD*, /dev/accel/accel*, /dev/davinci[0-9]*)",
			"and map none of its backends (libggml-cuda*.so*",
			": this run is not on the fast route",
		} {
			if !strings.Contains(route.Detail, want) {
				t.Errorf("route detail lacks %q: %s", want, route.Detail)
			}
		}
		if route.OK || g.code != 1 {
			t.Errorf("exit %d, route ok %v; want 1 and the route failed", g.code, route.OK)
		}
		cpuWitness(t, g)
	})

	t.Run("the same words with --witness off pass on the log alone", func(t *testing.T) {
		g := l.run(t, "words-unwitnessed", port, true, "--witness", "off")
		route := g.assertion(t, judge.Route)
		if !route.OK || g.code != 0 || !strings.Contains(route.Detail, "the serve log names the fast route") {
			t.Errorf("exit %d, route ok %v, %q; want 0 and the fast route, as the log names it", g.code, route.OK, route.Detail)
		}
		if g.res.Witness != nil {
			t.Errorf("--witness off: result.json has witness %+v, want none", g.res.Witness)
		}
	})
}

// cpuWitness checks what llama-server's processes witnessed on the CPU:
// read, holding no device node of the classes, mapping no backend of
// them, no device usage, and logs it.
func cpuWitness(t *testing.T, g gateRun) *route.Witness {
	t.Helper()
	w := g.res.Witness
	if w == nil || w.NotRead != "" || w.Processes < 1 || len(w.Unread) != 0 || len(w.Held) != 0 || len(w.Mapped) != 0 || slices.ContainsFunc(w.Usage, func(u route.Usage) bool { return u.EngineNS > 0 || u.MemoryBytes > 0 }) {
		t.Fatalf("witness = %+v, want llama-server's processes read, holding no device, mapping no GPU backend, using no device", w)
	}
	t.Logf("witness: %d processes read, held %q, mapped %q, usage %+v, no usage %q, account %+v", w.Processes, w.Held, w.Mapped, w.Usage, w.NoUsage, w.Account)
	return w
}

// witnessCostRuns is how many gate runs TestLlamaWitnessCost makes with
// the witnesses off and on, alternating.
const witnessCostRuns = 5

// witnessCostReplies is how many replies each of those runs judges: all of
// them, not as few as decide the verdict, so each run's median is of as
// many.
const witnessCostReplies = 10

// TestLlamaWitnessCost runs the gate against llama-server on the CPU with
// --witness off and on, alternating run by run so the machine's load falls
// on both alike, and logs the median over the runs of each run's median
// rate (the gate's, and llama-server's own from its timings), the spread of
// those, and how far on is from off: the witnesses read
// the serve's processes before the first judged request and after the last,
// never during one. It checks what was asked (a witness recorded with on,
// none with off), not the rates.
func TestLlamaWitnessCost(t *testing.T) {
	l := setUpLlama(t)
	if l == nil {
		return
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	modes := []string{"off", "on"}
	// Each run's median of the gate's rates and of the serve's own
	// (llama-server's timings); a reply the gate saw arrive in one burst
	// (a loaded machine) has no rate of the gate's, and is counted.
	gate, own := map[string][]float64{}, map[string][]float64{}
	bursts := map[string]int{}
	for run := range witnessCostRuns {
		for _, mode := range modes {
			g := l.run(t, "cost-"+mode+"-"+strconv.Itoa(run), port, false, "--witness", mode,
				"--replies", strconv.Itoa(witnessCostReplies), "--max-replies", strconv.Itoa(witnessCostReplies))
			if (g.res.Witness != nil) != (mode == "on") {
				t.Errorf("--witness %s: result.json has witness %+v", mode, g.res.Witness)
			}
			var gs, ss []float64
			for _, r := range g.res.Replies {
				if rate, ok := g.res.Rate(&r); ok {
					gs = append(gs, rate)
				} else {
					bursts[mode]++
				}
				rate, why := r.ServerRate()
				if why != "" {
					t.Fatalf("--witness %s: reply %d has no rate of llama-server's own: %s", mode, r.N, why)
				}
				ss = append(ss, rate)
			}
			if len(gs) > 0 {
				gate[mode] = append(gate[mode], stats.Median(gs))
			}
			own[mode] = append(own[mode], stats.Median(ss))
		}
	}
	t.Logf("the gate (--preset llama.cpp) against llama-server on the CPU, %d runs with each --witness, alternating, %d replies of %d tokens a run; each run's median rate:", witnessCostRuns, witnessCostReplies, maxTokens)
	for _, rates := range []struct {
		name string
		of   map[string][]float64
	}{{"the gate's", gate}, {"llama-server's own", own}} {
		for _, mode := range modes {
			if len(rates.of[mode]) == 0 {
				continue
			}
			t.Logf("%-18s --witness %-3s median %.1f tok/s, runs %.1f to %.1f: %.1f", rates.name, mode, stats.Median(rates.of[mode]),
				slices.Min(rates.of[mode]), slices.Max(rates.of[mode]), rates.of[mode])
		}
		if len(rates.of["off"]) > 0 && len(rates.of["on"]) > 0 {
			off, on := stats.Median(rates.of["off"]), stats.Median(rates.of["on"])
			t.Logf("%-18s --witness on against off: %+.2f%% (medians)", rates.name, 100*(on-off)/off)
		}
	}
	t.Logf("replies that arrived in one burst (no rate of the gate's): %d with --witness off, %d with on", bursts["off"], bursts["on"])
}
