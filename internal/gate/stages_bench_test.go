package gate

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// BenchmarkGateStages is the gate's own time in each stage of a run against
// a simulated serve that loads in 400 ms and answers 5 replies of 16 tokens
// at 20,000 tok/s, from the times its progress lines were written:
//
//	to-spawn     Run's start to the serve spawned (out dir, hold, port,
//	             log capture, supervisor)
//	to-first     the serve ready to the first request written
//	between      the time between replies (each reply's file, its line)
//	stop         the serve's stop, as the run measured it
//	report       the stop's end to Run's return (judge, result.json, summary)
//
// go test -run '^$' -bench GateStages -benchtime 20x ./internal/gate
func BenchmarkGateStages(b *testing.B) {
	names := []string{"to-spawn", "to-first", "between", "stop", "report"}
	sum := map[string]float64{}
	for b.Loop() {
		b.StopTimer()
		p := plan(b, "--instant", "--rate", "20000", "--first-token-ms", "0", "--ready-after", "400ms")
		p.RateSource = judge.RateServer
		p.Replies, p.MaxReplies, p.MaxTokens, p.Energy = 5, 5, 16, "off"
		p.EnergySpec.Kind = "off"
		var mu sync.Mutex
		at := map[string]time.Time{}
		log := &lineWatcher{on: func(line string) {
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			for _, prefix := range []string{"serve: pid", "serve: ready", "serve: stop took"} {
				if strings.HasPrefix(line, prefix) {
					at[prefix] = now
				}
			}
		}}
		b.StartTimer()
		t0 := time.Now()
		res, err := (&Gate{Plan: p, Log: log}).Run(context.Background())
		end := time.Now()
		if err != nil || !res.Pass() {
			b.Fatalf("Run() = %v, %v", res, err)
		}
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		all := append(append([]measure.Reply(nil), res.Warmups...), res.Replies...)
		sum["to-spawn"] += ms(at["serve: pid"].Sub(t0))
		sum["to-first"] += ms(all[0].T0.Sub(at["serve: ready"]))
		for i := 1; i < len(all); i++ {
			prevEnd := all[i-1].T0.Add(time.Duration(all[i-1].EndMS * float64(time.Millisecond)))
			sum["between"] += ms(all[i].T0.Sub(prevEnd))
		}
		sum["stop"] += res.Serve.StopMS
		sum["report"] += ms(end.Sub(at["serve: stop took"]))
	}
	total := 0.0
	for _, n := range names {
		b.ReportMetric(sum[n]/float64(b.N), n+"-ms")
		total += sum[n]
	}
	b.ReportMetric(total/float64(b.N), "own-ms")
}
