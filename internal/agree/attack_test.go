package agree

import (
	"math"
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

// TestCompareRightIDsWrongWords: a serve that sends the reference's ids and
// logprobs with other words (a wrong vocabulary or byte decoding on the
// device) disagrees at its first wrong word; one whose tokens hold more
// than it streamed, or an end token the content does not end with beside
// others, is compared by its text, and says why.
func TestCompareRightIDsWrongWords(t *testing.T) {
	// idRep is a reply whose token i has id i, the texts given, each sure.
	idRep := func(n int, texts ...string) measure.Reply {
		toks := make([]measure.Token, len(texts))
		for i, s := range texts {
			toks[i] = measure.Token{Text: s, ID: ptr(i), Logprob: math.Log(0.9),
				Top: []measure.Alt{aID(s, i, 0.9), aID("x", 1000, 0.05)}}
		}
		return rep(n, toks...)
	}
	ref := idRep(1, " The", " capital", " is", " Paris", "<|eot_id|>")
	ref.Content = " The capital is Paris"

	words := idRep(2, " The", " Kapital", " ist", " Berlin", "<|eot_id|>")
	words.Content = " The Kapital ist Berlin"
	got := Compare(&ref, &words, bounds)
	if got.OK || got.Unit != UnitTokens || got.Agree != 1 || got.Diverged == nil || got.Diverged.Run.Text != " Kapital" {
		t.Errorf("the reference's ids with other words: %+v; want compared by token and a real disagreement at token 2, \" Kapital\"", got)
	}

	// The ids and texts of the reference, a shorter text streamed: the
	// tokens only contain it.
	part := idRep(3, " The", " capital", " is", " Paris", "<|eot_id|>")
	part.Content = " Paris"
	got = Compare(&ref, &part, bounds)
	if want := "this run's reply: its tokens hold 15 bytes before its content, and it streamed no reasoning"; got.OK || got.Unit != UnitBytes || got.TextOnly != want {
		t.Errorf("tokens holding more than the content: OK %v unit %q text_only %q; want failed as text, %q", got.OK, got.Unit, got.TextOnly, want)
	}

	// An empty token with the reference's id where the reference has a
	// word: the texts joined are the content, the token is not the word.
	empty := idRep(4, " The", "", " is", " Paris", "<|eot_id|>")
	empty.Content = " The is Paris"
	if got = Compare(&ref, &empty, bounds); got.OK || got.Unit != UnitTokens || got.Agree != 1 {
		t.Errorf("an empty token with the reference's id: %+v; want a real disagreement at token 2", got)
	}

	// The reference itself, its end token on: agrees, by token, on the
	// four tokens of its text (the end token is none of it).
	self := idRep(5, " The", " capital", " is", " Paris", "<|eot_id|>")
	self.Content = ref.Content
	if got = Compare(&ref, &self, bounds); !got.OK || got.Unit != UnitTokens || got.Agree != 4 || got.Of != 4 || got.TextOnly != "" {
		t.Errorf("the reference against itself: %+v; want 4/4 by token", got)
	}
}
