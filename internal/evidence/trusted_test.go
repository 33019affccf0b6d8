package evidence

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// An artifact's load limits and witness classes are its writer's: Trust
// puts the judge's own in their place, and a section deleted or emptied is
// judged as the gate never writes it.
func TestTrust(t *testing.T) {
	mine := judge.LoadLimits{Streams: 2, Expect: judge.LoadBatch, Efficiency: 0.5, FirstTokenMS: 1200, MaxRounds: 11}
	theirs := judge.LoadLimits{Streams: 2, Expect: judge.LoadSerial, Efficiency: 0.01, FirstTokenMS: 1e9, MaxRounds: 99}
	two := [][]measure.Reply{{{N: 1}, {N: 2}}}
	three := [][]measure.Reply{{{N: 1}, {N: 2}}, {{N: 1}, {N: 2}, {N: 3}}}
	devices, libraries := []string{"/dev/accel/accel*"}, []string{"libggml-cann*.so*"}
	on := Trusted{Witness: true, Devices: devices, Libraries: libraries, Binary: true}
	seen := &route.Witness{Devices: []string{"/dev/zero"}, Libraries: []string{"libsim*.so"}, Processes: 2,
		Held: []string{"/dev/zero", "/dev/accel/accel0"}, Mapped: []string{"/opt/libsim.so", "/opt/lib/libggml-cann.so.1"}}
	for _, tc := range []struct {
		name        string
		t           Trusted
		load        *judge.LoadRun
		witness     *route.Witness
		wantLoad    *judge.LoadRun
		wantWitness *route.Witness
		wantNote    string
	}{
		{name: "the judge's load limits, not the artifact's", t: Trusted{Load: mine},
			load: &judge.LoadRun{Limits: theirs, Rounds: two}, wantLoad: &judge.LoadRun{Limits: mine, Rounds: two}},
		{name: "no load asked: the rounds held judged with the judge's limits, at their streams", t: Trusted{Load: judge.LoadLimits{Expect: judge.LoadBatch, Efficiency: 0.5, FirstTokenMS: 1200}},
			load: &judge.LoadRun{Limits: theirs, Rounds: two}, wantLoad: &judge.LoadRun{Limits: judge.LoadLimits{Streams: 2, Expect: judge.LoadBatch, Efficiency: 0.5, FirstTokenMS: 1200}, Rounds: two},
			wantNote: "result.json holds load rounds of 2 streams, while no --load is asked here: they are judged all the same, but the same artifact with its load section deleted would have no load row at all; pass the gate's --load 2"},
		{name: "no load asked, no floor given: the gate's default at the rounds' streams", t: Trusted{Load: judge.LoadLimits{Expect: judge.LoadBatch, FirstTokenMS: 1200}},
			load: &judge.LoadRun{Limits: theirs, Rounds: two}, wantLoad: &judge.LoadRun{Limits: judge.LoadLimits{Streams: 2, Expect: judge.LoadBatch, Efficiency: 0.65, FirstTokenMS: 1200}, Rounds: two},
			wantNote: "result.json holds load rounds of 2 streams, while no --load is asked here: they are judged all the same, but the same artifact with its load section deleted would have no load row at all; pass the gate's --load 2"},
		{name: "no load asked, none held", t: Trusted{}},
		{name: "load asked, section deleted", t: Trusted{Load: mine},
			wantLoad: &judge.LoadRun{Limits: mine, Skipped: "result.json holds no load section, while --load 2 is asked here (a run asked --load writes its rounds there)"}},
		{name: "load asked, rounds of another size", t: Trusted{Load: mine}, load: &judge.LoadRun{Limits: theirs, Rounds: three},
			wantLoad: &judge.LoadRun{Limits: mine, Skipped: "result.json's load round 2 holds 3 streams, while --load 2 is asked here"}},
		{name: "load asked, none measured: the run's reason stays", t: Trusted{Load: mine}, load: &judge.LoadRun{Limits: theirs, Skipped: "the single streams failed"},
			wantLoad: &judge.LoadRun{Limits: mine, Skipped: "the single streams failed"}},
		{name: "witness off: the log alone", t: Trusted{}, witness: seen},
		{name: "witness deleted", t: on,
			wantWitness: &route.Witness{Devices: devices, Libraries: libraries, Binary: true, Absent: noWitness}},
		{name: "witness emptied", t: on, witness: &route.Witness{},
			wantWitness: &route.Witness{Devices: devices, Libraries: libraries, Binary: true, Absent: emptyWitness}},
		{name: "witness deleted, no class known", t: Trusted{Witness: true}, wantWitness: &route.Witness{}},
		{name: "no class known, the run's weighed against its own", t: Trusted{Witness: true},
			witness:     &route.Witness{Devices: []string{"/dev/zero"}, Libraries: []string{"libsim*.so"}, Processes: 2, Held: []string{"/dev/zero"}, Mapped: []string{"/opt/libsim.so"}},
			wantWitness: &route.Witness{Processes: 2, Held: []string{}, Mapped: []string{}},
			wantNote:    "result.json's witnesses were weighed by the run against 1 device classes and 1 backend libraries, while none is known here: they are not weighed, and the route rests on the log; pass the gate's --preset (or its --witness-device and --witness-library)"},
		{name: "not read, said: the run's own", t: on, witness: &route.Witness{NotRead: "in a container"},
			wantWitness: &route.Witness{Devices: devices, Libraries: libraries, Binary: true, NotRead: "in a container"}},
		{name: "a Windows run's modules, matched by their Windows names", t: on,
			witness: &route.Witness{Processes: 1, Usage: []route.Usage{{Source: "d3dkmt", MemoryBytes: 1}},
				Mapped: []string{`C:\llama\ggml-cann.dll`, `C:\llama\GGML-CANN-910B.DLL`, `C:\llama\ggml-cpu.dll`, `C:\llama\libggml-cann.dll`}},
			wantWitness: &route.Witness{Devices: devices, Libraries: libraries, Binary: true, Processes: 1, Usage: []route.Usage{{Source: "d3dkmt", MemoryBytes: 1}},
				Mapped: []string{`C:\llama\ggml-cann.dll`, `C:\llama\GGML-CANN-910B.DLL`}}},
		{name: "the judge's slow route on the device, whatever the artifact says", t: Trusted{Witness: true, Devices: devices, SlowOnDevice: "eager"},
			witness:     &route.Witness{Processes: 1, Held: []string{"/dev/accel/accel0"}},
			wantWitness: &route.Witness{Devices: devices, SlowOnDevice: "eager", Processes: 1, Held: []string{"/dev/accel/accel0"}}},
		{name: "the judge's classes, and what was seen of them only", t: on, witness: seen,
			wantWitness: &route.Witness{Devices: devices, Libraries: libraries, Binary: true, Processes: 2,
				Held: []string{"/dev/accel/accel0"}, Mapped: []string{"/opt/lib/libggml-cann.so.1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &report.Result{Load: tc.load}
			if tc.witness != nil {
				w := *tc.witness
				res.Witness = &w
			}
			if note := Trust(res, tc.t); note != tc.wantNote {
				t.Errorf("note %q, want %q", note, tc.wantNote)
			}
			if diff := cmp.Diff(tc.wantLoad, res.Load); diff != "" {
				t.Errorf("load (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWitness, res.Witness); diff != "" {
				t.Errorf("witness (-want +got):\n%s", diff)
			}
		})
	}
}

// Trust's witness, judged: a fast route's words with the witness deleted
// or emptied fail where the judge's classes are known, saying why.
func TestTrustJudged(t *testing.T) {
	ev := route.Evidence{Fast: &route.Match{Line: 1, Text: "on the private route", Pattern: "private route"}}
	on := Trusted{Witness: true, Devices: []string{"/dev/accel/accel*"}}
	for _, tc := range []struct {
		name    string
		witness *route.Witness
		ok      bool
		detail  string
	}{
		{"deleted", nil, false, noWitness + ": this run is not on the fast route"},
		{"emptied", &route.Witness{}, false, emptyWitness + ": this run is not on the fast route"},
		{"held", &route.Witness{Processes: 1, Held: []string{"/dev/accel/accel0"}}, true, `hold "/dev/accel/accel0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &report.Result{Route: ev, Witness: tc.witness}
			Trust(res, on)
			v := route.JudgeWitnessed(res.Route, res.Witness)
			if v.OK != tc.ok || !strings.Contains(v.Detail, tc.detail) {
				t.Errorf("route: ok %v, %q; want ok %v, holding %q", v.OK, v.Detail, tc.ok, tc.detail)
			}
		})
	}
}
