package gate

import (
	"context"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/energy"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// energyRun is the energy sensor read during a run's judged replies.
type energyRun struct {
	meter  *energy.Meter
	passed []string
	// writable says how the serve could set the sensor's file, or "".
	writable   string
	idle       time.Duration
	idleBefore [2]time.Time
	idleAfter  [2]time.Time
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
	if tool, why := config.SourceWritableBy(p.EnergySpec, info, p.EnergyEnv, config.ServeUID()); why != "" && tool != "" {
		e.writable = tool + " could be replaced: " + why
	} else {
		e.writable = why
	}
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

// idleAfter reads the serve's idle power once the last judged reply has
// ended, before anything else is asked of it (the load rounds).
func (g *Gate) idleAfter(ctx context.Context, res *report.Result, e *energyRun) {
	if e != nil && e.idle > 0 && len(res.Replies) > 0 {
		e.idleAfter = idleSpan(ctx, e.idle)
	}
}

// finishEnergy waits for a counter to move past the last reading's end,
// stops the readings and puts the figures in res.Energy: the judged window
// (the first judged request written to the last judged reply's end), and
// with --load each round's (its first request written to its last
// stream's end), net of the idle power read around the judged window.
func (g *Gate) finishEnergy(ctx context.Context, res *report.Result, e *energyRun) {
	if e == nil {
		return
	}
	w := energy.Window{IdleBefore: e.idleBefore, IdleAfter: e.idleAfter}
	w.Start, w.End, _ = span(res.Replies)
	tokens := tokensOf(res.Replies)
	var rounds []energy.RoundWindow
	if res.Load != nil {
		for n, replies := range res.Load.Rounds {
			if rw, ok := roundWindow(n+1, replies); ok {
				rounds = append(rounds, rw)
			}
		}
	}
	// A counter's value at the last span's end is known once it moved.
	last := w.End
	if w.IdleAfter[1].After(last) {
		last = w.IdleAfter[1]
	}
	for _, r := range rounds {
		if r.End.After(last) {
			last = r.End
		}
	}
	info := e.meter.Info()
	e.meter.WaitChange(ctx, last, max(3*info.Period, time.Second))
	samples, readErr := e.meter.Stop()
	var f judge.Energy
	if len(res.Replies) == 0 {
		f = judge.Energy{Source: info.Name, Quantity: info.Quantity, Boundary: info.Boundary, Method: info.Method, Why: "no judged reply: no window to measure"}
	} else {
		f = energy.Figures(info, samples, readErr, w, tokens)
		f.Rounds = energy.RoundFigures(info, samples, rounds, f.IdleW)
	}
	f.Passed, f.WritableByServe = e.passed, e.writable
	res.Energy = &f
	g.logf("energy: %s", judge.EnergyText(&f))
}

// span is when replies ran: the first one's request written to the last
// one's end; ok is false without replies.
func span(replies []measure.Reply) (start, end time.Time, ok bool) {
	for i := range replies {
		r := &replies[i]
		t0, t1 := r.T0, r.T0.Add(time.Duration(r.EndMS*float64(time.Millisecond)))
		if !ok || t0.Before(start) {
			start = t0
		}
		if !ok || t1.After(end) {
			end = t1
		}
		ok = true
	}
	return start, end, ok
}

// tokensOf are the tokens the replies decoded, those that failed left out.
func tokensOf(replies []measure.Reply) int {
	n := 0
	for i := range replies {
		if replies[i].Error == "" {
			t, _ := replies[i].Tokens()
			n += t
		}
	}
	return n
}

// roundWindow is load round n's span and tokens.
func roundWindow(n int, replies []measure.Reply) (energy.RoundWindow, bool) {
	start, end, ok := span(replies)
	return energy.RoundWindow{N: n, Start: start, End: end, Tokens: tokensOf(replies)}, ok
}
