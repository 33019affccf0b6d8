package gate

import (
	"context"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/energy"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// energyRun is the energy sensor read during a run's judged replies.
type energyRun struct {
	meter      *energy.Meter
	passed     []string
	idle       time.Duration
	idleBefore [2]time.Time
}

// maxIdleSpan bounds an idle span stretched to the sensor's ten periods.
const maxIdleSpan = 30 * time.Second

// startEnergy opens the energy sensor (--energy), starts reading it, and
// reads the serve's idle power for --energy-idle (at least ten of the
// sensor's periods), loaded and asked nothing, before the first judged
// request. It returns nil when the readings are off or no sensor can be
// read; then res.Energy says why.
func (g *Gate) startEnergy(ctx context.Context, res *report.Result) *energyRun {
	p := g.Plan
	if p.EnergySpec.Kind == energy.Off || p.EnergySpec.Kind == "" {
		return nil
	}
	src, passed, err := energy.Open(p.EnergySpec, p.EnergyOrder, p.EnergyEnv)
	if err != nil {
		res.Energy = &judge.Energy{Source: p.Energy, Why: err.Error()}
		g.logf("energy: unavailable: %s", err)
		return nil
	}
	info := src.Info()
	g.logf("energy: reading %s (%s, %s: %s)", info.Name, info.Quantity, info.Method, info.Boundary)
	for _, why := range passed {
		g.logf("energy: passed over %s", why)
	}
	e := &energyRun{meter: energy.Start(src), passed: passed, idle: p.EnergyIdle}
	if e.idle > 0 {
		e.idle = min(max(e.idle, judge.MinPeriods*info.Period), maxIdleSpan)
		e.idleBefore = idleSpan(ctx, e.idle)
	}
	return e
}

// idleSpan waits d (less when cancelled) and returns the span waited.
func idleSpan(ctx context.Context, d time.Duration) [2]time.Time {
	t0 := time.Now()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return [2]time.Time{t0, time.Now()}
}

// finishEnergy reads the idle power after the last judged reply, waits for
// a counter to move past the window's end, stops the readings and puts the
// figures of the judged window in res.Energy: the first judged request
// written to the last judged reply's end.
func (g *Gate) finishEnergy(ctx context.Context, res *report.Result, e *energyRun) {
	if e == nil {
		return
	}
	w := energy.Window{IdleBefore: e.idleBefore}
	tokens := 0
	for i := range res.Replies {
		r := &res.Replies[i]
		if i == 0 {
			w.Start = r.T0
		}
		w.End = r.T0.Add(time.Duration(r.EndMS * float64(time.Millisecond)))
		if r.Error == "" {
			n, _ := r.Tokens()
			tokens += n
		}
	}
	if e.idle > 0 && len(res.Replies) > 0 {
		w.IdleAfter = idleSpan(ctx, e.idle)
	}
	// A counter's value at the last span's end is known once it moved.
	last := w.End
	if !w.IdleAfter[1].IsZero() {
		last = w.IdleAfter[1]
	}
	info := e.meter.Info()
	wait := max(3*info.Period, time.Second)
	e.meter.WaitChange(ctx, last, wait)
	samples, readErr := e.meter.Stop()
	var f judge.Energy
	if len(res.Replies) == 0 {
		f = judge.Energy{Source: info.Name, Quantity: info.Quantity, Boundary: info.Boundary, Method: info.Method, Why: "no judged reply: no window to measure"}
	} else {
		f = energy.Figures(info, samples, readErr, w, tokens)
	}
	f.Passed = e.passed
	res.Energy = &f
	g.logf("energy: %s", judge.EnergyText(&f))
}
