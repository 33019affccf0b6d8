package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// BenchmarkGateBinaryStages is the gate's own time in each stage of a run,
// as a runner pays it: the release build of the gate, exec'd, against its
// simulated serve that loads in 400 ms and answers 5 replies of 16 tokens
// at 20,000 tok/s, from the times its console lines reach this process and
// the replies' own times (result.json). Each is the median over b.N runs:
//
//	to-spawn   the exec to the serve spawned (the process's start, flags,
//	           config, out dir, port, log capture, the supervisor)
//	to-first   the serve ready to the first request written
//	between    the time between replies (each reply's file, its line)
//	stop       the last reply read to the serve's stop reported
//	report     the stop reported to the process's exit (judge, result.json,
//	           the console's table)
//
// With NPU_SERVE_SMOKE_STAGES_AGAINST set to another build of the gate (a
// release build of main, say: go build -trimpath -ldflags='-s -w' in its
// tree), each run of this tree's build is followed by one of that binary,
// and its figures are reported as against-*: on a shared machine whose
// speed drifts from one minute to the next, only runs side by side compare.
// That binary is copied beside this tree's, written the same way (one
// write): a file the linker wrote (through a mapping, a page at a time)
// started 1.2 to 4 ms slower here, on different days, than the same bytes
// written at once (`perf stat -r 50 BIN supervise`), which starts a process
// in fewer page faults.
//
// go test -run '^$' -bench GateBinaryStages -benchtime 20x ./cmd/action
func BenchmarkGateBinaryStages(b *testing.B) {
	dir := b.TempDir()
	bins := map[string]string{"": newReleased(b, dir).bin}
	if other := os.Getenv("NPU_SERVE_SMOKE_STAGES_AGAINST"); other != "" {
		exe, err := os.ReadFile(other)
		if err != nil {
			b.Fatal(err)
		}
		bins["against-"] = filepath.Join(dir, "against")
		if err := os.WriteFile(bins["against-"], exe, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	got := map[string][]float64{}
	energy := map[string]bool{}
	for _, bin := range bins {
		energy[bin] = hasEnergyFlag(b, bin)
	}
	for i := 0; b.Loop(); i++ {
		for prefix, bin := range bins {
			out := filepath.Join(dir, "out", prefix+strings.Repeat("x", i%8)+time.Now().Format("150405.000000000"))
			for stage, ms := range gateStages(b, bin, out, energy[bin]) {
				got[prefix+stage] = append(got[prefix+stage], ms)
			}
		}
	}
	for name, v := range got {
		slices.Sort(v)
		b.ReportMetric(v[len(v)/2], name+"-ms")
	}
}

// hasEnergyFlag reports whether the gate bin has --energy: a build from
// before the energy sensor has not, and reads none.
func hasEnergyFlag(b *testing.B, bin string) bool {
	help, _ := exec.Command(bin, "run", "-h").CombinedOutput()
	if !strings.Contains(string(help), "-max-tokens") {
		b.Fatalf("%s run -h: not the gate's flags:\n%s", bin, help)
	}
	return strings.Contains(string(help), "  -energy ")
}

// gateStages runs the gate bin once, its out directory out, and returns its
// own time in each stage, and in all ("own"), in milliseconds. energy: bin
// has --energy, which is set off (a build without it reads no sensor).
func gateStages(b *testing.B, bin, out string, energy bool) map[string]float64 {
	args := []string{"run",
		"--serve", bin + " fakellm --port {port} --instant --rate 20000 --first-token-ms 0 --ready-after 400ms",
		"--rate-source", "server", "--replies", "5", "--max-replies", "5", "--max-tokens", "16",
		"--hold", "none", "--out", out}
	if energy {
		args = append(args, "--energy", "off")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "GITHUB_ACTIONS=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	at := map[string]time.Time{}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		now := time.Now()
		for _, prefix := range []string{"serve: pid", "serve: ready", "serve: stop took", "serve: stopped in"} {
			if strings.HasPrefix(sc.Text(), prefix) {
				// "serve: stopped in" is the stop's line in builds of
				// November 2026.
				at[strings.Replace(prefix, "stopped in", "stop took", 1)] = now
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("the gate %s: %v", bin, err)
	}
	end := time.Now()
	var res struct {
		Warmups []measure.Reply `json:"warmups"`
		Replies []measure.Reply `json:"replies"`
	}
	raw, err := os.ReadFile(filepath.Join(out, "result.json"))
	if err != nil || json.Unmarshal(raw, &res) != nil || len(res.Replies) != 5 {
		b.Fatalf("result.json: %v, %d replies", err, len(res.Replies))
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	endOf := func(r measure.Reply) time.Time { return r.T0.Add(time.Duration(r.EndMS * float64(time.Millisecond))) }
	all := append(res.Warmups, res.Replies...)
	st := map[string]float64{
		"to-spawn": ms(at["serve: pid"].Sub(t0)),
		"to-first": ms(all[0].T0.Sub(at["serve: ready"])),
		"stop":     ms(at["serve: stop took"].Sub(endOf(all[len(all)-1]))),
		"report":   ms(end.Sub(at["serve: stop took"])),
	}
	for i := 1; i < len(all); i++ {
		st["between"] += ms(all[i].T0.Sub(endOf(all[i-1])))
	}
	for _, v := range []string{"to-spawn", "to-first", "between", "stop", "report"} {
		st["own"] += st[v]
	}
	return st
}
