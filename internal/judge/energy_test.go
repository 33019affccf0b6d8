package judge

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
)

func fp(v float64) *float64 { return &v }

func figures() *Energy {
	return &Energy{Source: "nvml:0", Quantity: "power", Boundary: "the GPU board", Method: "not known",
		PeriodMS: 100, WindowS: fp(25), Joules: fp(250), IdleW: fp(4), Tokens: 100,
		GrossJPerToken: fp(2.5), NetJPerToken: fp(1.5), TokensPerJoule: fp(0.4)}
}

func TestJudgeEnergy(t *testing.T) {
	cases := []struct {
		name    string
		e       *Energy
		ceiling float64
		row     bool
		ok      bool
		info    bool
		want    []string
	}{
		{name: "off, no ceiling: no row", e: nil},
		{name: "off with a ceiling", e: nil, ceiling: 1, row: true, want: []string{"no energy figures were recorded: --max-joules-per-token 1 cannot be judged"}},
		{name: "figures for people", e: figures(), row: true, ok: true, info: true,
			want: []string{"gross 2.5 J/token (net 1.5; 0.4 tokens/J): 250 J over 25.00 s for 100 tokens, idle 4 W", `"nvml:0" ("the GPU board", "not known")`}},
		{name: "under the ceiling", e: figures(), ceiling: 3, row: true, ok: true, want: []string{"; at most 3 J/token gross: ok"}},
		{name: "at the ceiling", e: figures(), ceiling: 2.5, row: true, ok: true, want: []string{"at most 2.5 J/token gross: ok"}},
		{name: "above the ceiling", e: figures(), ceiling: 2.4, row: true, want: []string{"above the ceiling of 2.4 J/token gross"}},
		{name: "no joules at all is judged", e: func() *Energy {
			e := figures()
			e.Joules, e.GrossJPerToken, e.NetJPerToken, e.TokensPerJoule = fp(0), fp(0), fp(-1), nil
			return e
		}(), ceiling: 1, row: true, ok: true,
			want: []string{"gross 0 J/token (net -1)", "; at most 1 J/token gross: ok"}},
		{name: "too short, for people", e: func() *Energy { e := figures(); e.TooShort = "too short for this sensor"; return e }(), row: true, ok: true, info: true,
			want: []string{`"too short for this sensor"`}},
		{name: "unavailable, for people", e: &Energy{Source: "auto", Why: "no energy source can be read here"}, row: true, ok: true, info: true,
			want: []string{`unavailable: "no energy source can be read here"; source "auto"`}},
		{name: "unavailable, with a ceiling", e: &Energy{Why: "gone"}, ceiling: 1, row: true,
			want: []string{`unavailable: "gone"; no figures: --max-joules-per-token 1 cannot be judged`}},
		// A serve that burns power while the gate reads its idle power (or
		// a sensor that jumped then) makes the net figure negative: under
		// any ceiling, yet it measured nothing of decoding.
		{name: "net below 0, with a ceiling", e: func() *Energy {
			e := figures()
			e.IdleW, e.NetJPerToken = fp(140), fp(-1)
			e.Why = "the net figure is below 0: the idle power moved more than decoding added"
			return e
		}(), ceiling: 3, row: true, ok: true,
			want: []string{"gross 2.5 J/token (net -1;", "the net figure is below 0", "; at most 3 J/token gross: ok"}},
		{name: "net below 0, for people", e: func() *Energy {
			e := figures()
			e.IdleW, e.NetJPerToken = fp(140), fp(-1)
			return e
		}(), row: true, ok: true, info: true, want: []string{"gross 2.5 J/token (net -1;"}},
		{name: "no net, with a ceiling", e: func() *Energy {
			e := figures()
			e.NetJPerToken, e.IdleW = nil, nil
			e.Why = "no idle power measured: no net figure"
			return e
		}(), ceiling: 5, row: true,
			ok: true, want: []string{"gross 2.5 J/token (no net figure; 0.4 tokens/J)", "; at most 5 J/token gross: ok"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, row := judgeEnergy(c.e, Limits{MaxJoulesPerToken: c.ceiling})
			if row != c.row {
				t.Fatalf("row %v, want %v", row, c.row)
			}
			if !row {
				return
			}
			if a.Name != EnergyName || a.OK != c.ok || a.Info != c.info {
				t.Errorf("name %q ok %v info %v; want ok %v info %v: %s", a.Name, a.OK, a.Info, c.ok, c.info, a.Detail)
			}
			for _, w := range c.want {
				if !strings.Contains(a.Detail, w) {
					t.Errorf("detail %q lacks %q", a.Detail, w)
				}
			}
			// What is added to the figures' text is added to it, not in
			// its place.
			if c.e != nil && !strings.HasPrefix(a.Detail, EnergyText(c.e)) {
				t.Errorf("detail %q does not start with the figures %q", a.Detail, EnergyText(c.e))
			}
		})
	}
}

func TestEnergyText(t *testing.T) {
	e := figures()
	e.TooShort, e.Why = "too short for this sensor", "idle after: no reading"
	got := EnergyText(e)
	if want := `gross 2.5 J/token (net 1.5; 0.4 tokens/J): 250 J over 25.00 s for 100 tokens, idle 4 W; "nvml:0" ("the GPU board", "not known"); "too short for this sensor"; "idle after: no reading"`; got != want {
		t.Errorf("EnergyText() = %q, want %q", got, want)
	}
	// No tokens: the joules alone.
	e = &Energy{Source: "c", Joules: fp(3), WindowS: fp(1)}
	if got := EnergyText(e); !strings.HasPrefix(got, "3 J over no decoded token (): 3 J over 1.00 s for 0 tokens; \"c\"") {
		t.Errorf("no tokens: %q", got)
	}
	// Under load, each round's figure: gross, net beside it where there
	// is one, else why.
	e = figures()
	e.Rounds = []EnergyRound{{N: 1, GrossJPerToken: fp(0.9), NetJPerToken: fp(0.5)}, {N: 2, GrossJPerToken: fp(0.8)}, {N: 3, Why: "no reading after it"}, {N: 4}}
	if got := EnergyText(e); got != `gross 2.5 J/token (net 1.5; 0.4 tokens/J): 250 J over 25.00 s for 100 tokens, idle 4 W; "nvml:0" ("the GPU board", "not known"); under load, each round: 0.9 gross (0.5 net), 0.8 gross, none ("no reading after it"), none` {
		t.Errorf("rounds: %q", got)
	}
	// Joules without a window are no figures.
	if got := EnergyText(&Energy{Source: "c", Joules: fp(3), Why: "w"}); got != `unavailable: "w"; source "c"` {
		t.Errorf("no window: %q", got)
	}
	// No boundary or method: no parentheses.
	if got := EnergyText(&Energy{Source: "c"}); got != `unavailable: "no reading"; source "c"` {
		t.Errorf("bare: %q", got)
	}
	// Text from a sensor's label or a file's path is quoted.
	if got := EnergyText(&Energy{Source: "counter:/x\n::error::y", Boundary: "b`|", Why: "w"}); strings.Contains(got, "\n") {
		t.Errorf("unescaped: %q", got)
	}
}

func TestJudgeWithEnergy(t *testing.T) {
	in := passing()
	in.Energy = figures()
	v := Judge(in)
	if !v.Pass || v.Assertions[len(v.Assertions)-1].Name != EnergyName || !v.Assertions[len(v.Assertions)-1].Info {
		t.Fatalf("an info row keeps a pass: %+v", v)
	}
	in.Limits.MaxJoulesPerToken = 1
	if v := Judge(in); v.Pass {
		t.Errorf("above the ceiling passed: %+v", v)
	}
	// No replies: a ceiling's row fails with the others, and no row
	// without one.
	in.Replies = nil
	v = Judge(in)
	if last := v.Assertions[len(v.Assertions)-1]; last.Name != EnergyName || last.OK || !strings.HasPrefix(last.Detail, "no replies") {
		t.Errorf("no replies with a ceiling: %+v", v.Assertions)
	}
	in.Limits.MaxJoulesPerToken = 0
	for _, a := range Judge(in).Assertions {
		if a.Name == EnergyName {
			t.Errorf("no replies, no ceiling: an energy row %+v", a)
		}
	}
}

// passing is a run that passes route, rate, first token and content.
func passing() Input {
	m, _ := route.NewMatcher(route.DefaultFast, route.DefaultSlow)
	m.Line([]byte(fastLine))
	return Input{Route: m.Evidence(), Replies: replies([]float64{90, 90, 90}, []float64{250, 250, 250}), Limits: limits}
}

// release is a run's energy figures at 90 tok/s of decoding, 1280 tokens
// over a 19 s window (the first tokens and the gaps between replies in
// it): idle watts while nothing is asked, busy watts while the replies
// run, read by a counter that updates every 100 ms.
func release(idle, busy float64) *Energy {
	const window, tokens = 19.0, 1280
	j := busy * window
	gross, net, tpj := j/tokens, (j-idle*window)/tokens, tokens/j
	return &Energy{Source: "counter:/sensor", Quantity: "energy", PeriodMS: 100, WindowS: fp(window), Joules: fp(j), IdleW: fp(idle),
		Tokens: tokens, GrossJPerToken: &gross, NetJPerToken: &net, TokensPerJoule: &tpj}
}

// TestEnergyCeilingIsGross: the ceiling judges what a user pays for, the
// gross joules per token. Net of idle, a release whose idle power rose with
// its busy power (a clock governor stuck high) reads as the first, and one
// that spins all the time (idle near busy) reads as nearly free.
func TestEnergyCeilingIsGross(t *testing.T) {
	cases := []struct {
		name       string
		idle, busy float64
		gross, net float64 // J/token, to 3 places
		ceiling    float64
		ok         bool
	}{
		{"idle 20 W, busy 100 W", 20, 100, 1.484, 1.188, 0.5, false},
		{"idle 60 W, busy 140 W: a governor stuck high", 60, 140, 2.078, 1.188, 0.5, false},
		{"idle 95 W, busy 100 W: a kernel that spins", 95, 100, 1.484, 0.074, 0.5, false},
		{"idle 20 W, busy 100 W", 20, 100, 1.484, 1.188, 1.5, true},
		{"idle 60 W, busy 140 W: a governor stuck high", 60, 140, 2.078, 1.188, 1.5, false},
		{"idle 95 W, busy 100 W: a kernel that spins", 95, 100, 1.484, 0.074, 1.5, true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s, ceiling %g", c.name, c.ceiling), func(t *testing.T) {
			e := release(c.idle, c.busy)
			if got := fmt.Sprintf("%.3f %.3f", *e.GrossJPerToken, *e.NetJPerToken); got != fmt.Sprintf("%.3f %.3f", c.gross, c.net) {
				t.Fatalf("gross and net %s, want %.3f %.3f", got, c.gross, c.net)
			}
			a, _ := judgeEnergy(e, Limits{MaxJoulesPerToken: c.ceiling})
			if a.OK != c.ok || a.Info {
				t.Errorf("ok %v info %v, want ok %v: %s", a.OK, a.Info, c.ok, a.Detail)
			}
			want := fmt.Sprintf("; above the ceiling of %g J/token gross", c.ceiling)
			if c.ok {
				want = fmt.Sprintf("; at most %g J/token gross: ok", c.ceiling)
			}
			if !strings.HasSuffix(a.Detail, want) {
				t.Errorf("detail %q does not end %q", a.Detail, want)
			}
		})
	}
}

// TestEnergyOutOfRange: figures read back from a result.json (judge DIR,
// publish) that no run can have made are not judged, and say so; without
// a ceiling the row still says they are out of range.
func TestEnergyOutOfRange(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(e *Energy)
		want string
	}{
		{"negative tokens", func(e *Energy) { e.Tokens = -100 }, "tokens -100"},
		{"a window of 0", func(e *Energy) { e.WindowS = fp(0) }, "window_s 0"},
		{"a negative window", func(e *Energy) { e.WindowS = fp(-2.5) }, "window_s -2.5"},
		{"a window not a number", func(e *Energy) { e.WindowS = fp(math.NaN()) }, "window_s NaN"},
		{"an endless window", func(e *Energy) { e.WindowS = fp(math.Inf(1)) }, "window_s +Inf"},
		{"negative joules", func(e *Energy) { e.Joules = fp(-250) }, "joules -250"},
		{"endless joules", func(e *Energy) { e.Joules = fp(math.Inf(1)) }, "joules +Inf"},
		{"a negative period", func(e *Energy) { e.PeriodMS = -10 }, "period_ms -10"},
		{"a period not a number", func(e *Energy) { e.PeriodMS = math.NaN() }, "period_ms NaN"},
		{"an endless period", func(e *Energy) { e.PeriodMS = math.Inf(1) }, "period_ms +Inf"},
		{"a negative lag", func(e *Energy) { e.LagMS = -1 }, "lag_ms -1"},
		{"an endless lag", func(e *Energy) { e.LagMS = math.Inf(1) }, "lag_ms +Inf"},
		{"a negative idle power", func(e *Energy) { e.IdleW = fp(-40) }, "idle_w -40"},
		{"an idle power not a number", func(e *Energy) { e.IdleBeforeW = fp(math.NaN()) }, "idle_before_w NaN"},
		{"an endless idle power after", func(e *Energy) { e.IdleAfterW = fp(math.Inf(1)) }, "idle_after_w +Inf"},
		{"a negative gross figure", func(e *Energy) { e.GrossJPerToken = fp(-2.5) }, "gross_j_per_token -2.5"},
		{"a net figure not a number", func(e *Energy) { e.NetJPerToken = fp(math.NaN()) }, "net_j_per_token NaN"},
		{"an endless net figure", func(e *Energy) { e.NetJPerToken = fp(math.Inf(-1)) }, "net_j_per_token -Inf"},
		{"negative tokens per joule", func(e *Energy) { e.TokensPerJoule = fp(-0.4) }, "tokens_per_joule -0.4"},
		{"a round's negative tokens", func(e *Energy) { e.Rounds = []EnergyRound{{N: 1}, {N: 2, Tokens: -1}} }, "rounds[1].tokens -1"},
		{"a round's window of 0", func(e *Energy) { e.Rounds = []EnergyRound{{N: 1, WindowS: fp(0)}} }, "rounds[0].window_s 0"},
		{"a round's endless joules", func(e *Energy) { e.Rounds = []EnergyRound{{N: 1, Joules: fp(math.Inf(1))}} }, "rounds[0].joules +Inf"},
		{"a round's negative gross", func(e *Energy) { e.Rounds = []EnergyRound{{N: 1, GrossJPerToken: fp(-1)}} }, "rounds[0].gross_j_per_token -1"},
		{"a round's net not a number", func(e *Energy) { e.Rounds = []EnergyRound{{N: 1, NetJPerToken: fp(math.NaN())}} }, "rounds[0].net_j_per_token NaN"},
		{"two at once", func(e *Energy) { e.Tokens, e.Joules = -1, fp(-1) }, "tokens -1, joules -1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := figures()
			c.set(e)
			a, _ := judgeEnergy(e, Limits{MaxJoulesPerToken: 1000})
			if a.OK || !strings.HasPrefix(a.Detail, EnergyText(e)+"; ") || !strings.Contains(a.Detail, "; figures out of range ("+c.want+"): --max-joules-per-token 1000 cannot be judged") {
				t.Errorf("ok %v: %s", a.OK, a.Detail)
			}
			a, _ = judgeEnergy(e, Limits{})
			if !a.OK || !a.Info || !strings.HasPrefix(a.Detail, EnergyText(e)+"; ") || !strings.HasSuffix(a.Detail, "; figures out of range ("+c.want+"): not figures a run makes") {
				t.Errorf("for people: ok %v info %v: %s", a.OK, a.Info, a.Detail)
			}
		})
	}
	// The edges of the ranges are in them: no tokens, no joules, no idle
	// power, a net figure below 0, a period and a lag of 0.
	e := figures()
	e.Tokens, e.Joules, e.IdleW, e.IdleBeforeW, e.IdleAfterW, e.NetJPerToken, e.GrossJPerToken, e.TokensPerJoule, e.LagMS = 0, fp(0), fp(0), fp(0), fp(0), fp(-1), fp(0), fp(0), 0
	e.Rounds = []EnergyRound{{N: 1, WindowS: fp(0.001), Joules: fp(0), Tokens: 0, GrossJPerToken: fp(0), NetJPerToken: fp(-1)}}
	if a, _ := judgeEnergy(e, Limits{}); strings.Contains(a.Detail, "out of range") {
		t.Errorf("edges in range: %s", a.Detail)
	}
	e.WindowS = fp(math.SmallestNonzeroFloat64)
	e.PeriodMS = 0
	if a, _ := judgeEnergy(e, Limits{}); strings.Contains(a.Detail, "out of range") {
		t.Errorf("the shortest window and no period: %s", a.Detail)
	}
}

// TestEnergyCeilingWindow: a ceiling judges a window of at least
// CeilingPeriods of the sensor's periods (the worst phase's error then
// within MaxCeilingError); a shorter one, or a sensor whose period is not
// known, is not judged, and says why.
func TestEnergyCeilingWindow(t *testing.T) {
	if CounterCeilingPeriods != 33 || PowerCeilingPeriods != 60 || AveragedCeilingPeriods != 37 {
		t.Fatalf("ceiling periods %d %d %d: internal/energy's TestWorstPhase derives 33, 60, 37", CounterCeilingPeriods, PowerCeilingPeriods, AveragedCeilingPeriods)
	}
	for _, c := range []struct {
		name     string
		quantity string
		period   float64
		lag      float64
		window   float64
		want     string // "" judged
	}{
		{"a counter, 33 periods", "energy", 100, 0, 3.3, ""},
		{"a counter, under 33 periods", "energy", 100, 0, 3.29, "the window, 3.29 s, is 32.9 periods of 100 ms (this sensor's, at least 100 ms); a ceiling judges 33 at least (3.3 s), where the worst phase of the sensor is off by at most 2%"},
		{"a faster counter is counted at 100 ms", "energy", 20, 0, 3.29, "the window, 3.29 s, is 32.9 periods of 100 ms (this sensor's, at least 100 ms); a ceiling judges 33 at least (3.3 s)"},
		{"a slower counter", "energy", 101, 0, 3.3, "is 32.7 periods of 101 ms (this sensor's, at least 100 ms); a ceiling judges 33 at least (3.333 s)"},
		{"a slower counter, 33 periods", "energy", 101, 0, 3.333, ""},
		{"power, 60 periods", "power", 100, 0, 6, ""},
		{"power, under 60 periods", "power", 100, 0, 5.99, "the window, 5.99 s, is 59.9 periods of 100 ms (this sensor's, at least 100 ms); a ceiling judges 60 at least (6 s)"},
		{"an averaged power, 37 periods", "power", 1000, 1000, 37, ""},
		{"an averaged power, under 37 periods", "power", 1000, 1000, 36.9, "is 36.9 periods of 1000 ms (this sensor's, at least 100 ms); a ceiling judges 37 at least (37 s)"},
		{"a lag under the period is no average of it", "power", 1000, 999, 37, "a ceiling judges 60 at least"},
		{"a lag over the period", "power", 1000, 2000, 37, ""},
		{"a counter's lag is no matter", "energy", 100, 5000, 3.3, ""},
		{"no period", "energy", 0, 0, 100, "the sensor's period is not known, so neither is how far off the figure may be"},
		{"no quantity", "", 100, 0, 100, `the quantity "" is neither energy nor power`},
		{"another quantity", "heat", 100, 0, 100, `the quantity "heat" is neither energy nor power`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := figures()
			e.Quantity, e.PeriodMS, e.LagMS, e.WindowS = c.quantity, c.period, c.lag, fp(c.window)
			a, _ := judgeEnergy(e, Limits{MaxJoulesPerToken: 1000})
			if c.want == "" {
				if !a.OK {
					t.Errorf("not judged: %s", a.Detail)
				}
				return
			}
			if a.OK || !strings.HasPrefix(a.Detail, EnergyText(e)+"; ") || !strings.Contains(a.Detail, c.want) || !strings.HasSuffix(a.Detail, "--max-joules-per-token 1000 cannot be judged; ask a longer window: more replies at least (--replies: the sign counts may stop a run there, under --max-replies) or more tokens each (--max-tokens), or read a sensor that updates faster") {
				t.Errorf("ok %v: %s", a.OK, a.Detail)
			}
		})
	}
}

// TestEnergyWritableByServe: a sensor the serve could set is no figure a
// ceiling judges.
func TestEnergyWritableByServe(t *testing.T) {
	e := figures()
	e.WritableByServe = "/x belongs to runner (uid 1000), the serve's user"
	a, _ := judgeEnergy(e, Limits{MaxJoulesPerToken: 1000})
	if a.OK || !strings.HasPrefix(a.Detail, EnergyText(e)+"; ") || !strings.HasSuffix(a.Detail, `; the serve could set this sensor's readings ("/x belongs to runner (uid 1000), the serve's user"): --max-joules-per-token 1000 cannot be judged; read a sensor the serve's user cannot write (docs/measuring.md: energy per token)`) {
		t.Errorf("ok %v: %s", a.OK, a.Detail)
	}
	if a, _ := judgeEnergy(e, Limits{}); !a.OK || !a.Info || !strings.HasPrefix(a.Detail, EnergyText(e)+"; ") || !strings.Contains(a.Detail, "the serve could set this sensor's readings") {
		t.Errorf("for people: %+v", a)
	}
	// Joules without a window, or a window without joules: no figures.
	for _, e := range []*Energy{func() *Energy { e := figures(); e.WindowS = nil; return e }(), func() *Energy { e := figures(); e.Joules = nil; return e }()} {
		if a, _ := judgeEnergy(e, Limits{MaxJoulesPerToken: 1000}); a.OK || !strings.HasSuffix(a.Detail, "; no figures: --max-joules-per-token 1000 cannot be judged") {
			t.Errorf("one of joules and window: %s", a.Detail)
		}
	}
	// No tokens: nothing per token to judge.
	e = figures()
	e.Tokens, e.GrossJPerToken, e.NetJPerToken, e.TokensPerJoule = 0, nil, nil, nil
	if a, _ := judgeEnergy(e, Limits{MaxJoulesPerToken: 1000}); a.OK || !strings.HasPrefix(a.Detail, EnergyText(e)+"; ") || !strings.HasSuffix(a.Detail, "; no decoded token: --max-joules-per-token 1000 cannot be judged") {
		t.Errorf("no tokens: %s", a.Detail)
	}
}
