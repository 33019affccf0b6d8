package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// BenchmarkGateBinaryStages is the gate's own time in each stage of a run,
// as a runner pays it: the release build of the gate, exec'd, against its
// simulated serve that loads in 400 ms and answers 5 replies of 16 tokens
// at 20,000 tok/s, from the times its console lines reach this process and
// the replies' own times (result.json):
//
//	to-spawn   the exec to the serve spawned (the process's start, flags,
//	           config, out dir, port, log capture, the supervisor)
//	to-first   the serve ready to the first request written
//	between    the time between replies (each reply's file, its line)
//	stop       the last reply read to the serve's stop reported
//	report     the stop reported to the process's exit (judge, result.json,
//	           the console's table)
//
// go test -run '^$' -bench GateBinaryStages -benchtime 20x ./cmd/action
func BenchmarkGateBinaryStages(b *testing.B) {
	dir := b.TempDir()
	r := newReleased(b, dir)
	names := []string{"to-spawn", "to-first", "between", "stop", "report"}
	sum := map[string]float64{}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for i := 0; b.Loop(); i++ {
		out := filepath.Join(dir, "out", strings.Repeat("x", i%8)+time.Now().Format("150405.000000000"))
		cmd := exec.Command(r.bin, "run",
			"--serve", r.bin+" fakellm --port {port} --instant --rate 20000 --first-token-ms 0 --ready-after 400ms",
			"--rate-source", "server", "--replies", "5", "--max-replies", "5", "--max-tokens", "16",
			"--energy", "off", "--hold", "none", "--out", out)
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
			for _, prefix := range []string{"serve: pid", "serve: ready", "serve: stop took"} {
				if strings.HasPrefix(sc.Text(), prefix) {
					at[prefix] = now
				}
			}
		}
		if err := cmd.Wait(); err != nil {
			b.Fatalf("the gate: %v", err)
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
		all := append(res.Warmups, res.Replies...)
		last := all[len(all)-1]
		sum["to-spawn"] += ms(at["serve: pid"].Sub(t0))
		sum["to-first"] += ms(all[0].T0.Sub(at["serve: ready"]))
		for i := 1; i < len(all); i++ {
			prevEnd := all[i-1].T0.Add(time.Duration(all[i-1].EndMS * float64(time.Millisecond)))
			sum["between"] += ms(all[i].T0.Sub(prevEnd))
		}
		sum["stop"] += ms(at["serve: stop took"].Sub(last.T0.Add(time.Duration(last.EndMS * float64(time.Millisecond)))))
		sum["report"] += ms(end.Sub(at["serve: stop took"]))
	}
	total := 0.0
	for _, n := range names {
		b.ReportMetric(sum[n]/float64(b.N), n+"-ms")
		total += sum[n]
	}
	b.ReportMetric(total/float64(b.N), "own-ms")
}
