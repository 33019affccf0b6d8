package judge

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/quote"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// Load is the assertion of --load N: rounds of N streams at once, judged on
// what the serve was built for.
const Load = "load"

// What a serve under load is built to do (--load-expect).
const (
	// LoadBatch: the serve decodes the N streams together, each round a
	// sign against the efficiency floor and the first-token limit.
	LoadBatch = "batch"
	// LoadSerial: the serve takes one request at a time, first in first
	// out (OVMS on the NPU, FastFlowLM): every request completes, and the
	// worst first token stays within the queue's bound.
	LoadSerial = "serial"
)

// MinWindow is the shortest window in which all N streams decoded, as a
// fraction of the median stream's decode span, that the aggregate rate is
// read over; shorter (the streams' lengths or starts differ too much), the
// round's tokens are spread over its whole decode span instead, which can
// only understate the rate, and the figures say so.
const MinWindow = 0.5

// FIFOMargin is the margin on the first-in-first-out bound of a serial
// serve's worst first token: (N - 1) single replies and --first-token-ms,
// and half that again (a serve's own pause between requests, the noise of
// a shared machine).
const FIFOMargin = 0.5

// OneAtATime is the achieved concurrency below which a round's streams are
// said to have run one at a time.
const OneAtATime = 1.5

// MaxStreams is the most streams a run asks at once (--load).
const MaxStreams = 64

// MinStreamTokens is the least a stream under load decodes, as a fraction of
// the shortest single reply: a stream that decoded less (a refusal in band,
// "Server busy" with 200 OK and finish_reason "stop") is not a completed
// request.
const MinStreamTokens = 0.5

// SliceMargin is how far above 1/N the default efficiency floor sits: a
// serve that time-slices one device evenly between the N streams in flight
// decodes them at η = 1/N, and a round's η varies by about 10% (one
// standard deviation), so a floor of (1 + SliceMargin)/N leaves such a serve
// three deviations below it (docs/measuring.md, TestLoadFloorTable).
const SliceMargin = 0.3

// Sliced is η of a serve that time-slices one device evenly between n
// streams: 1/n. A floor at or below it cannot tell time-slicing from
// batching.
func Sliced(n int) float64 { return 1 / float64(n) }

// LeastFloor is the least efficiency floor of two decimals above 1/n, the
// least a run takes for n streams (0.51 at n = 2, 0.34 at 3).
func LeastFloor(n int) float64 { return math.Floor(Sliced(n)*100+1) / 100 }

// DefaultEfficiency is the efficiency floor for n streams when
// --load-efficiency is left out: 0.5, or (1 + SliceMargin)/n where that is
// higher (n = 2: 0.65).
func DefaultEfficiency(n int) float64 { return max(0.5, (1+SliceMargin)*Sliced(n)) }

// LoadLimits are the load assertion's settings.
type LoadLimits struct {
	Streams int    `json:"streams"` // --load: N
	Expect  string `json:"expect"`  // LoadBatch or LoadSerial
	// Efficiency is the least η = aggregate / (N x the single-stream
	// median) a batching serve's round meets (--load-efficiency).
	Efficiency float64 `json:"efficiency"`
	// FirstTokenMS is the most the worst first token of a batching serve's
	// round may take (--load-first-token-ms).
	FirstTokenMS float64 `json:"first_token_ms"`
	MaxRounds    int     `json:"max_rounds"` // --load-max-rounds
}

// LoadRun is the load stage's evidence: its rounds, each the N replies of
// streams started together, or why no round was asked.
type LoadRun struct {
	Limits  LoadLimits        `json:"limits"`
	Rounds  [][]measure.Reply `json:"rounds,omitempty"`
	Skipped string            `json:"skipped,omitempty"`
	// Exit says how the serve ended when it died under load.
	Exit string `json:"exit,omitempty"`
}

// Round is what one round of N streams shows, from the chunk times the probe
// recorded: never the sum of the streams' rates.
type Round struct {
	N int `json:"n"` // 1-based
	// Aggregate is the tokens decoded in the window where all N streams
	// were decoding, over its length (wall clock), tok/s; with
	// Conservative, the tokens after each stream's first over the round's
	// whole decode span.
	Aggregate    float64 `json:"aggregate"`
	WindowMS     float64 `json:"window_ms"` // where all N decoded; 0 when none
	SpanMS       float64 `json:"span_ms"`   // first stream's first token to the last one's last
	Conservative bool    `json:"conservative,omitempty"`
	// Concurrency is the streams' decode time summed over the span: about
	// N when the serve batches, about 1 when it serialises.
	Concurrency float64 `json:"concurrency"`
	// Efficiency is η: Aggregate / (N x the run's single-stream median).
	Efficiency float64 `json:"efficiency"`
	// Rates are each stream's own decode rate, tok/s (0: none).
	Rates        []float64 `json:"rates"`
	FirstMS      []float64 `json:"first_ms"`
	WorstFirstMS float64   `json:"worst_first_ms"`
	// GapMS is the median time from one stream's last token to the next
	// stream's first, ordered by first token, over the streams that did not
	// overlap: a serialising serve's pause and the next prefill.
	GapMS float64 `json:"gap_ms,omitempty"`
	Gaps  int     `json:"gaps,omitempty"`
	// Failed says which stream failed and the serve's words, quoted.
	Failed string `json:"failed,omitempty"`
}

// Single are the run's single-stream figures a round is judged against.
type Single struct {
	Rate    float64 // median decode rate from the stream, tok/s; 0: none
	FirstMS float64 // median first token, ms
	ReplyMS float64 // median whole reply, ms
	// Tokens is the fewest tokens a single reply that did not fail decoded,
	// of those that decoded any (0: none did); a stream under load decodes
	// MinStreamTokens of it at least.
	Tokens int
	// Source is the rate source the run judges (RateClient or
	// RateServer): a stream under load has its own rate the same way.
	Source string
}

// SingleOf are the single-stream medians of replies, whose rates the run
// judges from source.
func SingleOf(replies []measure.Reply, source string) Single {
	var rates, first, whole []float64
	tokens := 0
	for i := range replies {
		r := &replies[i]
		if v, why := r.DecodeRate(); why == "" {
			rates = append(rates, v)
		}
		if v, ok := r.FirstTokenMS(); ok {
			first = append(first, v)
		}
		if r.Error == "" {
			whole = append(whole, r.EndMS)
			if n, _ := r.Tokens(); n > 0 {
				tokens = fewest(tokens, n)
			}
		}
	}
	return Single{Rate: stats.Median(rates), FirstMS: stats.Median(first), ReplyMS: stats.Median(whole), Tokens: tokens, Source: source}
}

// incomplete says why a stream under load that arrived is not a completed
// request, or "": it decodes what a single reply does, at least
// MinStreamTokens of the shortest single reply's tokens, and has a decode
// rate of its own, had as the run's single replies have theirs, and its
// content passes what the content assertion asks of theirs (some, not one
// character repeated, the prompt's expect pattern matched).
func incomplete(r *measure.Reply, s Single) string {
	var why []string
	if n, _ := r.Tokens(); float64(n) < MinStreamTokens*float64(s.Tokens) {
		why = append(why, fmt.Sprintf("%s, under half the %d of the shortest single reply", tokenCount(n), s.Tokens))
	}
	if _, no := (Limits{RateSource: s.Source}).RateOf(r); no != "" {
		// A stream the gate read in one burst (a loaded runner reads
		// late) decoded all the same where the serve's own figures say
		// so: only a stream with neither has no rate of its own (with
		// RateServer the two are one).
		if _, none := r.ServerRate(); none != "" {
			why = append(why, fmt.Sprintf("no decode rate of its own (%s)", no))
		}
	}
	if len(why) == 0 {
		if p := contentProblem(r); p != "" {
			return "is not a completed reply: it " + p
		}
		return ""
	}
	said := r.Content
	if said == "" {
		said = r.Reasoning
	}
	return fmt.Sprintf("is not a completed reply: %s; it said %s", strings.Join(why, ", and "), quote.Cut(said, contentQuote))
}

// fewest is the fewer of the tokens so far (0: none yet) and n.
func fewest(so, n int) int {
	if so == 0 {
		return n
	}
	return min(so, n)
}

// tokenCount is n tokens in words.
func tokenCount(n int) string {
	if n == 1 {
		return "1 token"
	}
	return fmt.Sprintf("%d tokens", n)
}

// badTimes says why a reply's times cannot be a stream's, or "": each
// finite and not negative, the last token not before the first, and a
// chunk at least that brought them (counted, or in the arrivals).
func badTimes(r *measure.Reply, first float64) string {
	bad := func(v float64) bool { return !(v >= 0) || math.IsInf(v, 0) }
	last := *r.LastMS
	if bad(first) || bad(last) || bad(r.EndMS) || last < first {
		return fmt.Sprintf("its times cannot be a stream's: first token %v ms, last %v ms, end %v ms", first, last, r.EndMS)
	}
	chunks := 0
	for _, a := range r.Arrivals {
		if bad(a.MS) || a.Chunks < 0 {
			return fmt.Sprintf("its times cannot be a stream's: %d chunks arrived at %v ms", a.Chunks, a.MS)
		}
		chunks += a.Chunks
	}
	if max(chunks, r.Chunks) < 1 {
		return fmt.Sprintf("its times cannot be a stream's: a first token at %v ms, and no chunk arrived", first)
	}
	return ""
}

// RoundOf figures round n's replies, against the run's single-stream
// figures.
func RoundOf(n int, replies []measure.Reply, single Single) Round {
	rd := Round{N: n}
	type stream struct {
		first, last float64 // ms after the round's origin
		tokens      int
		perChunk    float64
		arrivals    []measure.Arrival
		start       float64
	}
	var ss []stream
	if len(replies) == 0 {
		rd.Failed = "no stream was asked"
		return rd
	}
	origin := replies[0].T0
	for i := range replies {
		if replies[i].T0.Before(origin) {
			origin = replies[i].T0
		}
	}
	for i := range replies {
		r := &replies[i]
		v, _ := r.DecodeRate()
		rd.Rates = append(rd.Rates, v)
		f, ok := r.FirstTokenMS()
		if ok {
			rd.FirstMS = append(rd.FirstMS, f)
			rd.WorstFirstMS = max(rd.WorstFirstMS, f)
		}
		if rd.Failed != "" {
			continue
		}
		if r.Error != "" {
			rd.Failed = fmt.Sprintf("stream %d failed: %s", i+1, quote.Cut(r.Error, errorQuote))
			continue
		}
		if !ok || r.LastMS == nil {
			rd.Failed = fmt.Sprintf("stream %d: no content arrived", i+1)
			continue
		}
		if why := badTimes(r, f); why != "" {
			rd.Failed = fmt.Sprintf("stream %d: %s", i+1, why)
			continue
		}
		if why := incomplete(r, single); why != "" {
			rd.Failed = fmt.Sprintf("stream %d %s", i+1, why)
			continue
		}
		start := float64(r.T0.Sub(origin)) / 1e6
		tokens, _ := r.Tokens()
		chunks := 0
		for _, a := range r.Arrivals {
			chunks += a.Chunks
		}
		s := stream{first: start + f, last: start + *r.LastMS, tokens: tokens, arrivals: r.Arrivals, start: start}
		// A reply recorded without arrivals (Chunks counts them still)
		// is taken as clean: a token a chunk, evenly from first to last.
		s.perChunk = float64(tokens) / float64(max(chunks, r.Chunks))
		ss = append(ss, s)
	}
	if rd.Failed != "" {
		return rd
	}
	from, to := ss[0].first, ss[0].last // the window where all decode
	lo, hi := ss[0].first, ss[0].last   // the round's decode span
	var spans []float64
	decoding := 0.0
	for _, s := range ss {
		from, to = max(from, s.first), min(to, s.last)
		lo, hi = min(lo, s.first), max(hi, s.last)
		spans = append(spans, s.last-s.first)
		decoding += s.last - s.first
	}
	rd.SpanMS = hi - lo
	if rd.SpanMS <= 0 {
		rd.Failed = "no stream took any time to decode: each arrived in one burst"
		return rd
	}
	rd.Concurrency = decoding / rd.SpanMS
	rd.WindowMS = max(0, to-from)
	if rd.WindowMS > 0 && rd.WindowMS >= MinWindow*stats.Median(spans) {
		tokens := 0.0
		for _, s := range ss {
			for _, a := range s.arrivals {
				if at := s.start + a.MS; at > from && at <= to {
					tokens += float64(a.Chunks) * s.perChunk
				}
			}
			if len(s.arrivals) == 0 {
				// Evenly spread: the window's share of its decode (a
				// stream in the window decoded for longer than it).
				tokens += float64(s.tokens-1) * (to - from) / (s.last - s.first)
			}
		}
		rd.Aggregate = tokens / (rd.WindowMS / 1000)
	} else {
		rd.Conservative = true
		tokens := 0
		for _, s := range ss {
			tokens += max(0, s.tokens-1)
		}
		rd.Aggregate = float64(tokens) / (rd.SpanMS / 1000)
	}
	if single.Rate > 0 {
		rd.Efficiency = rd.Aggregate / (float64(len(replies)) * single.Rate)
	}
	// The gaps of streams that ran one after another.
	order := slices.Clone(ss)
	slices.SortFunc(order, func(a, b stream) int { return cmp.Compare(a.first, b.first) })
	var gaps []float64
	for k := 1; k < len(order); k++ {
		if g := order[k].first - order[k-1].last; g > 0 {
			gaps = append(gaps, g)
		}
	}
	rd.GapMS, rd.Gaps = stats.Median(gaps), len(gaps)
	return rd
}

// FIFOBound is the most a serial serve's worst first token may take with n
// streams queued: (n - 1) single replies, then the last one's first token,
// and FIFOMargin more.
func FIFOBound(n int, s Single, firstTokenMS float64) float64 {
	return (1 + FIFOMargin) * (float64(n-1)*s.ReplyMS + firstTokenMS)
}

// LoadSigns are the rounds' sign counts: η against the efficiency floor
// (batch only), and the worst first token against its limit (batch) or the
// FIFO bound (serial).
type LoadSigns struct {
	Efficiency *stats.Count `json:"efficiency,omitempty"`
	FirstToken stats.Count  `json:"first_token"`
}

// LoadSignsOf counts the rounds' signs at lead. failed is true when a round
// failed (a stream failed, or none decoded).
func LoadSignsOf(rounds []Round, l LoadLimits, s Single, firstTokenMS float64, lead int) (signs LoadSigns, failed bool) {
	var eta, worst []float64
	for _, rd := range rounds {
		if rd.Failed != "" {
			failed = true
			continue
		}
		eta = append(eta, rd.Efficiency)
		worst = append(worst, rd.WorstFirstMS)
	}
	limit := l.FirstTokenMS
	if l.Expect == LoadSerial {
		limit = FIFOBound(l.Streams, s, firstTokenMS)
	} else {
		c := stats.CountOf(eta, func(v float64) bool { return v >= l.Efficiency }, lead)
		signs.Efficiency = &c
	}
	signs.FirstToken = stats.CountOf(worst, func(v float64) bool { return v <= limit }, lead)
	return signs, failed
}

// LoadStop says whether the load stage stops after these rounds: a round
// failed, every count decided, or --load-max-rounds were asked.
func LoadStop(rounds []Round, l LoadLimits, s Single, firstTokenMS float64, lead int) bool {
	if len(rounds) >= l.MaxRounds {
		return true
	}
	signs, failed := LoadSignsOf(rounds, l, s, firstTokenMS, lead)
	if failed {
		return true
	}
	return signs.FirstToken.Decided && (signs.Efficiency == nil || signs.Efficiency.Decided)
}

// Nonsense says what in the load limits and rounds read back from a run
// cannot be a run's, each problem once; none when all can: 2 to
// MaxStreams streams, batch or serial, an efficiency floor above 0 and at
// most 1, a finite first-token limit above 0, no more rounds than
// --load-max-rounds, each of the streams asked (the first round that is not
// named).
func (lr *LoadRun) Nonsense() []string {
	l := lr.Limits
	var bad []string
	if l.Streams < 2 || l.Streams > MaxStreams {
		bad = append(bad, fmt.Sprintf("%d streams (a run asks 2 to %d)", l.Streams, MaxStreams))
	}
	if l.Expect != LoadBatch && l.Expect != LoadSerial {
		bad = append(bad, fmt.Sprintf("expect %s (batch or serial)", quote.Cut(l.Expect, 20)))
	}
	if !(l.Efficiency > 0 && l.Efficiency <= 1) {
		bad = append(bad, fmt.Sprintf("efficiency floor %v (above 0, at most 1)", l.Efficiency))
	}
	if !(l.FirstTokenMS > 0) || math.IsInf(l.FirstTokenMS, 0) {
		bad = append(bad, fmt.Sprintf("first-token limit %v ms (above 0, finite)", l.FirstTokenMS))
	}
	if len(lr.Rounds) > l.MaxRounds {
		bad = append(bad, fmt.Sprintf("%d rounds, at most %d asked", len(lr.Rounds), l.MaxRounds))
	}
	for i, round := range lr.Rounds {
		if len(round) != l.Streams {
			bad = append(bad, fmt.Sprintf("round %d has %d streams of %d", i+1, len(round), l.Streams))
			break
		}
	}
	return bad
}

// Rounds figures every round of the run.
func (lr *LoadRun) Figures(s Single) []Round {
	var out []Round
	for i, replies := range lr.Rounds {
		out = append(out, RoundOf(i+1, replies, s))
	}
	return out
}

func judgeLoad(in Input) Assertion {
	a := Assertion{Name: Load}
	lr := in.Load
	l := lr.Limits
	if len(lr.Rounds) == 0 {
		why := lr.Skipped
		if why == "" {
			why = "no round was asked"
		}
		a.Detail = "not measured: " + why
		return a
	}
	if bad := lr.Nonsense(); len(bad) > 0 {
		a.Detail = "not judged: the load limits and rounds read back cannot be a run's: " + strings.Join(bad, "; ")
		return a
	}
	if sliced := Sliced(l.Streams); l.Expect == LoadBatch && l.Efficiency <= sliced {
		a.Detail = fmt.Sprintf("not judged: the efficiency floor %v is at or below 1/%d = %.4g, the η of a serve that time-slices one device between %d streams: it cannot tell time-slicing from batching; judge again with --load-efficiency %.2f or more (the default for --load %d is %.2f)",
			l.Efficiency, l.Streams, sliced, l.Streams, LeastFloor(l.Streams), l.Streams, DefaultEfficiency(l.Streams))
		return a
	}
	s := SingleOf(in.Replies, in.Limits.RateSource)
	if s.Rate <= 0 {
		a.Detail = "no single-stream decode rate to compare the rounds with: η cannot be figured"
		return a
	}
	rounds := lr.Figures(s)
	lead := max(in.Limits.Lead, 1)
	signs, _ := LoadSignsOf(rounds, l, s, in.Limits.FirstTokenMS, lead)
	each := eachRound(rounds)
	var failed []string
	var eta, conc, worst []float64
	for _, rd := range rounds {
		if rd.Failed != "" {
			failed = append(failed, fmt.Sprintf("round %d: %s", rd.N, rd.Failed))
			continue
		}
		eta, conc, worst = append(eta, rd.Efficiency), append(conc, rd.Concurrency), append(worst, rd.WorstFirstMS)
	}
	figures := fmt.Sprintf("each: %s; %s", each, p95Text(rounds))
	if lr.Exit != "" {
		failed = append(failed, quote.Cut(lr.Exit, errorQuote))
	}
	if len(failed) > 0 {
		a.Detail = fmt.Sprintf("%d streams asked at once, and a request failed under load: %s (%s)", l.Streams, strings.Join(failed, "; "), figures)
		return a
	}
	mEta, mConc, mWorst := stats.Median(eta), stats.Median(conc), stats.Median(worst)
	if l.Expect == LoadSerial {
		bound := FIFOBound(l.Streams, s, in.Limits.FirstTokenMS)
		a.OK = mWorst <= bound
		verdict := "every request completed"
		if !a.OK {
			verdict = fmt.Sprintf("the queue took longer than first in, first out allows: the worst first token, median %.0f ms over the rounds, is above", mWorst)
		} else {
			verdict += fmt.Sprintf(", the worst first token, median %.0f ms over the rounds, within", mWorst)
		}
		a.Detail = fmt.Sprintf("%d streams asked, %.1f decoding at once (serial expected): %s the first-in-first-out bound %.0f ms ((%d - 1) x a single reply's %.0f ms + --first-token-ms %.0f, +%.0f%%); %s; %s; %s",
			l.Streams, mConc, verdict, bound, l.Streams, s.ReplyMS, in.Limits.FirstTokenMS, FIFOMargin*100,
			pauseText(rounds, s), figures, roundSigns(signs.FirstToken, "the bound"))
		return a
	}
	etaOK, worstOK := mEta >= l.Efficiency, mWorst <= l.FirstTokenMS
	a.OK = etaOK && worstOK
	var what []string
	// if, not switch: each condition is a statement of its own, which
	// mutation testing can reach.
	if !etaOK && mConc < OneAtATime {
		what = append(what, fmt.Sprintf("%d streams asked, %.1f decoding at once: the serve ran them one at a time (η %.2f, floor %.2f)", l.Streams, mConc, mEta, l.Efficiency))
	} else if !etaOK {
		what = append(what, fmt.Sprintf("%d streams asked, %.1f decoding at once: together they decode at η %.2f of %d single streams, below the floor %.2f", l.Streams, mConc, mEta, l.Streams, l.Efficiency))
	} else {
		what = append(what, fmt.Sprintf("%d streams asked, %.1f decoding at once: η %.2f (floor %.2f)", l.Streams, mConc, mEta, l.Efficiency))
	}
	if !worstOK {
		what = append(what, fmt.Sprintf("the worst first token of a round, median %.0f ms, is above --load-first-token-ms %.0f", mWorst, l.FirstTokenMS))
	} else {
		what = append(what, fmt.Sprintf("the worst first token of a round, median %.0f ms (limit %.0f)", mWorst, l.FirstTokenMS))
	}
	a.Detail = fmt.Sprintf("%s; single-stream median %.1f tok/s; %s; %s; first token: %s",
		strings.Join(what, "; "), s.Rate, figures, roundSigns(*signs.Efficiency, "the efficiency floor"), roundSigns(signs.FirstToken, "the limit"))
	return a
}

// roundSigns is a count of rounds as the detail ends.
func roundSigns(c stats.Count, what string) string {
	return strings.Replace(c.Text(what), "too few replies", "too few rounds", 1)
}

// eachRound is the rounds' figures as the detail lists them.
func eachRound(rounds []Round) string {
	var parts []string
	for _, rd := range rounds {
		if rd.Failed != "" {
			parts = append(parts, fmt.Sprintf("round %d failed", rd.N))
			continue
		}
		var rates []string
		for _, v := range rd.Rates {
			rates = append(rates, fmt.Sprintf("%.1f", v))
		}
		agg := fmt.Sprintf("%.1f tok/s", rd.Aggregate)
		if rd.Conservative {
			agg += fmt.Sprintf(" (conservative: all decoded together for %.0f of %.0f ms, too little for a window; the tokens over the whole span)", rd.WindowMS, rd.SpanMS)
		}
		parts = append(parts, fmt.Sprintf("round %d η %.2f, %.1f at once, aggregate %s, per stream %s tok/s, worst first token %.0f ms",
			rd.N, rd.Efficiency, rd.Concurrency, agg, strings.Join(rates, "/"), rd.WorstFirstMS))
	}
	return strings.Join(parts, "; ")
}

// pauseText is a serialising serve's pause between requests, as measured.
func pauseText(rounds []Round, s Single) string {
	var gaps []float64
	n := 0
	for _, rd := range rounds {
		if rd.Failed == "" && rd.Gaps > 0 {
			gaps = append(gaps, rd.GapMS)
			n += rd.Gaps
		}
	}
	if len(gaps) == 0 {
		return "no stream began after another ended: no pause between requests to measure"
	}
	g := stats.Median(gaps)
	return fmt.Sprintf("the serve's pause between requests: median %.0f ms from one stream's last token to the next one's first (%d gaps), %.0f ms beyond a single reply's first token", g, n, math.Max(0, g-s.FirstMS))
}

// p95Text is the 95th percentiles of first token and per-token time over
// every stream of the rounds: descriptive, never judged (a p95 claim needs
// 59 clean requests).
func p95Text(rounds []Round) string {
	var first, perToken []float64
	for _, rd := range rounds {
		first = append(first, rd.FirstMS...)
		for _, v := range rd.Rates {
			if v > 0 {
				perToken = append(perToken, 1000/v)
			}
		}
	}
	pt := "none"
	if len(perToken) > 0 {
		pt = fmt.Sprintf("%.1f ms", stats.P95(perToken))
	}
	return fmt.Sprintf("p95 over %d streams, descriptive, not judged: first token %.0f ms, per-token time %s", len(first), stats.P95(first), pt)
}
