package agree

import "testing"

// TestCompareCutAtMaxTokens: a reply that ended because it reached the
// max_tokens it asked for has not disagreed by ending: a reference recorded
// with a smaller --max-tokens than the run's (or a larger one) agrees on the
// tokens both have. One that says "length" short of its cap, or stopped at
// its end token, still diverges where it ended.
func TestCompareCutAtMaxTokens(t *testing.T) {
	long := rep(1, sure("a"), sure("b"), sure("c"), sure("d"))
	long.MaxTokens, long.FinishReason = 4, "stop" // it ended on its own: how it ended is not the question
	short := rep(2, sure("a"), sure("b"))
	short.MaxTokens, short.FinishReason = 2, "length"
	for _, c := range []struct {
		name     string
		ref, run int // 0: long, 1: short
	}{{"the run cut at its cap", 0, 1}, {"the reference cut at its cap", 1, 0}} {
		ref, run := &long, &short
		if c.ref == 1 {
			ref, run = &short, &long
		}
		got := Compare(ref, run, Default)
		if !got.OK || got.Agree != 2 || got.Of != 4 || got.Diverged == nil || !got.Diverged.Cut {
			t.Errorf("%s: OK %v agree %d/%d diverged %+v (%s); want agreeing, 2/4, cut at its cap", c.name, got.OK, got.Agree, got.Of, got.Diverged, got.Why)
		}
	}
	// "length" one token short of the cap: not believed.
	early := short
	early.MaxTokens = 3
	if got := Compare(&long, &early, Default); got.OK || got.Diverged == nil || got.Diverged.Cut || got.Diverged.Ended != EndedRun {
		t.Errorf("\"length\" at 2 tokens of 3 asked: OK %v diverged %+v; want a real disagreement where it ended", got.OK, got.Diverged)
	}
	// At its cap but ended by its end token: ended, a real disagreement.
	stop := short
	stop.FinishReason = "stop"
	if got := Compare(&long, &stop, Default); got.OK || got.Diverged == nil || got.Diverged.Cut {
		t.Errorf("\"stop\" at its cap: OK %v diverged %+v; want a real disagreement", got.OK, got.Diverged)
	}
	// No cap recorded: not believed.
	none := short
	none.MaxTokens = 0
	if got := Compare(&long, &none, Default); got.OK {
		t.Errorf("\"length\" with no cap recorded: OK; want a real disagreement")
	}
}
