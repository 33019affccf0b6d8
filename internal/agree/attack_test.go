package agree

import (
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// TestCompareTokensNotContent: the tokens a serve lists must be the text it
// streamed. A broken serve whose content is "//////" but whose logprobs list
// the reference's tokens must not agree; a careless serve that sent logprobs
// for only some chunks must not be failed for tokens it did not list.
func TestCompareTokensNotContent(t *testing.T) {
	ref := rep(1, sure(" The"), sure(" capital"), sure(" is"), sure(" Paris"))

	broken := rep(2, sure(" The"), sure(" capital"), sure(" is"), sure(" Paris"))
	broken.Content = " //////"
	if got := Compare(&ref, &broken, bounds); got.OK || got.Unit != UnitBytes {
		t.Errorf("content %q with the reference's tokens: OK %v unit %q (%s); want compared as text and failed", broken.Content, got.OK, got.Unit, got.Why)
	}

	// Logprobs for the 1st, 2nd and 4th chunks only: the content is the
	// reference's, the tokens are not all there.
	gaps := rep(3, sure(" The"), sure(" capital"), sure(" Paris"))
	gaps.Content = ref.Content
	if got := Compare(&ref, &gaps, bounds); !got.OK || got.Unit != UnitBytes {
		t.Errorf("the reference's content with a token missing from the logprobs: OK %v unit %q (%s); want compared as text and agreeing", got.OK, got.Unit, got.Why)
	}

	// Thinking: the logprobs cover the reasoning too; the content is their end.
	think := rep(4, sure("<think>"), sure("hm"), sure("</think>"), sure(" The"), sure(" capital"), sure(" is"), sure(" Paris"))
	think.Content, think.Reasoning = ref.Content, "hm"
	thinkRef := think
	thinkRef.N = 5
	if got := Compare(&thinkRef, &think, bounds); !got.OK || got.Unit != UnitTokens {
		t.Errorf("tokens covering the reasoning and then the content: OK %v unit %q (%s); want compared by token", got.OK, got.Unit, got.Why)
	}
	_ = measure.LogprobsSent
}
