package realserve

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
)

// TestOllamaLoad runs --load 4 against a real Ollama started for one request
// at a time (OLLAMA_NUM_PARALLEL=1) and for four (4), and builds each run's
// verdict for both expectations with judge DIR --load-expect: started for
// one, the rounds decode one at a time (a batch expectation fails, saying
// so; a serial one passes, every request completed in the queue's bound);
// started for four, they decode together. What η a CPU reaches batching
// a tiny model is logged, not judged: on 2 busy cores it fell to 0.14-0.18,
// below the 1/4 of a serve that time-slices four streams (0.31-0.37 on an
// idle machine), so it is the machine's, not the gate's. The row's words
// must say which side of the least floor the gate takes (0.251) it fell.
func TestOllamaLoad(t *testing.T) {
	o := setUp(t)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	rejudge := func(t *testing.T, g gateRun, expect string) (code int, row string) {
		t.Helper()
		out, err := exec.Command(o.gate, "judge", g.out, "--load-expect", expect).CombinedOutput()
		code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(string(out), "\n") {
			if strings.HasPrefix(line, "load ") {
				row = line
			}
		}
		t.Logf("judge %s --load-expect %s: exit %d\n%s", g.out, expect, code, row)
		return code, row
	}
	figures := func(t *testing.T, g gateRun) (conc []float64) {
		t.Helper()
		for _, rd := range g.res.LoadRounds {
			t.Logf("round %d: η %.2f, %.2f decoding at once, aggregate %.1f tok/s (conservative %v), worst first token %.0f ms, gap %.0f ms; failed %q",
				rd.N, rd.Efficiency, rd.Concurrency, rd.Aggregate, rd.Conservative, rd.WorstFirstMS, rd.GapMS, rd.Failed)
			if rd.Failed != "" {
				t.Errorf("round %d failed: %s", rd.N, rd.Failed)
			}
			conc = append(conc, rd.Concurrency)
		}
		if len(conc) == 0 {
			t.Fatalf("no load round: %s", g.assertion(t, judge.Load).Detail)
		}
		return conc
	}

	t.Run("OLLAMA_NUM_PARALLEL=1: one at a time", func(t *testing.T) {
		o.serveEnv = "OLLAMA_NUM_PARALLEL=1 "
		defer func() { o.serveEnv = "" }()
		g := o.run(t, "parallel1", port, append([]string{"--floor", "1", "--load", "4", "--load-expect", "serial"}, cpuIsExpected...)...)
		if a := g.assertion(t, judge.Load); !a.OK || g.code != 0 {
			t.Errorf("exit %d; load ok %v: %s", g.code, a.OK, a.Detail)
		}
		if m := stats.Median(figures(t, g)); m >= judge.OneAtATime {
			t.Errorf("median %.2f decoding at once, want under %.1f: Ollama started for one request ran them together", m, judge.OneAtATime)
		}
		if code, row := rejudge(t, g, judge.LoadBatch); code != 1 || !strings.Contains(row, "the serve ran them one at a time") {
			t.Errorf("expected to batch: exit %d, %q; want 1 and \"the serve ran them one at a time\"", code, row)
		}
		if code, row := rejudge(t, g, judge.LoadSerial); code != 0 || !strings.Contains(row, "(serial expected): every request completed") {
			t.Errorf("expected serial: exit %d, %q", code, row)
		}
	})

	t.Run("OLLAMA_NUM_PARALLEL=4: together", func(t *testing.T) {
		o.serveEnv = "OLLAMA_NUM_PARALLEL=4 "
		defer func() { o.serveEnv = "" }()
		g := o.run(t, "parallel4", port, append([]string{"--floor", "1", "--load", "4", "--load-efficiency", "0.251", "--load-first-token-ms", firstTokenMS}, cpuIsExpected...)...)
		if m := stats.Median(figures(t, g)); m < judge.OneAtATime {
			t.Errorf("median %.2f decoding at once, want %.1f or more: Ollama started for four ran them one at a time", m, judge.OneAtATime)
		}
		a := g.assertion(t, judge.Load)
		t.Logf("load: ok %v: %s", a.OK, a.Detail)
		if !a.OK && !strings.Contains(a.Detail, "below the floor 0.25") {
			t.Errorf("load failed, and not on η below its floor: %s", a.Detail)
		}
		for _, expect := range []string{judge.LoadBatch, judge.LoadSerial} {
			rejudge(t, g, expect)
		}
	})

	t.Run("--load 4 above OLLAMA_NUM_PARALLEL=1, batch expected: bad input", func(t *testing.T) {
		out, err := exec.Command(o.gate, "run", "--preset", "ollama", "--serve", "env OLLAMA_NUM_PARALLEL=1 OLLAMA_HOST=127.0.0.1:{port} ollama serve",
			"--model", modelName, "--load", "4", "--hold", "none", "--out", o.dir+"/bad").CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--load 4 is above what the serve was started for: OLLAMA_NUM_PARALLEL=1 in --serve") {
			t.Errorf("exit %v, want 2 naming OLLAMA_NUM_PARALLEL:\n%s", err, fmt.Sprint(string(out)))
		}
	})
}
