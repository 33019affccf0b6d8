package agree

import (
	"math"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// TestCompareRunListsWithheld: a run whose tokens agree but whose
// distribution is far from the reference's is failed on its distance; the
// same run sending its lists empty, or with no entry that is a logprob,
// must not escape the distance by it.
func TestCompareRunListsWithheld(t *testing.T) {
	ref := rep(1, sure("a"), sure("b"), sure("c"))
	far := func(s string) measure.Token { return tok(s, a(s, 0.4), a("x", 0.35), a("y", 0.25)) }
	run := rep(2, far("a"), far("b"), far("c"))
	if got := Compare(&ref, &run, Default); got.OK {
		t.Fatalf("a run far from the reference with its lists: OK (%+v); want failed on its KL", got)
	}
	for name, top := range map[string][]measure.Alt{
		"empty": nil,
		"NaN":   {{Text: "a", Logprob: math.NaN()}, {Text: "x", Logprob: math.NaN()}},
		"+Inf":  {{Text: "a", Logprob: math.Inf(1)}},
	} {
		w := rep(3, far("a"), far("b"), far("c"))
		for i := range w.Generated {
			w.Generated[i].Top = top
		}
		w.TopLogprobs = 3
		got := Compare(&ref, &w, Default)
		if got.OK {
			t.Errorf("lists %s where 3 were asked: OK, shared %d (%s); want failed: its distance withheld", name, got.Shared, got.Why)
		}
	}
}

// TestCompareRunListsWithheldWhere: the first token without the run's list
// is named; a position where neither side listed any is not held against
// the run; a real disagreement is said first.
func TestCompareRunListsWithheldWhere(t *testing.T) {
	ref := rep(1, sure("a"), sure("b"), sure("c"))
	run := rep(2, sure("a"), sure("b"), sure("c"))
	run.Generated[1].Top, run.Generated[2].Top = nil, nil
	got := Compare(&ref, &run, Default)
	if want := "this run listed no alternatives at token 2, where the reference did: its distance from the reference is not measured"; got.OK || got.Why != want || got.Shared != 1 {
		t.Errorf("the run's lists missing from token 2: OK %v, shared %d, why %q; want failed, shared 1, %q", got.OK, got.Shared, got.Why, want)
	}
	// Neither side listed any at token 2: skipped, as before.
	ref.Generated[1].Top = nil
	run.Generated[2].Top = ref.Generated[2].Top
	if got := Compare(&ref, &run, Default); !got.OK || got.Shared != 2 {
		t.Errorf("no list on either side at token 2: OK %v, shared %d (%s); want agreeing on 2 shared positions", got.OK, got.Shared, got.Why)
	}
	// A real disagreement says so first.
	wrong := rep(3, sure("a"), sure("z"), sure("c"))
	wrong.Generated[0].Top = nil
	if got := Compare(&ref, &wrong, Default); got.Why != "a real disagreement at token 2" {
		t.Errorf("no list at token 1 and a real disagreement at 2: why %q", got.Why)
	}
}
