package gate

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
)

// The rounds come after the last judged reply ended, so the single-stream
// figures are the serve's alone; each round's N requests are written
// together, each prompt with a leading salt no other request shares.
func TestLoadRoundsAfterTheReplies(t *testing.T) {
	p := plan(t, "--load-mode", "batch", "--rate", "200", "--first-token-ms", "5")
	// The single-stream replies judged on the serve's own figures: what
	// this test checks is the rounds, and on a machine busy enough a reply's
	// 16 tokens reach the gate in one arrival, a reply with no rate of the
	// stream's, a failed rate and no round asked.
	p.MaxTokens, p.Load, p.LoadExpect, p.RateSource = 16, 3, judge.LoadBatch, judge.RateServer
	var log strings.Builder
	res, err := (&Gate{Plan: p, Log: &log, Tool: "test"}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Load == nil || len(res.Load.Rounds) < p.Lead {
		t.Fatalf("load %+v; log:\n%s", res.Load, log.String())
	}
	last := res.Replies[len(res.Replies)-1]
	end := last.T0.Add(msDuration(last.EndMS))
	salts := map[string]bool{}
	saltRE := regexp.MustCompile(`^\[([0-9a-f]{12}), load round (\d+), stream (\d+)\] `)
	for i, round := range res.Load.Rounds {
		if len(round) != 3 {
			t.Fatalf("round %d has %d streams, want 3", i+1, len(round))
		}
		for _, r := range round {
			if r.T0.Before(end) {
				t.Errorf("round %d, stream %d was written at %v, before the last judged reply ended at %v", i+1, r.N, r.T0, end)
			}
			m := saltRE.FindStringSubmatch(r.Prompt)
			if m == nil || salts[m[1]] {
				t.Errorf("round %d, stream %d: prompt %q has no salt of its own", i+1, r.N, r.Prompt)
				continue
			}
			salts[m[1]] = true
			if r.TopLogprobs != 0 || len(r.Generated) != 0 {
				t.Errorf("round %d, stream %d asked for logprobs (top_logprobs %d)", i+1, r.N, r.TopLogprobs)
			}
			if r.Error != "" {
				t.Errorf("round %d, stream %d: %s", i+1, r.N, r.Error)
			}
		}
	}
	found := false
	for _, a := range res.Assertions {
		if a.Name == judge.Load {
			found = true
			if !a.OK {
				t.Errorf("the load assertion failed: %+v", a)
			}
		}
	}
	if !found {
		t.Errorf("no load assertion: %+v", res.Assertions)
	}
	if !strings.Contains(log.String(), "load round 1: η ") {
		t.Errorf("the log has no round line:\n%s", log.String())
	}
}

// The single-stream assertions failed: no round is asked.
func TestLoadNotAfterAFailure(t *testing.T) {
	p := plan(t, "--rate", "200", "--first-token-ms", "5")
	p.MaxTokens, p.Load, p.Floor = 16, 2, 1e6
	res, err := (&Gate{Plan: p, Tool: "test"}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Load == nil || len(res.Load.Rounds) != 0 || !strings.Contains(res.Load.Skipped, "(rate)") {
		t.Errorf("load %+v", res.Load)
	}
	// Without --load, no load at all.
	p = plan(t, "--rate", "200", "--first-token-ms", "5")
	p.MaxTokens = 16
	if res, _ := (&Gate{Plan: p, Tool: "test"}).Run(context.Background()); res.Load != nil {
		t.Errorf("load %+v without --load", res.Load)
	}
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
