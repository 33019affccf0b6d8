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
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/prompts"
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
	// A binary built with -race sleeps a second before it exits, to let
	// other goroutines report races: the supervisors and serves this
	// binary becomes have nothing to wait for, and a start's stop waits
	// for them.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	serve.BecomeSubreaper()
	os.Exit(m.Run())
}

func plan(t testing.TB, serveArgs ...string) *config.Plan {
	t.Helper()
	t.Setenv("FAKELLM", "1")
	c := config.Default()
	c.Serve = config.QuoteWords(append([]string{os.Args[0], "--port", "{port}"}, serveArgs...)...)
	c.Replies, c.Warmup, c.MaxTokens = 3, 1, 8
	// The serve starts with the allow-list: this binary is the simulated
	// serve when told so by name.
	c.ServeEnv = []string{"FAKELLM=1"}
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
	// The serve's own rate: at 1000 tok/s a loaded machine can read 16
	// tokens in one arrival, a reply with no rate of the stream's.
	p.MaxTokens, p.RateSource = 16, judge.RateServer
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

// Far from the floor, above it or below it, every run stops at the lead:
// three replies, the rate's count decided for meeting the floor, or for
// missing it. Four seeds a rate (one batch of runs): at 200 or 20 tok/s
// ± 10% every reply is on the same side of the floor 60 whatever the seed,
// so more seeds take the same path.
func TestStopsAtTheLead(t *testing.T) {
	for _, tt := range []struct {
		rate, detail string
		pass         bool
	}{
		{"200", "decided, a lead of 3 for meeting it, --lead 3", true},
		{"20", "decided, a lead of 3 for missing it, --lead 3", false},
	} {
		for i, res := range noisyRuns(t, 4, tt.rate, "0.1", 15) {
			if len(res.Replies) != 3 || res.Pass() != tt.pass || !strings.Contains(res.Assertions[1].Detail, tt.detail) {
				t.Errorf("rate %s, seed %d: %s with %d replies (%s); want pass %v on 3, %q", tt.rate, i+1, res.Verdict, len(res.Replies), res.Assertions[1].Detail, tt.pass, tt.detail)
			}
		}
	}
}

// At the floor (60 tok/s ± 20%: each reply meets it with chance ½), a run
// stops when a count decides or at --max-replies, where the report says
// "close to the floor"; each run stops where the rule, read on its replies'
// signs in the order asked, says it stops: the rule whose figures the
// README gives is the one the gate runs. Seeds 1 to 8 (a serve's rates are
// drawn from its seed and the request's number alone) take every road of
// the rule: decided at 3, 5 and 7 replies (seeds 1, 7, 5), decided at the
// cap of 9 (seed 6), and capped undecided (seeds 2, 3, 4, 8).
func TestCapNearTheFloor(t *testing.T) {
	capped, early := 0, 0
	for i, res := range noisyRuns(t, 8, "60", "0.2", 9) {
		rule := judge.Rule{Lead: 3, Min: 1, Max: 9}
		s, _ := judge.SignsOf(res.Replies, res.Limits, 3)
		switch {
		case len(res.Replies) == 9 && !s.Rate.Decided:
			capped++
			if !strings.Contains(res.Assertions[1].Detail, "; close to the floor: ") || res.Signs == nil || res.Signs.Rate.Decided {
				t.Errorf("seed %d: capped at 9, rate %q, signs %+v; want it close to the floor", i+1, res.Assertions[1].Detail, res.Signs)
			}
		case s.Rate.Decided:
			early++
		default:
			t.Errorf("seed %d: stopped after %d replies undecided: %+v", i+1, len(res.Replies), s)
		}
		// Where the rule on the signs stops.
		meet, miss, stop := 0, 0, 0
		for n := range res.Replies {
			if v, _ := res.Limits.RateOf(&res.Replies[n]); v >= res.Limits.Floor {
				meet++
			} else {
				miss++
			}
			if rule.Stops(meet, miss) {
				stop = n + 1
				break
			}
		}
		if stop != len(res.Replies) {
			t.Errorf("seed %d: the gate asked %d replies, the rule on their signs stops at %d", i+1, len(res.Replies), stop)
		}
	}
	if capped == 0 || early == 0 {
		t.Errorf("8 runs at the floor: %d capped, %d decided early; want some of each", capped, early)
	}
}

// The prompts are asked in the order of the seed: --order-seed repeats it,
// and result.json keeps it; without one, a seed is drawn and kept.
func TestOrderSeed(t *testing.T) {
	seed := uint64(5)
	p := plan(t, "--instant", "--rate", "1000", "--first-token-ms", "0")
	p.OrderSeed, p.RateSource, p.MaxReplies, p.Replies = &seed, judge.RateServer, 7, 7
	var log strings.Builder
	res, err := (&Gate{Plan: p, Log: &log}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	order := prompts.NewOrder(p.Prompts, seed)
	for i, r := range res.Replies {
		if want := order.Request(i + 1).Prompt; r.Prompt != want {
			t.Errorf("reply %d asked %q, want %q", i+1, r.Prompt, want)
		}
	}
	if len(res.Replies) != 7 || res.Run.OrderSeed == nil || *res.Run.OrderSeed != 5 || !strings.Contains(log.String(), "prompt order: seed 5 (--order-seed 5 ") {
		t.Errorf("Run(--order-seed 5) = %d replies, seed %v; log:\n%s", len(res.Replies), res.Run.OrderSeed, log.String())
	}
	if got, err := report.Read(p.Out); err != nil || got.Run.OrderSeed == nil || *got.Run.OrderSeed != 5 {
		t.Errorf("result.json's seed = %v, %v; want 5", got.Run.OrderSeed, err)
	}
	p = plan(t, "--instant", "--rate", "1000", "--first-token-ms", "0")
	if res, err := (&Gate{Plan: p}).Run(context.Background()); err != nil || res.Run.OrderSeed == nil {
		t.Errorf("Run() with no seed given: seed %v, %v; want one drawn", res.Run.OrderSeed, err)
	}
}

// noisyRuns runs the gate once for each seed 1 to seeds against a serve whose
// rates are drawn from rate ± noise, four runs at a time: a run waits on its
// serve's start and stop far more than it computes, and the figures judged
// are the serve's own (--rate-source server), so running together changes
// none of them. Each run asks at least one reply and at most maxReplies.
func noisyRuns(t testing.TB, seeds int, rate, noise string, maxReplies int) []*report.Result {
	return noisyRunsFrom(t, seeds, rate, noise, 1, maxReplies)
}

func noisyRunsFrom(t testing.TB, seeds int, rate, noise string, minReplies, maxReplies int) []*report.Result {
	t.Helper()
	plans := make([]*config.Plan, seeds)
	for i := range plans {
		plans[i] = plan(t, "--instant", "--rate", rate, "--rate-noise", noise, "--seed", strconv.Itoa(i+1), "--first-token-ms", "0")
		plans[i].RateSource, plans[i].Replies, plans[i].MaxReplies = judge.RateServer, minReplies, maxReplies
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

// BenchmarkRepliesNearTheFloor is what the sequential rule saves on a serve
// whose rates sit 10% either side of the floor 60 (66 and 54 tok/s, each
// reply drawn ± 20%, so it meets the floor with chance 0.73 and 0.22): over
// 20 runs a side, the replies asked and the share of passes, with the
// sequential rule (the gate as it runs) and with the rule before it (at
// least 5 replies, then more while the median's order-statistic interval
// holds the floor, up to 15). The rule before is read on the replies of 20
// runs of 15 from the same serve: request n's rate is drawn from the serve's
// seed and n alone, so those are the replies it would have asked.
//
//	go test -run '^$' -bench RepliesNearTheFloor -benchtime 1x ./internal/gate
func BenchmarkRepliesNearTheFloor(b *testing.B) {
	for _, side := range []struct{ name, rate string }{{"above", "66"}, {"below", "54"}} {
		b.Run(side.name, func(b *testing.B) {
			var newReplies, newPass, oldReplies, oldPass float64
			for b.Loop() {
				newReplies, newPass, oldReplies, oldPass = 0, 0, 0, 0
				for _, res := range noisyRuns(b, 20, side.rate, "0.2", 15) {
					newReplies += float64(len(res.Replies))
					if res.Pass() {
						newPass++
					}
				}
				legacy := judge.Legacy{Min: 5, Max: 15}
				for _, res := range noisyRunsFrom(b, 20, side.rate, "0.2", 15, 15) {
					var rates []float64
					meet := 0
					for i := range res.Replies {
						v, _ := res.Limits.RateOf(&res.Replies[i])
						rates = append(rates, v)
						if v >= res.Limits.Floor {
							meet++
						}
						if legacy.Stops(meet, len(rates)-meet) {
							break
						}
					}
					oldReplies += float64(len(rates))
					if stats.Median(rates) >= res.Limits.Floor {
						oldPass++
					}
				}
			}
			b.ReportMetric(newReplies/20, "new-replies/run")
			b.ReportMetric(newPass/20*100, "new-%pass")
			b.ReportMetric(oldReplies/20, "old-replies/run")
			b.ReportMetric(oldPass/20*100, "old-%pass")
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

// With a baseline of too few replies, which is not judged, the last line
// speaks of the two counts that decided, not of four.
func TestStopTextTooFew(t *testing.T) {
	l := judge.Limits{Floor: 60, FirstTokenMS: 600, RateSource: judge.RateServer, MaxRegression: new(float64)}
	*l.MaxRegression = 0.10
	var replies []measure.Reply
	for i, rate := range []float64{95, 85, 95} {
		first, last := 100.0, 200.0
		replies = append(replies, measure.Reply{N: i + 1, Content: "x", FirstMS: &first, LastMS: &last, Server: &measure.ServerTimings{PredictedPerSecond: rate}})
	}
	few := &judge.Baseline{Rate: 100, FirstTokenMS: 150, Replies: 2, RateLo: 99, FirstTokenHiMS: 151, Coverage: 0.5}
	got := stopText(replies, l, judge.Rule{Lead: 3, Min: 1, Max: 15, Baseline: few})
	if want := "stopped after 3 replies: both sign counts decided (rate 3 meet the floor, 0 miss it; first token 3 meet the limit, 0 miss it; --lead 3)"; got != want {
		t.Errorf("stopText(a baseline of 2 replies) = %q, want %q", got, want)
	}
}

// stopText names a drift at --max-replies: the rows judge where the serve
// settled, not "close to a limit".
func TestStopTextDrift(t *testing.T) {
	l := judge.Limits{Floor: 60, FirstTokenMS: 600, RateSource: judge.RateClient, Lead: 3}
	rule := judge.Rule{Lead: 3, Min: 1, Max: 15}
	rated := func(rates ...float64) []measure.Reply {
		var rs []measure.Reply
		for i, r := range rates {
			first, last := 300.0, 300+127/r*1000
			rs = append(rs, measure.Reply{N: i + 1, FirstMS: &first, LastMS: &last, EndMS: last + 1, Chunks: 128, CompletionTokens: &[]int{128}[0]})
		}
		return rs
	}
	falling := rated(66, 65, 64.5, 63, 62.5, 61, 60.5, 59, 58.5, 57, 57.5, 56, 56.5, 55, 55.5)
	if got := stopText(falling, l, rule); !strings.HasPrefix(got, "stopped at --max-replies 15: the rate falls ") || !strings.Contains(got, "judged where it settled (rate 7 meet the floor, 8 miss it;") {
		t.Errorf("stopText(a falling rate at the cap) = %q", got)
	}
	// Short of the cap a drift is not named: the gate stopped for another
	// reason.
	if got := stopText(falling[:14], l, rule); strings.Contains(got, "falls") {
		t.Errorf("stopText(a falling rate short of the cap) = %q", got)
	}
	steady := rated(66, 55, 66, 55, 66, 55, 66, 55, 66, 55, 66, 55, 66, 55, 66)
	if got := stopText(steady, l, rule); !strings.HasPrefix(got, "stopped at --max-replies 15: close to a limit, the median decides") {
		t.Errorf("stopText(a steady rate at the cap) = %q", got)
	}
}
