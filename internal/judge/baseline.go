package judge

import (
	"fmt"
	"math"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// The baseline row asks whether the median rate fell, or the median first
// token rose, by more than the change allowed (--max-regression). As the
// floor's question, it is one on signs: each reply's rate holds the
// baseline when it is at least the bound, the baseline's median rate
// (RateEnd) less the change allowed (the floor --floor-from-baseline
// derives is such a bound, of the median itself), and each first token
// when it is at most the baseline's median first token (FirstTokenEnd)
// plus it. The median holds the bound when more replies hold it
// than miss it, so the sequential rule counts these signs too, one count
// for the rate and one for the first token, and the gate asks on until they
// decide. A serve whose replies hold the bound three times in four or more
// then fails the row as often as the rule errs at the zone's edge (its
// count decides against it with a chance of at most 1/27 by Ville's
// inequality, 4.0% with the median at the cap: the README's table), not as
// often as the median of the few replies the floor's count stopped at fell
// below the bound. The rule removes this run's noise; the baseline's, the
// bounds remove: they are the conservative ends of the baseline medians'
// order-statistic intervals (BaselineLevel), not the medians
// (docs/measuring.md's table, TestBaselineTable).

// BaselineLevel is the coverage of the baseline medians' intervals whose
// conservative ends the row holds this run against: the coverage of the
// range of 3 replies, a default run's. A baseline's median is as noisy as
// this run's: at 10% spread a reply, the median of 3 is above the serve's
// true median half the time, by 7%, and a serve that did not change failed
// the row against it 8.6% of the time. Against the interval's end, which is
// above the true median with a chance of at most (1 − BaselineLevel)/2, it
// fails at most alpha of the time at any spread the rule tells apart
// (docs/measuring.md's table, TestBaselineTable), at the cost of catching
// smaller drops less often.
const BaselineLevel = 0.75

// BaselineMinReplies is the fewest replies whose medians' intervals reach
// BaselineLevel: 1 − 2·½³ = 0.75. A baseline of fewer is not judged.
const BaselineMinReplies = 3

// BaselineOf is the baseline that file's figures give: its replies' rates
// and first tokens, their medians and the medians' intervals at
// BaselineLevel.
func BaselineOf(file string, rates, firstMS []float64) Baseline {
	b := Baseline{File: file, Rate: stats.Median(rates), FirstTokenMS: stats.Median(firstMS)}
	ri, rok := stats.MedianIntervalAt(rates, BaselineLevel)
	fi, fok := stats.MedianIntervalAt(firstMS, BaselineLevel)
	if rok && fok {
		b.Replies = min(ri.N, fi.N)
		b.RateLo, b.FirstTokenHiMS, b.Coverage = ri.Lo, fi.Hi, min(ri.Coverage, fi.Coverage)
	}
	return b
}

// NotFigures says why b's medians are no rate and first token, or "" when
// they are: a baseline is read from a file anyone with the artifact can
// edit, and a rate of 0 or less, or a first token below 0, would hold
// every reply.
func (b Baseline) NotFigures() string {
	if !(b.Rate > 0) || !(b.FirstTokenMS >= 0) {
		return fmt.Sprintf("its median rate %.1f tok/s and first token %.0f ms", b.Rate, b.FirstTokenMS)
	}
	return ""
}

// Bounded reports whether b's intervals bound its medians at BaselineLevel
// and their ends are the conservative side of them; a result.json is
// untrusted, and ends that are not are not used.
func (b Baseline) Bounded() bool {
	return b.Coverage >= BaselineLevel && b.RateLo > 0 && b.RateLo <= b.Rate &&
		b.FirstTokenHiMS >= b.FirstTokenMS && b.FirstTokenHiMS <= math.MaxFloat64
}

// TooFew reports whether b's replies are known and too few to bound its
// medians at BaselineLevel: the row then shows the change and judges
// nothing, as the baseline's noise alone would fail a serve that did not
// change more than alpha of the time.
func (b Baseline) TooFew() bool {
	return b.Replies > 0 && b.Coverage < BaselineLevel
}

// RateEnd is the rate this run is held against, less the change allowed:
// the lower end of the baseline's median rate's interval when it bounds
// it, the median otherwise.
func (b Baseline) RateEnd() float64 {
	if b.Bounded() {
		return b.RateLo
	}
	return b.Rate
}

// FirstTokenEnd is the first token this run is held against, plus the
// change allowed: the upper end of the baseline's median first token's
// interval when it bounds it, the median otherwise.
func (b Baseline) FirstTokenEnd() float64 {
	if b.Bounded() {
		return b.FirstTokenHiMS
	}
	return b.FirstTokenMS
}

// wider says how far from b's medians the row lets a change pass where
// b's ends lie farther from them than the change allowed, reg, or "" where
// neither does: the row then tells apart only changes larger than the
// baseline's own spread.
func (b Baseline) wider(reg float64) string {
	var far []string
	if d := (b.Rate - b.RateEnd()) / b.Rate; d > reg {
		far = append(far, fmt.Sprintf("a rate %.0f%% below its median", (1-b.RateEnd()*(1-reg)/b.Rate)*100))
	}
	if d := (b.FirstTokenEnd() - b.FirstTokenMS) / b.FirstTokenMS; d > reg {
		far = append(far, fmt.Sprintf("a first token %.0f%% above its median", (b.FirstTokenEnd()*(1+reg)/b.FirstTokenMS-1)*100))
	}
	return strings.Join(far, ", ")
}

// HoldsRate reports whether a rate v holds the baseline at the change
// allowed, reg: it is below RateEnd by at most reg of it. A reply's rate is
// counted so, and the replies' median judged so.
func (b Baseline) HoldsRate(v, reg float64) bool {
	end := b.RateEnd()
	return (v-end)/end >= -reg
}

// HoldsFirstToken reports whether a first token v holds the baseline at the
// change allowed, reg: it is above FirstTokenEnd by at most reg of it.
func (b Baseline) HoldsFirstToken(v, reg float64) bool {
	end := b.FirstTokenEnd()
	return (v-end)/end <= reg
}

// BaselineSigns are the replies' counts against a baseline's bounds: the
// rates that hold it and those that fell further, the first tokens that
// hold it and those that rose further.
type BaselineSigns struct {
	Rate       stats.Count `json:"rate"`
	FirstToken stats.Count `json:"first_token"`
}

// BaselineSignsOf counts the replies' signs against b at lead, at the
// change l allows. complete is false when a reply has no rate or no first
// token.
func BaselineSignsOf(replies []measure.Reply, l Limits, b Baseline, lead int) (s BaselineSigns, complete bool) {
	rates, firstMS, complete := Figures(replies, l)
	return baselineSigns(rates, firstMS, b, l.Regression(), lead), complete
}

func baselineSigns(rates, firstMS []float64, b Baseline, reg float64, lead int) BaselineSigns {
	return BaselineSigns{
		Rate:       stats.CountOf(rates, func(v float64) bool { return b.HoldsRate(v, reg) }, lead),
		FirstToken: stats.CountOf(firstMS, func(v float64) bool { return b.HoldsFirstToken(v, reg) }, lead),
	}
}

// baselineHeld says whether the medians of rates and firstMS hold b at the
// change allowed, reg.
func baselineHeld(rates, firstMS []float64, b Baseline, reg float64) (rate, firstToken bool) {
	return b.HoldsRate(stats.Median(rates), reg), b.HoldsFirstToken(stats.Median(firstMS), reg)
}

// repliesText is "1 reply" or "n replies".
func repliesText(n int) string {
	if n == 1 {
		return "1 reply"
	}
	return fmt.Sprintf("%d replies", n)
}
