package route

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// routeOf feeds log, line by line, to a matcher of the rules and judges it.
func routeOf(t *testing.T, fast, slow []string, log string) (Evidence, Verdict) {
	t.Helper()
	m, err := NewMatcher(fast, slow)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(log, "\n") {
		m.Line([]byte(line))
	}
	ev := m.Evidence()
	return ev, Judge(ev)
}

func TestRouteRules(t *testing.T) {
	offload := CountPrefix + `offloaded (\d+)/(\d+) layers to GPU`
	device := `CUDA0 model buffer`
	cpuOnly := UnlessFastPrefix + `CPU(_Mapped)? model buffer`
	llamaFast, llamaSlow := []string{offload, device}, []string{cpuOnly}
	tests := []struct {
		name       string
		fast, slow []string
		log        string
		ok         bool
		detail     string // the route detail, exactly
	}{
		{"every layer on the device", llamaFast, llamaSlow,
			"load_tensors: offloaded 29/29 layers to GPU\nload_tensors: CPU_Mapped model buffer size = 62.50 MiB\nload_tensors: CUDA0 model buffer size = 356.60 MiB",
			true, `the serve log names the fast route: "load_tensors: offloaded 29/29 layers to GPU" (line 1): 29 of 29`},
		{"some layers on the device", llamaFast, llamaSlow,
			"load_tensors: offloaded 20/29 layers to GPU\nload_tensors: CUDA0 model buffer size = 356.60 MiB",
			false, `the serve log names both routes; the slow route wins the doubt: "load_tensors: offloaded 20/29 layers to GPU" (line 1): 20 of 29, not all, after "load_tensors: CUDA0 model buffer size = 356.60 MiB" (line 2)`},
		{"model weights on the CPU only", llamaFast, llamaSlow,
			"system_info: CPU : AVX2 = 1\nload_tensors: CPU_Mapped model buffer size = 32.88 MiB",
			false, `the serve log names the slow route: "load_tensors: CPU_Mapped model buffer size = 32.88 MiB" (line 2): and no line of this model load names the fast route; this run is on the slow route`},
		{"a CPU buffer beside a device buffer is no slow evidence", llamaFast, llamaSlow,
			"load_tensors: CPU_Mapped model buffer size = 1 MiB\nload_tensors: CUDA0 model buffer size = 2 MiB",
			true, `the serve log names the fast route: "load_tensors: CUDA0 model buffer size = 2 MiB" (line 2)`},
		{"the fast line after the CPU buffer still wins over it", []string{device}, llamaSlow,
			"a CPU model buffer\nb CPU_Mapped model buffer\nc CUDA0 model buffer",
			true, `the serve log names the fast route: "c CUDA0 model buffer" (line 3)`},
		{"the first counted line is quoted; a later full count does not undo a short one", llamaFast, llamaSlow,
			"offloaded 3/3 layers to GPU\noffloaded 1/3 layers to GPU\noffloaded 2/3 layers to GPU",
			false, `the serve log names both routes; the slow route wins the doubt: "offloaded 1/3 layers to GPU" (line 2): 1 of 3, not all, after "offloaded 3/3 layers to GPU" (line 1): 3 of 3`},
		{"the numbers in the other order, the total named", []string{CountPrefix + `model=(?P<total>\d+) offload=(\d+)`}, []string{`never`},
			"msg=offload model=29 offload=20",
			false, `the serve log names the slow route: "msg=offload model=29 offload=20" (line 1): 20 of 29, not all; this run is on the slow route`},
		{"numbers too large to read are the slow route", llamaFast, []string{`never`},
			"offloaded 99999999999999999999/3 layers to GPU\noffloaded 3/99999999999999999999 layers to GPU",
			false, `the serve log names the slow route: "offloaded 99999999999999999999/3 layers to GPU" (line 1): "99999999999999999999" of "3": a count that does not read as two numbers; this run is on the slow route`},
		{"digits of another script are the slow route, not passed over", []string{CountPrefix + `(\d+) of (\d+) roles`, `private route`}, []string{`never`},
			"on the private route (٤ of 4 roles)",
			false, `the serve log names both routes; the slow route wins the doubt: "on the private route (٤ of 4 roles)" (line 1): "٤" of "4": a count that does not read as two numbers, after "on the private route (٤ of 4 roles)" (line 1)`},
		{"nothing counted is the slow route", llamaFast, []string{`never`},
			"offloaded 0/0 layers to GPU",
			false, `the serve log names the slow route: "offloaded 0/0 layers to GPU" (line 1): 0 of 0, nothing counted; this run is on the slow route`},
		{"more than the total is the slow route, quoted as printed", llamaFast, []string{`never`},
			"offloaded 30/29 layers to GPU",
			false, `the serve log names the slow route: "offloaded 30/29 layers to GPU" (line 1): 30 of 29, more than all; this run is on the slow route`},
		{"every count on a line is read", []string{CountPrefix + `(\d+) of (\d+) roles`}, []string{`never`},
			"a: 4 of 4 roles; b: 2 of 4 roles; c: 4 of 4 roles",
			false, `the serve log names both routes; the slow route wins the doubt: "a: 4 of 4 roles; b: 2 of 4 roles; c: 4 of 4 roles" (line 1): 2 of 4, not all, after "a: 4 of 4 roles; b: 2 of 4 roles; c: 4 of 4 roles" (line 1): 4 of 4`},
		{"the note: all roles", DefaultFast, DefaultSlow,
			"npu: ready on the private route dx (4 of 4 roles have a 16-row decode kernel)",
			true, `the serve log names the fast route: "npu: ready on the private route dx (4 of 4 roles have a 16-row decode kernel)" (line 1): 4 of 4`},
		{"the note is preferred to the route's name", DefaultFast, DefaultSlow,
			"npu: ready on the private route dx (2 of 4 role(s) have a 16-row decode kernel)",
			false, `the serve log names both routes; the slow route wins the doubt: "npu: ready on the private route dx (2 of 4 role(s) have a 16-row decode kernel)" (line 1): 2 of 4, not all, after "npu: ready on the private route dx (2 of 4 role(s) have a 16-row decode kernel)" (line 1)`},
		{"the note in the singular", DefaultFast, DefaultSlow,
			"npu: 1 of 1 role has a 16-row decode kernel",
			true, `the serve log names the fast route: "npu: 1 of 1 role has a 16-row decode kernel" (line 1): 1 of 1`},
		{"no note: the route's name", DefaultFast, DefaultSlow,
			"npu: ready on the private route dx",
			true, `the serve log names the fast route: "npu: ready on the private route dx" (line 1)`},
		{"an unless-fast line after a plain slow one: the plain one is quoted", []string{`fast`}, []string{cpuOnly, `per-op`},
			"CPU model buffer\nper-op forward",
			false, `the serve log names the slow route: "per-op forward" (line 2); this run is on the slow route`},
		{"two unless-fast rules: the first line that matches either", []string{`fast`}, []string{cpuOnly, UnlessFastPrefix + `host buffer`},
			"x\nhost buffer\nCPU model buffer",
			false, `the serve log names the slow route: "host buffer" (line 2): and no line of this model load names the fast route; this run is on the slow route`},
		// Sizes: a fast pattern with one group weighs the device, a heavier
		// rule the host, per model load.
		{"host buffers heavier than the device's: slow", []string{`dev = (\S+)`}, []string{HeavierPrefix + `host = (\S+)`},
			"dev = 2000.5\nhost = 1000\nhost = 1000.75",
			false, `the serve log names both routes; the slow route wins the doubt: "host = 1000" (line 2): 2000.75 in host buffers in this model load, more than the 2000.5 on the device, after "dev = 2000.5" (line 1)`},
		{"host buffers as heavy as the device's: fast", []string{`dev = (\S+)`}, []string{HeavierPrefix + `host = (\S+)`},
			"dev = 2000\nhost = 1000\nhost = 1000",
			true, `the serve log names the fast route: "dev = 2000" (line 1)`},
		{"device buffers added up", []string{`dev = (\S+)`}, []string{HeavierPrefix + `host = (\S+)`},
			"dev = 2\ndev = 2\nhost = 3",
			true, `the serve log names the fast route: "dev = 2" (line 1)`},
		{"host buffers alone: slow", []string{`dev = (\S+)`}, []string{HeavierPrefix + `host = (\S+)`},
			"host = 1",
			false, `the serve log names the slow route: "host = 1" (line 1): 1 in host buffers in this model load, more than the 0 on the device; this run is on the slow route`},
		{"a size that is not a number weighs nothing", []string{`dev = (\S+)`}, []string{HeavierPrefix + `host = (\S+)`},
			"dev = 1\nhost = x\nhost = 1",
			true, `the serve log names the fast route: "dev = 1" (line 1)`},
		{"a NaN size weighs nothing", []string{`dev = (\S+)`}, []string{HeavierPrefix + `host = (\S+)`},
			"dev = 1\nhost = NaN\nhost = 3",
			false, `the serve log names both routes; the slow route wins the doubt: "host = NaN" (line 2): 3 in host buffers in this model load, more than the 1 on the device, after "dev = 1" (line 1)`},
		{"a negative size weighs nothing", []string{`dev = (\S+)`}, []string{HeavierPrefix + `host = (\S+)`},
			"dev = 1\nhost = -5\nhost = 3",
			false, `the serve log names both routes; the slow route wins the doubt: "host = -5" (line 2): 3 in host buffers in this model load, more than the 1 on the device, after "dev = 1" (line 1)`},
		{"an infinite size weighs nothing", []string{`dev = (\S+)`}, []string{HeavierPrefix + `host = (\S+)`},
			"dev = Inf\nhost = 5",
			false, `the serve log names both routes; the slow route wins the doubt: "host = 5" (line 2): 5 in host buffers in this model load, more than the 0 on the device, after "dev = Inf" (line 1)`},
		{"a group that took no part weighs nothing", []string{`dev(?: = (\d+))?`}, []string{HeavierPrefix + `host = (\S+)`},
			"dev\nhost = 5",
			false, `the serve log names both routes; the slow route wins the doubt: "host = 5" (line 2): 5 in host buffers in this model load, more than the 0 on the device, after "dev" (line 1)`},
		{"a size at the start of the line", []string{`^(\d+) dev`}, []string{HeavierPrefix + `host = (\S+)`},
			"5 dev\nhost = 3",
			true, `the serve log names the fast route: "5 dev" (line 1)`},
		{"a second load on the host alone: slow", []string{`dev`}, []string{UnlessFastPrefix + `host`, LoadPrefix + `loading`},
			"loading a\ndev\nhost\nloading b\nhost",
			false, `the serve log names both routes; the slow route wins the doubt: "host" (line 5): and no line of this model load names the fast route, after "dev" (line 2)`},
		{"a first load on the host alone: slow", []string{`dev`}, []string{UnlessFastPrefix + `host`, LoadPrefix + `loading`},
			"loading a\nhost\nloading b\ndev\nhost",
			false, `the serve log names both routes; the slow route wins the doubt: "host" (line 2): and no line of this model load names the fast route, after "dev" (line 4)`},
		{"heavier per load: a light load after a heavy one", []string{`dev (\d+)`}, []string{HeavierPrefix + `host (\d+)`, LoadPrefix + `loading`},
			"loading a\ndev 1\nhost 5\nloading b\ndev 10\nhost 1",
			false, `the serve log names both routes; the slow route wins the doubt: "host 5" (line 3): 5 in host buffers in this model load, more than the 1 on the device, after "dev 1" (line 2)`},
		{"heavier per load: sizes of two loads are not added", []string{`dev (\d+)`}, []string{HeavierPrefix + `host (\d+)`, LoadPrefix + `loading`},
			"loading a\ndev 10\nhost 1\nloading b\nhost 2\ndev 3",
			true, `the serve log names the fast route: "dev 10" (line 2)`},
		// Plans: never the fast route; a plan for fewer than all is the
		// slow route; alone, a plan is said as only a plan.
		{"a plan for all, alone: only a plan", []string{PlanPrefix + `model=(?P<total>\d+) offload=(\d+)`}, []string{`never`},
			"x\nmsg=offload model=29 offload=29",
			false, `only a plan: "msg=offload model=29 offload=29" (line 2): 29 of 29 planned, not where the weights went; the serve log names neither route (fast: plan: model=(?P<total>\d+) offload=(\d+); slow: never): the evidence has to be there; what it says about devices: "msg=offload model=29 offload=29" (line 2)`},
		{"a plan for fewer than all: slow", []string{PlanPrefix + `model=(?P<total>\d+) offload=(\d+)`}, []string{`never`},
			"msg=offload model=29 offload=28",
			false, `the serve log names the slow route: "msg=offload model=29 offload=28" (line 1): 28 of 29 planned, not all; this run is on the slow route`},
		{"a plan for none of none: slow", []string{PlanPrefix + `(\d+)/(\d+) planned`}, []string{`never`},
			"0/0 planned",
			false, `the serve log names the slow route: "0/0 planned" (line 1): 0 of 0 planned, nothing counted; this run is on the slow route`},
		{"a plan for more than all: slow", []string{PlanPrefix + `(\d+)/(\d+) planned`}, []string{`never`},
			"30/29 planned",
			false, `the serve log names the slow route: "30/29 planned" (line 1): 30 of 29 planned, more than all; this run is on the slow route`},
		{"a plan without numbers: only a plan, the first quoted", []string{PlanPrefix + `will offload`, `placed`}, []string{`never`},
			"will offload a\nwill offload b",
			false, `only a plan: "will offload a" (line 1), not where the weights went; the serve log names neither route (fast: plan: will offload, placed; slow: never): the evidence has to be there; what it says about devices: "will offload a" (line 1), "will offload b" (line 2)`},
		{"a plan, then the placement: fast", []string{PlanPrefix + `will offload`, `placed`}, []string{`never`},
			"will offload\nplaced",
			true, `the serve log names the fast route: "placed" (line 2)`},
		{"a plan for all is no line of its load naming the fast route", []string{PlanPrefix + `(\d+)/(\d+) planned`}, []string{UnlessFastPrefix + `host`},
			"3/3 planned\nhost",
			false, `the serve log names the slow route: "host" (line 2): and no line of this model load names the fast route; this run is on the slow route`},
		{"a load line in the fast list", []string{`dev`, LoadPrefix + `loading`}, []string{UnlessFastPrefix + `host`},
			"dev\nloading b\nhost",
			false, `the serve log names both routes; the slow route wins the doubt: "host" (line 3): and no line of this model load names the fast route, after "dev" (line 1)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, a := routeOf(t, tt.fast, tt.slow, tt.log)
			if a.OK != tt.ok || a.Detail != tt.detail {
				t.Errorf("Judge(%q) = %v %q,\nwant %v %q", tt.log, a.OK, a.Detail, tt.ok, tt.detail)
			}
		})
	}
}

func TestRouteAnchorsAndWindows(t *testing.T) {
	m, err := NewMatcher([]string{`^start`, `\Atext`}, []string{`end$`, `done\z`})
	if err != nil {
		t.Fatal(err)
	}
	// A window that does not start its line: no start anchor matches; one
	// that does not end it: no end anchor.
	m.Segment(1, []byte("start of a cut window"), false, true)
	m.Segment(1, []byte("text of a cut window"), false, true)
	m.Segment(2, []byte("cut before the end"), true, false)
	m.Segment(2, []byte("cut before done"), true, false)
	if ev := m.Evidence(); ev.Fast != nil || ev.Slow != nil {
		t.Errorf("Evidence() = %+v %+v: an anchored pattern matched inside a cut line", ev.Fast, ev.Slow)
	}
	m.Segment(3, []byte("start here and end"), true, true)
	ev := m.Evidence()
	if ev.Fast == nil || ev.Fast.Line != 3 || ev.Slow == nil || ev.Slow.Line != 3 {
		t.Errorf("Evidence() = %+v %+v, want both on line 3", ev.Fast, ev.Slow)
	}
	if ev.LongLines != 1 || ev.FirstLongLine != 1 || ev.Lines != 3 {
		t.Errorf("LongLines %d, FirstLongLine %d, Lines %d; want 1, 1, 3", ev.LongLines, ev.FirstLongLine, ev.Lines)
	}
	m.Segment(5, []byte("x"), false, false)
	m.Segment(5, []byte("y"), false, true)
	if ev := m.Evidence(); ev.LongLines != 2 || ev.FirstLongLine != 1 || ev.Lines != 5 {
		t.Errorf("after a second long line: LongLines %d, FirstLongLine %d, Lines %d; want 2, 1, 5", ev.LongLines, ev.FirstLongLine, ev.Lines)
	}
	for expr, want := range map[string][2]bool{`^a`: {true, false}, `(?m)a$`: {false, true}, `\Aa\z`: {true, true}, `a|b`: {false, false}, `x(^a)`: {true, false}} {
		if b, e := anchors(expr); [2]bool{b, e} != want {
			t.Errorf("anchors(%q) = %v %v, want %v", expr, b, e, want)
		}
	}
}

func TestDeviceLinesFromTheLogsStart(t *testing.T) {
	m, err := NewMatcher([]string{`fast`}, []string{`slow`})
	if err != nil {
		t.Fatal(err)
	}
	m.Segment(DeviceLines, []byte("using device CUDA0"), true, true)
	m.Segment(DeviceLines+1, []byte("using device CUDA1"), true, true)
	m.Segment(DeviceLines+2, []byte("x"), false, true)
	if ev := m.Evidence(); len(ev.Devices) != 1 || ev.Devices[0].Line != DeviceLines {
		t.Errorf("Devices = %+v, want line %d alone", ev.Devices, DeviceLines)
	}
}

func TestNeitherSays(t *testing.T) {
	var log []string
	for i := range 12 {
		log = append(log, "ggml_backend: device "+strings.Repeat("d", i))
	}
	ev, a := routeOf(t, []string{`fast`}, []string{`slow`}, "loading\n"+strings.Join(log, "\n"))
	if len(ev.Devices) != MaxDevices || ev.Devices[0].Line != 2 {
		t.Errorf("Devices = %+v, want the first %d lines mentioning a device, from line 2", ev.Devices, MaxDevices)
	}
	if !strings.Contains(a.Detail, `what it says about devices: "ggml_backend: device " (line 2), "ggml_backend: device d" (line 3)`) {
		t.Errorf("neither detail = %q, want the device lines quoted", a.Detail)
	}
	ev.Hint = "add -lv 4 to --serve"
	if a := Judge(ev); !strings.Contains(a.Detail, "the evidence has to be there; add -lv 4 to --serve; what it says") {
		t.Errorf("neither detail with a hint = %q", a.Detail)
	}
	_, a = routeOf(t, []string{`fast`}, []string{`slow`}, "loading\nlistening")
	if want := "; none of its 2 lines mentions a device (CPU, GPU, NPU, device, backend, ...)"; !strings.HasSuffix(a.Detail, want) {
		t.Errorf("neither detail = %q, want it to end %q", a.Detail, want)
	}
	// An empty log: said, with what was looked for.
	if a := Judge(Evidence{FastPatterns: []string{`fast`}, SlowPatterns: []string{`slow`}}); a.OK || a.Detail != "the serve log names neither route (fast: fast; slow: slow): the evidence has to be there; the log is empty" {
		t.Errorf("Judge(an empty log) = %+v", a)
	}
	// Device lines are looked for in the first DeviceLines lines: past
	// them, the detail says so.
	for _, tt := range []struct {
		lines int
		want  string
	}{
		{DeviceLines, fmt.Sprintf("; none of its %d lines mentions a device (CPU, GPU, NPU, device, backend, ...)", DeviceLines)},
		{DeviceLines + 1, fmt.Sprintf("; none of its first %d lines (of %d) mentions a device (CPU, GPU, NPU, device, backend, ...); later lines were not looked at", DeviceLines, DeviceLines+1)},
	} {
		if a := Judge(Evidence{Lines: tt.lines}); !strings.HasSuffix(a.Detail, tt.want) {
			t.Errorf("Judge(%d lines, no device) = %q, want it to end %q", tt.lines, a.Detail, tt.want)
		}
	}
	// A long device line is quoted around the word.
	ev, _ = routeOf(t, []string{`fast`}, []string{`slow`}, strings.Repeat("z", 500)+" NPU")
	if len(ev.Devices) != 1 || !strings.HasSuffix(ev.Devices[0].Text, "z NPU") {
		t.Errorf("Devices = %+v, want an excerpt ending at the word", ev.Devices)
	}
}

func TestRouteDetailNotes(t *testing.T) {
	ev := Evidence{Fast: &Match{Line: 2, Text: "fast"}, LongLines: 3, FirstLongLine: 7, Dropped: 1234}
	want := `the serve log names the fast route: "fast" (line 2); 3 line(s) longer than 64 KiB, the first at line 7, were read in windows overlapping by 4 KiB; 1234 bytes of the log were cut from serve.log before this reading (the run's own scan read them): evidence there was not seen`
	if a := Judge(ev); a.Detail != want || !a.OK {
		t.Errorf("Judge(%+v) = %q, want %q", ev, a.Detail, want)
	}
}

func TestRuleErrors(t *testing.T) {
	_, err := NewMatcher(
		[]string{`ok`, `route (`, CountPrefix + `(\d+) of \d+`, UnlessFastPrefix + `x`, CountPrefix + " ", HeavierPrefix + `(\d+)`, PlanPrefix + `(\d+) of \d+`, PlanPrefix + `(\d+) (\d+) (\d+)`},
		[]string{`a**`, CountPrefix + `(\d+)/(\d+)`, HeavierPrefix + `host`, PlanPrefix + `will offload`})
	if err == nil {
		t.Fatal("NewMatcher of bad rules: no error")
	}
	for _, want := range []string{
		`--fast-route "route (" is not a valid RE2 pattern`,
		`--fast-route "count: (\\d+) of \\d+": a count rule needs two groups capturing numbers, e.g. 'count: offloaded (\d+)/(\d+) layers'; it has 1`,
		`--fast-route "unless-fast: x": an unless-fast rule names the slow route when no line names the fast one; pass it as --slow-route`,
		`--fast-route "count:  ": an empty pattern matches every line`,
		`--slow-route "a**" is not a valid RE2 pattern`,
		`--slow-route "count: (\\d+)/(\\d+)": a count rule names both routes (counts equal: fast; not equal: slow); pass it as --fast-route`,
		`--fast-route "heavier: (\\d+)": a heavier rule names the slow route when its sizes outweigh the device's; pass it as --slow-route`,
		`--slow-route "heavier: host": a heavier rule needs one group capturing a size, e.g. 'heavier: CPU model buffer size = +([0-9.]+) MiB'; it has 0`,
		`--fast-route "plan: (\\d+) of \\d+": a plan rule has no group, or two capturing numbers (planned, of all), e.g. 'plan: model=(?P<total>\d+) offload=(\d+)'; it has 1`,
		`--fast-route "plan: (\\d+) (\\d+) (\\d+)": a plan rule has no group, or two capturing numbers (planned, of all), e.g. 'plan: model=(?P<total>\d+) offload=(\d+)'; it has 3`,
		`--slow-route "plan: will offload": a plan rule states a plan for the fast route, never a placement; pass it as --fast-route`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("NewMatcher error =\n%v\nwant it to hold %q", err, want)
		}
	}
	if strings.Count(err.Error(), "\n") != 10 {
		t.Errorf("NewMatcher error lists %d problems, want 11:\n%v", strings.Count(err.Error(), "\n")+1, err)
	}
}

func TestExcerpt(t *testing.T) {
	long := strings.Repeat("a", 400) + "MATCH" + strings.Repeat("b", 400)
	huge := strings.Repeat("h", 2000)
	wideBefore := strings.Repeat("é", 200) + "MATCH" + strings.Repeat("x", 400)
	wideAfter := strings.Repeat("x", 400) + "MATCH" + strings.Repeat("é", 300)
	tests := []struct {
		name     string
		text     string
		from, to int
		want     string
	}{
		{"a short line whole", "short line", 0, 5, "short line"},
		{"a line of excerptMax whole", strings.Repeat("x", excerptMax), 250, 251, strings.Repeat("x", excerptMax)},
		{"around a match in the middle", long, 400, 405, "..." + long[300:600] + "..."},
		{"a match at the start", long, 0, 5, long[:excerptMax] + "..."},
		{"a match at the end", long, 790, 805, "..." + long[690:]},
		{"a long match whole", long, 100, 800, long[:800] + "..."},
		{"a very long match cut", huge, 0, 1500, huge[:3*excerptMax] + "..."},
		{"not inside a character before", wideBefore, 401, 405, "..." + wideBefore[300:601] + "..."},
		{"not inside a character after", wideAfter, 400, 405, "..." + wideAfter[300:601] + "..."},
		{"a line that starts inside a character", "\x80" + long, 50, 55, "\x80" + long[:excerptMax-1] + "..."},
	}
	for _, tt := range tests {
		if got := excerpt([]byte(tt.text), tt.from, tt.to); got != tt.want {
			t.Errorf("%s: excerpt(%d bytes, %d, %d) = %q, want %q", tt.name, len(tt.text), tt.from, tt.to, got, tt.want)
		}
	}
}

func TestEvidenceKeepsNoWeakMatchBesideAFastOne(t *testing.T) {
	m, err := NewMatcher([]string{`fast`}, []string{UnlessFastPrefix + `cpu`})
	if err != nil {
		t.Fatal(err)
	}
	m.Line([]byte("cpu"))
	if ev := m.Evidence(); ev.Slow == nil {
		t.Errorf("Evidence() after a cpu line alone: Slow = nil, want the unless-fast match")
	}
	m.Line([]byte("fast"))
	want := Evidence{FastPatterns: []string{`fast`}, SlowPatterns: []string{UnlessFastPrefix + `cpu`}, Fast: &Match{Line: 2, Text: "fast", Pattern: "fast"}, Lines: 2, Devices: []Match{{Line: 1, Text: "cpu"}}}
	if diff := cmp.Diff(want, m.Evidence()); diff != "" {
		t.Errorf("Evidence() (-want +got):\n%s", diff)
	}
}

func TestMustHold(t *testing.T) {
	for expr, want := range map[string]string{
		`per-op forward`:            "per-op forward",
		`abc.def`:                   "abc",
		`a.bc.def`:                  "def",
		`(\d+) of (\d+) roles have`: "roles have",
		`(?i)per-op`:                "",
		`a|b`:                       "",
		`x+`:                        "",
		`load_tensors: +CUDA\d+`:    "load_tensors:",
	} {
		if got := string(mustHold(expr)); got != want {
			t.Errorf("mustHold(%q) = %q, want %q", expr, got, want)
		}
	}
}

func TestLowerAndDeviceWord(t *testing.T) {
	for i := range 256 {
		want := byte(i)
		if 'A' <= i && i <= 'Z' {
			want = byte(i) + 'a' - 'A'
		}
		if lower[i] != want {
			t.Errorf("lower[%q] = %q, want %q", rune(i), lower[i], want)
		}
	}
	m := &Matcher{}
	for text, want := range map[string]int{"CPU only": 0, "on the ASCEND card": 7, "gpu and cpu": 8, "nothing here": -1, "x Offload": 2} {
		at, ok := m.deviceWord([]byte(text))
		if !ok {
			at = -1
		}
		if at != want {
			t.Errorf("deviceWord(%q) = %d, %v; want %d", text, at, ok, want)
		}
	}
}

func TestCountAfterAPlainFastRule(t *testing.T) {
	_, a := routeOf(t, []string{`ready`, CountPrefix + `(\d+)/(\d+)`}, []string{`never`}, "ready\nloaded 1/3\nloaded 2/3")
	want := `the serve log names both routes; the slow route wins the doubt: "loaded 1/3" (line 2): 1 of 3, not all, after "ready" (line 1)`
	if a.Detail != want {
		t.Errorf("Judge() = %q, want %q", a.Detail, want)
	}
}

func TestMatcher(t *testing.T) {
	t.Run("first match of each route is kept", func(t *testing.T) {
		m, err := NewMatcher([]string{`private route (\w+)`, `fast kernels`}, []string{`per-op`})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []string{"a", "using fast kernels", "on the private route dx", "per-op forward", "per-op again"} {
			m.Line([]byte(l))
		}
		want := Evidence{
			FastPatterns: []string{`private route (\w+)`, `fast kernels`}, SlowPatterns: []string{`per-op`},
			Fast:  &Match{Line: 2, Text: "using fast kernels", Pattern: "fast kernels"},
			Slow:  &Match{Line: 4, Text: "per-op forward", Pattern: "per-op"},
			Lines: 5,
		}
		if diff := cmp.Diff(want, m.Evidence()); diff != "" {
			t.Errorf("Evidence() (-want +got):\n%s", diff)
		}
	})
	t.Run("a long line is matched on its first MaxLine bytes, quoted around the match", func(t *testing.T) {
		m, err := NewMatcher([]string{`on the private route`}, []string{`per-op forward`})
		if err != nil {
			t.Fatal(err)
		}
		m.Line([]byte(strings.Repeat("x", 1000) + "on the private route " + strings.Repeat("x", MaxLine)))
		m.Line([]byte(strings.Repeat("y", MaxLine) + "per-op forward"))
		ev := m.Evidence()
		if ev.Fast == nil || !strings.HasPrefix(ev.Fast.Text, "...") || !strings.Contains(ev.Fast.Text, "on the private route") || len(ev.Fast.Text) > 3*excerptMax {
			t.Errorf("Fast = %+v, want an excerpt around the match", ev.Fast)
		}
		if ev.Slow != nil {
			t.Errorf("Slow matched text past MaxLine: line %d", ev.Slow.Line)
		}
	})
	for _, tt := range []struct {
		name       string
		fast, slow []string
		want       string
	}{
		{"invalid fast pattern", []string{`route (`}, []string{`x`}, `--fast-route "route (" is not a valid RE2 pattern`},
		{"invalid slow pattern", []string{`x`}, []string{`a**`}, `--slow-route "a**" is not a valid RE2 pattern`},
		{"no fast pattern", nil, []string{`x`}, `--fast-route: no pattern given`},
		{"no slow pattern", []string{`x`}, nil, `--slow-route: no pattern given`},
		{"empty pattern", []string{``}, []string{`x`}, `--fast-route: an empty pattern matches every line`},
		{"empty slow pattern", []string{`x`}, []string{``}, `--slow-route: an empty pattern`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewMatcher(tt.fast, tt.slow)
			// The flag's name once: an error begins with it.
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("NewMatcher(%q, %q) error = %v, want one beginning %q", tt.fast, tt.slow, err, tt.want)
			}
		})
	}
}

// A line of exactly MaxLine bytes is whole: its end anchors match; one
// byte more, it is cut, and they do not.
func TestLineOfExactlyMaxLine(t *testing.T) {
	m, err := NewMatcher([]string{`fast`}, []string{`end$`})
	if err != nil {
		t.Fatal(err)
	}
	m.Line([]byte(strings.Repeat("x", MaxLine-2) + "end")) // MaxLine+1: cut, so not its end
	if ev := m.Evidence(); ev.Slow != nil {
		t.Errorf("a line cut at MaxLine matched an end anchor: %+v", ev.Slow)
	}
	m.Line([]byte(strings.Repeat("x", MaxLine-3) + "end")) // exactly MaxLine: whole
	if ev := m.Evidence(); ev.Slow == nil || ev.Slow.Line != 2 {
		t.Errorf("a line of exactly MaxLine: Slow = %+v, want line 2", ev.Slow)
	}
}
