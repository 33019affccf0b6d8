package judge

import (
	"fmt"
	"math"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
)

// A drift is a trend of the rate (or the first token) toward missing its
// limit that matters: the trend test finds it at stats.TrendAlpha, and its
// Theil-Sen line is past the limit by the reply looked at (the gate looks at
// --max-replies, the judge at the last reply). A serve far from its limits
// may slow a little without a drift: its line stays clear. While the rate or
// the first token drifts, the gate asks on, up to --max-replies; the row
// then judges the replies where the figure settled (stats.Settled), or fails
// naming the drift when they do not decide.
type drift struct {
	// what is "rate" or "first token"; limit names the limit and unit its
	// figures' unit.
	what, limit, unit string
	trend             stats.Trend
	// at is the reply the line was looked at; line its figure there.
	at   int
	line float64
}

// rateDrift is the rates' drift, looked at reply at; ok is false when
// they do not drift.
func rateDrift(rates []float64, floor float64, at int) (d drift, ok bool) {
	t, ok := stats.TrendOf(rates)
	if !ok || !t.Falls() || !(t.At(at) < floor) {
		return drift{}, false
	}
	return drift{what: "rate", limit: "the floor", unit: "tok/s", trend: t, at: at, line: t.At(at)}, true
}

// firstTokenDrift is the first tokens' drift, looked at reply at.
func firstTokenDrift(ms []float64, limit float64, at int) (d drift, ok bool) {
	t, ok := stats.TrendOf(ms)
	if !ok || !t.Rises() || !(t.At(at) > limit) {
		return drift{}, false
	}
	return drift{what: "first token", limit: "the limit", unit: "ms", trend: t, at: at, line: t.At(at)}, true
}

// Text says the drift: its direction and size a reply (Theil-Sen, against
// the median), Kendall's tau with its one-sided p-value against the level,
// and where its line is at the reply looked at.
func (d drift) Text(figures []float64) string {
	dir, p, side := "falls", d.trend.PDown, "below"
	if d.what == "first token" {
		dir, p, side = "rises", d.trend.PUp, "above"
	}
	size := 0.0
	if m := stats.Median(figures); m != 0 {
		size = math.Abs(d.trend.Slope / m * 100)
	}
	pText := fmt.Sprintf("p = %.3f", p)
	if p < 0.001 {
		pText = "p < 0.001"
	}
	return fmt.Sprintf("the %s %s %.1f%%/reply over %d replies (Kendall's tau %.2f, %s, alpha %g), its Theil-Sen line at reply %d %s %s, %s %s",
		d.what, dir, size, d.trend.N, d.trend.Tau, pText, stats.TrendAlpha, d.at, d.figure(d.line), d.unit, side, d.limit)
}

// figure is v as the row gives its figures: a rate to a tenth, a first
// token to the millisecond.
func (d drift) figure(v float64) string {
	if d.unit == "ms" {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// settledText judges figures that drift where they settled: ok is the
// median of the settled replies against the limit when their count
// decided, false when it did not; the text says which replies and their
// count. first is the number of the first figure's reply.
func settledText(d drift, figures []float64, meets func(float64) bool, lead, first int) (ok bool, text string) {
	s := stats.Settled(figures, d.what == "rate")
	tail := figures[s:]
	c := stats.CountOf(tail, meets, lead)
	m := stats.Median(tail)
	where := fmt.Sprintf("replies %d-%d: %d meet %s, %d miss it, median %s %s", first+s, first+len(figures)-1, c.Meet, d.limit, c.Miss, d.figure(m), d.unit)
	if c.Decided {
		return meets(m), fmt.Sprintf("drift: %s; judged where it settled, %s, decided at --lead %d", d.Text(figures), where, lead)
	}
	return false, fmt.Sprintf("drift: %s; it did not settle in the replies asked (%s, short of --lead %d): ask past the drift (--warmup, --replies; docs/measuring.md)", d.Text(figures), where, lead)
}
