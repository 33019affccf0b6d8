package fleet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/evidence"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
)

const base = "npu serve smoke"

// run writes a finished run of job j's check into parent/ARTIFACT, on the
// fast route when fast, and returns its directory.
func run(t *testing.T, parent string, j Job, fast bool) string {
	t.Helper()
	dir := filepath.Join(parent, j.Artifact(base))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "result.json"), []byte(`{"schema": "npu-serve-smoke/v1", "verdict": "pass", "run": {"check_name": "`+j.CheckName(base)+`"}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "reply_1.json"), []byte(`{"n": 1, "first_ms": 250, "last_ms": 1520, "completion_tokens": 128, "content": "Paris"}`), 0o644)
	log := "serving with the per-op forward\n"
	if fast {
		log = "ready on the private route dx\n"
	}
	os.WriteFile(filepath.Join(dir, "serve.log"), []byte(log), 0o644)
	return dir
}

var limits = Limits{Judge: judge.Limits{Floor: 60, FirstTokenMS: 600, RateSource: judge.RateClient}, FastRoute: []string{"private route"}, SlowRoute: []string{"per-op forward"}, RoutesSet: true}

// One artifact in two directories: the row fails naming both, in either
// order, and Artifacts says so before a merge. One directory given twice is
// one artifact.
func TestMergeArtifactInTwoDirs(t *testing.T) {
	j := Job{KeyModel: "Qwen3-4B", KeyDevice: "npu"}
	tmp := t.TempDir()
	failing := run(t, filepath.Join(tmp, "runs"), j, false)
	passing := run(t, filepath.Join(tmp, "extra"), j, true)
	for _, dirs := range [][]string{{failing, passing}, {passing, failing}} {
		if _, err := Artifacts(dirs); err == nil || !strings.Contains(err.Error(), "is in 2 directories ("+dirs[0]+", "+dirs[1]+")") {
			t.Errorf("Artifacts(%v) = %v, want both named", dirs, err)
		}
		m := Merge(context.Background(), base, []Job{j}, dirs, limits, nil)
		if got := m.Rows[0]; got.State != Fail || len(got.Why) != 1 || !strings.Contains(got.Why[0], dirs[0]+", "+dirs[1]) {
			t.Errorf("Merge(%v) row = %s %q, want fail naming both", dirs, got.State, got.Why)
		}
		if m.Pass() || len(m.Unexpected) != 0 {
			t.Errorf("Merge(%v) pass %v, unexpected %v; want a fail, none unexpected", dirs, m.Pass(), m.Unexpected)
		}
	}
	if _, err := Artifacts([]string{passing, passing + "/", filepath.Join(tmp, "extra", ".", j.Artifact(base))}); err != nil {
		t.Errorf("Artifacts(one directory thrice) = %v, want it one artifact", err)
	}
	m := Merge(context.Background(), base, []Job{j}, []string{passing, passing + "/"}, limits, nil)
	if diff := cmp.Diff([]string{Pass}, []string{m.Rows[0].State}); diff != "" {
		t.Errorf("Merge(one passing directory twice) (-want +got):\n%s\n%q", diff, m.Rows[0].Why)
	}
}

// A cancelled merge judges no more rows: they fail, saying why.
func TestMergeCancelled(t *testing.T) {
	j := Job{KeyModel: "Qwen3-4B", KeyDevice: "npu"}
	dir := run(t, t.TempDir(), j, true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := Merge(ctx, base, []Job{j}, []string{dir}, limits, nil)
	if got := m.Rows[0]; got.State != Fail || len(got.Why) != 1 || !strings.Contains(got.Why[0], "not judged: the merge was cancelled (context canceled)") {
		t.Errorf("Merge(cancelled) row = %s %q, want a fail saying the merge was cancelled", got.State, got.Why)
	}
	if m := Merge(context.Background(), base, []Job{j}, []string{dir}, limits, nil); m.Rows[0].State != Pass {
		t.Errorf("Merge(not cancelled) row = %s %q, want pass", m.Rows[0].State, m.Rows[0].Why)
	}
}

// cancelledAfter is a context whose Err is nil for its first n calls, then
// context.Canceled: a cancel that lands while a row is being judged.
type cancelledAfter struct {
	context.Context
	n int
}

func (c *cancelledAfter) Err() error {
	if c.n > 0 {
		c.n--
		return nil
	}
	return context.Canceled
}

// A merge cancelled while a row's serve.log is read fails that row: a
// verdict of a log read in part is never a pass.
func TestMergeCancelledWhileJudging(t *testing.T) {
	j := Job{KeyModel: "Qwen3-4B", KeyDevice: "npu"}
	dir := run(t, t.TempDir(), j, true)
	m := Merge(&cancelledAfter{Context: context.Background(), n: 1}, base, []Job{j}, []string{dir}, limits, nil)
	if got := m.Rows[0]; got.State != Fail || len(got.Why) != 1 || !strings.Contains(got.Why[0], "not judged: the merge was cancelled") {
		t.Errorf("Merge(cancelled while judging) row = %s %q, want a fail saying the merge was cancelled", got.State, got.Why)
	}
}

// TestMergeKeepsNoTokens: once a row is judged, its tokens (each with its
// alternatives: most of a run's memory) and warm-ups are let go; a merge of
// many jobs at a run directory's bounds would otherwise hold them all until
// the table is posted. What the table shows stays.
func TestMergeKeepsNoTokens(t *testing.T) {
	parent := t.TempDir()
	j := Job{KeyModel: "m", KeyDevice: "npu"}
	dir := run(t, parent, j, true)
	os.WriteFile(filepath.Join(dir, "reply_1.json"), []byte(`{"n": 1, "first_ms": 250, "last_ms": 1520, "completion_tokens": 128, "content": "Paris",
  "generated": [{"text": "Paris", "logprob": -0.1, "top": [{"text": "Paris", "logprob": -0.1}, {"text": "Lyon", "logprob": -3}]}]}`), 0o644)
	os.WriteFile(filepath.Join(dir, "result.json"), []byte(`{"schema": "npu-serve-smoke/v1", "verdict": "pass", "run": {"check_name": "`+j.CheckName(base)+`"},
  "warmups": [{"n": 1, "warmup": true, "content": "x", "generated": [{"text": "x"}]}]}`), 0o644)
	m := Merge(context.Background(), base, []Job{j}, []string{dir}, limits, nil)
	r := m.Rows[0]
	if r.State != Pass || r.Result == nil {
		t.Fatalf("Merge() row = %+v, want a pass", r)
	}
	if len(r.Result.Replies) != 1 || r.Result.Replies[0].Generated != nil || r.Result.Warmups != nil {
		t.Errorf("Merge() row keeps replies %+v and warm-ups %+v; want the reply without its tokens, no warm-ups", r.Result.Replies, r.Result.Warmups)
	}
	if v, ok := r.Rate(); !ok || v != 100 {
		t.Errorf("Merge() row rate = %v, %v; want 100 tok/s", v, ok)
	}
}

// A job's load settings and witness classes are the merge's: its preset's
// classes and expectation unless the flags gave them, and twice its
// first-token limit unless --load-first-token-ms was given.
func TestTrustedFor(t *testing.T) {
	l := Limits{Judge: judge.Limits{FirstTokenMS: 600}, Trusted: evidence.Trusted{
		Load:    judge.LoadLimits{Streams: 4, Expect: judge.LoadBatch, Efficiency: 0.5, FirstTokenMS: 1200},
		Witness: true, Devices: []string{"/dev/zero"}, Libraries: []string{"libsim*.so"}}}
	flm := config.PresetWitnesses["flm"]
	for _, tc := range []struct {
		name string
		l    func(l *Limits)
		job  Job
		want evidence.Trusted
	}{
		{"no preset", func(*Limits) {}, Job{KeyModel: "m", KeyDevice: "d", KeyFirstTokenMS: "100"}, evidence.Trusted{
			Load:    judge.LoadLimits{Streams: 4, Expect: judge.LoadBatch, Efficiency: 0.5, FirstTokenMS: 200},
			Witness: true, Devices: []string{"/dev/zero"}, Libraries: []string{"libsim*.so"}}},
		{"the preset's", func(*Limits) {}, Job{KeyModel: "m", KeyDevice: "d", KeyPreset: "flm"}, evidence.Trusted{
			Load:    judge.LoadLimits{Streams: 4, Expect: judge.LoadSerial, Efficiency: 0.5, FirstTokenMS: 1200},
			Witness: true, Devices: flm.Devices, Libraries: flm.Libraries, Binary: true}},
		{"the flags'", func(l *Limits) {
			l.DevicesSet, l.LibrariesSet, l.LoadExpectSet, l.LoadFirstTokenSet = true, true, true, true
			l.Trusted.Load.FirstTokenMS = 900
		}, Job{KeyModel: "m", KeyDevice: "d", KeyPreset: "flm", KeyFirstTokenMS: "100"}, evidence.Trusted{
			Load:    judge.LoadLimits{Streams: 4, Expect: judge.LoadBatch, Efficiency: 0.5, FirstTokenMS: 900},
			Witness: true, Devices: []string{"/dev/zero"}, Libraries: []string{"libsim*.so"}, Binary: true}},
		{"vllm's slow route on the device", func(*Limits) {}, Job{KeyModel: "m", KeyDevice: "d", KeyPreset: "vllm"}, evidence.Trusted{
			Load:    judge.LoadLimits{Streams: 4, Expect: judge.LoadBatch, Efficiency: 0.5, FirstTokenMS: 1200},
			Witness: true, Devices: config.PresetWitnesses["vllm"].Devices, Libraries: config.PresetWitnesses["vllm"].Libraries, SlowOnDevice: config.PresetWitnesses["vllm"].SlowOnDevice}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := l
			tc.l(&l)
			if diff := cmp.Diff(tc.want, l.TrustedFor(tc.job)); diff != "" {
				t.Errorf("TrustedFor (-want +got):\n%s", diff)
			}
		})
	}
}
