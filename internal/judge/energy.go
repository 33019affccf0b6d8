package judge

import (
	"fmt"
	"math"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/quote"
)

// EnergyName is the energy row: joules per decoded token from the runner's
// own sensor. It is there for people (Info) unless Limits.MaxJoulesPerToken
// makes it an assertion.
const EnergyName = "energy"

// Energy is what one sensor said of the judged window: the figures of
// result.json's "energy". A figure is nil where it could not be had, and
// Why then says why.
type Energy struct {
	// Source names the sensor ("nvml:0", "hwmon:amdgpu", "rapl:0",
	// "counter:/path"), Quantity what it gives ("energy", a cumulative
	// counter, or "power", instantaneous), Boundary what it covers (chip,
	// board, package, system, or what the sensor's label says), Method
	// whether the sensor measures ("measured"), models ("estimated"), or
	// its maker does not say ("not known").
	Source   string `json:"source"`
	Quantity string `json:"quantity,omitempty"`
	Boundary string `json:"boundary,omitempty"`
	Method   string `json:"method,omitempty"`
	// PeriodMS is the sensor's update period, as seen in this run's
	// readings where they changed often enough, else as declared.
	PeriodMS float64 `json:"period_ms,omitempty"`
	// LagMS is the length of the trailing average a power reading is (0:
	// an instantaneous one).
	LagMS float64 `json:"lag_ms,omitempty"`
	// WritableByServe says why the serve could set the sensor's readings
	// (a counter: or power: file its user may write or replace), "" when
	// it could not: a ceiling judges no such figure.
	WritableByServe string `json:"writable_by_serve,omitempty"`
	// WindowS is the judged window: the first judged request written to
	// the last judged reply's end.
	WindowS *float64 `json:"window_s"`
	Joules  *float64 `json:"joules"`
	// IdleW is the serve's idle power, loaded and asked nothing, the mean
	// of IdleBeforeW (before the first judged request) and IdleAfterW
	// (after the last), weighted by their lengths.
	IdleW       *float64 `json:"idle_w"`
	IdleBeforeW *float64 `json:"idle_before_w,omitempty"`
	IdleAfterW  *float64 `json:"idle_after_w,omitempty"`
	// Tokens are the judged replies' decoded tokens.
	Tokens         int      `json:"tokens"`
	GrossJPerToken *float64 `json:"gross_j_per_token"`
	NetJPerToken   *float64 `json:"net_j_per_token"`
	TokensPerJoule *float64 `json:"tokens_per_joule"` // tokens over gross joules
	// TooShort says so when the window is under MinPeriods sensor periods:
	// the figure is then rough.
	TooShort string `json:"too_short,omitempty"`
	// Why says why the figures, or some of them, are not there.
	Why string `json:"why,omitempty"`
	// Passed are the other sources asked (auto) and why each was not used.
	Passed []string `json:"passed,omitempty"`
	// Rounds are the same figures for each --load round: what batching
	// buys.
	Rounds []EnergyRound `json:"rounds,omitempty"`
}

// EnergyRound is one load round's energy: its first request written to its
// last stream's end, net of the judged window's idle power.
type EnergyRound struct {
	N              int      `json:"n"`
	WindowS        *float64 `json:"window_s"`
	Joules         *float64 `json:"joules"`
	Tokens         int      `json:"tokens"`
	GrossJPerToken *float64 `json:"gross_j_per_token"`
	NetJPerToken   *float64 `json:"net_j_per_token"`
	Why            string   `json:"why,omitempty"`
}

// MinPeriods is the fewest sensor periods a window may have before its
// figure is called too short for the sensor: a counter read at the edges of
// a window can be off by up to a period at each.
const MinPeriods = 10

// MaxCeilingError is how far off, at the sensor's worst phase, the figure a
// ceiling judges may be: 2%.
const MaxCeilingError = 0.02

// The worst-phase error of the integrator (internal/energy), in periods of
// the sensor of the step between idle and busy power, both edges of the
// window together: the sensor's updates and the meter's polls (every 20 ms)
// at their worst phase against the window's start and end. A counter is
// interpolated between its moves; an instantaneous power is seen up to a
// period and a poll late at the start, and ends up to half a poll early; a
// trailing average of a period is placed half a period earlier. For a
// sensor updating every 100 ms; one that updates faster is counted as 100
// ms (MinBoundPeriodMS), for the meter's poll then dominates.
// internal/energy's TestWorstPhase reads them off the integrator.
const (
	CounterEdgePeriods  = 0.66
	PowerEdgePeriods    = 1.2
	AveragedEdgePeriods = 0.73
)

// MinBoundPeriodMS is the shortest period the bounds count: five of the
// meter's 20 ms polls.
const MinBoundPeriodMS = 100

// The fewest sensor periods a window a ceiling judges may have: over n
// periods the net figure is off by at most the edge's periods over n, and
// the gross one by that times (busy - idle) / busy, at most as much; these
// are the least n for which that is within MaxCeilingError.
const (
	CounterCeilingPeriods  = 33
	PowerCeilingPeriods    = 60
	AveragedCeilingPeriods = 37
)

// CeilingPeriods is the fewest sensor periods a ceiling judges for a
// sensor giving quantity ("energy" or "power") whose readings are trailing
// averages of lagMS; 0 for a quantity that is neither.
func CeilingPeriods(quantity string, periodMS, lagMS float64) int {
	if quantity == "energy" {
		return CounterCeilingPeriods
	}
	if quantity != "power" {
		return 0
	}
	// A reading that averages a period or more smooths a step as a
	// counter does.
	if lagMS >= periodMS {
		return AveragedCeilingPeriods
	}
	return PowerCeilingPeriods
}

// CeilingWindow is the shortest window a ceiling judges for such a sensor
// updating every periodMS, in seconds; 0 for a quantity that is neither.
func CeilingWindow(quantity string, periodMS, lagMS float64) float64 {
	return float64(CeilingPeriods(quantity, periodMS, lagMS)) * max(periodMS, MinBoundPeriodMS) / 1000
}

// judgeEnergy is the energy row, and false when there is none (energy off
// and no ceiling). Without a ceiling the row is for people (Info) whatever
// it says; with one it passes when the gross joules per token (the joules
// the judged window drew, idle included, over its decoded tokens: what a
// user pays for) are at most the ceiling. It is not judged, and fails, when
// the figures are out of the range a run makes (a result.json read back),
// the serve could set the sensor, or the window is shorter than
// CeilingPeriods of the sensor's periods.
func judgeEnergy(e *Energy, l Limits) (Assertion, bool) {
	ceiling := l.MaxJoulesPerToken
	if e == nil && ceiling <= 0 {
		return Assertion{}, false
	}
	a := Assertion{Name: EnergyName}
	if e == nil {
		a.Detail = fmt.Sprintf("no energy figures were recorded: --max-joules-per-token %g cannot be judged", ceiling)
		return a, true
	}
	a.Detail = EnergyText(e)
	bad := outOfRange(e)
	if ceiling <= 0 {
		a.OK, a.Info = true, true
		if bad != "" {
			a.Detail += "; figures out of range (" + bad + "): not figures a run makes"
		}
		if e.WritableByServe != "" {
			a.Detail += "; the serve could set this sensor's readings (" + quote.Cut(e.WritableByServe, 200) + ")"
		}
		return a, true
	}
	cannot := fmt.Sprintf("--max-joules-per-token %g cannot be judged", ceiling)
	if bad != "" {
		a.Detail += "; figures out of range (" + bad + "): " + cannot
		return a, true
	}
	if e.WritableByServe != "" {
		a.Detail += "; the serve could set this sensor's readings (" + quote.Cut(e.WritableByServe, 200) + "): " + cannot +
			"; read a sensor the serve's user cannot write (docs/measuring.md: energy per token)"
		return a, true
	}
	if e.Joules == nil || e.WindowS == nil {
		a.Detail += "; no figures: " + cannot
		return a, true
	}
	if e.Tokens == 0 {
		a.Detail += "; no decoded token: " + cannot
		return a, true
	}
	if why := tooShortForCeiling(e); why != "" {
		a.Detail += "; " + why + ": " + cannot + "; ask a longer window: more replies at least (--replies: the sign counts may stop a run there, under --max-replies) or more tokens each (--max-tokens), or read a sensor that updates faster"
		return a, true
	}
	// Judged on the joules and tokens, not on a stored quotient.
	gross := *e.Joules / float64(e.Tokens)
	a.OK = gross <= ceiling
	if a.OK {
		a.Detail += fmt.Sprintf("; at most %g J/token gross: ok", ceiling)
	} else {
		a.Detail += fmt.Sprintf("; above the ceiling of %g J/token gross", ceiling)
	}
	return a, true
}

// tooShortForCeiling says why the window is too short for a ceiling to
// judge, or "".
func tooShortForCeiling(e *Energy) string {
	need := CeilingPeriods(e.Quantity, e.PeriodMS, e.LagMS)
	if need == 0 {
		return fmt.Sprintf("the quantity %s is neither energy nor power", quote.Cut(e.Quantity, 40))
	}
	if e.PeriodMS == 0 {
		return "the sensor's period is not known, so neither is how far off the figure may be"
	}
	if min := CeilingWindow(e.Quantity, e.PeriodMS, e.LagMS); *e.WindowS < min {
		period := max(e.PeriodMS, MinBoundPeriodMS)
		return fmt.Sprintf("the window, %.3g s, is %.3g periods of %.4g ms (this sensor's, at least %d ms); a ceiling judges %d at least (%.4g s), where the worst phase of the sensor is off by at most %g%%",
			*e.WindowS, *e.WindowS*1000/period, period, MinBoundPeriodMS, need, min, MaxCeilingError*100)
	}
	return ""
}

// outOfRange names the figures no run makes (negative tokens, a window
// that is not above 0, negative joules or watts, a figure that is not a
// finite number), with their values, or "".
func outOfRange(e *Energy) string {
	var bad []string
	if e.Tokens < 0 {
		bad = append(bad, fmt.Sprintf("tokens %d", e.Tokens))
	}
	notAbove0 := func(v float64) bool { return !(v > 0) || math.IsInf(v, 0) }
	below0 := func(v float64) bool { return !(v >= 0) || math.IsInf(v, 0) }
	notFinite := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	check := func(name string, v *float64, out func(float64) bool) {
		if v != nil && out(*v) {
			bad = append(bad, fmt.Sprintf("%s %g", name, *v))
		}
	}
	check("window_s", e.WindowS, notAbove0)
	check("joules", e.Joules, below0)
	check("period_ms", &e.PeriodMS, below0)
	check("lag_ms", &e.LagMS, below0)
	check("idle_w", e.IdleW, below0)
	check("idle_before_w", e.IdleBeforeW, below0)
	check("idle_after_w", e.IdleAfterW, below0)
	check("gross_j_per_token", e.GrossJPerToken, below0)
	check("net_j_per_token", e.NetJPerToken, notFinite)
	check("tokens_per_joule", e.TokensPerJoule, below0)
	for i, r := range e.Rounds {
		if r.Tokens < 0 {
			bad = append(bad, fmt.Sprintf("rounds[%d].tokens %d", i, r.Tokens))
		}
		check(fmt.Sprintf("rounds[%d].window_s", i), r.WindowS, notAbove0)
		check(fmt.Sprintf("rounds[%d].joules", i), r.Joules, below0)
		check(fmt.Sprintf("rounds[%d].gross_j_per_token", i), r.GrossJPerToken, below0)
		check(fmt.Sprintf("rounds[%d].net_j_per_token", i), r.NetJPerToken, notFinite)
	}
	return strings.Join(bad, ", ")
}

// EnergyText is the energy figures in one line, for the row's detail and
// the console.
func EnergyText(e *Energy) string {
	src := quote.Cut(e.Source, 100)
	var what []string
	if e.Boundary != "" {
		what = append(what, quote.Cut(e.Boundary, 80))
	}
	if e.Method != "" {
		what = append(what, quote.Cut(e.Method, 20))
	}
	if len(what) > 0 {
		src += " (" + strings.Join(what, ", ") + ")"
	}
	if e.Joules == nil || e.WindowS == nil {
		why := e.Why
		if why == "" {
			why = "no reading"
		}
		s := "unavailable: " + quote.Cut(why, 300)
		if e.Source != "" {
			s += "; source " + src
		}
		return s
	}
	var s string
	// Gross first: what a ceiling judges; net beside it.
	if e.GrossJPerToken != nil && e.NetJPerToken != nil {
		s = fmt.Sprintf("gross %.4g J/token (net %.4g", *e.GrossJPerToken, *e.NetJPerToken)
	} else if e.GrossJPerToken != nil {
		s = fmt.Sprintf("gross %.4g J/token (no net figure", *e.GrossJPerToken)
	} else {
		s = fmt.Sprintf("%.4g J over no decoded token (", *e.Joules)
	}
	if e.TokensPerJoule != nil {
		s += fmt.Sprintf("; %.4g tokens/J", *e.TokensPerJoule)
	}
	s += fmt.Sprintf("): %.4g J over %.2f s for %d tokens", *e.Joules, *e.WindowS, e.Tokens)
	if e.IdleW != nil {
		s += fmt.Sprintf(", idle %.4g W", *e.IdleW)
	}
	s += "; " + src
	if e.TooShort != "" {
		s += "; " + quote.Cut(e.TooShort, 200)
	}
	if e.Why != "" {
		s += "; " + quote.Cut(e.Why, 300)
	}
	if len(e.Rounds) > 0 {
		var each []string
		for _, r := range e.Rounds {
			each = append(each, roundEnergyText(r))
		}
		s += "; under load, each round: " + strings.Join(each, ", ")
	}
	return s
}

// roundEnergyText is one load round's joules per token: gross, and net
// beside it where the idle power is known.
func roundEnergyText(r EnergyRound) string {
	// if, not switch: each condition a statement of its own, which
	// mutation testing can reach.
	if r.GrossJPerToken != nil && r.NetJPerToken != nil {
		return fmt.Sprintf("%.4g gross (%.4g net)", *r.GrossJPerToken, *r.NetJPerToken)
	}
	if r.GrossJPerToken != nil {
		return fmt.Sprintf("%.4g gross", *r.GrossJPerToken)
	}
	if r.Why != "" {
		return "none (" + quote.Cut(r.Why, 100) + ")"
	}
	return "none"
}
