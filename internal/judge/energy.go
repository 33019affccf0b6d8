package judge

import (
	"fmt"
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

// judgeEnergy is the energy row, and false when there is none (energy off
// and no ceiling). Without a ceiling the row is for people (Info) whatever
// it says; with one it passes when the net joules per token are at most
// the ceiling, judged on the whole window, and fails when there is no net
// figure or it is below 0 (the idle power read above decoding's).
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
	if ceiling <= 0 {
		a.OK, a.Info = true, true
		return a, true
	}
	if e.NetJPerToken == nil {
		a.Detail += fmt.Sprintf("; no net figure: --max-joules-per-token %g cannot be judged", ceiling)
		return a, true
	}
	if *e.NetJPerToken < 0 {
		// The idle power read above what decoding drew: a serve that burns
		// power while the gate reads its idle, or a sensor that jumped. Such
		// a figure is under every ceiling and says nothing of decoding.
		a.Detail += fmt.Sprintf("; a net figure below 0 measures nothing of decoding: --max-joules-per-token %g cannot be judged", ceiling)
		return a, true
	}
	if e.TooShort != "" {
		// Under ten of the sensor's periods each edge can be off by up to
		// a period, and the lag reads low: a figure that leans towards
		// passing judges nothing.
		a.Detail += fmt.Sprintf("; too short a window for this sensor: --max-joules-per-token %g cannot be judged; ask more replies (--replies) or read a sensor that updates faster", ceiling)
		return a, true
	}
	a.OK = *e.NetJPerToken <= ceiling
	if a.OK {
		a.Detail += fmt.Sprintf("; at most %g J/token net: ok", ceiling)
	} else {
		a.Detail += fmt.Sprintf("; above the ceiling of %g J/token net", ceiling)
	}
	return a, true
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
	if e.NetJPerToken != nil {
		s = fmt.Sprintf("net %.4g J/token (gross %.4g", *e.NetJPerToken, *e.GrossJPerToken)
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

// roundEnergyText is one load round's joules per token, net where the idle
// power is known.
func roundEnergyText(r EnergyRound) string {
	// if, not switch: each condition a statement of its own, which
	// mutation testing can reach.
	if r.NetJPerToken != nil {
		return fmt.Sprintf("%.4g net", *r.NetJPerToken)
	}
	if r.GrossJPerToken != nil {
		return fmt.Sprintf("%.4g gross", *r.GrossJPerToken)
	}
	if r.Why != "" {
		return "none (" + quote.Cut(r.Why, 100) + ")"
	}
	return "none"
}
