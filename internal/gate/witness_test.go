package gate

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
)

// TestWitnessLine: the console says what the witnesses read, what they
// could not, and what a bound cut.
func TestWitnessLine(t *testing.T) {
	for _, tc := range []struct {
		w    route.Witness
		want string
	}{
		{route.Witness{NotRead: "x"}, "not witnessed: x"},
		{route.Witness{Processes: 2, Held: []string{"/dev/accel/accel0"}}, "2 processes read; devices held: /dev/accel/accel0; backends mapped: none"},
		{route.Witness{Processes: 64, Unread: []string{"pid 9: permission denied"}, Cut: "the maps of 32 of the serve's 64 processes read: the sample's time ran out (at most 2s)"},
			"64 processes read; devices held: none; backends mapped: none; unread: pid 9: permission denied; cut: the maps of 32 of the serve's 64 processes read: the sample's time ran out (at most 2s)"},
		{route.Witness{Processes: 4096, Cut: "4096 of the serve's 5000 processes read (at most 4096)", Excess: []string{"5000 processes, where a healthy serve has a few", "e"}},
			"4096 processes read; devices held: none; backends mapped: none; cut: 4096 of the serve's 5000 processes read (at most 4096); past a healthy serve's size: 5000 processes, where a healthy serve has a few; e"},
	} {
		if got := witnessLine(&tc.w); got != tc.want {
			t.Errorf("witnessLine(%+v) = %q, want %q", tc.w, got, tc.want)
		}
	}
}

// BenchmarkWitnessRate is the gate's median decode rate against the
// simulated serve with the witnesses off and on, alternating run by run so
// that the machine's load falls on both alike (the serve holding a "device"
// of the class given and mapping a file named like a backend, so each
// reading finds something): paced at 90 tok/s after 250 ms, and unpaced.
// It reports the median over the runs of each run's median rate, and how
// far on is from off (on-vs-off-%). The witnesses read the serve's
// processes before the first judged request and after the last, never
// during one, so the rate must not move.
func BenchmarkWitnessRate(b *testing.B) {
	lib := filepath.Join(b.TempDir(), "libggml-sim.so")
	if err := os.WriteFile(lib, []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, pace := range []struct {
		name string
		args []string
	}{{"paced", []string{"--rate", "90", "--first-token-ms", "250"}}, {"unpaced", []string{"--rate", "0", "--first-token-ms", "0"}}} {
		b.Run(pace.name, func(b *testing.B) {
			rates := map[string][]float64{}
			for b.Loop() {
				for _, on := range []string{"off", "on"} {
					p := plan(b, append(pace.args, "--hold-device", "/dev/zero", "--map-library", lib)...)
					p.MaxTokens, p.Replies, p.MaxReplies = 128, 5, 5
					p.Witness, p.WitnessDevices, p.WitnessLibraries = on, []string{"/dev/zero"}, []string{"libggml-sim*.so"}
					res, err := (&Gate{Plan: p}).Run(context.Background())
					if err != nil || res.Intervals.Rate == nil {
						b.Fatalf("Run() = %v, %v", res, err)
					}
					if got := res.Witness != nil && len(res.Witness.Held) == 1 && len(res.Witness.Mapped) == 1; got != (on == "on") {
						b.Fatalf("witness %s: recorded %+v", on, res.Witness)
					}
					rates[on] = append(rates[on], res.Intervals.Rate.Median)
				}
			}
			off, on := stats.Median(rates["off"]), stats.Median(rates["on"])
			b.ReportMetric(off, "off-tok/s")
			b.ReportMetric(on, "on-tok/s")
			b.ReportMetric(100*(on-off)/off, "on-vs-off-%")
		})
	}
}
