package gate

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/energy"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
)

// BenchmarkEnergyRate is what reading the energy sensor while the judged
// replies decode costs the measured rate: runs with --energy off and with
// a counter file read every 20 ms, alternating, against a simulated serve
// that writes that counter (every 10 ms) in both, paced at 90 tok/s; the
// medians of each run's median rate.
//
// go test -run '^$' -bench EnergyRate -benchtime 6x ./internal/gate
func BenchmarkEnergyRate(b *testing.B) {
	rates := map[string][]float64{}
	for b.Loop() {
		for _, on := range []bool{false, true} {
			counter := filepath.Join(b.TempDir(), "uj")
			p := plan(b, "--rate", "90", "--first-token-ms", "250", "--sensor", counter, "--sensor-period", "10ms")
			p.MaxTokens, p.Replies, p.MaxReplies, p.EnergyIdle = 128, 5, 5, 0
			p.EnergySpec = energy.Spec{Kind: energy.Off}
			if on {
				p.EnergySpec = energy.Spec{Kind: "counter", Arg: counter, Scale: 1e-6}
			}
			res, err := (&Gate{Plan: p}).Run(context.Background())
			if err != nil || res.Intervals.Rate == nil {
				b.Fatalf("Run() = %v, %v", res, err)
			}
			if got := res.Energy != nil && res.Energy.Joules != nil; got != on {
				b.Fatalf("energy %v: recorded %+v", on, res.Energy)
			}
			name := map[bool]string{false: "off", true: "on"}[on]
			rates[name] = append(rates[name], res.Intervals.Rate.Median)
		}
	}
	off, on := stats.Median(rates["off"]), stats.Median(rates["on"])
	b.ReportMetric(off, "off-tok/s")
	b.ReportMetric(on, "on-tok/s")
	b.ReportMetric(100*(on-off)/off, "on-vs-off-%")
}

// TestEnergyWritableByServe: a sensor file the serve could set is said so
// in the figures, so a ceiling read back later (judge DIR) does not judge
// them; the run's own user writes this one.
func TestEnergyWritableByServe(t *testing.T) {
	counter := filepath.Join(t.TempDir(), "uj")
	p := plan(t, "--rate", "1000", "--first-token-ms", "0", "--sensor", counter, "--sensor-period", "10ms")
	p.MaxTokens, p.Replies, p.MaxReplies, p.EnergyIdle = 8, 1, 1, 0
	p.RateSource = judge.RateServer
	p.EnergySpec = energy.Spec{Kind: "counter", Arg: counter, Scale: 1e-6}
	res, err := (&Gate{Plan: p}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Energy == nil || res.Energy.WritableByServe != config.SensorWritableBy(counter, uint32(os.Geteuid())) || res.Energy.WritableByServe == "" {
		t.Errorf("energy %+v: not said that the serve could set %s", res.Energy, counter)
	}
}
