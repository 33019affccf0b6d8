package report

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

// A run's counts, times and load limits are read from an artifact, which
// anyone may edit: a negative token count re-judged as a negative energy a
// token (under any ceiling), "-3 streams asked", a load run of rounds the
// gate never asks. Read refuses a file holding one, naming the field and its
// value, and lists at most a few of them.
func TestReadRefusesOutOfRange(t *testing.T) {
	const reply = `{"n": 1, "first_ms": 250, "last_ms": 1520, "end_ms": 1530, "chunks": 128, "completion_tokens": 128, "arrivals": [{"ms": 250, "chunks": 1}]}`
	load := func(limits, rounds string) string {
		return `"load": {"limits": {` + limits + `}, "rounds": [` + rounds + `]}`
	}
	const limits = `"streams": 2, "expect": "batch", "efficiency": 0.5, "first_token_ms": 1200, "max_rounds": 3`
	const round = `[{"n": 1}, {"n": 2}]`
	for _, tc := range []struct {
		name   string
		result string // result.json's fields after the schema
		reply  string // reply_1.json, when not reply
		want   string // "" when read
	}{
		{name: "as the gate writes it", result: `"replies": [` + reply + `], "run": {"replies": 1, "warmup": 1, "max_tokens": 128}, "serve": {"port": 8080, "survivors": 0}, ` +
			load(limits, round+","+round) + `, "energy": {"window_s": 1.5, "joules": 30, "idle_w": 2, "tokens": 128, "gross_j_per_token": 0.2, "net_j_per_token": -0.01},` +
			`"witness": {"processes": 1, "usage": [{"source": "fdinfo", "engine_ns": 5, "span_ns": 9, "memory_bytes": 1}], ` +
			`"memory": {"weights_bytes": 2147483648, "weights_from": "m.gguf", "samples": [{"source": "nvidia-smi", "bytes": 0, "processes": [{"pid": 42, "bytes": 0}]}, {"why": "x"}]}}`},
		{name: "negative tokens in a reply file", reply: `{"n": 1, "first_ms": 250, "last_ms": 1520, "completion_tokens": -5}`,
			want: "reply_1.json: completion_tokens is -5, below 0"},
		{name: "a decode window that ends before it starts", reply: `{"n": 1, "first_ms": 250, "last_ms": 100}`,
			want: "reply_1.json: last_ms is 100, before first_ms 250"},
		{name: "a server count", reply: `{"n": 1, "server": {"predicted_n": -3, "predicted_ms": -1}}`,
			want: "reply_1.json: server.predicted_n is -3, below 0; server.predicted_ms is -1, below 0"},
		{name: "an arrival", reply: `{"n": 1, "arrivals": [{"ms": 1, "chunks": 1}, {"ms": -2, "chunks": -1}]}`,
			want: "reply_1.json: arrivals[1].ms is -2, below 0; arrivals[1].chunks is -1, below 0"},
		{name: "a warm-up in result.json", result: `"warmups": [{"n": 1, "chunks": -1}]`, want: "result.json: warmups[0].chunks is -1, below 0"},
		{name: "streams", result: load(`"streams": -3, "expect": "batch", "efficiency": 0.5, "first_token_ms": 1200, "max_rounds": 3`, ""),
			want: "result.json: load.limits.streams is -3, not 2 to 64"},
		{name: "streams above the most", result: load(`"streams": 65, "expect": "batch", "efficiency": 0.5, "first_token_ms": 1200, "max_rounds": 3`, ""),
			want: "load.limits.streams is 65, not 2 to 64"},
		{name: "a round of other streams", result: load(limits, round+`,[{"n": 1}]`),
			want: "result.json: load.rounds[1] holds 1 streams, not load.limits.streams 2"},
		{name: "more rounds than asked", result: load(limits, round+","+round+","+round+","+round),
			want: "result.json: load.rounds holds 4 rounds, more than load.limits.max_rounds 3"},
		{name: "load limits", result: load(`"streams": 2, "expect": "sometimes", "efficiency": 0, "first_token_ms": 0, "max_rounds": 100`, ""),
			want: `result.json: load.limits.expect is "sometimes", not batch or serial; load.limits.efficiency is 0, not above 0 and at most 1; load.limits.first_token_ms is 0, not above 0; load.limits.max_rounds is 100, not 1 to 99`},
		{name: "efficiency above 1", result: load(`"streams": 2, "expect": "serial", "efficiency": 1.01, "first_token_ms": 1, "max_rounds": 1`, ""),
			want: "load.limits.efficiency is 1.01, not above 0 and at most 1"},
		{name: "energy", result: `"energy": {"window_s": -1, "joules": -2, "idle_w": -3, "idle_before_w": -4, "idle_after_w": -5, "tokens": -6, "gross_j_per_token": -7, "period_ms": -8, "rounds": [{"n": 1, "window_s": -9, "joules": -10, "tokens": -11, "gross_j_per_token": -12}]}`,
			want: "result.json: energy.period_ms is -8, below 0; energy.window_s is -1, below 0; energy.joules is -2, below 0; energy.idle_w is -3, below 0; energy.idle_before_w is -4, below 0 and 7 more"},
		{name: "run, serve and hold", result: `"run": {"replies": -1, "warmup": -1, "max_tokens": -1}, "extra": {"replies": -1, "max": -1}`,
			want: "result.json: run.replies is -1, below 0; run.warmup is -1, below 0; run.max_tokens is -1, below 0; extra.replies is -1, below 0; extra.max is -1, below 0"},
		{name: "serve", result: `"serve": {"port": 70000, "pid": -1, "ready_ms": -1, "stop_ms": -1, "swept": -1}`,
			want: "result.json: serve.port is 70000, not 0 to 65535; serve.pid is -1, below 0; serve.ready_ms is -1, below 0; serve.stop_ms is -1, below 0; serve.swept is -1, below 0"},
		{name: "serve's counts", result: `"serve": {"survivors": -1, "log_bytes": -1, "log_dropped": -1, "supervisor_stopped": -1}, "hold": {"waited_ms": -1, "held_ms": -1}`,
			want: "result.json: serve.survivors is -1, below 0; serve.log_bytes is -1, below 0; serve.log_dropped is -1, below 0; serve.supervisor_stopped is -1, below 0; hold.waited_ms is -1, below 0 and 1 more"},
		{name: "a negative port", result: `"serve": {"port": -1}`, want: "serve.port is -1, not 0 to 65535"},
		{name: "witness", result: `"witness": {"processes": -1, "usage": [{"source": "fdinfo", "engine_ns": -1, "span_ns": -1, "memory_bytes": -1}]}`,
			want: "result.json: witness.processes is -1, below 0; witness.usage[0].engine_ns is -1, below 0; witness.usage[0].span_ns is -1, below 0; witness.usage[0].memory_bytes is -1, below 0"},
		{name: "witness memory", result: `"witness": {"processes": 1, "memory": {"weights_bytes": -1, "samples": [{"source": "nvidia-smi", "bytes": -2, "processes": [{"pid": -3, "bytes": -4}]}]}}`,
			want: "result.json: witness.memory.weights_bytes is -1, below 0; witness.memory.samples[0].bytes is -2, below 0; witness.memory.samples[0].processes[0].pid is -3, below 0; witness.memory.samples[0].processes[0].bytes is -4, below 0"},
		{name: "witness memory: 3 samples", result: `"witness": {"processes": 1, "memory": {"samples": [{}, {}, {}]}}`,
			want: "result.json: witness.memory.samples holds 3 samples, more than 2 (the first and the last)"},
		{name: "witness memory: 33 processes", result: `"witness": {"processes": 1, "memory": {"samples": [{"processes": [` + strings.Repeat(`{"pid": 1},`, 32) + `{"pid": 1}]}]}}`,
			want: "result.json: witness.memory.samples[0].processes holds 33, more than 32"},
		{name: "a load round's reply", result: load(limits, `[{"n": 1, "completion_tokens": -1}, {"n": 2}]`),
			want: "result.json: load.rounds[0][0].completion_tokens is -1, below 0"},
		{name: "many: the first five, and a count", result: `"replies": [` + strings.Repeat(`{"n": 1, "chunks": -1},`, 41207) + `{"n": 1, "chunks": -1}]`,
			want: "replies[4].chunks is -1, below 0 and 41,203 more; it is not a file the gate wrote, refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := wintest.TempDir(t)
			write(t, filepath.Join(dir, ResultFile), `{"schema": "`+Schema+`"`+map[bool]string{true: ", ", false: ""}[tc.result != ""]+tc.result+`}`)
			if tc.reply != "" {
				write(t, filepath.Join(dir, "reply_1.json"), tc.reply)
			}
			_, err := Read(dir)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tc.want == "" {
				if diff := cmp.Diff("", got); diff != "" {
					t.Errorf("Read (-want +got):\n%s", diff)
				}
				return
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("Read: %v\nwant it to hold %q", err, tc.want)
			}
		})
	}
}

// listed names the first few of what it is given, then counts the rest.
func TestListed(t *testing.T) {
	xs := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprint(i))
		}
		return out
	}
	for _, tc := range []struct {
		n, most int
		want    string
	}{
		{0, 2, ""},
		{2, 2, "0; 1"},
		{3, 2, "0; 1 and 1 more"},
		{1002, 2, "0; 1 and 1,000 more"},
		{1_000_002, 2, "0; 1 and 1,000,000 more"},
	} {
		if got := listed(xs(tc.n), tc.most); got != tc.want {
			t.Errorf("listed of %d, most %d: %q, want %q", tc.n, tc.most, got, tc.want)
		}
	}
}
