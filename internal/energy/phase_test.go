package energy

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
)

// Sensor kinds the worst-phase sweep reads.
const (
	kindCounter  = "counter"        // a cumulative counter, updated every period
	kindPower    = "power"          // the power at each update, held until the next
	kindAveraged = "averaged power" // the mean power over the period before each update
)

// phased is a sensor on a device drawing idle watts, busy watts within the
// window [s, s+n periods), updating every period, read by the meter every
// poll. The window starts xs periods (and a µs) after an update, and that
// update came ys polls (and a µs) after a poll; it ends xe periods after
// an update that came ye polls after a poll: the phases at each edge. The
// two edges' phases are apart, as a sensor's clock and the meter's drift
// apart (the sensor and the poll switch from the start's phases to the
// end's halfway through the window, where the power is steady).
type phased struct {
	kind           string
	idle, busy     float64
	period, poll   float64
	n              float64
	xs, ys, xe, ye float64
	// avg is how long an averaged power's readings average; 0: a period.
	avg float64
}

const phaseEps = 1e-6

func (p phased) start() float64 { return 2 }
func (p phased) end() float64   { return p.start() + p.n*p.period }

func (p phased) energyAt(t float64) float64 {
	b := math.Max(0, math.Min(t, p.end())-math.Max(p.start(), math.Min(t, p.start())))
	return p.idle*t + (p.busy-p.idle)*b
}

// samples are what a meter keeps of the sensor read over [0, end()+2].
func (p phased) samples() []Sample {
	mid := (p.start() + p.end()) / 2
	us := p.start() - p.xs*p.period - phaseEps // an update
	ue := p.end() - p.xe*p.period - phaseEps
	poll := func(u, y float64) float64 { return u - y*p.poll - phaseEps }
	t := poll(us, p.ys)
	t -= math.Floor(t/p.poll) * p.poll // the first poll at or after 0
	var out []Sample
	for u0 := us; t <= p.end()+2; t += p.poll {
		if t >= mid && u0 == us {
			// The end's phases from here on.
			u0 = ue
			pe := poll(ue, p.ye)
			t = pe - math.Floor((pe-t)/p.poll)*p.poll
		}
		u := u0 + math.Floor((t-u0)/p.period)*p.period
		var v float64
		switch p.kind {
		case kindCounter:
			v = math.Round(p.energyAt(u)*1e6) / 1e6
			if n := len(out); n > 0 {
				// Where the phases switch: a counter never goes back.
				v = max(v, out[n-1].V)
			}
		case kindPower:
			v = p.idle
			if u >= p.start() && u < p.end() {
				v = p.busy
			}
		case kindAveraged:
			l := p.period
			if p.avg > 0 {
				l = p.avg
			}
			v = (p.energyAt(u) - p.energyAt(u-l)) / l
		}
		n := len(out)
		if n >= 2 && out[n-1].V == v && out[n-2].V == v {
			out[n-1].T = at(t)
			continue
		}
		out = append(out, Sample{T: at(t), V: v})
	}
	return out
}

// figures are the meter's figures of the window, and the truth's gross and
// net joules per token.
func (p phased) figures() (e judge.Energy, gross, net float64) {
	const tokens = 100
	info := Info{Name: "phased", Quantity: Counter, Period: time.Duration(p.period * float64(time.Second))}
	if p.kind != kindCounter {
		info.Quantity = Power
	}
	if p.kind == kindAveraged {
		info.Lag = info.Period
	}
	w := Window{IdleBefore: [2]time.Time{at(0.5), at(1.5)}, Start: at(p.start()), End: at(p.end()),
		IdleAfter: [2]time.Time{at(p.end() + 0.5), at(p.end() + 1.5)}}
	e = Figures(info, p.samples(), nil, w, tokens)
	window := p.end() - p.start()
	return e, p.busy * window / tokens, (p.busy - p.idle) * window / tokens
}

// errs are the gross and net figures' errors, as fractions of the truth.
func (p phased) errs() (gross, net float64) {
	e, g, n := p.figures()
	return (*e.GrossJPerToken - g) / g, (*e.NetJPerToken - n) / n
}

// worst is the worst error over the phases at each edge (gx of the sensor
// by gy of the poll) of the gross and net figures, as fractions of the
// truth. An edge's error is the same whatever the other's phases (the
// power is steady between them), so each edge's lowest and highest are
// found with the other's phases at 0, and the worst pair is then read
// whole.
func worst(kind string, n, idle, busy float64, gx, gy int) (gross, net float64) {
	p := phased{kind: kind, idle: idle, busy: busy, period: 0.1, poll: DefaultPoll.Seconds(), n: n}
	_, base := p.errs()
	var lo, hi [2]phased // the start's and the end's
	var dlo, dhi [2]float64
	for i := range gx {
		for j := range gy {
			x, y := float64(i)/float64(gx), float64(j)/float64(gy)
			for edge := range 2 {
				q := p
				if edge == 0 {
					q.xs, q.ys = x, y
				} else {
					q.xe, q.ye = x, y
				}
				_, d := q.errs()
				if d -= base; d < dlo[edge] {
					dlo[edge], lo[edge] = d, q
				}
				if d > dhi[edge] {
					dhi[edge], hi[edge] = d, q
				}
			}
		}
	}
	pick := func(s, e phased) phased {
		q := p
		q.xs, q.ys, q.xe, q.ye = s.xs, s.ys, e.xe, e.ye
		return q
	}
	gross, net = pick(lo[0], lo[1]).errs()
	if g, n := pick(hi[0], hi[1]).errs(); math.Abs(n) > math.Abs(net) {
		gross, net = g, n
	}
	return gross, net
}

// TestWorstPhase is the integrator's error at the sensor's worst phase
// against the window's edges and the meter's poll (a sensor updating every
// 100 ms, read every 20 ms), and the shortest window a ceiling judges
// derived from it. The error of a window's joules is a part of the step
// between idle and busy power at each edge: judge's edge periods' worth of
// it at most, both edges together, whatever the window's length; so over n
// periods the net figure is off by up to edge/n, and the gross one by
// edge/n times (busy-idle)/busy, at most edge/n (an idle of 0). The
// shortest window is the least n with edge/n within judge.MaxCeilingError.
// The phases swept (40 of the sensor, 10 of the poll, at each edge) come
// within 0.05 periods of the bound, never past it.
//
// go test -run TestWorstPhase -v ./internal/energy
func TestWorstPhase(t *testing.T) {
	for _, c := range []struct {
		kind    string
		edge    float64
		periods int
	}{
		{kindCounter, judge.CounterEdgePeriods, judge.CounterCeilingPeriods},
		{kindPower, judge.PowerEdgePeriods, judge.PowerCeilingPeriods},
		{kindAveraged, judge.AveragedEdgePeriods, judge.AveragedCeilingPeriods},
	} {
		_, net := worst(c.kind, 10, 20, 100, 40, 10)
		edge := -net * 10
		if !(edge <= c.edge) || edge < c.edge-0.05 {
			t.Errorf("%s: the worst phase swept is off by %.4f periods of the step; judge's bound is %.2f", c.kind, edge, c.edge)
		}
		if n := int(math.Ceil(c.edge/judge.MaxCeilingError - 1e-9)); n != c.periods {
			t.Errorf("%s: %.2f periods at the edges need %d periods for %g%%, and judge says %d", c.kind, c.edge, n, 100*judge.MaxCeilingError, c.periods)
		}
		row := fmt.Sprintf("%-14s edge %.3f periods swept (bound %.2f), shortest window %d periods:", c.kind, edge, c.edge, c.periods)
		for _, w := range []float64{1, 5, 10, 30, float64(c.periods)} {
			g, nt := worst(c.kind, w, 20, 100, 20, 5)
			row += fmt.Sprintf(" | %.0f: gross %+.1f%%, net %+.1f%%", w, 100*g, 100*nt)
			if math.Abs(nt) > c.edge/w || math.Abs(g) > math.Abs(nt) {
				t.Errorf("%s over %v periods: gross %+.3f%%, net %+.3f%%, past the bound %.3f%%", c.kind, w, 100*g, 100*nt, 100*c.edge/w)
			}
		}
		t.Log(row)
		// At the shortest window, with an idle of 0 (gross is then net; a
		// counter stands still before the window), the worst phase is
		// within the error allowed.
		if g, _ := worst(c.kind, float64(c.periods), 0, 100, 40, 10); math.Abs(g) > judge.MaxCeilingError {
			t.Errorf("%s, %d periods, idle 0: gross off by %+.3f%%", c.kind, c.periods, 100*g)
		}
	}
}

// TestAverageReadAsInstant: nvidia-smi's power.draw (without .instant) is
// an average over a second on Ampere and newer GPUs, printed every 100 ms.
// Read as an instantaneous power updating every 100 ms, a window of 1 s
// passed the ten-periods check and its net figure read low by half;
// placed half a second earlier, with a period of a second, it is close, and
// a window of a second is one period, too short to judge.
//
// go test -run TestAverageReadAsInstant -v ./internal/energy
func TestAverageReadAsInstant(t *testing.T) {
	asInstant := Info{Name: "power.draw", Quantity: Power, Period: 100 * time.Millisecond}
	asAverage := Info{Name: "power.draw", Quantity: Power, Period: time.Second, Lag: time.Second}
	var rows []string
	for _, window := range []float64{1, 3, 5} {
		var worstOld, worstNew float64
		var shortOld, shortNew bool
		for i := range 20 {
			p := phased{kind: kindAveraged, idle: 20, busy: 100, period: 0.1, poll: DefaultPoll.Seconds(), n: window / 0.1, avg: 1,
				xs: float64(i) / 20, xe: float64(i) / 20}
			s := p.samples()
			w := Window{IdleBefore: [2]time.Time{at(0.2), at(1.2)}, Start: at(p.start()), End: at(p.end()),
				IdleAfter: [2]time.Time{at(p.end() + 1.5), at(p.end() + 2)}}
			truth := (p.busy - p.idle) * window / 100
			for _, c := range []struct {
				info  Info
				worst *float64
				short *bool
			}{{asInstant, &worstOld, &shortOld}, {asAverage, &worstNew, &shortNew}} {
				e := Figures(c.info, s, nil, w, 100)
				if e.NetJPerToken == nil {
					t.Fatalf("%v s: no net figure: %+v", window, e)
				}
				if d := (*e.NetJPerToken - truth) / truth; math.Abs(d) > math.Abs(*c.worst) {
					*c.worst = d
				}
				*c.short = e.TooShort != ""
			}
		}
		rows = append(rows, fmt.Sprintf("%.0f s: read as instant, net %+.0f%% (too short: %v); as a 1 s average, net %+.0f%% (too short: %v)", window, 100*worstOld, shortOld, 100*worstNew, shortNew))
		if !(worstOld < -0.09) || math.Abs(worstNew) > math.Abs(worstOld)/2 {
			t.Errorf("%v s: net off by %+.1f%% read as instant, %+.1f%% as an average", window, 100*worstOld, 100*worstNew)
		}
		if shortOld || !shortNew {
			t.Errorf("%v s: too short %v as instant, %v as an average; want false, true", window, shortOld, shortNew)
		}
	}
	t.Logf("a 1 s average printed every 100 ms, 20 W idle, 100 W busy, the worst of 20 phases:\n%s", strings.Join(rows, "\n"))
}
