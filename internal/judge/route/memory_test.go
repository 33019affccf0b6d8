package route

import (
	"strings"
	"testing"
)

const gib = 1 << 30

// held is a witness of a serve holding an NVIDIA GPU's node, with the
// device's account m.
func held(m *Memory) *Witness {
	return &Witness{Devices: []string{"/dev/nvidia[0-9]*"}, Processes: 1, Held: []string{"/dev/nvidia0"}, Memory: m}
}

// weights is a Memory of 100 GiB of weights and one sample per figure.
func weights(w int64, samples ...MemorySample) *Memory {
	return &Memory{WeightsBytes: w, WeightsFrom: "m.gguf: GGUF tensor data", Samples: samples}
}

func smi(b int64) MemorySample {
	return MemorySample{Source: "nvidia-smi", Bytes: b, Processes: []ProcessMemory{{PID: 42, Bytes: b}}}
}

func TestRouteMemory(t *testing.T) {
	fastEv := Evidence{Fast: &Match{Line: 3, Text: fastLine, Pattern: "p"}, Lines: 5}
	slowEv := Evidence{Slow: &Match{Line: 4, Text: slowLine, Pattern: "p"}, Lines: 5}
	neitherEv := Evidence{FastPatterns: []string{"f"}, SlowPatterns: []string{"s"}, Lines: 2}
	fastQ := `the serve log names the fast route: "` + fastLine + `" (line 3)`
	slowQ := `the serve log names the slow route: "` + slowLine + `" (line 4); this run is on the slow route`
	neitherQ := "the serve log names neither route (fast: f; slow: s): the evidence has to be there; none of its 2 lines mentions a device (CPU, GPU, NPU, device, backend, ...)"
	seen := `; witnessed: the serve's processes (1 read) hold "/dev/nvidia0" and map none of its backends ()`
	acct := func(on, dev string) string {
		return on + " of 100.0 GiB of the model's weights on the device (nvidia-smi: " + dev + " over 1 process; the weights: m.gguf: GGUF tensor data)"
	}
	tests := []struct {
		name   string
		ev     Evidence
		w      *Witness
		ok     bool
		detail string
	}{
		{"no memory: as before", neitherEv, held(nil), false, neitherQ + seen},
		{"neither, all of the weights: the fast route", neitherEv, held(weights(100*gib, smi(100*gib), smi(130*gib))), true,
			"the device's own account names the fast route where the serve log names neither: " + acct("100.0", "100.0 GiB") + "; " + neitherQ + seen},
		{"neither, 90% of the weights (the margin): the fast route", neitherEv, held(weights(100, smi(90))), true,
			"the device's own account names the fast route where the serve log names neither: 90 of 100 bytes of the model's weights on the device (nvidia-smi: 90 bytes over 1 process; the weights: m.gguf: GGUF tensor data); " + neitherQ + seen},
		{"neither, 89% of the weights: a partial offload", neitherEv, held(weights(100, smi(89))), false,
			"the device's own account names the slow route where the serve log names neither: 89 of 100 bytes of the model's weights on the device (nvidia-smi: 89 bytes over 1 process; the weights: m.gguf: GGUF tensor data): a partial offload; this run is on the slow route; " + neitherQ + seen},
		{"neither, 12.1 of 24.9 GiB: a partial offload", neitherEv, held(weights(249*gib/10, smi(121*gib/10))), false,
			"the device's own account names the slow route where the serve log names neither: 12.1 of 24.9 GiB of the model's weights on the device (nvidia-smi: 12.1 GiB over 1 process; the weights: m.gguf: GGUF tensor data): a partial offload; this run is on the slow route; " + neitherQ + seen},
		{"neither, none of them", neitherEv, held(weights(100*gib, smi(0))), false,
			"the device's own account names the slow route where the serve log names neither: " + acct("0.0", "0.0 GiB") + ": none of them; this run is on the slow route; " + neitherQ + seen},
		{"the least of the samples decides: the first all, the last part", neitherEv, held(weights(100*gib, smi(100*gib), smi(50*gib))), false,
			"the device's own account names the slow route where the serve log names neither: " + acct("50.0", "50.0 GiB") + ": a partial offload; this run is on the slow route; " + neitherQ + seen},
		{"fast words, all of the weights: agrees", fastEv, held(weights(100*gib, smi(120*gib))), true,
			fastQ + seen + "; the device's own account agrees: " + acct("100.0", "120.0 GiB")},
		{"fast words (an account that lies), none on the device: FAIL naming both", fastEv, held(weights(100*gib, smi(0))), false,
			fastQ + seen + "; but the device's own account names the slow route: " + acct("0.0", "0.0 GiB") + ": none of them: the log and the device disagree, and the slow route wins the doubt"},
		{"slow words, all on the device: the slow route, naming both", slowEv, held(weights(100*gib, smi(100*gib))), false,
			slowQ + seen + "; the device's own account names the fast route (" + acct("100.0", "100.0 GiB") + "), the log the slow route: the slow route wins the doubt"},
		{"slow words, part on the device: agrees", slowEv, held(weights(100*gib, smi(10*gib))), false,
			slowQ + seen + "; the device's own account agrees: " + acct("10.0", "10.0 GiB") + ": a partial offload"},
		{"neither, a binary preset's usage made it fast, all on the device", neitherEv, &Witness{Devices: []string{"/dev/accel/accel*"}, Binary: true, Processes: 1, Held: []string{"/dev/accel/accel0"},
			Usage: []Usage{{Source: "fdinfo", MemoryBytes: 1}}, Memory: weights(100*gib, smi(100*gib))}, true,
			`the serve log names neither route, and the preset's route is the device or nothing (docs/presets.md): the serve's processes (1 read) hold "/dev/accel/accel0" and map none of its backends (); device memory 1 bytes (fdinfo): the fast route; and the device's own account: ` + acct("100.0", "100.0 GiB")},
		{"neither, a binary preset's usage made it fast, part on the device: FAIL", neitherEv, &Witness{Devices: []string{"/dev/accel/accel*"}, Binary: true, Processes: 1, Held: []string{"/dev/accel/accel0"},
			Usage: []Usage{{Source: "fdinfo", MemoryBytes: 1}}, Memory: weights(100*gib, smi(10*gib))}, false,
			"the device's own account names the slow route where the serve log names neither: " + acct("10.0", "10.0 GiB") + `: a partial offload; this run is on the slow route; the serve log names neither route, and the preset's route is the device or nothing (docs/presets.md): the serve's processes (1 read) hold "/dev/accel/accel0" and map none of its backends (); device memory 1 bytes (fdinfo): the fast route`},
		{"no account: neither stays", neitherEv, held(weights(100*gib, MemorySample{Why: "nvidia-smi: not installed"}, MemorySample{Why: "nvidia-smi: lists no process"})), false,
			neitherQ + seen + "; device memory: not witnessed (no account of the device's memory: nvidia-smi: not installed; nvidia-smi: lists no process)"},
		{"no sample at all", neitherEv, held(weights(100 * gib)), false,
			neitherQ + seen + "; device memory: not witnessed (no account of the device's memory was read)"},
		{"weights not sized: neither stays, saying why", neitherEv, held(&Memory{NoWeights: "the serve command names no model file", Samples: []MemorySample{smi(100 * gib)}}), false,
			neitherQ + seen + "; device memory: not witnessed (the model's weights not sized: the serve command names no model file)"},
		{"weights of 0 bytes, no reason: not sized", neitherEv, held(&Memory{Samples: []MemorySample{smi(0)}}), false,
			neitherQ + seen + "; device memory: not witnessed (the model's weights not sized: 0 bytes is no size)"},
		{"fast words, weights not sized: the log stands, nothing said", fastEv, held(&Memory{NoWeights: "x", Samples: []MemorySample{smi(0)}}), true, fastQ + seen},
		{"slow words, no account: the log stands, nothing said", slowEv, held(weights(100, MemorySample{Why: "y"})), false, slowQ + seen},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := JudgeWitnessed(tc.ev, tc.w)
			if got.OK != tc.ok || got.Detail != tc.detail {
				t.Errorf("JudgeWitnessed = %v %q\nwant %v %q", got.OK, got.Detail, tc.ok, tc.detail)
			}
		})
	}
}

// TestMemoryBounds pins every bound of the account and the weights: a
// figure past MaxMemoryBytes or below zero is not believed, and the
// least of the samples that were read decides.
func TestMemoryBounds(t *testing.T) {
	tests := []struct {
		name    string
		m       *Memory
		why     string // "" where it decides
		least   int64
		source  string
		fast    bool
		hasText string
	}{
		{"weights of 1 byte are sized", weights(1, smi(1)), "", 1, "nvidia-smi", true, ""},
		{"weights at the bound are sized", weights(MaxMemoryBytes, smi(MaxMemoryBytes)), "", MaxMemoryBytes, "nvidia-smi", true, ""},
		{"weights past the bound are not", &Memory{WeightsBytes: MaxMemoryBytes + 1, Samples: []MemorySample{smi(1)}}, "the model's weights not sized: 4398046511105 bytes is no size", 0, "", false, ""},
		{"weights below zero are not", &Memory{WeightsBytes: -1, NoWeights: "x", Samples: []MemorySample{smi(1)}}, "the model's weights not sized: x", 0, "", false, ""},
		{"an account at 0 is read", weights(10, smi(0)), "", 0, "nvidia-smi", false, "none of them"},
		{"an account below 0 is not", weights(10, smi(-1)), "no account of the device's memory: -1 bytes from nvidia-smi is past any device's memory", 0, "", false, ""},
		{"an account past the bound is not", weights(10, smi(MaxMemoryBytes+1)), "no account of the device's memory: 4398046511105 bytes from nvidia-smi is past any device's memory", 0, "", false, ""},
		{"an account past the bound beside one read: the one read", weights(10, smi(MaxMemoryBytes+1), smi(9)), "", 9, "nvidia-smi", true, ""},
		{"a sample with a source and a reason is none", weights(10, MemorySample{Source: "nvidia-smi", Bytes: 10, Why: "x"}), "no account of the device's memory: x", 0, "", false, ""},
		{"a sample with no source is none", weights(10, MemorySample{Bytes: 10}), "no account of the device's memory was read", 0, "", false, ""},
		{"a sample with no source is none, at 0", weights(10, MemorySample{Bytes: 0}), "no account of the device's memory was read", 0, "", false, ""},
		{"a sample with no source is none, at the bound", weights(10, MemorySample{Bytes: MaxMemoryBytes}), "no account of the device's memory was read", 0, "", false, ""},
		{"equal samples: the first", weights(10, MemorySample{Source: "a", Bytes: 5}, MemorySample{Source: "b", Bytes: 5}), "", 5, "a", false, "partial"},
		{"the less second", weights(10, MemorySample{Source: "a", Bytes: 6}, MemorySample{Source: "b", Bytes: 5}), "", 5, "b", false, "partial"},
		{"the less first", weights(10, MemorySample{Source: "a", Bytes: 5}, MemorySample{Source: "b", Bytes: 6}), "", 5, "a", false, "partial"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if why := tc.m.whyNot(); why != tc.why {
				t.Errorf("whyNot() = %q, want %q", why, tc.why)
			}
			if tc.why != "" {
				return
			}
			s, ok := tc.m.onDevice()
			if !ok || s.Bytes != tc.least || s.Source != tc.source {
				t.Errorf("onDevice() = %+v %v, want %d from %q", s, ok, tc.least, tc.source)
			}
			names, text := tc.m.account(s)
			if (names == RouteFast) != tc.fast || !strings.Contains(text, tc.hasText) {
				t.Errorf("account(%+v) = %s %q, want fast %v, %q", s, names, text, tc.fast, tc.hasText)
			}
		})
	}
}

// TestMemoryMargin pins MarginPercent at its boundary: 90 of 100 is all,
// 89 is not, and the comparison holds for sizes past 2^53.
func TestMemoryMargin(t *testing.T) {
	if MaxMemoryBytes != 4<<40 {
		t.Errorf("MaxMemoryBytes = %d, want 4 TiB", int64(MaxMemoryBytes))
	}
	if MarginPercent != 10 {
		t.Errorf("MarginPercent = %d, want 10 (docs/measuring.md says so)", MarginPercent)
	}
	tests := []struct {
		dev, weights int64
		want         bool
	}{
		{90, 100, true}, {89, 100, false}, {100, 100, true}, {1000, 100, true},
		{9, 10, true}, {8, 10, false}, {0, 1, false}, {1, 1, true},
		{MaxMemoryBytes / 10 * 9, MaxMemoryBytes / 10 * 10, true},
		{MaxMemoryBytes/10*9 - 1, MaxMemoryBytes / 10 * 10, false},
	}
	for _, tc := range tests {
		if got := all(tc.dev, tc.weights); got != tc.want {
			t.Errorf("all(%d, %d) = %v, want %v", tc.dev, tc.weights, got, tc.want)
		}
	}
}

func TestFigure(t *testing.T) {
	tests := []struct {
		b, of      int64
		want, unit string
	}{
		{gib, gib, "1.0", "GiB"},
		{gib - 1<<20, gib - 1, "1023.0", "MiB"},
		{3 << 29, 2 * gib, "1.5", "GiB"},
		{3 << 19, gib - 1, "1.5", "MiB"},
		{1 << 20, 1 << 20, "1.0", "MiB"},
		{1<<20 - 1, 1<<20 - 1, "1048575", "bytes"},
	}
	for _, tc := range tests {
		if got, u := figure(tc.b, tc.of), unit(tc.of); got != tc.want || u != tc.unit {
			t.Errorf("figure(%d, %d), unit = %q %q, want %q %q", tc.b, tc.of, got, u, tc.want, tc.unit)
		}
	}
	if plural(1, "process", "processes") != "process" || plural(2, "process", "processes") != "processes" || plural(0, "process", "processes") != "processes" {
		t.Error("plural: 1 process, 2 and 0 processes")
	}
}

// TestMemoryIdleEngines: a serve that holds the weights' size on the
// device while it decodes on the CPU is not on the fast route by memory
// alone where the engines' time was read and none was used.
func TestMemoryIdleEngines(t *testing.T) {
	neitherEv := Evidence{FastPatterns: []string{"f"}, SlowPatterns: []string{"s"}, Lines: 2}
	withUsage := func(u ...Usage) *Witness {
		w := held(weights(100*gib, MemorySample{Source: "fdinfo", Bytes: 100 * gib, Processes: []ProcessMemory{{PID: 42, Bytes: 100 * gib}}}))
		w.Usage = u
		return w
	}
	idleText := "engine busy 0 s of 2 s decoding, device memory 102400.0 MiB (fdinfo)"
	tests := []struct {
		name string
		w    *Witness
		ok   bool
		want string
	}{
		{"engines idle over the replies: not the fast route", withUsage(Usage{Source: "fdinfo", EngineNS: 0, SpanNS: 2e9, MemoryBytes: 100 * gib}), false,
			"the device's own account holds the weights (100.0 of 100.0 GiB of the model's weights on the device (fdinfo: 100.0 GiB over 1 process; the weights: m.gguf: GGUF tensor data)), but its engines did no work while the judged replies decoded (" + idleText + "): memory held is not memory used, and the serve log names neither route; the serve log names neither route"},
		{"one nanosecond of engine time: the fast route", withUsage(Usage{Source: "fdinfo", EngineNS: 1, SpanNS: 2e9, MemoryBytes: 100 * gib}), true,
			"the device's own account names the fast route where the serve log names neither"},
		{"one source idle, another busy: the fast route", withUsage(Usage{Source: "fdinfo", SpanNS: 2e9}, Usage{Source: "d3dkmt", EngineNS: 5, SpanNS: 2e9}), true,
			"the device's own account names the fast route where the serve log names neither"},
		{"no engine time read (nvidia-smi's memory alone): the fast route", withUsage(Usage{Source: "nvidia-smi", MemoryBytes: 100 * gib}), true,
			"the device's own account names the fast route where the serve log names neither"},
		{"no usage at all: the fast route", withUsage(), true,
			"the device's own account names the fast route where the serve log names neither"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := JudgeWitnessed(neitherEv, tt.w)
			if v.OK != tt.ok || !strings.HasPrefix(v.Detail, tt.want) {
				t.Errorf("ok %v, detail\n%s\nwant ok %v, detail starting\n%s", v.OK, v.Detail, tt.ok, tt.want)
			}
		})
	}
}

// TestMemorySlowOnDevice: where the preset's slow route holds all of the
// weights on the same device (vLLM's eager mode), the device's memory
// names no fast route; it still takes a PASS away.
func TestMemorySlowOnDevice(t *testing.T) {
	neitherEv := Evidence{FastPatterns: []string{"f"}, SlowPatterns: []string{"s"}, Lines: 2}
	fastEv := Evidence{Fast: &Match{Line: 3, Text: fastLine, Pattern: "p"}, Lines: 5}
	eager := func(m *Memory) *Witness {
		w := held(m)
		w.SlowOnDevice = "eager mode runs on the same GPU"
		return w
	}
	v := JudgeWitnessed(neitherEv, eager(weights(100*gib, smi(100*gib))))
	want := "the device's own account holds the weights (100.0 of 100.0 GiB of the model's weights on the device (nvidia-smi: 100.0 GiB over 1 process; the weights: m.gguf: GGUF tensor data)), but the serve's slow route holds them on the device too (eager mode runs on the same GPU): the device's memory names no fast route for it; the serve log names neither route"
	if v.OK || !strings.HasPrefix(v.Detail, want) {
		t.Errorf("all of the weights, the slow route on the device: ok %v, detail\n%s\nwant not ok, detail starting\n%s", v.OK, v.Detail, want)
	}
	if v := JudgeWitnessed(fastEv, eager(weights(100*gib, smi(10*gib)))); v.OK || !strings.Contains(v.Detail, "the log and the device disagree") {
		t.Errorf("the fast route's words, a tenth on the device: ok %v, detail %s; want a FAIL naming both", v.OK, v.Detail)
	}
	if v := JudgeWitnessed(fastEv, eager(weights(100*gib, smi(100*gib)))); !v.OK || !strings.Contains(v.Detail, "the device's own account agrees") {
		t.Errorf("the fast route's words, all on the device: ok %v, detail %s; want a PASS, the account agreeing", v.OK, v.Detail)
	}
}

// TestMemoryNoFastOnlyWhereItWouldPass: what keeps memory from naming the
// fast route (the slow route on the device, idle engines) is said only
// where the log names neither route and memory would have named the fast
// one: a partial offload stays a partial offload, a log naming the slow
// route stands; a source that read no span is passed over, not the end of
// the look at the others.
func TestMemoryNoFastOnlyWhereItWouldPass(t *testing.T) {
	neitherEv := Evidence{FastPatterns: []string{"f"}, SlowPatterns: []string{"s"}, Lines: 2}
	slowEv := Evidence{Slow: &Match{Line: 3, Text: "slow words", Pattern: "p"}, FastPatterns: []string{"f"}, Lines: 5}
	eager := func(m *Memory) *Witness {
		w := held(m)
		w.SlowOnDevice = "eager mode runs on the same GPU"
		return w
	}
	const but = "the device's own account holds the weights ("
	if v := JudgeWitnessed(neitherEv, eager(weights(100*gib, smi(50*gib)))); v.OK || strings.Contains(v.Detail, but) || !strings.Contains(v.Detail, "a partial offload") {
		t.Errorf("half of the weights, the slow route on the device, the log naming neither: ok %v, detail\n%s\nwant a FAIL naming the partial offload", v.OK, v.Detail)
	}
	if v := JudgeWitnessed(slowEv, eager(weights(100*gib, smi(100*gib)))); v.OK || strings.Contains(v.Detail, but) {
		t.Errorf("all of the weights, the log naming the slow route: ok %v, detail\n%s\nwant a FAIL that says nothing of memory held but unused", v.OK, v.Detail)
	}
	w := held(weights(100*gib, MemorySample{Source: "fdinfo", Bytes: 100 * gib, Processes: []ProcessMemory{{PID: 42, Bytes: 100 * gib}}}))
	w.Usage = []Usage{{Source: "nvidia-smi", MemoryBytes: 100 * gib}, {Source: "fdinfo", EngineNS: 0, SpanNS: 2e9, MemoryBytes: 100 * gib}}
	if v := JudgeWitnessed(neitherEv, w); v.OK || !strings.Contains(v.Detail, "its engines did no work") {
		t.Errorf("a source without a span, then one idle over the replies: ok %v, detail\n%s\nwant a FAIL, the engines idle", v.OK, v.Detail)
	}
}
