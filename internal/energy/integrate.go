package energy

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
)

// Window is when the judged replies ran, and the idle spans around them
// (the serve loaded and asked nothing). A zero idle span is none.
type Window struct {
	IdleBefore [2]time.Time
	Start, End time.Time
	IdleAfter  [2]time.Time
}

// point is a reading placed in time: for a counter, the joules since the
// first reading (wraps undone); for power, watts.
type point struct {
	t float64 // seconds after the first reading
	v float64
}

// series is a meter's readings made ready to integrate.
type series struct {
	origin time.Time
	pts    []point
	power  bool
}

// prepare turns readings into points. A counter's points are the first
// reading of each new value, where the counter was seen to move (between
// two such points its energy grew at an even rate, as far as anything
// read can tell); a counter that stood still for longer than its period
// before a move (a device drawing nothing) took that move's energy in the
// period before it, not over the stillness; a wrap adds the counter's
// range, and a counter that goes back with no range known is an error. A
// power reading that is a trailing average is placed half its length
// earlier.
func prepare(info Info, s []Sample) (series, error) {
	if len(s) == 0 {
		return series{}, fmt.Errorf("%s: no reading", info.Name)
	}
	sr := series{origin: s[0].T, power: info.Quantity == Power}
	sec := func(t time.Time) float64 { return t.Sub(sr.origin).Seconds() }
	if sr.power {
		shift := info.Lag.Seconds() / 2
		for _, x := range s {
			sr.pts = append(sr.pts, point{sec(x.T) - shift, x.V})
		}
		return sr, nil
	}
	total := 0.0
	p := period(info, s).Seconds()
	sr.pts = append(sr.pts, point{0, 0})
	for i := 1; i < len(s); i++ {
		d := s[i].V - s[i-1].V
		if d == 0 {
			continue
		}
		if d < 0 {
			if info.Range <= 0 {
				return series{}, fmt.Errorf("%s: the counter went back from %.6g J to %.6g J at %s, and its range is not known", info.Name, s[i-1].V, s[i].V, s[i].T.Format("15:04:05.000"))
			}
			d += info.Range
		}
		if still := sec(s[i].T) - p; p > 0 && still > sr.pts[len(sr.pts)-1].t {
			sr.pts = append(sr.pts, point{still, total})
		}
		total += d
		sr.pts = append(sr.pts, point{sec(s[i].T), total})
	}
	return sr, nil
}

// at is the counter's energy at t (linear between its points), or the
// power at t (linear between readings).
func (sr series) at(t float64) float64 {
	p := sr.pts
	i, _ := slices.BinarySearchFunc(p, t, func(x point, t float64) int {
		switch {
		case x.t < t:
			return -1
		case x.t > t:
			return 1
		}
		return 0
	})
	if i < len(p) && p[i].t == t {
		return p[i].v
	}
	if i == 0 || i == len(p) {
		// Outside the readings: the caller checked coverage first.
		return math.NaN()
	}
	a, b := p[i-1], p[i]
	return a.v + (b.v-a.v)*(t-a.t)/(b.t-a.t)
}

// joules over [a, b]: a counter's difference, or power integrated by the
// trapezoid rule. The readings must cover the span.
func (sr series) joules(a, b time.Time) (float64, error) {
	ta, tb := a.Sub(sr.origin).Seconds(), b.Sub(sr.origin).Seconds()
	if tb < ta {
		return 0, fmt.Errorf("the span ends before it starts")
	}
	first, last := sr.pts[0].t, sr.pts[len(sr.pts)-1].t
	if ta < first {
		return 0, fmt.Errorf("no reading before the span's start (the first %.3f s after it)", first-ta)
	}
	if tb > last {
		what := "reading"
		if !sr.power {
			what = "move of the counter"
		}
		return 0, fmt.Errorf("no %s after the span's end (the last %.3f s before it)", what, tb-last)
	}
	if !sr.power {
		return sr.at(tb) - sr.at(ta), nil
	}
	sum, prevT, prevV := 0.0, ta, sr.at(ta)
	for _, p := range sr.pts {
		if p.t <= ta {
			continue
		}
		if p.t >= tb {
			break
		}
		sum += (p.v + prevV) / 2 * (p.t - prevT)
		prevT, prevV = p.t, p.v
	}
	sum += (sr.at(tb) + prevV) / 2 * (tb - prevT)
	return sum, nil
}

// period is the sensor's update period as its readings show it: the median
// time between changes of value, once there are at least five; else the
// declared one. A power sensor that declares its period keeps it: a power
// that holds steady changes less often than its sensor updates.
func period(info Info, s []Sample) time.Duration {
	if info.Quantity == Power && info.Period > 0 {
		return info.Period
	}
	var starts []time.Time
	for i := 1; i < len(s); i++ {
		if s[i].V != s[i-1].V {
			starts = append(starts, s[i].T)
		}
	}
	var gaps []float64
	for i := 1; i < len(starts); i++ {
		gaps = append(gaps, starts[i].Sub(starts[i-1]).Seconds())
	}
	if len(gaps) < 4 {
		return info.Period
	}
	return time.Duration(stats.Median(gaps) * float64(time.Second))
}

// Figures are the energy figures of a window from a meter's readings:
// joules over the judged window, idle power around it, and per decoded
// token. What cannot be had is nil, and Why says why.
func Figures(info Info, s []Sample, readErr error, w Window, tokens int) judge.Energy {
	e := judge.Energy{Source: info.Name, Quantity: info.Quantity, Boundary: info.Boundary, Method: info.Method, Tokens: tokens}
	p := period(info, s)
	e.PeriodMS = float64(p) / float64(time.Millisecond)
	if info.Quantity == Power {
		e.LagMS = float64(info.Lag) / float64(time.Millisecond)
	}
	var whys []string
	if readErr != nil {
		whys = append(whys, readErr.Error())
	}
	sr, err := prepare(info, s)
	if err != nil {
		e.Why = joinWhy(append(whys, err.Error()))
		return e
	}
	window := w.End.Sub(w.Start).Seconds()
	j, err := sr.joules(w.Start, w.End)
	if err != nil {
		e.Why = joinWhy(append(whys, "the judged window: "+err.Error()))
		return e
	}
	e.WindowS, e.Joules = &window, &j
	var idleJ, idleS float64
	for _, span := range []struct {
		name string
		s    [2]time.Time
		out  **float64
	}{{"before", w.IdleBefore, &e.IdleBeforeW}, {"after", w.IdleAfter, &e.IdleAfterW}} {
		d := span.s[1].Sub(span.s[0]).Seconds()
		if d <= 0 {
			continue
		}
		ij, err := sr.joules(span.s[0], span.s[1])
		if err != nil {
			whys = append(whys, "idle "+span.name+": "+err.Error())
			continue
		}
		wt := ij / d
		*span.out = &wt
		idleJ, idleS = idleJ+ij, idleS+d
	}
	if idleS > 0 {
		idle := idleJ / idleS
		e.IdleW = &idle
	} else if len(whys) == 0 {
		whys = append(whys, "no idle power measured: no net figure")
	}
	if tokens > 0 {
		g := j / float64(tokens)
		e.GrossJPerToken = &g
		if e.IdleW != nil {
			n := (j - *e.IdleW*window) / float64(tokens)
			e.NetJPerToken = &n
			if n < 0 {
				whys = append(whys, "the net figure is below 0: the idle power moved more than decoding added")
			}
		}
	}
	if j > 0 && tokens > 0 {
		tpj := float64(tokens) / j
		e.TokensPerJoule = &tpj
	}
	if p > 0 && window < judge.MinPeriods*p.Seconds() {
		e.TooShort = fmt.Sprintf("the window, %.2f s, is %.1f sensor periods of %s: too short for this sensor (%d at least), the figure is rough",
			window, window/p.Seconds(), p.Round(time.Millisecond), judge.MinPeriods)
	}
	e.Why = joinWhy(whys)
	return finite(e)
}

// finite drops any figure that is not a finite number (JSON has none), and
// says so: what the gate writes it can read back.
func finite(e judge.Energy) judge.Energy {
	var bad []string
	for _, f := range []struct {
		name string
		v    **float64
	}{{"window_s", &e.WindowS}, {"joules", &e.Joules}, {"idle_w", &e.IdleW}, {"idle_before_w", &e.IdleBeforeW},
		{"idle_after_w", &e.IdleAfterW}, {"gross_j_per_token", &e.GrossJPerToken}, {"net_j_per_token", &e.NetJPerToken}, {"tokens_per_joule", &e.TokensPerJoule}} {
		if *f.v != nil && (math.IsNaN(**f.v) || math.IsInf(**f.v, 0)) {
			bad = append(bad, f.name)
			*f.v = nil
		}
	}
	if math.IsNaN(e.PeriodMS) || math.IsInf(e.PeriodMS, 0) {
		e.PeriodMS = 0
	}
	if len(bad) > 0 {
		e.Why = joinWhy(append([]string{e.Why}[:min(1, len(e.Why))], "not finite, dropped: "+strings.Join(bad, ", ")))
	}
	return e
}

func joinWhy(whys []string) string {
	s := ""
	for i, w := range whys {
		if i > 0 {
			s += "; "
		}
		s += w
	}
	return s
}

// RoundWindow is a load round's span and the tokens its streams decoded.
type RoundWindow struct {
	N          int
	Start, End time.Time
	Tokens     int
}

// RoundFigures are the energy figures of each load round, from the same
// readings, net of idleW (the judged window's idle power; nil: gross only).
func RoundFigures(info Info, s []Sample, rounds []RoundWindow, idleW *float64) []judge.EnergyRound {
	if len(rounds) == 0 {
		return nil
	}
	sr, err := prepare(info, s)
	var out []judge.EnergyRound
	for _, r := range rounds {
		e := judge.EnergyRound{N: r.N, Tokens: r.Tokens}
		if err != nil {
			e.Why = err.Error()
			out = append(out, e)
			continue
		}
		j, jerr := sr.joules(r.Start, r.End)
		if jerr != nil {
			e.Why = jerr.Error()
			out = append(out, e)
			continue
		}
		window := r.End.Sub(r.Start).Seconds()
		e.WindowS, e.Joules = &window, &j
		if r.Tokens > 0 {
			g := j / float64(r.Tokens)
			e.GrossJPerToken = &g
			if idleW != nil {
				n := (j - *idleW*window) / float64(r.Tokens)
				e.NetJPerToken = &n
			}
		}
		for _, v := range []**float64{&e.WindowS, &e.Joules, &e.GrossJPerToken, &e.NetJPerToken} {
			if *v != nil && (math.IsNaN(**v) || math.IsInf(**v, 0)) {
				*v = nil
				e.Why = "not finite, dropped"
			}
		}
		out = append(out, e)
	}
	return out
}
