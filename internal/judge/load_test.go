package judge

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// stream is a reply to a request written at startMS after epoch, whose
// first token came firstMS after it and whose tokens then came one a chunk
// at rate tok/s.
func stream(n int, startMS, firstMS, rate float64, tokens int) measure.Reply {
	r := reply(n, rate, firstMS, tokens, "The capital of France is Paris, a city on the Seine.")
	r.T0 = epoch.Add(time.Duration(startMS * float64(time.Millisecond)))
	for i := range tokens {
		r.Arrivals = append(r.Arrivals, measure.Arrival{MS: firstMS + float64(i)/rate*1000, Chunks: 1})
	}
	return r
}

// single are three single-stream replies at 100 tok/s, first token 200 ms,
// 128 tokens: a whole reply of 1471 ms.
var single = []measure.Reply{stream(1, 0, 200, 100, 128), stream(2, 0, 200, 100, 128), stream(3, 0, 200, 100, 128)}

// batched is a round of n streams started together, each at rate.
func batched(n int, rate, firstMS float64) []measure.Reply {
	var rs []measure.Reply
	for i := range n {
		rs = append(rs, stream(i+1, 0, firstMS, rate, 128))
	}
	return rs
}

// serialised is a round of n streams sent together and answered one after
// another at the full rate, pauseMS between a reply's end and the next one's
// prefill.
func serialised(n int, pauseMS float64) []measure.Reply {
	var rs []measure.Reply
	at := 0.0
	for i := range n {
		first := at + 200
		rs = append(rs, stream(i+1, 0, first, 100, 128))
		at = first + 127*10 + pauseMS
	}
	return rs
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestRoundBatched(t *testing.T) {
	rd := RoundOf(1, batched(4, 80, 250), Single{Rate: 100})
	if rd.Conservative || rd.Failed != "" {
		t.Fatalf("round %+v: want a window where all decode", rd)
	}
	if !near(rd.Aggregate, 320, 0.5) || !near(rd.Efficiency, 0.8, 0.002) || !near(rd.Concurrency, 4, 0.001) {
		t.Errorf("aggregate %.2f, η %.3f, concurrency %.3f; want 320, 0.8, 4", rd.Aggregate, rd.Efficiency, rd.Concurrency)
	}
	if rd.WorstFirstMS != 250 || rd.Gaps != 0 || len(rd.Rates) != 4 || !near(rd.Rates[0], 80, 1e-9) {
		t.Errorf("worst %v, gaps %d, rates %v", rd.WorstFirstMS, rd.Gaps, rd.Rates)
	}
}

// A serve that runs the streams one after another at the full rate: the sum
// of the streams' rates (400 tok/s, η 1.0) would call it perfect; the round
// says it decoded one at a time.
func TestRoundSerialisedIsNotTheSumOfRates(t *testing.T) {
	rd := RoundOf(1, serialised(4, 0), Single{Rate: 100})
	sum := 0.0
	for _, v := range rd.Rates {
		sum += v
	}
	if !near(sum, 400, 0.01) {
		t.Fatalf("the streams' rates sum to %.1f; the test wants 400", sum)
	}
	if !rd.Conservative || rd.WindowMS != 0 {
		t.Errorf("round %+v: no window where all decode, want the conservative estimate", rd)
	}
	// 4 x 127 tokens over 4 x 1270 ms of decode and 3 x 200 ms of prefill.
	if want := 508 / (5680.0 / 1000); !near(rd.Aggregate, want, 0.01) || !near(rd.Efficiency, want/400, 0.001) {
		t.Errorf("aggregate %.2f, η %.3f; want %.2f, %.3f", rd.Aggregate, rd.Efficiency, want, want/400)
	}
	if !near(rd.Concurrency, 5080.0/5680, 0.001) {
		t.Errorf("concurrency %.3f, want %.3f", rd.Concurrency, 5080.0/5680)
	}
	if rd.Gaps != 3 || !near(rd.GapMS, 200, 0.01) || rd.WorstFirstMS != 200+3*1470 {
		t.Errorf("gaps %d of median %.1f ms, worst first %.0f", rd.Gaps, rd.GapMS, rd.WorstFirstMS)
	}
}

// A serve that counts two tokens a chunk: each chunk in the window counts
// both.
func TestRoundTokensPerChunk(t *testing.T) {
	rs := batched(4, 80, 250)
	for i := range rs {
		rs[i].CompletionTokens = ptr(256)
	}
	if rd := RoundOf(1, rs, Single{Rate: 100}); !near(rd.Aggregate, 640, 1) {
		t.Errorf("aggregate %.1f, want 640", rd.Aggregate)
	}
}

// Streams of very different lengths share too short a window: the round is
// figured over its whole span, and says so.
func TestRoundLengthsDiffer(t *testing.T) {
	rs := batched(3, 100, 200)
	rs = append(rs, stream(4, 0, 200, 100, 4)) // 30 ms of decode
	rd := RoundOf(1, rs, Single{Rate: 100})
	if !rd.Conservative || !near(rd.WindowMS, 30, 1e-6) {
		t.Fatalf("round %+v: want conservative, window 30 ms", rd)
	}
	if want := float64(3*127+3) / 1.27; !near(rd.Aggregate, want, 0.01) {
		t.Errorf("aggregate %.2f, want %.2f", rd.Aggregate, want)
	}
	// At the edge: a window of exactly MinWindow of the median span is read.
	rs = batched(2, 100, 200)
	rs[1].T0 = rs[1].T0.Add(635 * time.Millisecond) // half of 1270 ms overlaps
	if rd := RoundOf(1, rs, Single{Rate: 100}); rd.Conservative || !near(rd.WindowMS, 635, 1e-6) {
		t.Errorf("round %+v: a window of half the span is read", rd)
	}
	rs[1].T0 = rs[1].T0.Add(time.Millisecond)
	if rd := RoundOf(1, rs, Single{Rate: 100}); !rd.Conservative {
		t.Errorf("round %+v: a window under half the span is not read", rd)
	}
}

// Replies recorded without arrivals are taken as clean: their tokens spread
// evenly from the first to the last.
func TestRoundWithoutArrivals(t *testing.T) {
	rs := batched(2, 100, 200)
	rs[1].Arrivals = nil
	rs[1].T0 = rs[1].T0.Add(300 * time.Millisecond)
	rd := RoundOf(1, rs, Single{Rate: 100})
	// The window: 970 ms, in which stream 1 sent 97 tokens and stream 2
	// 127 x 970/1270.
	if want := (97 + 127*970.0/1270) / 0.97; rd.Conservative || !near(rd.Aggregate, want, 0.01) {
		t.Errorf("aggregate %.3f, want %.3f (round %+v)", rd.Aggregate, want, rd)
	}
}

// A reply whose chunk count says less than its arrivals (a file written by
// hand) counts its arrivals' chunks: no token is counted twice, and no rate
// is infinite.
func TestRoundChunksFromArrivals(t *testing.T) {
	rs := batched(4, 80, 250)
	want := RoundOf(1, rs, Single{Rate: 100}).Aggregate
	for i := range rs {
		rs[i].Chunks = 0
	}
	if got := RoundOf(1, rs, Single{Rate: 100}).Aggregate; !near(got, want, 1e-9) {
		t.Errorf("aggregate %v with no chunk count, %v with it", got, want)
	}
}

// Most streams of one token (no decode span), judged on the serve's own
// rates: no window, whatever the median span, and a finite aggregate.
func TestRoundMostlyOneToken(t *testing.T) {
	rs := []measure.Reply{stream(1, 0, 200, 100, 1), stream(2, 0, 200, 100, 1), stream(3, 0, 200, 100, 1), stream(4, 0, 200, 100, 128)}
	rd := RoundOf(1, rs, Single{Rate: 100, Source: RateServer})
	if !rd.Conservative || rd.WindowMS != 0 || !near(rd.Aggregate, 100, 1e-9) {
		t.Errorf("round %+v: want conservative, no window, 127 tokens over 1.27 s", rd)
	}
}

func TestRoundFailures(t *testing.T) {
	rs := batched(3, 100, 200)
	rs[1] = measure.Reply{N: 2, T0: epoch, Error: "HTTP 503: server busy\x1b[2J"}
	rd := RoundOf(2, rs, Single{Rate: 100})
	if rd.Failed != `stream 2 failed: "HTTP 503: server busy\x1b[2J"` {
		t.Errorf("failed %q", rd.Failed)
	}
	// The streams after a failed one still give their figures.
	rs[2].FirstMS = ptr(900.0)
	if rd := RoundOf(2, rs, Single{Rate: 100}); len(rd.Rates) != 3 || len(rd.FirstMS) != 2 || rd.WorstFirstMS != 900 {
		t.Errorf("rates %v, first %v, worst %v: the streams after the failed one are left out", rd.Rates, rd.FirstMS, rd.WorstFirstMS)
	}
	rs[2] = stream(3, 0, 200, 100, 128)
	rs[1] = measure.Reply{N: 2, T0: epoch, EndMS: 5}
	if rd := RoundOf(2, rs, Single{Rate: 100}); rd.Failed != "stream 2: no content arrived" {
		t.Errorf("failed %q", rd.Failed)
	}
	rs[1] = stream(2, 0, 200, 100, 128)
	rs[1].LastMS = nil
	if rd := RoundOf(2, rs, Single{Rate: 100}); rd.Failed != "stream 2: no content arrived" || len(rd.Rates) != 3 || len(rd.FirstMS) != 3 {
		t.Errorf("a first token and no last: failed %q, rates %v, first %v", rd.Failed, rd.Rates, rd.FirstMS)
	}
	// Two failures: the first is named, and the streams after still count.
	rs[0] = measure.Reply{N: 1, T0: epoch, Error: "first"}
	if rd := RoundOf(2, rs, Single{Rate: 100}); rd.Failed != `stream 1 failed: "first"` || len(rd.Rates) != 3 || len(rd.FirstMS) != 2 {
		t.Errorf("failed %q, rates %v, first %v", rd.Failed, rd.Rates, rd.FirstMS)
	}
	if rd := RoundOf(1, nil, Single{Rate: 100}); rd.Failed != "no stream was asked" {
		t.Errorf("failed %q", rd.Failed)
	}
	burst := []measure.Reply{stream(1, 0, 200, 100, 1), stream(2, 0, 200, 100, 1)}
	if rd := RoundOf(1, burst, Single{Rate: 100, Source: RateServer}); rd.Failed != "no stream took any time to decode: each arrived in one burst" {
		t.Errorf("failed %q", rd.Failed)
	}
	if rd := RoundOf(1, batched(2, 50, 200), Single{}); rd.Efficiency != 0 || rd.Failed != "" {
		t.Errorf("no single rate: η %v, failed %q", rd.Efficiency, rd.Failed)
	}
}

func TestSingleOf(t *testing.T) {
	rs := append([]measure.Reply{}, single...)
	rs = append(rs, measure.Reply{N: 4, Error: "boom", EndMS: 99999})
	s := SingleOf(rs, RateClient)
	if !near(s.Rate, 100, 1e-9) || s.FirstMS != 200 || !near(s.ReplyMS, 1471, 1e-9) {
		t.Errorf("single %+v", s)
	}
}

var batchLimits = LoadLimits{Streams: 4, Expect: LoadBatch, Efficiency: 0.5, FirstTokenMS: 1200, MaxRounds: 11}

func loadInput(l LoadLimits, rounds ...[]measure.Reply) Input {
	lim := limits
	lim.Lead = 3
	return Input{Route: route.Evidence{Fast: &route.Match{Text: "fast", Line: 1}}, Replies: single, Limits: lim, Load: &LoadRun{Limits: l, Rounds: rounds}}
}

func loadRow(t *testing.T, in Input) Assertion {
	t.Helper()
	v := Judge(in)
	a := v.Assertions[len(v.Assertions)-1]
	if a.Name != Load {
		t.Fatalf("last assertion %q, want load", a.Name)
	}
	return a
}

func TestJudgeLoadBatch(t *testing.T) {
	r := batched(4, 80, 250)
	a := loadRow(t, loadInput(batchLimits, r, r, r))
	if !a.OK {
		t.Fatalf("a batching serve at η 0.8 fails: %s", a.Detail)
	}
	for _, want := range []string{"4 streams asked, 4.0 decoding at once: η 0.80 (floor 0.50)", "round 1 η 0.80, 4.0 at once, aggregate 320.0 tok/s, per stream 80.0/80.0/80.0/80.0 tok/s, worst first token 250 ms",
		"median 250 ms (limit 1200)", "signs: 3 meet the efficiency floor, 0 miss it: decided", "p95 over 12 streams, descriptive, not judged: first token 250 ms, per-token time 12.5 ms", "single-stream median 100.0 tok/s"} {
		if !strings.Contains(a.Detail, want) {
			t.Errorf("detail lacks %q:\n%s", want, a.Detail)
		}
	}
	// Slow to start: the worst first token fails the row alone.
	slow := batched(4, 80, 1300)
	if a := loadRow(t, loadInput(batchLimits, slow, slow, slow)); a.OK || !strings.Contains(a.Detail, "the worst first token of a round, median 1300 ms, is above --load-first-token-ms 1200") {
		t.Errorf("first token above the limit: ok %v, %s", a.OK, a.Detail)
	}
	// At the limits exactly: both met.
	edge := batched(4, 50, 1200)
	if a := loadRow(t, loadInput(batchLimits, edge)); !a.OK {
		t.Errorf("η 0.5 and 1200 ms at the limits fail: %s", a.Detail)
	}
}

func TestJudgeLoadBatchServeRanThemOneAtATime(t *testing.T) {
	r := serialised(4, 0)
	l := batchLimits
	l.FirstTokenMS = 1e6
	a := loadRow(t, loadInput(l, r, r, r))
	if a.OK || !strings.HasPrefix(a.Detail, "4 streams asked, 0.9 decoding at once: the serve ran them one at a time (η 0.22, floor 0.50)") {
		t.Errorf("ok %v: %s", a.OK, a.Detail)
	}
	if !strings.Contains(a.Detail, "aggregate 89.4 tok/s (conservative: all decoded together for 0 of 5680 ms") {
		t.Errorf("the conservative estimate is not said: %s", a.Detail)
	}
	// Two at a time of four: below the floor, not one at a time.
	half := append(batched(2, 100, 200), stream(3, 0, 1480, 100, 128), stream(4, 0, 1480, 100, 128))
	l.Efficiency = 0.6
	if a := loadRow(t, loadInput(l, half)); a.OK || !strings.HasPrefix(a.Detail, "4 streams asked, 2.0 decoding at once: together they decode at η 0.50 of 4 single streams, below the floor 0.60") {
		t.Errorf("ok %v: %s", a.OK, a.Detail)
	}
}

func TestJudgeLoadSerial(t *testing.T) {
	l := LoadLimits{Streams: 4, Expect: LoadSerial, Efficiency: 0.5, FirstTokenMS: 1200, MaxRounds: 11}
	r := serialised(4, 333)
	a := loadRow(t, loadInput(l, r, r, r))
	// (4 - 1) x 1471 + 600, and half again: 7519.5 ms.
	if !a.OK {
		t.Fatalf("a serialising serve expected serial fails: %s", a.Detail)
	}
	for _, want := range []string{"4 streams asked, 0.8 decoding at once (serial expected): every request completed, the worst first token, median 5609 ms over the rounds, within the first-in-first-out bound 7520 ms ((4 - 1) x a single reply's 1471 ms + --first-token-ms 600, +50%)",
		"the serve's pause between requests: median 533 ms from one stream's last token to the next one's first (9 gaps), 333 ms beyond a single reply's first token",
		"signs: 3 meet the bound, 0 miss it: decided"} {
		if !strings.Contains(a.Detail, want) {
			t.Errorf("detail lacks %q:\n%s", want, a.Detail)
		}
	}
	// A queue that waits far longer than first in, first out.
	slow := serialised(4, 3000)
	if a := loadRow(t, loadInput(l, slow)); a.OK || !strings.Contains(a.Detail, "the queue took longer than first in, first out allows: the worst first token, median 13610 ms over the rounds, is above the first-in-first-out bound 7520 ms") {
		t.Errorf("ok %v: %s", a.OK, a.Detail)
	}
	// Streams that overlap: no pause to measure.
	b := batched(4, 100, 200)
	if a := loadRow(t, loadInput(l, b)); !a.OK || !strings.Contains(a.Detail, "no stream began after another ended: no pause between requests to measure") {
		t.Errorf("ok %v: %s", a.OK, a.Detail)
	}
}

func TestJudgeLoadFailures(t *testing.T) {
	r := batched(4, 80, 250)
	bad := batched(4, 80, 250)
	bad[2] = measure.Reply{N: 3, T0: epoch, Error: "HTTP 429: queue full\n<b>"}
	a := loadRow(t, loadInput(batchLimits, r, bad))
	if a.OK || !strings.HasPrefix(a.Detail, `4 streams asked at once, and a request failed under load: round 2: stream 3 failed: "HTTP 429: queue full\n<b>" (each: round 1 η 0.80`) {
		t.Errorf("ok %v: %s", a.OK, a.Detail)
	}
	if a := loadRow(t, loadInput(batchLimits, []measure.Reply{bad[2], bad[2], bad[2], bad[2]})); !strings.Contains(a.Detail, "(each: round 1 failed; p95 over 0 streams, descriptive, not judged: first token 0 ms, per-token time none)") {
		t.Errorf("no figures: %s", a.Detail)
	}
	if a := loadRow(t, loadInput(batchLimits, bad, r, bad)); !strings.Contains(a.Detail, "round 1: stream 3 failed") || !strings.Contains(a.Detail, "round 3: stream 3 failed") {
		t.Errorf("every failed round is not named: %s", a.Detail)
	} else if !strings.Contains(a.Detail, "round 1 failed; round 2 η 0.80") {
		t.Errorf("the rounds after a failed one are not listed: %s", a.Detail)
	}
	if !strings.Contains(a.Detail, "round 2 failed") {
		t.Errorf("the failed round is not in the figures: %s", a.Detail)
	}
	in := loadInput(batchLimits)
	in.Load.Skipped = "the single-stream assertions failed first (rate)"
	if a := loadRow(t, in); a.OK || a.Detail != "not measured: the single-stream assertions failed first (rate)" {
		t.Errorf("skipped: ok %v: %s", a.OK, a.Detail)
	}
	in.Load.Skipped = ""
	if a := loadRow(t, in); a.OK || a.Detail != "not measured: no round was asked" {
		t.Errorf("none: ok %v: %s", a.OK, a.Detail)
	}
	in = loadInput(batchLimits, r)
	in.Replies = []measure.Reply{{N: 1, Error: "boom"}}
	if a := loadRow(t, in); a.OK || !strings.HasPrefix(a.Detail, "no single-stream decode rate") {
		t.Errorf("no single rate: ok %v: %s", a.OK, a.Detail)
	}
	in.Replies = nil
	in.NoReplies = "never ready"
	if a := loadRow(t, in); a.OK || a.Detail != "no replies: never ready" {
		t.Errorf("no replies: ok %v: %s", a.OK, a.Detail)
	}
	in.Load = nil
	if v := Judge(in); v.Assertions[len(v.Assertions)-1].Name == Load {
		t.Errorf("no --load, yet a load row")
	}
}

// The rounds stop as the replies do: a count decided by --lead, a failed
// round, or --load-max-rounds; at the cap the median decides.
func TestLoadStop(t *testing.T) {
	s := SingleOf(single, RateClient)
	good, slow := RoundOf(1, batched(4, 80, 250), s), RoundOf(1, batched(4, 20, 250), s)
	failed := Round{Failed: "stream 1 failed"}
	for _, tc := range []struct {
		name   string
		rounds []Round
		l      LoadLimits
		stop   bool
	}{
		{"none", nil, batchLimits, false},
		{"two meet", []Round{good, good}, batchLimits, false},
		{"three meet", []Round{good, good, good}, batchLimits, true},
		{"three miss", []Round{slow, slow, slow}, batchLimits, true},
		{"split", []Round{good, slow, good, slow}, batchLimits, false},
		{"failed", []Round{failed}, batchLimits, true},
		{"cap", []Round{good, slow}, LoadLimits{Streams: 4, Expect: LoadBatch, Efficiency: 0.5, FirstTokenMS: 1200, MaxRounds: 2}, true},
		// η decided, the first token not: a batching serve slow to start
		// half the time.
		{"first token open", []Round{good, good, good, withWorst(good, 5000)}, batchLimits, false},
		// Serial: only the first token counts.
		{"serial", []Round{slow, slow, slow}, LoadLimits{Streams: 4, Expect: LoadSerial, MaxRounds: 11}, true},
	} {
		if got := LoadStop(tc.rounds, tc.l, s, 600, 3); got != tc.stop {
			t.Errorf("%s: stop %v, want %v", tc.name, got, tc.stop)
		}
	}
	// At the cap the median round decides: close to the efficiency floor.
	l := batchLimits
	l.MaxRounds = 3
	r, low := batched(4, 80, 250), batched(4, 20, 250)
	a := loadRow(t, loadInput(l, r, low, r))
	if !a.OK || !strings.Contains(a.Detail, "close to the efficiency floor: 2 meet it, 1 miss it, a lead of 1, short of --lead 3") {
		t.Errorf("at the cap: ok %v: %s", a.OK, a.Detail)
	}
	if a := loadRow(t, loadInput(l, r)); !strings.Contains(a.Detail, "too few rounds (1) to reach --lead 3") {
		t.Errorf("one round: %s", a.Detail)
	}
}

func withWorst(rd Round, ms float64) Round {
	rd.WorstFirstMS = ms
	return rd
}

func TestFIFOBound(t *testing.T) {
	if got := FIFOBound(4, Single{ReplyMS: 1000}, 600); got != 1.5*3600 {
		t.Errorf("bound %v, want 5400", got)
	}
}

// The edges: 1.5 decoding at once is not one at a time; a worst first token
// at the FIFO bound is within it.
func TestJudgeLoadEdges(t *testing.T) {
	l := batchLimits
	l.Efficiency, l.Streams = 0.6, 3
	r := append(batched(2, 100, 200), stream(3, 0, 1470, 100, 128))
	if rd := RoundOf(1, r, Single{Rate: 100}); rd.Concurrency != 1.5 {
		t.Fatalf("concurrency %v, the test wants 1.5", rd.Concurrency)
	}
	if a := loadRow(t, loadInput(l, r)); a.OK || !strings.HasPrefix(a.Detail, "3 streams asked, 1.5 decoding at once: together they decode at η 0.50 of 3 single streams, below the floor 0.60") {
		t.Errorf("ok %v: %s", a.OK, a.Detail)
	}
	serial := LoadLimits{Streams: 4, Expect: LoadSerial, Efficiency: 0.5, FirstTokenMS: 1200, MaxRounds: 11}
	in := loadInput(serial, batched(4, 100, 7500))
	// (4 - 1) x 1471 + 587 = 5000, and half again: 7500.
	in.Limits.FirstTokenMS = 587
	if a := loadRow(t, in); !a.OK || !strings.Contains(a.Detail, "median 7500 ms over the rounds, within the first-in-first-out bound 7500 ms") {
		t.Errorf("at the bound: ok %v: %s", a.OK, a.Detail)
	}
	in.Limits.FirstTokenMS = 586
	if a := loadRow(t, in); a.OK {
		t.Errorf("past the bound: ok %v: %s", a.OK, a.Detail)
	}
}

// A round's signs at the limits exactly: η at the floor and the worst first
// token at the limit meet them; a failed round counts no sign, and the
// rounds after it still do.
func TestLoadSignsOf(t *testing.T) {
	s := SingleOf(single, RateClient)
	at := Round{Efficiency: 0.5, WorstFirstMS: 1200}
	below := Round{Efficiency: 0.49, WorstFirstMS: 1201}
	signs, failed := LoadSignsOf([]Round{{Failed: "x"}, at, below}, batchLimits, s, 600, 3)
	if !failed || signs.Efficiency == nil || signs.Efficiency.Meet != 1 || signs.Efficiency.Miss != 1 || signs.FirstToken.Meet != 1 || signs.FirstToken.Miss != 1 {
		t.Errorf("signs %+v, %+v, failed %v", signs.Efficiency, signs.FirstToken, failed)
	}
	serial := LoadLimits{Streams: 4, Expect: LoadSerial}
	bound := FIFOBound(4, s, 600)
	signs, failed = LoadSignsOf([]Round{{WorstFirstMS: bound}, {WorstFirstMS: bound + 1}}, serial, s, 600, 3)
	if failed || signs.Efficiency != nil || signs.FirstToken.Meet != 1 || signs.FirstToken.Miss != 1 {
		t.Errorf("serial signs %+v, %+v, failed %v", signs.Efficiency, signs.FirstToken, failed)
	}
}

// Streams back to back, the next first token as the last one's last: no
// gap between them.
func TestRoundNoGap(t *testing.T) {
	rs := []measure.Reply{stream(1, 0, 200, 100, 128), stream(2, 0, 1470, 100, 128), stream(3, 0, 2840, 100, 128)}
	rd := RoundOf(1, rs, Single{Rate: 100})
	if rd.Gaps != 1 || !near(rd.GapMS, 100, 1e-9) {
		t.Errorf("gaps %d of %.1f ms, want 1 of 100 (the first two are back to back)", rd.Gaps, rd.GapMS)
	}
}

// busy is a reply a serve gives in band to a request it will not take: at
// once, 200 OK, one chunk of text and finish_reason "stop".
func busy(n int, text string) measure.Reply {
	return measure.Reply{N: n, T0: epoch, Prompt: "p", Content: text, FinishReason: "stop",
		FirstMS: ptr(2.0), LastMS: ptr(2.0), EndMS: 3, Chunks: 1, Arrivals: []measure.Arrival{{MS: 2, Chunks: 1}}}
}

// A serve that answers every request arriving while another is in flight
// with "Server busy" has not completed them: the row fails, naming the
// stream and quoting what it said, whatever was expected.
func TestJudgeLoadRefusedInBand(t *testing.T) {
	r := []measure.Reply{stream(1, 0, 200, 100, 128), busy(2, "Server busy, try again later."), busy(3, "Server busy, try again later."), busy(4, "Server busy, try again later.")}
	serial := LoadLimits{Streams: 4, Expect: LoadSerial, Efficiency: 0.5, FirstTokenMS: 1200, MaxRounds: 11}
	want := `4 streams asked at once, and a request failed under load: round 1: stream 2 is not a completed reply: 1 token, under half the 128 of the shortest single reply, and no decode rate of its own (1 token, too few for a rate); it said "Server busy, try again later."; round 2: stream 2`
	for _, l := range []LoadLimits{serial, batchLimits} {
		if a := loadRow(t, loadInput(l, r, r, r)); a.OK || !strings.HasPrefix(a.Detail, want) {
			t.Errorf("%s expected: ok %v: %s\nwant the prefix %s", l.Expect, a.OK, a.Detail, want)
		}
	}
}

// The load limits read back from a run are checked: nonsense is never
// judged, and the row says what it is.
func TestJudgeLoadNonsense(t *testing.T) {
	r := batched(4, 80, 250)
	for _, tc := range []struct {
		name string
		set  func(lr *LoadRun)
		want string
	}{
		{"streams negative", func(lr *LoadRun) { lr.Limits.Streams = -3 }, "-3 streams (a run asks 2 to 64)"},
		{"streams one", func(lr *LoadRun) { lr.Limits.Streams = 1 }, "1 streams (a run asks 2 to 64)"},
		{"streams many", func(lr *LoadRun) { lr.Limits.Streams = 65 }, "65 streams (a run asks 2 to 64)"},
		{"expect", func(lr *LoadRun) { lr.Limits.Expect = "many\n" }, `expect "many\n" (batch or serial)`},
		{"efficiency NaN", func(lr *LoadRun) { lr.Limits.Efficiency = math.NaN() }, "efficiency floor NaN (above 0, at most 1)"},
		{"efficiency zero", func(lr *LoadRun) { lr.Limits.Efficiency = 0 }, "efficiency floor 0 (above 0, at most 1)"},
		{"efficiency above 1", func(lr *LoadRun) { lr.Limits.Efficiency = 1.0001 }, "efficiency floor 1.0001 (above 0, at most 1)"},
		{"first token zero", func(lr *LoadRun) { lr.Limits.FirstTokenMS = 0 }, "first-token limit 0 ms (above 0, finite)"},
		{"first token NaN", func(lr *LoadRun) { lr.Limits.FirstTokenMS = math.NaN() }, "first-token limit NaN ms (above 0, finite)"},
		{"first token infinite", func(lr *LoadRun) { lr.Limits.FirstTokenMS = math.Inf(1) }, "first-token limit +Inf ms (above 0, finite)"},
		{"max rounds", func(lr *LoadRun) { lr.Limits.MaxRounds = 0 }, "3 rounds, at most 0 asked"},
		{"more rounds than asked", func(lr *LoadRun) { lr.Limits.MaxRounds = 2 }, "3 rounds, at most 2 asked"},
		{"a round short", func(lr *LoadRun) { lr.Rounds[1] = lr.Rounds[1][:3] }, "round 2 has 3 streams of 4"},
		{"two rounds short", func(lr *LoadRun) { lr.Rounds[1], lr.Rounds[2] = lr.Rounds[1][:3], lr.Rounds[2][:2] }, "round 2 has 3 streams of 4\x00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := loadInput(batchLimits, r, r, slices.Clone(r))
			tc.set(in.Load)
			a := loadRow(t, in)
			// \x00: the detail ends there.
			if a.OK || !strings.HasPrefix(a.Detail, "not judged: the load limits and rounds read back cannot be a run's: ") || !strings.Contains(a.Detail+"\x00", tc.want) {
				t.Errorf("ok %v: %s\nwant %q", a.OK, a.Detail, tc.want)
			}
		})
	}
	// Every problem at once.
	in := loadInput(batchLimits, r)
	in.Load.Limits.Streams, in.Load.Limits.Efficiency = -3, math.NaN()
	if a := loadRow(t, in); !strings.Contains(a.Detail, "-3 streams (a run asks 2 to 64); efficiency floor NaN") {
		t.Errorf("both problems: %s", a.Detail)
	}
	// At the edges: what a run can have is judged.
	for _, set := range []func(l *LoadLimits){
		func(l *LoadLimits) { l.Efficiency = 1 },
		func(l *LoadLimits) { l.MaxRounds = 1 },
		func(l *LoadLimits) { l.FirstTokenMS = 0.001 },
	} {
		l := batchLimits
		set(&l)
		if a := loadRow(t, loadInput(l, r)); strings.HasPrefix(a.Detail, "not judged") {
			t.Errorf("limits %+v are a run's: %s", l, a.Detail)
		}
	}
	if a := loadRow(t, loadInput(LoadLimits{Streams: 2, Expect: LoadBatch, Efficiency: 0.65, FirstTokenMS: 1200, MaxRounds: 1}, r[:2])); strings.HasPrefix(a.Detail, "not judged") {
		t.Errorf("2 streams are a run's: %s", a.Detail)
	}
	most := &LoadRun{Limits: LoadLimits{Streams: MaxStreams, Expect: LoadSerial, Efficiency: 0.5, FirstTokenMS: 1200, MaxRounds: 1}}
	if bad := most.Nonsense(); len(bad) != 0 {
		t.Errorf("%d streams are a run's: %q", MaxStreams, bad)
	}
}

// A floor at or below 1/N cannot tell a serve that time-slices one device
// between the N streams (η = 1/N) from one that batches: never judged ok.
func TestJudgeLoadFloorAtTimeSlicing(t *testing.T) {
	l := LoadLimits{Streams: 2, Expect: LoadBatch, Efficiency: 0.5, FirstTokenMS: 1200, MaxRounds: 11}
	r := batched(2, 100, 200)
	want := "not judged: the efficiency floor 0.5 is at or below 1/2 = 0.5, the η of a serve that time-slices one device between 2 streams: it cannot tell time-slicing from batching; judge again with --load-efficiency 0.51 or more (the default for --load 2 is 0.65)"
	if a := loadRow(t, loadInput(l, r, r, r)); a.OK || a.Detail != want {
		t.Errorf("ok %v: %s\nwant %s", a.OK, a.Detail, want)
	}
	l.Streams, l.Efficiency = 4, 0.25
	r = batched(4, 100, 200)
	if a := loadRow(t, loadInput(l, r, r, r)); a.OK || !strings.HasPrefix(a.Detail, "not judged: the efficiency floor 0.25 is at or below 1/4 = 0.25") {
		t.Errorf("ok %v: %s", a.OK, a.Detail)
	}
	// The floor and 1/N as they are, not rounded to look the same: 0.333
	// at --load 3 is not "0.33, at or below 0.33".
	l.Streams, l.Efficiency = 3, 0.333
	r3 := batched(3, 100, 200)
	if a := loadRow(t, loadInput(l, r3, r3, r3)); a.OK || !strings.HasPrefix(a.Detail, "not judged: the efficiency floor 0.333 is at or below 1/3 = 0.3333, ") || !strings.Contains(a.Detail, "judge again with --load-efficiency 0.34 or more (the default for --load 3 is 0.50)") {
		t.Errorf("ok %v: %s", a.OK, a.Detail)
	}
	l.Streams = 4
	l.Efficiency = 0.2501
	if a := loadRow(t, loadInput(l, r, r, r)); !a.OK {
		t.Errorf("a floor above 1/N: ok %v: %s", a.OK, a.Detail)
	}
	// Serial judges no η: its floor is not read.
	l.Expect, l.Efficiency = LoadSerial, 0.25
	if a := loadRow(t, loadInput(l, r, r, r)); !a.OK {
		t.Errorf("serial: ok %v: %s", a.OK, a.Detail)
	}
}

// A stream under load decodes what a single reply does: at least half the
// shortest single reply's tokens, and a rate of its own, had as the run's
// single replies have theirs.
func TestRoundIncomplete(t *testing.T) {
	s := SingleOf(single, RateClient)
	if s.Tokens != 128 || s.Source != RateClient {
		t.Fatalf("single %+v: want 128 tokens, client", s)
	}
	at := func(tokens int) []measure.Reply {
		return []measure.Reply{stream(1, 0, 200, 100, 128), stream(2, 0, 200, 100, tokens)}
	}
	if rd := RoundOf(1, at(64), s); rd.Failed != "" {
		t.Errorf("half the tokens exactly: failed %q", rd.Failed)
	}
	if rd := RoundOf(1, at(63), s); rd.Failed != `stream 2 is not a completed reply: 63 tokens, under half the 128 of the shortest single reply; it said "The capital of France is Paris, a city on the Seine."` {
		t.Errorf("under half: failed %q", rd.Failed)
	}
	// One burst of every token: no rate of the stream's, but the serve's
	// own where the run judges that.
	whole := at(128)
	whole[1].Arrivals = []measure.Arrival{{MS: 200, Chunks: 128}}
	whole[1].LastMS = ptr(200.0)
	server := whole[1].Server
	whole[1].Server = nil
	if rd := RoundOf(1, whole, s); rd.Failed != `stream 2 is not a completed reply: no decode rate of its own (`+measure.Burst+`); it said "The capital of France is Paris, a city on the Seine."` {
		t.Errorf("one burst: failed %q", rd.Failed)
	}
	s.Source = RateServer
	whole[1].Server = server
	if rd := RoundOf(1, whole, s); rd.Failed != "" {
		t.Errorf("one burst, the serve's own rate judged: failed %q", rd.Failed)
	}
	// Read in one burst, the stream's rate judged: the serve's own figures
	// say it decoded (a loaded runner read it late); without them, or
	// where they are the serve's own judged figure and missing, it did not.
	s.Source = RateClient
	whole[1].Server = &measure.ServerTimings{PredictedN: 128, PredictedMS: 1270}
	if rd := RoundOf(1, whole, s); rd.Failed != "" {
		t.Errorf("one burst, the serve's own figures sent: failed %q", rd.Failed)
	}
	whole[1].Server = &measure.ServerTimings{PredictedN: 128}
	if rd := RoundOf(1, whole, s); !strings.Contains(rd.Failed, "no decode rate of its own ("+measure.Burst+")") {
		t.Errorf("one burst, the serve's figures without a time: failed %q", rd.Failed)
	}
	whole[1].Server = nil
	// What it said is quoted, cut, and the reasoning when it said no
	// content.
	r := []measure.Reply{stream(1, 0, 200, 100, 128), busy(2, strings.Repeat("busy\x1b[2J ", 10))}
	if rd := RoundOf(1, r, s); !strings.HasSuffix(rd.Failed, `; it said "busy\x1b[2J busy\x1b[2J busy\x1b[2J busy\x1b[2J busy\x1b[2J busy\x1b[2J busy\x1b["...`) {
		t.Errorf("failed %q", rd.Failed)
	}
	r[1].Content, r[1].Reasoning = "", "thinking, then busy"
	if rd := RoundOf(1, r, s); !strings.HasSuffix(rd.Failed, `; it said "thinking, then busy"`) {
		t.Errorf("failed %q", rd.Failed)
	}
	// No single reply decoded: the count asks nothing.
	if rd := RoundOf(1, at(2), Single{Rate: 100}); rd.Failed != "" {
		t.Errorf("no single tokens: failed %q", rd.Failed)
	}
}

// A stream under load whose content the content assertion would fail is no
// completed reply either: a batched kernel's garbage ("!!!!", one token
// repeated), reasoning and no content, or text the prompt's expect pattern
// does not match, however many tokens it decoded at whatever rate.
func TestRoundContent(t *testing.T) {
	s := SingleOf(single, RateClient)
	said := func(content, reasoning, expect string) []measure.Reply {
		r := []measure.Reply{stream(1, 0, 200, 100, 128), stream(2, 0, 200, 100, 128)}
		r[1].Content, r[1].Reasoning, r[1].Expect = content, reasoning, expect
		return r
	}
	for _, tc := range []struct {
		name, content, reasoning, expect, want string
	}{
		{"garbage", strings.Repeat("!", 128), "", "", `stream 2 is not a completed reply: it is one character repeated: "` + strings.Repeat("!", 60) + `"...`},
		{"reasoning only", "", strings.Repeat("hmm ", 32), "", "stream 2 is not a completed reply: it has no content, only reasoning (128 characters): is thinking off?"},
		{"expect missed", "Server busy, try again later. Server busy, try again later.", "", "Paris", `stream 2 is not a completed reply: it does not match "Paris": "Server busy, try again later. Server busy, try again later."`},
		{"expect met", "The capital of France is Paris, a city on the Seine.", "", "Paris", ""},
		{"words", "The capital of France is Paris, a city on the Seine.", "", "", ""},
	} {
		if rd := RoundOf(1, said(tc.content, tc.reasoning, tc.expect), s); rd.Failed != tc.want {
			t.Errorf("%s: failed %q, want %q", tc.name, rd.Failed, tc.want)
		}
	}
	// Too few tokens and garbage: the count is said, and what it said.
	r := said("!!", "", "")
	r[1] = stream(2, 0, 200, 100, 2)
	r[1].Content = "!!"
	if rd := RoundOf(1, r, s); rd.Failed != `stream 2 is not a completed reply: 2 tokens, under half the 128 of the shortest single reply; it said "!!"` {
		t.Errorf("few tokens of garbage: failed %q", rd.Failed)
	}
	// Expected serial or batch, the row fails naming the stream.
	for _, l := range []LoadLimits{{Streams: 2, Expect: LoadSerial, Efficiency: 0.65, FirstTokenMS: 1200, MaxRounds: 11}, {Streams: 2, Expect: LoadBatch, Efficiency: 0.65, FirstTokenMS: 1200, MaxRounds: 11}} {
		g := said(strings.Repeat("!", 128), "", "")
		if a := loadRow(t, loadInput(l, g, g, g)); a.OK || !strings.Contains(a.Detail, "round 1: stream 2 is not a completed reply: it is one character repeated") {
			t.Errorf("%s expected: ok %v: %s", l.Expect, a.OK, a.Detail)
		}
	}
}

// The fewest tokens a single reply decoded, of those that did not fail.
func TestSingleOfTokens(t *testing.T) {
	none := stream(3, 0, 200, 100, 0)
	none.CompletionTokens = nil
	rs := []measure.Reply{stream(1, 0, 200, 100, 128), stream(2, 0, 200, 100, 100), none, stream(4, 0, 200, 100, 120), {N: 5, Error: "boom"}}
	if s := SingleOf(rs, RateServer); s.Tokens != 100 || s.Source != RateServer {
		t.Errorf("single %+v: want 100 tokens, server", s)
	}
}

// Times read back that cannot be a stream's fail the round, saying so.
func TestRoundBadTimes(t *testing.T) {
	s := Single{Rate: 100, Source: RateServer}
	for _, tc := range []struct {
		name string
		set  func(r *measure.Reply)
		want string // "" for none
	}{
		{"first at 0", func(r *measure.Reply) { r.FirstMS = ptr(0.0) }, ""},
		{"last as first", func(r *measure.Reply) { r.LastMS = ptr(200.0); r.Arrivals = r.Arrivals[:1] }, ""},
		{"first negative", func(r *measure.Reply) { r.FirstMS = ptr(-1.0) }, "first token -1 ms, last 1470 ms, end 1471 ms"},
		{"first NaN", func(r *measure.Reply) { r.FirstMS = ptr(math.NaN()) }, "first token NaN ms"},
		{"last NaN", func(r *measure.Reply) { r.LastMS = ptr(math.NaN()) }, "last NaN ms"},
		{"last infinite", func(r *measure.Reply) { r.LastMS = ptr(math.Inf(1)) }, "last +Inf ms"},
		{"last before first", func(r *measure.Reply) { r.LastMS = ptr(199.0) }, "first token 200 ms, last 199 ms"},
		{"end negative", func(r *measure.Reply) { r.EndMS = -5 }, "end -5 ms"},
		{"end infinite", func(r *measure.Reply) { r.EndMS = math.Inf(-1) }, "end -Inf ms"},
		{"arrival NaN", func(r *measure.Reply) { r.Arrivals[3].MS = math.NaN() }, "1 chunks arrived at NaN ms"},
		{"arrival negative", func(r *measure.Reply) { r.Arrivals[3].MS = -1 }, "1 chunks arrived at -1 ms"},
		{"arrival infinite", func(r *measure.Reply) { r.Arrivals[3].MS = math.Inf(1) }, "1 chunks arrived at +Inf ms"},
		{"chunks negative", func(r *measure.Reply) { r.Arrivals[3].Chunks = -2 }, "-2 chunks arrived at 230 ms"},
		{"chunks none", func(r *measure.Reply) { r.Arrivals[3].Chunks = 0 }, ""},
		// Content with a first token and a last, carried by no chunk: its
		// tokens a chunk would be infinite and η NaN.
		{"no chunk", func(r *measure.Reply) { r.Chunks = 0; noChunks(r, 0) }, "a first token at 200 ms, and no chunk arrived"},
		{"one chunk", func(r *measure.Reply) { r.Chunks = 1; noChunks(r, 1) }, ""},
		{"chunks counted, none in the arrivals", func(r *measure.Reply) { noChunks(r, 0) }, ""},
		{"chunks in the arrivals, none counted", func(r *measure.Reply) { r.Chunks = 0 }, ""},
		{"chunks in the arrivals but the last, none counted", func(r *measure.Reply) { r.Chunks = 0; r.Arrivals[len(r.Arrivals)-1].Chunks = 0 }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := []measure.Reply{stream(1, 0, 200, 100, 128), stream(2, 0, 200, 100, 128)}
			tc.set(&rs[1])
			rd := RoundOf(1, rs, s)
			want := ""
			if tc.want != "" {
				want = "stream 2: its times cannot be a stream's: "
			}
			if !strings.HasPrefix(rd.Failed, want) || !strings.Contains(rd.Failed, tc.want) || (tc.want == "") != (rd.Failed == "") {
				t.Errorf("failed %q, want %q", rd.Failed, want+tc.want)
			}
		})
	}
}

// A stream that fails its round does not end the round's record: every
// stream's rate and first token are kept after it.
func TestRoundRecordsEveryStream(t *testing.T) {
	s := Single{Rate: 100, Tokens: 128, Source: RateServer}
	for _, tc := range []struct {
		name string
		set  func(r *measure.Reply)
		want string
	}{
		{"no content arrived", func(r *measure.Reply) { r.LastMS = nil }, "stream 1: no content arrived"},
		{"times no stream's", func(r *measure.Reply) { r.LastMS = ptr(199.0) }, "stream 1: its times cannot be a stream's"},
		{"not a completed reply", func(r *measure.Reply) { r.CompletionTokens = ptr(1); r.Server = nil }, "stream 1 is not a completed reply"},
	} {
		rs := []measure.Reply{stream(1, 0, 200, 100, 128), stream(2, 0, 500, 100, 128)}
		tc.set(&rs[0])
		rd := RoundOf(1, rs, s)
		if !strings.HasPrefix(rd.Failed, tc.want) || len(rd.Rates) != 2 || rd.WorstFirstMS != 500 {
			t.Errorf("%s: failed %q, %d rates, worst first token %v ms; want %q..., 2 rates, 500 ms", tc.name, rd.Failed, len(rd.Rates), rd.WorstFirstMS, tc.want)
		}
	}
}

// noChunks leaves the first of r's arrivals first chunks and the others
// none.
func noChunks(r *measure.Reply, first int) {
	for i := range r.Arrivals {
		r.Arrivals[i].Chunks = 0
	}
	r.Arrivals[0].Chunks = first
}

// The least floor of two decimals above 1/N, which a run takes.
func TestLeastFloor(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want float64
	}{{2, 0.51}, {3, 0.34}, {4, 0.26}, {20, 0.06}, {50, 0.03}, {64, 0.02}} {
		got := LeastFloor(tc.n)
		if !near(got, tc.want, 1e-12) || got <= Sliced(tc.n) {
			t.Errorf("LeastFloor(%d) = %v, want %v, above 1/%d", tc.n, got, tc.want, tc.n)
		}
	}
}

// η = 1/N and the default floor: at N = 2 it sits above 1/N by
// SliceMargin, elsewhere at 0.5.
func TestDefaultEfficiency(t *testing.T) {
	for _, tc := range []struct {
		n             int
		sliced, floor float64
	}{{2, 0.5, 0.65}, {3, 1.0 / 3, 0.5}, {4, 0.25, 0.5}, {64, 1.0 / 64, 0.5}} {
		if got := Sliced(tc.n); got != tc.sliced {
			t.Errorf("Sliced(%d) = %v, want %v", tc.n, got, tc.sliced)
		}
		if got := DefaultEfficiency(tc.n); !near(got, tc.floor, 1e-12) {
			t.Errorf("DefaultEfficiency(%d) = %v, want %v", tc.n, got, tc.floor)
		}
	}
}

// timeSliced is a round of n streams started together on a serve that
// time-slices one device between the streams in flight: each stream's
// tokens come n times apart.
func timeSliced(n int, rate float64, tokens int) []measure.Reply {
	var rs []measure.Reply
	for i := range n {
		rs = append(rs, stream(i+1, 0, 200, rate/float64(n), tokens))
	}
	return rs
}

// A time-slicing round measures η = 1/N: at N = 2 the old default floor,
// 0.5, is exactly its η; the default now sits above it.
func TestRoundTimeSliced(t *testing.T) {
	for _, n := range []int{2, 4} {
		rd := RoundOf(1, timeSliced(n, 100, 128), Single{Rate: 100})
		if rd.Failed != "" || !near(rd.Efficiency, Sliced(n), 1e-9) || !near(rd.Concurrency, float64(n), 1e-9) {
			t.Errorf("N = %d: round %+v, want η %v and %d decoding at once", n, rd, Sliced(n), n)
		}
	}
	l := LoadLimits{Streams: 2, Expect: LoadBatch, Efficiency: DefaultEfficiency(2), FirstTokenMS: 1200, MaxRounds: 11}
	r := timeSliced(2, 100, 128)
	if a := loadRow(t, loadInput(l, r, r, r)); a.OK || !strings.HasPrefix(a.Detail, "2 streams asked, 2.0 decoding at once: together they decode at η 0.50 of 2 single streams, below the floor 0.65") {
		t.Errorf("a time-slicing serve at the default floor: ok %v: %s", a.OK, a.Detail)
	}
}
