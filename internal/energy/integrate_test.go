package energy

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// device is a simulated device: idle watts, busy watts within [busyFrom,
// busyTo), read by a sensor that updates every period (a counter rounded
// to µJ, or the power at the update), polled every poll.
type device struct {
	idle, busy       float64
	busyFrom, busyTo float64
	period, poll     float64
	phase            float64 // the sensor's first update after 0
}

func (d device) energyAt(t float64) float64 {
	b := math.Max(0, math.Min(t, d.busyTo)-d.busyFrom)
	return d.idle*t + (d.busy-d.idle)*b
}

func (d device) powerAt(t float64) float64 {
	if t >= d.busyFrom && t < d.busyTo {
		return d.busy
	}
	return d.idle
}

// samples are what a meter keeps of the sensor read over [0, end].
func (d device) samples(power bool, end float64) []Sample {
	var out []Sample
	for t := 0.0; t <= end+1e-9; t += d.poll {
		// The sensor's last update at or before t.
		u := d.phase + math.Floor((t-d.phase)/d.period)*d.period
		if u < 0 {
			u = 0
		}
		v := math.Round(d.energyAt(u)*1e6) / 1e6
		if power {
			v = d.powerAt(u)
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

// TestFiguresAgainstTheTruth: a counter and a power sensor on a device
// whose power steps from idle to busy and back are integrated over windows
// of 1, 5 and 30 sensor periods; the joules land within the error the edges
// allow (a period's worth of the busy-idle step at each edge for a counter
// read between updates, less with the interpolation), and net J/token
// recovers the busy power's excess.
func TestFiguresAgainstTheTruth(t *testing.T) {
	const period = 0.1
	var table []string
	for _, power := range []bool{false, true} {
		for _, periods := range []float64{1, 5, 30} {
			d := device{idle: 20, busy: 100, busyFrom: 2, busyTo: 2 + periods*period, period: period, poll: 0.005, phase: 0.037}
			w := Window{IdleBefore: [2]time.Time{at(0.5), at(1.5)}, Start: at(d.busyFrom), End: at(d.busyTo), IdleAfter: [2]time.Time{at(d.busyTo + 0.5), at(d.busyTo + 1.5)}}
			info := Info{Name: "test", Quantity: Counter, Period: time.Duration(period * float64(time.Second))}
			if power {
				info.Quantity = Power
			}
			tokens := 100
			e := Figures(info, d.samples(power, d.busyTo+2), nil, w, tokens)
			truth := d.energyAt(d.busyTo) - d.energyAt(d.busyFrom)
			if e.Joules == nil || e.NetJPerToken == nil || e.IdleW == nil {
				t.Fatalf("power %v, %v periods: no figures: %+v", power, periods, e)
			}
			errJ := *e.Joules - truth
			netTruth := (d.busy - d.idle) * (d.busyTo - d.busyFrom) / float64(tokens)
			errNet := *e.NetJPerToken - netTruth
			table = append(table, fmt.Sprintf("%-7s %4.0f periods: joules %.3f (truth %.3f, %+.1f%%), idle %.2f W, net %.4f J/token (truth %.4f, %+.1f%%), too short: %v",
				info.Quantity, periods, *e.Joules, truth, 100*errJ/truth, *e.IdleW, *e.NetJPerToken, netTruth, 100*errNet/netTruth, e.TooShort != ""))
			// The edges: a step of (busy-idle) W is placed within a period
			// at each end.
			bound := 2 * (d.busy - d.idle) * period
			if math.Abs(errJ) > bound {
				t.Errorf("power %v, %v periods: joules %.4f, truth %.4f: off by more than %.2f", power, periods, *e.Joules, truth, bound)
			}
			if math.Abs(*e.IdleW-d.idle) > 0.01*d.idle {
				t.Errorf("power %v: idle %.3f W, truth %.1f", power, *e.IdleW, d.idle)
			}
			if (e.TooShort != "") != (periods < 10) {
				t.Errorf("power %v, %v periods: too short %q", power, periods, e.TooShort)
			}
			if periods == 30 && math.Abs(errJ) > 0.02*truth {
				t.Errorf("power %v, 30 periods: joules off by %.1f%%, want under 2%%", power, 100*errJ/truth)
			}
			if got := e.PeriodMS; math.Abs(got-100) > 6 {
				t.Errorf("power %v: the period seen %.1f ms, want about 100", power, got)
			}
		}
	}
	t.Logf("windows of 1, 5 and 30 sensor periods (100 ms), idle 20 W, busy 100 W, read every 5 ms:\n%s", strings.Join(table, "\n"))
}

func TestCounterWraps(t *testing.T) {
	// A 32-bit µJ counter (RAPL's range is about 262 kJ; this one is small).
	s := []Sample{{at(0), 90}, {at(1), 95}, {at(2), 100 - 1}, {at(3), 4}, {at(4), 9}}
	info := Info{Name: "rapl:0", Quantity: Counter, Range: 100}
	sr, err := prepare(info, s)
	if err != nil {
		t.Fatal(err)
	}
	j, err := sr.joules(at(1), at(4))
	if err != nil || math.Abs(j-14) > 1e-9 {
		t.Fatalf("across the wrap: %v J, %v; want 14", j, err)
	}
	info.Range = 0
	if _, err := prepare(info, s); err == nil || !strings.Contains(err.Error(), "went back from 99 J to 4 J") {
		t.Fatalf("a counter that goes back with no range known: %v", err)
	}
}

func TestCoverage(t *testing.T) {
	info := Info{Name: "c", Quantity: Counter}
	sr, _ := prepare(info, []Sample{{at(0), 0}, {at(1), 1}, {at(2), 2}})
	for _, c := range []struct {
		a, b float64
		want string
	}{
		{-1, 1, "no reading before the span's start"},
		{0.5, 3, "no move of the counter after the span's end"},
		{1.5, 1, "ends before it starts"},
	} {
		if _, err := sr.joules(at(c.a), at(c.b)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("[%v, %v]: %v, want %q", c.a, c.b, err, c.want)
		}
	}
	j, err := sr.joules(at(0.5), at(1.5))
	if err != nil || math.Abs(j-1) > 1e-9 {
		t.Errorf("interpolated: %v %v", j, err)
	}
	pw, _ := prepare(Info{Name: "p", Quantity: Power}, []Sample{{at(0), 10}, {at(1), 10}, {at(1.0001), 30}, {at(2), 30}})
	if _, err := pw.joules(at(0.5), at(3)); err == nil || !strings.Contains(err.Error(), "no reading after") {
		t.Errorf("power past its readings: %v", err)
	}
	j, err = pw.joules(at(0.5), at(1.5))
	if err != nil || math.Abs(j-(5+15)) > 0.01 {
		t.Errorf("power, trapezoid over a step: %v %v, want about 20", j, err)
	}
	if _, err := prepare(info, nil); err == nil {
		t.Error("no readings: no error")
	}
}

// TestLag: a trailing average of L describes the L before it, so its
// readings are placed L/2 earlier.
func TestLag(t *testing.T) {
	s := []Sample{{at(0), 10}, {at(1), 10}, {at(1.001), 30}, {at(3), 30}}
	noLag, _ := prepare(Info{Quantity: Power}, s)
	lag, _ := prepare(Info{Quantity: Power, Lag: time.Second}, s)
	a, _ := noLag.joules(at(0.2), at(1.5))
	b, _ := lag.joules(at(0.2), at(1.5))
	if !(b > a) || math.Abs(b-(0.3*10+1*30)) > 0.05 {
		t.Errorf("lag: %v J against %v with none; want about 33", b, a)
	}
}

func TestFiguresWithout(t *testing.T) {
	info := Info{Name: "c", Quantity: Counter, Period: 100 * time.Millisecond}
	s := []Sample{{at(0), 0}, {at(1), 10}, {at(2), 20}, {at(3), 30}}
	// No idle spans: gross only.
	e := Figures(info, s, nil, Window{Start: at(1), End: at(2)}, 10)
	if e.Joules == nil || *e.Joules != 10 || e.GrossJPerToken == nil || *e.GrossJPerToken != 1 || e.NetJPerToken != nil || e.IdleW != nil {
		t.Fatalf("no idle: %+v", e)
	}
	if !strings.Contains(e.Why, "no idle power measured") {
		t.Errorf("no idle: why %q", e.Why)
	}
	if e.TokensPerJoule == nil || *e.TokensPerJoule != 1 {
		t.Errorf("tokens per joule: %v", e.TokensPerJoule)
	}
	// No tokens: joules, no per-token figure.
	e = Figures(info, s, nil, Window{Start: at(1), End: at(2), IdleBefore: [2]time.Time{at(0), at(1)}}, 0)
	if e.Joules == nil || e.GrossJPerToken != nil || e.NetJPerToken != nil || e.TokensPerJoule != nil {
		t.Errorf("no tokens: %+v", e)
	}
	// A read error is said, and the readings before it still count.
	e = Figures(info, s, fmt.Errorf("c: a reading failed"), Window{Start: at(1), End: at(2)}, 10)
	if !strings.Contains(e.Why, "a reading failed") || e.Joules == nil {
		t.Errorf("read error: %+v", e)
	}
	// The window past the readings: no figures, the reason.
	e = Figures(info, s, nil, Window{Start: at(1), End: at(5)}, 10)
	if e.Joules != nil || !strings.Contains(e.Why, "the judged window: no move of the counter after") {
		t.Errorf("window past the readings: %+v", e)
	}
	// A counter that went back: no figures, the reason.
	e = Figures(info, []Sample{{at(0), 5}, {at(1), 1}}, nil, Window{Start: at(0), End: at(1)}, 1)
	if e.Joules != nil || !strings.Contains(e.Why, "went back") {
		t.Errorf("backwards: %+v", e)
	}
	// An idle span the readings do not cover: said, the other one used.
	e = Figures(info, s, nil, Window{Start: at(1), End: at(2), IdleBefore: [2]time.Time{at(0), at(1)}, IdleAfter: [2]time.Time{at(2), at(9)}}, 10)
	if e.IdleBeforeW == nil || e.IdleAfterW != nil || !strings.Contains(e.Why, "idle after:") || e.NetJPerToken == nil {
		t.Errorf("one idle span uncovered: %+v", e)
	}
	// Net below zero is said.
	e = Figures(info, []Sample{{at(0), 0}, {at(1), 100}, {at(2), 101}, {at(3), 201}}, nil, Window{Start: at(1), End: at(2), IdleBefore: [2]time.Time{at(0), at(1)}}, 1)
	if e.NetJPerToken == nil || *e.NetJPerToken >= 0 || !strings.Contains(e.Why, "below 0") {
		t.Errorf("negative net: %+v", e)
	}
}

// TestFinite: figures that overflow are dropped with the reason, so
// result.json can be written and read back.
func TestFinite(t *testing.T) {
	info := Info{Name: "c", Quantity: Counter, Range: math.MaxFloat64}
	s := []Sample{{at(0), 0}, {at(1), 1.7e308}, {at(2), 1}, {at(3), 1.7e308}, {at(4), 1.75e308}}
	e := Figures(info, s, nil, Window{Start: at(0.5), End: at(2.5), IdleBefore: [2]time.Time{at(0), at(0.5)}}, 1)
	for _, v := range []*float64{e.Joules, e.IdleW, e.GrossJPerToken, e.NetJPerToken, e.TokensPerJoule, e.WindowS} {
		if v != nil && (math.IsInf(*v, 0) || math.IsNaN(*v)) {
			t.Fatalf("a figure not finite kept: %+v", e)
		}
	}
	if !strings.Contains(e.Why, "not finite, dropped: ") {
		t.Errorf("why %q", e.Why)
	}
	if _, err := json.Marshal(e); err != nil {
		t.Errorf("result.json's energy cannot be written: %v", err)
	}
}

func TestPeriod(t *testing.T) {
	info := Info{Period: 7 * time.Millisecond}
	few := []Sample{{at(0), 0}, {at(0.1), 1}, {at(0.2), 2}}
	if p := period(info, few); p != info.Period {
		t.Errorf("few changes: %v, want the declared %v", p, info.Period)
	}
	var many []Sample
	for i := range 10 {
		many = append(many, Sample{at(float64(i) * 0.25), float64(i)})
	}
	if p := period(info, many); p != 250*time.Millisecond {
		t.Errorf("changes every 250 ms: %v", p)
	}
}

// TestRoundFigures: each load round's joules over its own span, net of the
// idle power; a round the readings do not cover says why; no idle power
// gives gross only.
func TestRoundFigures(t *testing.T) {
	info := Info{Name: "c", Quantity: Counter}
	// 10 W throughout, 100 W within [2, 3).
	d := device{idle: 10, busy: 100, busyFrom: 2, busyTo: 3, period: 0.01, poll: 0.01}
	s := d.samples(false, 5)
	idle := 10.0
	got := RoundFigures(info, s, []RoundWindow{{N: 1, Start: at(2), End: at(3), Tokens: 90}, {N: 2, Start: at(4), End: at(9), Tokens: 10}}, &idle)
	if len(got) != 2 {
		t.Fatalf("%d rounds", len(got))
	}
	r := got[0]
	if r.N != 1 || r.Joules == nil || math.Abs(*r.Joules-100) > 1.5 || r.NetJPerToken == nil || math.Abs(*r.NetJPerToken-1) > 0.02 || r.GrossJPerToken == nil || math.Abs(*r.GrossJPerToken-100.0/90) > 0.02 {
		t.Errorf("round 1: %+v (joules %v, net %v)", r, deref(r.Joules), deref(r.NetJPerToken))
	}
	if got[1].Joules != nil || !strings.Contains(got[1].Why, "no move of the counter after the span's end") {
		t.Errorf("round 2 past the readings: %+v", got[1])
	}
	gross := RoundFigures(info, s, []RoundWindow{{N: 1, Start: at(2), End: at(3), Tokens: 90}}, nil)
	if gross[0].NetJPerToken != nil || gross[0].GrossJPerToken == nil {
		t.Errorf("no idle power: %+v", gross[0])
	}
	none := RoundFigures(info, s, []RoundWindow{{N: 1, Start: at(2), End: at(3)}}, &idle)
	if none[0].GrossJPerToken != nil || none[0].Joules == nil {
		t.Errorf("no tokens: %+v", none[0])
	}
	if RoundFigures(info, s, nil, &idle) != nil {
		t.Error("no rounds: figures")
	}
	bad := RoundFigures(info, nil, []RoundWindow{{N: 1, Start: at(2), End: at(3)}}, &idle)
	if bad[0].Why == "" || bad[0].Joules != nil {
		t.Errorf("no readings: %+v", bad[0])
	}
}

func deref(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

// A power sensor that declares its period keeps it, whatever its readings'
// changes show; a counter's changes show its period.
func TestPeriodOfPower(t *testing.T) {
	var steady []Sample
	for i := range 10 {
		steady = append(steady, Sample{at(float64(i)), float64(i % 2)})
	}
	if p := period(Info{Quantity: Power, Period: 100 * time.Millisecond}, steady); p != 100*time.Millisecond {
		t.Errorf("declared power period: %v", p)
	}
	if p := period(Info{Quantity: Power}, steady); p != time.Second {
		t.Errorf("undeclared power period: %v, want the readings' 1s", p)
	}
	if p := period(Info{Quantity: Counter, Period: 100 * time.Millisecond}, steady); p != time.Second {
		t.Errorf("a counter's period: %v, want the readings' 1s", p)
	}
}

// TestFiguresLag: a power reading's lag is in the figures (a ceiling needs
// it to tell an averaged sensor); a counter has none.
func TestFiguresLag(t *testing.T) {
	s := []Sample{{at(0), 10}, {at(1), 10}, {at(2), 10}, {at(3), 10}}
	w := Window{Start: at(1.5), End: at(2.5)}
	if e := Figures(Info{Name: "p", Quantity: Power, Lag: 1500 * time.Millisecond, Period: time.Second}, s, nil, w, 1); e.LagMS != 1500 || e.PeriodMS != 1000 {
		t.Errorf("power: lag %v ms, period %v ms", e.LagMS, e.PeriodMS)
	}
	if e := Figures(Info{Name: "c", Quantity: Counter, Lag: time.Second}, []Sample{{at(0), 0}, {at(1), 1}, {at(2), 2}, {at(3), 3}}, nil, w, 1); e.LagMS != 0 {
		t.Errorf("a counter: lag %v ms", e.LagMS)
	}
}

// TestCounterStill: a counter that stands still (a device drawing nothing)
// and then moves took that move's energy in the period before it, not
// over the stillness.
func TestCounterStill(t *testing.T) {
	// Still at 0 J from 0 to 5 s, then 1 J a move every 100 ms.
	s := []Sample{{at(0), 0}, {at(5), 0}}
	for i := 1; i <= 10; i++ {
		s = append(s, Sample{at(5 + 0.1*float64(i)), float64(i)})
	}
	sr, err := prepare(Info{Name: "c", Quantity: Counter}, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ a, b, want float64 }{
		{0, 5, 0},   // the stillness drew nothing
		{5, 5.1, 1}, // the period before the first move took it
		{5.05, 5.1, 0.5},
		{5.1, 6, 9},
	} {
		if j, err := sr.joules(at(c.a), at(c.b)); err != nil || math.Abs(j-c.want) > 1e-9 {
			t.Errorf("[%v, %v]: %v J, %v; want %v", c.a, c.b, j, err, c.want)
		}
	}
}
