package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

// An interrupted judge has read the serve's log in part: its verdict is
// cancelled, never one judged on what it read (a recording's check
// included), and it exits 1.
func TestJudgeCancelled(t *testing.T) {
	needPrograms(t)
	quiet := func(string) string { return "" }
	for _, cmd := range []string{"run", "record"} {
		t.Run(cmd, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			// The released gate, not run(...) here: a gate that starts a
			// serve makes its process not dumpable, and this one's
			// listeners would then be hidden from the scripts' gates.
			gate := exec.Command("npu-serve-smoke", cmd,
				"--serve", "fakellm --port {port} --instant --first-token-ms 0 --rate 100",
				"--rate-source", "server", "--replies", "5", "--max-replies", "5", "--max-tokens", "8", "--hold", "none",
				"--out", out)
			if log, err := gate.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v, want a pass:\n%s", cmd, err, log)
			}
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), []string{"judge", out}, quiet, &stdout, &stderr); code != exitPass {
				t.Fatalf("judge exited %d, want 0:\n%s%s", code, stdout.String(), stderr.String())
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			stdout.Reset()
			stderr.Reset()
			code := run(ctx, []string{"judge", out}, quiet, &stdout, &stderr)
			if code != exitFail || !strings.Contains(stdout.String(), "RESULT: FAIL (cancelled)") || !strings.Contains(stderr.String(), "judging was cancelled") {
				t.Errorf("judge, interrupted, exited %d; want 1, its result cancelled and said so:\n%s%s", code, stdout.String(), stderr.String())
			}
		})
	}
}

// What a finished run asks of a reference names each prompt once: its first
// round as it recorded it (or, recorded before it kept one, every prompt it
// asked), then the other prompts it asked.
func TestAskedOf(t *testing.T) {
	replies := func(ps ...string) []measure.Reply {
		var rs []measure.Reply
		for _, p := range ps {
			rs = append(rs, measure.Reply{Prompt: p})
		}
		return rs
	}
	for _, tt := range []struct {
		name              string
		first             []string
		replies           []measure.Reply
		wantFirst, wantAs []string
	}{
		{"its first round", []string{"a", "b", "c"}, replies("b", "a"), []string{"a", "b", "c"}, []string{"a", "b", "c"}},
		{"a second round", []string{"a", "b"}, replies("a", "b", "a2"), []string{"a", "b"}, []string{"a", "b", "a2"}},
		{"repeated", []string{"a", "b", "a", "b"}, replies("b", "b", "c", "c"), []string{"a", "b"}, []string{"a", "b", "c"}},
		{"none kept", nil, replies("b", "a", "b"), []string{"b", "a"}, []string{"b", "a"}},
	} {
		res := &report.Result{Replies: tt.replies}
		res.Run.FirstRound, res.Run.MaxTokens, res.Run.Thinking = tt.first, 8, "off"
		w := askedOf(res)
		if !slices.Equal(w.FirstRound, tt.wantFirst) || !slices.Equal(w.Asked, tt.wantAs) || w.MaxTokens != 8 || w.Thinking != "off" {
			t.Errorf("%s: askedOf = %+v; want first round %q, asked %q, max_tokens 8, thinking off", tt.name, w, tt.wantFirst, tt.wantAs)
		}
	}
}
