// Package judge turns the evidence of one run into its assertions and a
// verdict: route, rate, first-token and content, and with their settings
// baseline, agreement and load.
//
// It is pure: evidence and limits in, assertions out. It does no I/O, reads no
// clock and touches no process state, so what it says can be checked by
// reading it and by its table of tests.
package judge

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/agree"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/quote"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// Assertion names, in report order.
const (
	Route      = "route"
	Rate       = "rate"
	FirstToken = "first-token"
	Content    = "content"
	Regression = "baseline"  // only with a baseline
	Agreement  = "agreement" // only with a reference
)

// Rate sources.
const (
	RateClient = "client" // decode rate measured from the stream
	RateServer = "server" // the serve's own figures, on the stream's definition (measure.Reply.ServerEstimate)
)

// Limits are what the evidence is judged against.
type Limits struct {
	Floor        float64 `json:"floor"`          // median decode rate, tok/s, at least
	FirstTokenMS float64 `json:"first_token_ms"` // median first token, ms, at most
	RateSource   string  `json:"rate_source"`    // RateClient or RateServer
	// MaxRegression is how far the median rate may fall, or the median first
	// token rise, against a baseline: 0.10 is 10%; 0 allows no change. Nil
	// in a run made before it was kept: Regression gives the default.
	MaxRegression *float64 `json:"max_regression,omitempty"`
	// FloorWhy says where the floor comes from when it was not typed: the
	// default's reason, or the baseline it was derived from. A failed rate
	// says it, and so does a derived floor always.
	FloorWhy     string `json:"floor_why,omitempty"`
	FloorDerived bool   `json:"floor_derived,omitempty"`
	// Agreement bounds the agreement with a reference; nil (a run made
	// before the agreement assertion) is agree.Default, and bounds of 0 are
	// exact.
	Agreement *agree.Bounds `json:"agreement,omitempty"`
	// Lead is the lead by which a sign count decides (Rule); 0 in a run
	// made before the sequential rule, whose details then give no signs.
	Lead int `json:"lead,omitempty"`
	// MaxJoulesPerToken makes the energy row an assertion: the judged
	// window's gross joules per decoded token (idle included) at most
	// this. 0: the row is for people only.
	MaxJoulesPerToken float64 `json:"max_joules_per_token,omitempty"`
}

// DefaultMaxRegression is the change against a baseline allowed by default,
// 10%.
const DefaultMaxRegression = 0.10

// Regression is l.MaxRegression, or DefaultMaxRegression when it was never
// set.
func (l Limits) Regression() float64 {
	if l.MaxRegression == nil {
		return DefaultMaxRegression
	}
	return *l.MaxRegression
}

// RateOf is the figure the rate assertion judges for one reply: its decode
// rate from the stream, or the serve's own with RateServer. When there is
// none, why says so.
func (l Limits) RateOf(r *measure.Reply) (rate float64, why string) {
	if l.RateSource == RateServer {
		return r.ServerRate()
	}
	return r.DecodeRate()
}

// Baseline is an earlier run's medians, to compare against.
type Baseline struct {
	File         string  `json:"file"`
	Rate         float64 `json:"rate"`           // median decode rate, tok/s
	FirstTokenMS float64 `json:"first_token_ms"` // median first token, ms
	// Replies is how many replies the medians are of (the fewer of its
	// rates and first tokens); 0 when they are not known (a result.json
	// written before they were kept), and the medians are then the bounds.
	Replies int `json:"replies,omitempty"`
	// RateLo and FirstTokenHiMS are the conservative ends of the medians'
	// order-statistic intervals at Coverage, the least of the two's
	// (BaselineLevel or more when Replies is 3 or more): the rate's lower
	// end, the first token's upper one.
	RateLo         float64 `json:"rate_lo,omitempty"`
	FirstTokenHiMS float64 `json:"first_token_hi_ms,omitempty"`
	Coverage       float64 `json:"coverage,omitempty"`
}

// Reference is a trusted route's replies to the same prompts (the CPU build,
// the per-op forward, the last release), to compare this run's with.
type Reference struct {
	File    string          `json:"file"` // where it came from: a path, or the run of github:PATTERN
	Replies []measure.Reply `json:"-"`
	// Missing says why no usable reference was found where one was asked
	// for: the agreement assertion fails, saying so.
	Missing string `json:"missing,omitempty"`
}

// Input is everything the judge looks at.
type Input struct {
	Route   route.Evidence
	Replies []measure.Reply // judged replies only; warm-ups are left out by the caller
	Limits  Limits
	// NoReplies says why there are no replies (never ready, exit status, ...),
	// for the report when Replies is empty.
	NoReplies string
	Baseline  *Baseline // adds the baseline assertion when set
	// Reference adds the agreement assertion when set: a trusted route's
	// replies to the same prompts.
	Reference *Reference
	// Release is how the device was given back: the release assertion is
	// added, failed, when it was not given back clean.
	Release Release
	// Witness is what the serve's processes showed while it decoded, and
	// its own account; nil (--witness off, a run made before them): the
	// route rests on the log alone.
	Witness *route.Witness
	// Energy is what the runner's energy sensor said of the judged window;
	// nil with --energy off.
	Energy *Energy
	// Load adds the load assertion when set: --load N's rounds of N
	// streams at once, or why none was asked.
	Load *LoadRun
}

// Assertion is one line of the verdict.
type Assertion struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// Info marks a row that is there for people and judges nothing (the
	// energy figures without a ceiling): it is always OK.
	Info bool `json:"info,omitempty"`
}

// Verdict is the judgement of one run.
type Verdict struct {
	Pass       bool        `json:"pass"`
	Assertions []Assertion `json:"assertions"`
}

// Judge judges the evidence against the limits.
func Judge(in Input) Verdict {
	var as []Assertion
	if len(in.Replies) == 0 {
		why := in.NoReplies
		if why == "" {
			why = "the probe recorded none"
		}
		names := []string{Route, Rate, FirstToken, Content}
		if in.Baseline != nil {
			names = append(names, Regression)
		}
		if in.Reference != nil {
			names = append(names, Agreement)
		}
		if in.Load != nil {
			names = append(names, Load)
		}
		if in.Limits.MaxJoulesPerToken > 0 {
			names = append(names, EnergyName)
		}
		for _, name := range names {
			as = append(as, Assertion{Name: name, Detail: "no replies: " + why})
		}
	} else {
		as = []Assertion{
			judgeRoute(in.Route, in.Witness),
			judgeRate(in.Replies, in.Limits),
			judgeFirstToken(in.Replies, in.Limits),
			judgeContent(in.Replies),
		}
		if in.Baseline != nil {
			as = append(as, judgeBaseline(in.Replies, in.Limits, *in.Baseline))
		}
		if in.Reference != nil {
			as = append(as, judgeAgreement(in))
		}
		if in.Load != nil {
			as = append(as, judgeLoad(in))
		}
		if a, ok := judgeEnergy(in.Energy, in.Limits); ok {
			as = append(as, a)
		}
	}
	if a, ok := judgeRelease(in.Release); ok {
		as = append(as, a)
	}
	pass := true
	for _, a := range as {
		pass = pass && a.OK
	}
	return Verdict{Pass: pass, Assertions: as}
}

// judgeRoute is the route assertion: the log's evidence with the witnesses
// weighed (package route).
func judgeRoute(ev route.Evidence, w *route.Witness) Assertion {
	v := route.JudgeWitnessed(ev, w)
	return Assertion{Name: Route, OK: v.OK, Detail: v.Detail}
}

// Disagree is how far the stream's rate and the serve's own may differ, as a
// fraction of the serve's, before the report warns that the measurement path
// is not clean (a proxy, a buffer, the transport).
const Disagree = 0.05

func judgeRate(replies []measure.Reply, l Limits) Assertion {
	a := Assertion{Name: Rate}
	var rates []float64
	var each, other, missing, regressed, disagree, chunked []string
	approximate, others := 0, 0
	for i := range replies {
		r := &replies[i]
		v, why := l.RateOf(r)
		// The other side's figure, beside it: the serve's own when the
		// stream is judged, the stream's when the serve's is.
		o, owhy := r.ServerRate()
		if l.RateSource == RateServer {
			o, owhy = r.DecodeRate()
		}
		other = append(other, "-")
		if owhy == "" {
			other[i] = fmt.Sprintf("%.1f", o)
			others++
		}
		if d, ok := r.Disagreement(); ok && d > Disagree {
			disagree = append(disagree, fmt.Sprintf("%d (%.0f%%)", r.N, d*100))
		}
		if why != "" {
			// Its own reason only: a reply that failed sent no usage either.
			each = append(each, "-")
			missing = append(missing, fmt.Sprintf("reply %d has no rate (%s)", r.N, why))
			continue
		}
		if _, src := r.Tokens(); src == measure.SourceChunks && l.RateSource != RateServer {
			approximate++
		}
		if c := r.Count(); c.Chunked != "" {
			chunked = append(chunked, fmt.Sprintf("reply %d, %s", r.N, c.Chunked))
		}
		if l.RateSource != RateServer && r.Estimate().Method == measure.MethodRegression {
			regressed = append(regressed, strconv.Itoa(r.N))
		}
		rates = append(rates, v)
		each = append(each, fmt.Sprintf("%.1f", v))
	}
	source := ""
	if l.RateSource == RateServer {
		source = ", the serve's own figures"
	}
	side := ""
	if others > 0 {
		side = "; the serve's own: "
		if l.RateSource == RateServer {
			side = "; the stream's: "
		}
		side += joinEach(other, ", ")
	}
	figures := fmt.Sprintf("(floor %.1f; each: %s%s)", l.Floor, joinEach(each, ", "), side)
	if approximate > 0 {
		figures += fmt.Sprintf("; tokens approximate for %d of %d: counted chunks, the serve sent no usage", approximate, len(rates))
	}
	if len(regressed) > 0 {
		figures += fmt.Sprintf("; chunks came together (reply %s): their rates are the regression over arrivals", joinEach(regressed, ", "))
	}
	if len(chunked) > 0 {
		figures += fmt.Sprintf("; counts of several tokens a chunk believed on their text (%d bytes a token or more): %s", measure.ChunkedTokenBytes, joinEach(chunked, "; "))
	}
	if len(disagree) > 0 {
		figures += fmt.Sprintf("; warning: the stream's rate and the serve's own differ by more than %.0f%% in replies %s: the measurement path is not clean",
			Disagree*100, joinEach(disagree, ", "))
	}
	if len(missing) > 0 {
		a.Detail = joinEach(missing, "; ") + " " + figures
		return a
	}
	m := stats.Median(rates)
	a.OK = m >= l.Floor
	a.Detail = fmt.Sprintf("median %.1f tok/s%s %s", m, source, figures)
	if l.Lead > 0 {
		meets := func(v float64) bool { return v >= l.Floor }
		a.Detail += "; " + stats.CountOf(rates, meets, l.Lead).Text("the floor")
		if d, ok := rateDrift(rates, l.Floor, len(rates)); ok {
			var settled string
			a.OK, settled = settledText(d, rates, meets, l.Lead, replies[0].N)
			a.Detail += "; " + settled
		}
	}
	if l.FloorWhy != "" && (!a.OK || l.FloorDerived) {
		a.Detail += "; the floor: " + l.FloorWhy
	}
	return a
}

func judgeFirstToken(replies []measure.Reply, l Limits) Assertion {
	a := Assertion{Name: FirstToken}
	var ms []float64
	var each, missing []string
	for i := range replies {
		v, ok := replies[i].FirstTokenMS()
		if !ok {
			each = append(each, "-")
			missing = append(missing, fmt.Sprintf("reply %d has no first token", replies[i].N))
			continue
		}
		ms = append(ms, v)
		each = append(each, strconv.FormatFloat(v, 'f', 0, 64))
	}
	figures := fmt.Sprintf("(limit %.0f; each: %s)", l.FirstTokenMS, joinEach(each, ", "))
	if len(missing) > 0 {
		a.Detail = joinEach(missing, "; ") + " " + figures
		return a
	}
	m := stats.Median(ms)
	a.OK = m <= l.FirstTokenMS
	a.Detail = fmt.Sprintf("median %.0f ms %s", m, figures)
	if l.Lead > 0 {
		meets := func(v float64) bool { return v <= l.FirstTokenMS }
		a.Detail += "; " + stats.CountOf(ms, meets, l.Lead).Text("the limit")
		if d, ok := firstTokenDrift(ms, l.FirstTokenMS, len(ms)); ok {
			var settled string
			a.OK, settled = settledText(d, ms, meets, l.Lead, replies[0].N)
			a.Detail += "; " + settled
		}
	}
	return a
}

func judgeContent(replies []measure.Reply) Assertion {
	a := Assertion{Name: Content}
	var bad []string
	for i := range replies {
		if why := contentProblem(&replies[i]); why != "" {
			bad = append(bad, fmt.Sprintf("reply %d %s", replies[i].N, why))
		}
	}
	if len(bad) > 0 {
		a.Detail = fmt.Sprintf("%d of %d replies fail: %s", len(bad), len(replies), joinEach(bad, "; "))
		return a
	}
	a.OK = true
	a.Detail = fmt.Sprintf("%d replies, all with content", len(replies))
	if len(replies) == 1 {
		a.Detail = "1 reply, with content"
	}
	return a
}

func judgeBaseline(replies []measure.Reply, l Limits, b Baseline) Assertion {
	a := Assertion{Name: Regression}
	rates, firstMS, _ := Figures(replies, l)
	if len(rates) == 0 || len(firstMS) == 0 {
		a.Detail = "no rate or first token to compare with the baseline " + b.File
		return a
	}
	if why := b.NotFigures(); why != "" {
		a.Detail = fmt.Sprintf("the baseline %s is no rate and first token to compare with: %s; pass the result.json of a run that measured them", b.File, why)
		return a
	}
	reg := l.Regression()
	rate, ft := stats.Median(rates), stats.Median(firstMS)
	rateChange := (rate - b.Rate) / b.Rate
	ftChange := (ft - b.FirstTokenMS) / b.FirstTokenMS
	change := fmt.Sprintf("rate %.1f tok/s against %.1f (%+.1f%%), first token %.0f ms against %.0f (%+.1f%%)",
		rate, b.Rate, rateChange*100, ft, b.FirstTokenMS, ftChange*100)
	if b.TooFew() {
		a.OK, a.Info = true, true
		a.Detail = fmt.Sprintf("%s; not judged: the baseline's %s cannot bound its median at %.0f%%, and its noise alone would fail a serve that did not change more often than alpha; record the baseline with --replies %d or more (docs/measuring.md)",
			change, repliesText(b.Replies), BaselineLevel*100, BaselineMinReplies)
		return a
	}
	rateOK, ftOK := baselineHeld(rates, firstMS, b, reg)
	var worse []string
	if !rateOK {
		worse = append(worse, "the rate fell")
	}
	if !ftOK {
		worse = append(worse, "the first token rose")
	}
	a.OK = len(worse) == 0
	a.Detail = fmt.Sprintf("%s; allowed %.0f%%", change, reg*100)
	rateOf, ftOf := "the baseline's", "the baseline's"
	if b.Bounded() {
		a.Detail += fmt.Sprintf(" below %.1f tok/s and above %.0f ms, the baseline's median rate and first token at their conservative ends (its %s bound each median at %.0f%%)",
			b.RateEnd(), b.FirstTokenEnd(), repliesText(b.Replies), b.Coverage*100)
		rateOf, ftOf = "its low end", "its high end"
	}
	if l.Lead > 0 {
		s := baselineSigns(rates, firstMS, b, reg, l.Lead)
		a.Detail += fmt.Sprintf("; rate: %s; first token: %s",
			s.Rate.Text(fmt.Sprintf("%.1f tok/s (%s less %.0f%%)", b.RateEnd()*(1-reg), rateOf, reg*100)),
			s.FirstToken.Text(fmt.Sprintf("%.0f ms (%s plus %.0f%%)", b.FirstTokenEnd()*(1+reg), ftOf, reg*100)))
	}
	if wide := b.wider(reg); wide != "" {
		a.Detail += "; the baseline's own replies spread wider than the change allowed: the row passes " + wide + "; record the baseline with more replies (docs/measuring.md)"
	}
	if !a.OK {
		a.Detail = strings.Join(worse, " and ") + " by more than allowed: " + a.Detail
	}
	return a
}

// emptyThink is an empty thinking block at a reply's start, compiled on
// first use: not in the binary's start, which the serve's spawn waits for.
var emptyThink = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*<think>\s*</think>`) })

// contentProblem says what is wrong with a reply's content, or "" when
// nothing is.
func contentProblem(r *measure.Reply) string {
	if r.Error != "" {
		return "is an error: " + quote.Cut(r.Error, errorQuote)
	}
	content := strings.TrimSpace(emptyThink().ReplaceAllString(r.Content, ""))
	if content == "" {
		if strings.TrimSpace(r.Reasoning) != "" {
			return fmt.Sprintf("has no content, only reasoning (%d characters): is thinking off?", utf8.RuneCountInString(r.Reasoning))
		}
		return "has no content"
	}
	if oneRepeated(content) {
		return "is one character repeated: " + quote.Cut(content, contentQuote)
	}
	if r.Expect != "" {
		re, err := regexp.Compile(r.Expect)
		if err != nil {
			return fmt.Sprintf("has an expect pattern that does not compile: %v", err)
		}
		if !re.MatchString(content) {
			return fmt.Sprintf("does not match %s: %s", strconv.Quote(r.Expect), quote.Cut(content, contentQuote))
		}
	}
	return ""
}

// oneRepeated reports whether s, white space aside, is a single character
// written two or more times ("//////", "a a a").
func oneRepeated(s string) bool {
	var first rune
	n := 0
	for _, c := range s {
		if unicode.IsSpace(c) {
			continue
		}
		if n > 0 && c != first {
			return false
		}
		first = c
		n++
	}
	return n >= 2
}

// Bounds for text quoted in details; the text is the serve's and untrusted.
const (
	contentQuote = 60
	errorQuote   = 200
)

// maxEach is how many entries of a list about the replies a detail names
// (each reply's figure, the replies without one, those that fail); the rest
// are counted. A run's replies are read back from its directory, which
// anyone may edit, up to 65,536 of them.
const maxEach = 64

// joinEach joins the first maxEach of xs with sep, and counts the rest:
// "90.0, 88.1, ..., 41143 more".
func joinEach(xs []string, sep string) string {
	if len(xs) <= maxEach {
		return strings.Join(xs, sep)
	}
	return strings.Join(xs[:maxEach], sep) + sep + strconv.Itoa(len(xs)-maxEach) + " more"
}
