package gate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakellm"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/serve"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise"
)

// The test binary doubles as the serve's supervisor and as the simulated
// serve.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == supervise.Command {
		os.Exit(supervise.Main(os.Args[2:], os.Getenv, os.Stderr))
	}
	if os.Getenv("FAKELLM") == "1" {
		os.Exit(fakellm.Command(os.Args[1:], os.Stdout, os.Stderr))
	}
	serve.BecomeSubreaper()
	os.Exit(m.Run())
}

func plan(t testing.TB, serveArgs ...string) *config.Plan {
	t.Helper()
	t.Setenv("FAKELLM", "1")
	c := config.Default()
	c.Serve = config.QuoteWords(append([]string{os.Args[0], "--port", "{port}"}, serveArgs...)...)
	c.Replies, c.Warmup, c.MaxTokens = 3, 1, 8
	c.Hold = "none"
	c.Out = filepath.Join(t.TempDir(), "out")
	p, err := c.Check(func(f string) (string, error) { return f, nil })
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunWritesEveryFile(t *testing.T) {
	p := plan(t, "--rate", "1000", "--first-token-ms", "0")
	p.MaxTokens = 16
	var log strings.Builder
	res, err := (&Gate{Plan: p, Log: &log, Tool: "test"}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Pass() || len(res.Replies) != 3 || len(res.Warmups) != 1 || res.Serve.Survivors != 0 || res.Run.Tool != "test" {
		t.Errorf("Run() = verdict %s, %d replies, %d warm-ups, %d survivors", res.Verdict, len(res.Replies), len(res.Warmups), res.Serve.Survivors)
	}
	got, err := report.Read(p.Out)
	if err != nil {
		t.Fatal(err)
	}
	if got.Verdict != res.Verdict || len(got.Replies) != 3 || got.Hold.Mode != "none" {
		t.Errorf("Read(out) = %+v", got)
	}
	for _, f := range []string{"serve.log", "result.json", "summary.md", "warmup_1.json", "reply_1.json", "reply_3.json"} {
		if _, err := os.Stat(filepath.Join(p.Out, f)); err != nil {
			t.Errorf("out/%s: %v", f, err)
		}
	}
}

func TestRunCancelled(t *testing.T) {
	p := plan(t, "--stall", "1")
	ctx, cancel := context.WithCancel(context.Background())
	var log lineWatcher
	log.on = func(line string) {
		if strings.HasPrefix(line, "serve: ready") {
			cancel()
		}
	}
	res, err := (&Gate{Plan: p, Log: &log}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != report.Cancelled || res.Serve.Survivors != 0 {
		t.Errorf("Run() cancelled = verdict %s, %d survivors, want cancelled and 0", res.Verdict, res.Serve.Survivors)
	}
	if got, err := report.Read(p.Out); err != nil || got.Verdict != report.Cancelled {
		t.Errorf("result.json after a cancel: %v, %v", got, err)
	}
}

type lineWatcher struct{ on func(string) }

func (w *lineWatcher) Write(b []byte) (int, error) {
	w.on(string(b))
	return len(b), nil
}

// BenchmarkGateOverhead is the gate's own cost per run against a simulated
// serve that answers at once: the wall time of Run minus the time inside
// requests, and of that what is not the serve's own start (ready) or stop.
func BenchmarkGateOverhead(b *testing.B) {
	var overhead, gateOnly, ready, stop float64
	for b.Loop() {
		b.StopTimer()
		// Unpaced, the stream is a burst with no rate of its own: the
		// serve's figures are judged.
		p := plan(b, "--instant", "--rate", "1000", "--first-token-ms", "0")
		p.RateSource = judge.RateServer
		b.StartTimer()
		res, err := (&Gate{Plan: p}).Run(context.Background())
		if err != nil || !res.Pass() {
			b.Fatalf("Run() = %v, %v", res, err)
		}
		wall := float64(res.Run.Finished.Sub(res.Run.Started).Microseconds()) / 1000
		inRequests := 0.0
		for _, r := range append(res.Warmups, res.Replies...) {
			inRequests += r.EndMS
		}
		overhead += wall - inRequests
		gateOnly += wall - inRequests - res.Serve.ReadyMS - res.Serve.StopMS
		ready += res.Serve.ReadyMS
		stop += res.Serve.StopMS
	}
	n := float64(b.N)
	b.ReportMetric(overhead/n, "overhead-ms/run")
	b.ReportMetric(ready/n, "serve-start-ms/run")
	b.ReportMetric(stop/n, "serve-stop-ms/run")
	b.ReportMetric(gateOnly/n, "gate-only-ms/run")
}

// BenchmarkCancel is the time from a cancel (the runner's SIGINT) to Run
// returning with the serve stopped, the ticket released and result.json
// written, while a reply is streaming: with a serve that honours TERM, and
// with one that ignores it (KILL after CancelGrace).
func BenchmarkCancel(b *testing.B) {
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"honours-term", []string{"--stall", "1"}},
		{"ignores-term", []string{"--stall", "1", "--ignore-term"}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			var total, worst float64
			for b.Loop() {
				b.StopTimer()
				p := plan(b, append([]string{"--first-token-ms", "0"}, tt.args...)...)
				p.Warmup = 0
				ctx, cancel := context.WithCancel(context.Background())
				var at time.Time
				log := &lineWatcher{on: func(line string) {
					if strings.HasPrefix(line, "serve: ready") {
						// The request is on its way; cancel once it stalls.
						time.AfterFunc(100*time.Millisecond, func() { at = time.Now(); cancel() })
					}
				}}
				b.StartTimer()
				res, err := (&Gate{Plan: p, Log: log}).Run(ctx)
				d := float64(time.Since(at).Microseconds()) / 1000
				if err != nil || res.Verdict != report.Cancelled || res.Serve.Survivors != 0 {
					b.Fatalf("Run() = %v, %v", res, err)
				}
				total += d
				worst = max(worst, d)
			}
			b.ReportMetric(total/float64(b.N), "mean-ms")
			b.ReportMetric(worst, "worst-ms")
		})
	}
}

// Rates drawn around the floor (70 tok/s ± 25%, floor 60): twenty runs with
// twenty seeds give one verdict every time once the gate takes more replies
// while the median's interval holds the floor. The serve reports each
// request's drawn rate as its own figure (--rate-source server), so the
// figures do not depend on this machine's timing.
func TestVerdictStableNearTheFloor(t *testing.T) {
	verdicts := map[string]int{}
	extra := 0
	for _, res := range noisyRuns(t, "70", 15) {
		verdicts[res.Verdict]++
		extra += res.Extra.Replies
	}
	if len(verdicts) != 1 {
		t.Errorf("verdicts over 20 runs near the floor = %v, want one", verdicts)
	}
	if extra == 0 {
		t.Errorf("no run near the floor took extra replies")
	}
	t.Logf("near the floor: verdicts %v, %d extra replies in all", verdicts, extra)
}

// Far from the floor (200 tok/s ± 10%), no run takes an extra reply.
func TestNoExtraRepliesFarFromTheFloor(t *testing.T) {
	for i, res := range noisyRuns(t, "200", 15) {
		if res.Extra.Replies != 0 || !res.Pass() || len(res.Replies) != 5 {
			t.Errorf("seed %d: %s with %d replies, %d extra (%s); want a pass on 5", i+1, res.Verdict, len(res.Replies), res.Extra.Replies, res.Extra.Why)
		}
	}
}

// noisyRuns runs the gate once for each seed 1 to 20 against a serve whose
// rates are drawn around rate, four runs at a time: a run waits on its
// serve's start and stop far more than it computes, and the figures judged
// are the serve's own, so running together changes none of them.
func noisyRuns(t testing.TB, rate string, maxReplies int) []*report.Result {
	t.Helper()
	plans := make([]*config.Plan, 20)
	for i := range plans {
		plans[i] = plan(t, "--instant", "--rate", rate, "--rate-noise", noise(rate), "--seed", strconv.Itoa(i+1), "--first-token-ms", "0")
		plans[i].RateSource, plans[i].Replies, plans[i].MaxReplies = judge.RateServer, 5, maxReplies
	}
	results := make([]*report.Result, len(plans))
	errs := make([]error, len(plans))
	running := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, p := range plans {
		wg.Go(func() {
			running <- struct{}{}
			defer func() { <-running }()
			results[i], errs[i] = (&Gate{Plan: p}).Run(context.Background())
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return results
}

func noise(rate string) string {
	if rate == "70" {
		return "0.25"
	}
	return "0.1"
}

// BenchmarkAgreementNearTheFloor is the share of 20 runs near the floor that
// agree with the majority verdict, with the extra replies (max-replies 15)
// and without them (max-replies 5).
func BenchmarkAgreementNearTheFloor(b *testing.B) {
	for _, maxReplies := range []int{5, 15} {
		b.Run(fmt.Sprintf("max-replies-%d", maxReplies), func(b *testing.B) {
			var agree float64
			for b.Loop() {
				verdicts := map[string]int{}
				for _, res := range noisyRuns(b, "70", maxReplies) {
					verdicts[res.Verdict]++
				}
				agree = float64(max(verdicts[report.Pass], verdicts[report.Fail])) / 20
			}
			b.ReportMetric(agree*100, "%agree")
		})
	}
}

// BenchmarkRateByLength is the gate's median decode rate against a serve at
// a fixed 90 tok/s with a 250 ms first token, at three answer lengths: the
// rate leaves prefill and the first token out, so it is one figure.
func BenchmarkRateByLength(b *testing.B) {
	for _, tokens := range []int{16, 64, 256} {
		b.Run(fmt.Sprintf("max-tokens-%d", tokens), func(b *testing.B) {
			var rate float64
			for b.Loop() {
				p := plan(b, "--rate", "90", "--first-token-ms", "250")
				p.MaxTokens, p.MaxReplies = tokens, 3
				res, err := (&Gate{Plan: p}).Run(context.Background())
				if err != nil || res.Intervals.Rate == nil {
					b.Fatalf("Run() = %v, %v", res, err)
				}
				rate = res.Intervals.Rate.Median
			}
			b.ReportMetric(rate, "tok/s")
		})
	}
}

// BenchmarkLogprobsRate is the gate's median decode rate and first token
// against the simulated serve, without logprobs and with 5 alternatives a
// token: paced at 90 tok/s after 250 ms, and unpaced (the serve as fast as
// it can write, the probe as fast as it can read). The rate assertion must
// not be skewed by asking.
func BenchmarkLogprobsRate(b *testing.B) {
	for _, pace := range []struct {
		name string
		args []string
	}{{"paced", []string{"--rate", "90", "--first-token-ms", "250"}}, {"unpaced", []string{"--rate", "0", "--first-token-ms", "0"}}} {
		for _, k := range []int{0, 5} {
			b.Run(fmt.Sprintf("%s/top-logprobs-%d", pace.name, k), func(b *testing.B) {
				var rate, first float64
				for b.Loop() {
					p := plan(b, pace.args...)
					p.MaxTokens, p.Replies, p.MaxReplies, p.TopLogprobs = 128, 5, 5, k
					res, err := (&Gate{Plan: p}).Run(context.Background())
					if err != nil || res.Intervals.Rate == nil || res.Intervals.FirstToken == nil {
						b.Fatalf("Run() = %v, %v", res, err)
					}
					if want := map[int]string{0: "", 5: "sent"}[k]; res.Replies[0].Logprobs != want {
						b.Fatalf("Logprobs = %q, want %q", res.Replies[0].Logprobs, want)
					}
					rate, first = res.Intervals.Rate.Median, res.Intervals.FirstToken.Median
				}
				b.ReportMetric(rate, "tok/s")
				b.ReportMetric(first, "first-ms")
			})
		}
	}
}
