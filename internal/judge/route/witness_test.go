package route

import (
	"fmt"
	"strings"
	"testing"
)

// The reference serve's lines for its two routes, as DefaultFast and
// DefaultSlow name them.
const (
	fastLine = "npu: Qwen3-0.6B ready on the private route dx (4 of 4 roles)"
	slowLine = "npu: no 16-row decode kernel for role ffn; using the per-op forward"
)

// npuWitness is a witness of a serve that named the NPU's classes; f
// changes it.
func npuWitness(f func(w *Witness)) *Witness {
	w := &Witness{Devices: []string{"/dev/accel/accel*"}, Libraries: []string{"libggml-cann*.so*"}, Processes: 2}
	if f != nil {
		f(w)
	}
	return w
}

func TestRouteWitnessed(t *testing.T) {
	fastEv := Evidence{Fast: &Match{Line: 3, Text: fastLine, Pattern: "p"}, Lines: 5}
	slowEv := Evidence{Slow: &Match{Line: 4, Text: slowLine, Pattern: "p"}, Lines: 5}
	neitherEv := Evidence{FastPatterns: []string{"f"}, SlowPatterns: []string{"s"}, Lines: 2}
	fastQ := `the serve log names the fast route: "` + fastLine + `" (line 3)`
	neitherQ := "the serve log names neither route (fast: f; slow: s): the evidence has to be there; none of its 2 lines mentions a device (CPU, GPU, NPU, device, backend, ...)"
	none := `the serve's processes (2 read) hold no device of the fast route's classes (/dev/accel/accel*) and map none of its backends (libggml-cann*.so*)`
	busy := Usage{Source: "fdinfo", EngineNS: 1_900_000_000, SpanNS: 2_100_000_000}

	tests := []struct {
		name   string
		ev     Evidence
		w      *Witness
		ok     bool
		detail string
	}{
		{"off: the log alone", fastEv, nil, true, fastQ},
		{"not read: the log decides, and says so", fastEv, npuWitness(func(w *Witness) { w.NotRead = "/proc: permission denied" }), true,
			fastQ + "; witnesses: not witnessed (/proc: permission denied): the verdict rests on the log"},
		{"not read: a silent binary log stays a FAIL", neitherEv, npuWitness(func(w *Witness) { w.NotRead = "x"; w.Binary = true; w.Usage = []Usage{busy} }), false,
			neitherQ + "; witnesses: not witnessed (x): the verdict rests on the log"},
		{"no classes known", fastEv, &Witness{Processes: 1}, true,
			fastQ + "; witnesses: not witnessed: no device class or backend library of the fast route is known for this serve (--witness-device, --witness-library): the verdict rests on the log"},
		{"libraries alone are a class", fastEv, &Witness{Libraries: []string{"libcuda.so*"}, Processes: 1}, false,
			fastQ + `; but the serve's processes (1 read) hold no device of the fast route's classes () and map none of its backends (libcuda.so*): this run is not on the fast route`},
		{"fast words, no device: FAIL saying both", fastEv, npuWitness(nil), false,
			fastQ + "; but " + none + ": this run is not on the fast route"},
		{"fast words, no device, a process unread: not witnessed", fastEv, npuWitness(func(w *Witness) { w.Unread = []string{"pid 9: permission denied"} }), true,
			fastQ + "; witnesses: not witnessed: " + none + ", and 1 of the serve's processes could not be read (pid 9: permission denied): the verdict rests on the log"},
		{"fast words, no device, part of the serve left unread by a bound: not witnessed", fastEv, npuWitness(func(w *Witness) {
			w.Cut = "256 of the serve's 300 processes read (at most 256)"
		}), true,
			fastQ + "; witnesses: not witnessed: " + none + "; 256 of the serve's 300 processes read (at most 256): what was left unread may hold what the rest does not: the verdict rests on the log"},
		{"fast words, no device, unread and cut: the unread named", fastEv, npuWitness(func(w *Witness) {
			w.Unread = []string{"pid 9: permission denied"}
			w.Cut = "c"
		}), true,
			fastQ + "; witnesses: not witnessed: " + none + "; c, and 1 of the serve's processes could not be read (pid 9: permission denied): the verdict rests on the log"},
		{"fast words, no device, a process hiding and part cut: FAIL", fastEv, npuWitness(func(w *Witness) {
			w.Unread = []string{"pid 9: permission denied"}
			w.Hiding = []string{"pid 9"}
			w.Cut = "c"
		}), false,
			fastQ + "; but " + none + "; c, and 1 of the serve's processes run as the gate's own user yet hide their descriptors from it (pid 9: not dumpable: prctl PR_SET_DUMPABLE, an executable this user cannot read, or a set-id program): the fast route is not taken on the log's word alone"},
		{"fast words, no device, part cut by the serve's own size: FAIL", fastEv, npuWitness(func(w *Witness) {
			w.Cut = "c"
			w.Excess = []string{"5000 processes, where a healthy serve has a few", "e"}
		}), false,
			fastQ + "; but " + none + "; c, and the serve is past any healthy serve's size (5000 processes, where a healthy serve has a few; e): what the bounds left unread is its own doing: the fast route is not taken on the log's word alone"},
		{"fast words, no device, past a healthy size and a process unread: FAIL", fastEv, npuWitness(func(w *Witness) {
			w.Unread = []string{"pid 9: permission denied"}
			w.Cut = "c"
			w.Excess = []string{"e"}
		}), false,
			fastQ + "; but " + none + "; c, and the serve is past any healthy serve's size (e): what the bounds left unread is its own doing: the fast route is not taken on the log's word alone"},
		{"fast words, a device held, past a healthy size: the held device witnesses it", fastEv, npuWitness(func(w *Witness) {
			w.Held = []string{"/dev/accel/accel0"}
			w.Cut = "c"
			w.Excess = []string{"e"}
		}), true,
			fastQ + `; witnessed: the serve's processes (2 read) hold "/dev/accel/accel0" and map none of its backends (libggml-cann*.so*); c`},
		{"slow words, past a healthy size: slow, said as the slow route's", slowEv, npuWitness(func(w *Witness) { w.Cut = "c"; w.Excess = []string{"e"} }), false,
			`the serve log names the slow route: "` + slowLine + `" (line 4); this run is on the slow route; witnessed: ` + none + "; c"},
		{"fast words, no device, part cut, the section absent when read back: FAIL", fastEv, npuWitness(func(w *Witness) {
			w.Cut = "c"
			w.Absent = "a"
		}), false,
			fastQ + "; but " + none + "; c; a: this run is not on the fast route"},
		{"slow words, part cut: slow", slowEv, npuWitness(func(w *Witness) { w.Cut = "c" }), false,
			`the serve log names the slow route: "` + slowLine + `" (line 4); this run is on the slow route; witnessed: ` + none + "; c"},
		{"fast words, no device, a process of the gate's own user that hides its descriptors: FAIL", fastEv, npuWitness(func(w *Witness) {
			w.Unread = []string{"pid 9: permission denied"}
			w.Hiding = []string{"pid 9"}
		}), false,
			fastQ + "; but " + none + ", and 1 of the serve's processes run as the gate's own user yet hide their descriptors from it (pid 9: not dumpable: prctl PR_SET_DUMPABLE, an executable this user cannot read, or a set-id program): the fast route is not taken on the log's word alone"},
		{"slow words, a process that hides its descriptors: slow, and said as the slow route's", slowEv, npuWitness(func(w *Witness) {
			w.Unread = []string{"pid 9: permission denied"}
			w.Hiding = []string{"pid 9"}
		}), false, `the serve log names the slow route: "` + slowLine + `" (line 4); this run is on the slow route; witnessed: ` + none},
		{"fast words, a device held", fastEv, npuWitness(func(w *Witness) { w.Held = []string{"/dev/accel/accel0"} }), true,
			fastQ + `; witnessed: the serve's processes (2 read) hold "/dev/accel/accel0" and map none of its backends (libggml-cann*.so*)`},
		{"fast words, a device held, a process unread: the held device witnesses it", fastEv, npuWitness(func(w *Witness) {
			w.Held = []string{"/dev/accel/accel0"}
			w.Unread = []string{"pid 9: permission denied"}
		}), true,
			fastQ + `; witnessed: the serve's processes (2 read) hold "/dev/accel/accel0" and map none of its backends (libggml-cann*.so*)`},
		{"fast words, a backend mapped", fastEv, npuWitness(func(w *Witness) { w.Mapped = []string{"/opt/lib/libggml-cann.so"} }), true,
			fastQ + `; witnessed: the serve's processes (2 read) hold no device of the fast route's classes (/dev/accel/accel*) and map "/opt/lib/libggml-cann.so"`},
		{"fast words, both, with usage", fastEv, npuWitness(func(w *Witness) {
			w.Held = []string{"/dev/accel/accel0"}
			w.Mapped = []string{"/opt/lib/libggml-cann.so"}
			w.Usage = []Usage{busy, {Source: "nvidia-smi", MemoryBytes: 1 << 20}, {Source: "x"}}
			w.NoUsage = []string{"npu-smi: not installed"}
			w.Cut = "1 process's maps cut at 4096 lines"
		}), true,
			fastQ + `; witnessed: the serve's processes (2 read) hold "/dev/accel/accel0" and map "/opt/lib/libggml-cann.so"; engine busy 1.9 s of 2.1 s decoding (fdinfo); device memory 1.0 MiB (nvidia-smi); no device memory or engine time (x); device usage not witnessed: npu-smi: not installed; 1 process's maps cut at 4096 lines`},
		{"slow words stay slow", slowEv, npuWitness(func(w *Witness) { w.Held = []string{"/dev/accel/accel0"}; w.Binary = true; w.Usage = []Usage{busy} }), false,
			`the serve log names the slow route: "` + slowLine + `" (line 4); this run is on the slow route; witnessed: the serve's processes (2 read) hold "/dev/accel/accel0" and map none of its backends (libggml-cann*.so*); engine busy 1.9 s of 2.1 s decoding (fdinfo)`},
		{"binary, silent log, engine time: PASS", neitherEv, npuWitness(func(w *Witness) { w.Held = []string{"/dev/accel/accel0"}; w.Binary = true; w.Usage = []Usage{busy} }), true,
			`the serve log names neither route, and the preset's route is the device or nothing (docs/presets.md): the serve's processes (2 read) hold "/dev/accel/accel0" and map none of its backends (libggml-cann*.so*); engine busy 1.9 s of 2.1 s decoding (fdinfo): the fast route`},
		{"binary, silent log, device memory: PASS", neitherEv, npuWitness(func(w *Witness) {
			w.Held = []string{"/dev/accel/accel0"}
			w.Binary = true
			w.Usage = []Usage{{Source: "fdinfo", MemoryBytes: 512}}
		}), true,
			`the serve log names neither route, and the preset's route is the device or nothing (docs/presets.md): the serve's processes (2 read) hold "/dev/accel/accel0" and map none of its backends (libggml-cann*.so*); device memory 512 bytes (fdinfo): the fast route`},
		{"binary, silent log, node held, no usage: FAIL", neitherEv, npuWitness(func(w *Witness) {
			w.Held = []string{"/dev/accel/accel0"}
			w.Binary = true
			w.Usage = []Usage{{Source: "fdinfo", SpanNS: 2_100_000_000}}
		}), false,
			neitherQ + `; witnessed: the serve's processes (2 read) hold "/dev/accel/accel0" and map none of its backends (libggml-cann*.so*); engine busy 0 s of 2.1 s decoding (fdinfo); a device held open proves little: no device memory or engine time used while the judged replies decoded was witnessed`},
		{"binary, silent log, nothing held: FAIL", neitherEv, npuWitness(func(w *Witness) { w.Binary = true }), false,
			neitherQ + "; witnessed: " + none},
		{"not binary, silent log, engine time: still FAIL", neitherEv, npuWitness(func(w *Witness) { w.Held = []string{"/dev/accel/accel0"}; w.Usage = []Usage{busy} }), false,
			neitherQ + `; witnessed: the serve's processes (2 read) hold "/dev/accel/accel0" and map none of its backends (libggml-cann*.so*); engine busy 1.9 s of 2.1 s decoding (fdinfo)`},
		{"many held: the first four named", fastEv, npuWitness(func(w *Witness) {
			w.Held = []string{"/dev/accel/accel0", "/dev/accel/accel1", "/dev/accel/accel2", "/dev/accel/accel3", "/dev/accel/accel4", "/dev/accel/accel5"}
		}), true,
			fastQ + `; witnessed: the serve's processes (2 read) hold "/dev/accel/accel0", "/dev/accel/accel1", "/dev/accel/accel2", "/dev/accel/accel3", 2 more and map none of its backends (libggml-cann*.so*)`},
		{"a path with escapes is quoted", fastEv, npuWitness(func(w *Witness) { w.Mapped = []string{"/tmp/libggml-cann.so\n::error::x"} }), true,
			fastQ + `; witnessed: the serve's processes (2 read) hold no device of the fast route's classes (/dev/accel/accel*) and map "/tmp/libggml-cann.so\n::error::x"`},
		{"account none on the device: slow, like a log line", neitherEv, npuWitness(func(w *Witness) {
			w.Account = &Account{Source: "GET /api/ps", Text: `tiny: size 1000, size_vram 0`, Route: RouteSlow, Why: "none of the model on the device"}
		}), false,
			`the serve log names the slow route: "tiny: size 1000, size_vram 0" (the serve's own account, GET /api/ps): none of the model on the device; this run is on the slow route; witnessed: ` + none},
		{"account against fast words: the slow route wins the doubt", fastEv, npuWitness(func(w *Witness) {
			w.Held = []string{"/dev/accel/accel0"}
			w.Account = &Account{Source: "GET /api/ps", Text: "a", Route: RouteSlow, Why: "b"}
		}), false,
			`the serve log names both routes; the slow route wins the doubt: "a" (the serve's own account, GET /api/ps): b, after "` + fastLine + `" (line 3); witnessed: the serve's processes (2 read) hold "/dev/accel/accel0" and map none of its backends (libggml-cann*.so*)`},
		{"account all on the device, no device held: only a plan, FAIL", neitherEv, npuWitness(func(w *Witness) {
			w.Account = &Account{Source: "GET /api/ps", Text: "a", Route: RouteFast, Why: "all of the model on the device"}
		}), false,
			`only a plan: "a" (the serve's own account, GET /api/ps): all of the model on the device, not where the weights went; ` + neitherQ + "; witnessed: " + none},
		// ps says what Ollama expects, not where the runner put the
		// weights: all of the model there never names the fast route,
		// even with the device held and busy.
		{"account all on the device, device held and busy: still only a plan, FAIL", neitherEv, npuWitness(func(w *Witness) {
			w.Held = []string{"/dev/accel/accel0"}
			w.Usage = []Usage{busy}
			w.Account = &Account{Source: "GET /api/ps", Text: "tiny: size 1000, size_vram 1000", Route: RouteFast, Why: "all of the model in device memory"}
		}), false,
			`only a plan: "tiny: size 1000, size_vram 1000" (the serve's own account, GET /api/ps): all of the model in device memory, not where the weights went; ` + neitherQ + `; witnessed: the serve's processes (2 read) hold "/dev/accel/accel0" and map none of its backends (libggml-cann*.so*); engine busy 1.9 s of 2.1 s decoding (fdinfo)`},
		{"account all on the device after the log's own plan: the log's plan is quoted", Evidence{FastPatterns: []string{"f"}, SlowPatterns: []string{"s"}, Lines: 2, Plan: &Match{Line: 1, Text: "plan"}}, npuWitness(func(w *Witness) {
			w.Account = &Account{Source: "GET /api/ps", Text: "a", Route: RouteFast}
		}), false,
			`only a plan: "plan" (line 1), not where the weights went; ` + neitherQ + "; witnessed: " + none},
		{"account all on the device against slow words: the slow route, the plan unquoted", slowEv, npuWitness(func(w *Witness) {
			w.Account = &Account{Source: "GET /api/ps", Text: "a", Route: RouteFast}
		}), false,
			`the serve log names the slow route: "` + slowLine + `" (line 4); this run is on the slow route; witnessed: ` + none},
		{"account fast, the log's own fast line is quoted", fastEv, npuWitness(func(w *Witness) {
			w.Held = []string{"/dev/accel/accel0"}
			w.Account = &Account{Source: "GET /api/ps", Text: "a", Route: RouteFast}
		}), true,
			fastQ + `; witnessed: the serve's processes (2 read) hold "/dev/accel/accel0" and map none of its backends (libggml-cann*.so*)`},
		{"account slow, the log's own slow line is quoted", slowEv, npuWitness(func(w *Witness) {
			w.Account = &Account{Source: "GET /api/ps", Text: "a", Route: RouteSlow}
		}), false,
			`the serve log names the slow route: "` + slowLine + `" (line 4); this run is on the slow route; witnessed: ` + none},
		{"account naming no route changes nothing", neitherEv, npuWitness(func(w *Witness) {
			w.Account = &Account{Source: "GET /api/ps", Text: "a"}
		}), false,
			neitherQ + "; witnessed: " + none},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := JudgeWitnessed(tc.ev, tc.w)
			if got.OK != tc.ok || got.Detail != tc.detail {
				t.Errorf("JudgeWitnessed = %+v\nwant ok %v, detail\n%s", got, tc.ok, tc.detail)
			}
		})
	}
}

// A witness section is read back from result.json, which anyone may edit:
// every list and text of it that goes into the route's detail is bounded.
// A padded unread list once made a route line of 14.9 MB.
func TestWitnessDetailBounded(t *testing.T) {
	fastEv := Evidence{Fast: &Match{Line: 3, Text: fastLine, Pattern: "p"}, Lines: 5}
	pids := func(n int, what string) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("pid %d%s", i, what))
		}
		return out
	}
	classes := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("/dev/c%d", i))
		}
		return out
	}
	long := strings.Repeat("é", maxText)
	tests := []struct {
		name string
		w    *Witness
		want string // in the detail
		not  string // not in it ("" for none)
	}{
		{"unread, padded", npuWitness(func(w *Witness) { w.Unread = pids(41207, ": permission denied") }),
			"could not be read (pid 0: permission denied, pid 1: permission denied, pid 2: permission denied, pid 3: permission denied, 41203 more)", "pid 4:"},
		{"unread, as many as named", npuWitness(func(w *Witness) { w.Unread = pids(maxListed, ": gone") }),
			"could not be read (pid 0: gone, pid 1: gone, pid 2: gone, pid 3: gone): the verdict", "more"},
		{"hiding, padded", npuWitness(func(w *Witness) { w.Unread, w.Hiding = pids(5, ": x"), pids(5, "") }),
			"hide their descriptors from it (pid 0, pid 1, pid 2, pid 3, 1 more: not dumpable", "pid 4,"},
		{"classes, as many as named", npuWitness(func(w *Witness) { w.Devices = classes(maxClasses) }),
			"classes (/dev/c0, /dev/c1, /dev/c2, /dev/c3, /dev/c4, /dev/c5, /dev/c6, /dev/c7, /dev/c8, /dev/c9, /dev/c10, /dev/c11, /dev/c12, /dev/c13, /dev/c14, /dev/c15)", "more"},
		{"classes, one past", npuWitness(func(w *Witness) { w.Devices = classes(maxClasses + 1) }),
			"/dev/c15, 1 more)", "/dev/c16"},
		{"libraries, one past", npuWitness(func(w *Witness) { w.Libraries = classes(maxClasses + 2) }),
			"backends (/dev/c0, /dev/c1, /dev/c2, /dev/c3, /dev/c4, /dev/c5, /dev/c6, /dev/c7, /dev/c8, /dev/c9, /dev/c10, /dev/c11, /dev/c12, /dev/c13, /dev/c14, /dev/c15, 2 more)", "/dev/c16"},
		{"a text as long as kept", npuWitness(func(w *Witness) { w.Unread = []string{long} }), "(" + long + "):", long + "..."},
		{"a text one past", npuWitness(func(w *Witness) { w.Unread = []string{long + "ž"} }), "(" + long + "...):", "ž"},
		{"not read, long", npuWitness(func(w *Witness) { w.NotRead = long + "ž" }), "not witnessed (" + long + "...): the verdict", "ž"},
		{"cut, long", npuWitness(func(w *Witness) { w.Cut = long + "ž" }), "; " + long + "...: what was left unread", "ž"},
		{"excess, padded", npuWitness(func(w *Witness) { w.Cut = "c"; w.Excess = pids(maxListed+3, "") }),
			"size (pid 0; pid 1; pid 2; pid 3; 3 more)", "pid 4"},
		{"no usage, padded", npuWitness(func(w *Witness) { w.NoUsage = pids(maxListed+2, "") }),
			"device usage not witnessed: pid 3; 2 more sources not witnessed: this run", "pid 5"},
		{"no usage, as many as named", npuWitness(func(w *Witness) { w.NoUsage = pids(maxListed, "") }),
			"device usage not witnessed: pid 3: this run", "more"},
		{"usage, padded", npuWitness(func(w *Witness) {
			w.Held = []string{"/dev/accel/accel0"}
			for i := range maxListed + 2 {
				w.Usage = append(w.Usage, Usage{Source: fmt.Sprint("s", i)})
			}
		}), "no device memory or engine time (s3); 2 more sources", "(s5)"},
		{"usage, as many as named, a long source", npuWitness(func(w *Witness) {
			w.Held = []string{"/dev/accel/accel0"}
			for range maxListed {
				w.Usage = append(w.Usage, Usage{Source: long + "ž"})
			}
		}), "no device memory or engine time (" + long + "...)", "more"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := JudgeWitnessed(fastEv, tc.w)
			if !strings.Contains(v.Detail, tc.want) {
				t.Errorf("detail (%d bytes) %.2000q\nwant it to hold %q", len(v.Detail), v.Detail, tc.want)
			}
			if tc.not != "" && strings.Contains(v.Detail, tc.not) {
				t.Errorf("detail (%d bytes) holds %q: %.2000q", len(v.Detail), tc.not, v.Detail)
			}
			if len(v.Detail) > 8000 {
				t.Errorf("detail of %d bytes", len(v.Detail))
			}
		})
	}
}
