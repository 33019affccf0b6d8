package judge

import (
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
)

func fp(v float64) *float64 { return &v }

func figures() *Energy {
	return &Energy{Source: "nvml:0", Quantity: "power", Boundary: "the GPU board", Method: "not known",
		WindowS: fp(2.5), Joules: fp(250), IdleW: fp(40), Tokens: 100,
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
			want: []string{"net 1.5 J/token (gross 2.5; 0.4 tokens/J): 250 J over 2.50 s for 100 tokens, idle 40 W", `"nvml:0" ("the GPU board", "not known")`}},
		{name: "under the ceiling", e: figures(), ceiling: 2, row: true, ok: true, want: []string{"; at most 2 J/token net: ok"}},
		{name: "at the ceiling", e: figures(), ceiling: 1.5, row: true, ok: true, want: []string{"at most 1.5 J/token net: ok"}},
		{name: "above the ceiling", e: figures(), ceiling: 1.4, row: true, want: []string{"above the ceiling of 1.4 J/token net"}},
		{name: "a net figure of exactly 0 is judged", e: func() *Energy { e := figures(); e.NetJPerToken = fp(0); return e }(), ceiling: 1, row: true, ok: true,
			want: []string{"net 0 J/token", "; at most 1 J/token net: ok"}},
		{name: "too short, with a ceiling", e: func() *Energy { e := figures(); e.TooShort = "too short for this sensor"; return e }(), ceiling: 100, row: true,
			want: []string{`; "too short for this sensor"; too short a window for this sensor: --max-joules-per-token 100 cannot be judged; ask more replies (--replies) or read a sensor that updates faster`}},
		{name: "too short, for people", e: func() *Energy { e := figures(); e.TooShort = "too short for this sensor"; return e }(), row: true, ok: true, info: true,
			want: []string{`"too short for this sensor"`}},
		{name: "unavailable, for people", e: &Energy{Source: "auto", Why: "no energy source can be read here"}, row: true, ok: true, info: true,
			want: []string{`unavailable: "no energy source can be read here"; source "auto"`}},
		{name: "unavailable, with a ceiling", e: &Energy{Why: "gone"}, ceiling: 1, row: true,
			want: []string{`unavailable: "gone"; no net figure: --max-joules-per-token 1 cannot be judged`}},
		// A serve that burns power while the gate reads its idle power (or
		// a sensor that jumped then) makes the net figure negative: under
		// any ceiling, yet it measured nothing of decoding.
		{name: "net below 0, with a ceiling", e: func() *Energy {
			e := figures()
			e.IdleW, e.NetJPerToken = fp(140), fp(-1)
			e.Why = "the net figure is below 0: the idle power moved more than decoding added"
			return e
		}(), ceiling: 1, row: true,
			want: []string{"net -1 J/token", "the net figure is below 0", "a net figure below 0 measures nothing of decoding: --max-joules-per-token 1 cannot be judged"}},
		{name: "net below 0, for people", e: func() *Energy {
			e := figures()
			e.IdleW, e.NetJPerToken = fp(140), fp(-1)
			return e
		}(), row: true, ok: true, info: true, want: []string{"net -1 J/token"}},
		{name: "no net, with a ceiling", e: func() *Energy {
			e := figures()
			e.NetJPerToken, e.IdleW = nil, nil
			e.Why = "no idle power measured: no net figure"
			return e
		}(), ceiling: 5, row: true,
			want: []string{"gross 2.5 J/token (no net figure; 0.4 tokens/J)", "no net figure: --max-joules-per-token 5 cannot be judged"}},
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
	if want := `net 1.5 J/token (gross 2.5; 0.4 tokens/J): 250 J over 2.50 s for 100 tokens, idle 40 W; "nvml:0" ("the GPU board", "not known"); "too short for this sensor"; "idle after: no reading"`; got != want {
		t.Errorf("EnergyText() = %q, want %q", got, want)
	}
	// No tokens: the joules alone.
	e = &Energy{Source: "c", Joules: fp(3), WindowS: fp(1)}
	if got := EnergyText(e); !strings.HasPrefix(got, "3 J over no decoded token (): 3 J over 1.00 s for 0 tokens; \"c\"") {
		t.Errorf("no tokens: %q", got)
	}
	// Under load, each round's figure: net, else gross, else why.
	e = figures()
	e.Rounds = []EnergyRound{{N: 1, GrossJPerToken: fp(0.9), NetJPerToken: fp(0.5)}, {N: 2, GrossJPerToken: fp(0.8)}, {N: 3, Why: "no reading after it"}, {N: 4}}
	if got := EnergyText(e); got != `net 1.5 J/token (gross 2.5; 0.4 tokens/J): 250 J over 2.50 s for 100 tokens, idle 40 W; "nvml:0" ("the GPU board", "not known"); under load, each round: 0.5 net, 0.8 gross, none ("no reading after it"), none` {
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
