package judge

import (
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// The baseline row asks whether the median rate fell, or the median first
// token rose, by more than the change allowed (--max-regression). As the
// floor's question, it is one on signs: each reply's rate holds the
// baseline when it is at least the bound, the baseline's median rate less
// the change allowed (the floor --floor-from-baseline derives is such a
// bound), and each first token when it is at most the baseline's median
// first token plus it. The median holds the bound when more replies hold it
// than miss it, so the sequential rule counts these signs too, one count
// for the rate and one for the first token, and the gate asks on until they
// decide. A serve whose replies hold the bound three times in four or more
// then fails the row as often as the rule errs at the zone's edge (its
// count decides against it with a chance of at most 1/27 by Ville's
// inequality, 4.0% with the median at the cap: the README's table), not as
// often as the median of the few replies the floor's count stopped at fell
// below the bound. The rule removes this run's noise, not the baseline's:
// a baseline's medians of few replies move the bounds by their own
// (docs/measuring.md's table, TestBaselineTable).

// HoldsRate reports whether a rate v holds the baseline at the change
// allowed, reg: it fell by at most reg against the baseline's median rate.
// A reply's rate is counted so, and the replies' median judged so.
func (b Baseline) HoldsRate(v, reg float64) bool {
	return (v-b.Rate)/b.Rate >= -reg
}

// HoldsFirstToken reports whether a first token v holds the baseline at the
// change allowed, reg: it rose by at most reg against the baseline's median
// first token.
func (b Baseline) HoldsFirstToken(v, reg float64) bool {
	return (v-b.FirstTokenMS)/b.FirstTokenMS <= reg
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
