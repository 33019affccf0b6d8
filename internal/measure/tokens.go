package measure

import (
	"fmt"
	"math"
)

// SpecialTokens is how many tokens of a reply may carry no text: an
// end-of-turn token, a think tag the serve strips. Every other token
// decodes to at least one byte, so a count above the text's bytes plus these
// is more than the stream held.
const SpecialTokens = 4

// ChunkedTokenBytes is the least text, in bytes a token, a reply carries
// when its count says several tokens came in one chunk (vLLM's stream
// interval, multi-step scheduling): a token of text is about 4 bytes in the
// tokenizers these serves use, and those chunks carry every token's text. A
// count above the chunks with less text is not believed on its own: nothing
// but the serve's word says those tokens were generated, and the serve's
// timings are its word too.
const ChunkedTokenBytes = 3

// Count is a reply's number of generated tokens, where it came from, and
// why a count the serve sent was not believed, when it was not.
type Count struct {
	N      int    `json:"n"`
	Source string `json:"source"` // SourceUsage, SourceServer or SourceChunks
	// Doubt says which count of the serve's was not believed and why; N is
	// then the next count that holds (in the end, the chunks counted).
	Doubt string `json:"doubt,omitempty"`
	// Chunked says, when N is the serve's count and more than SpecialTokens
	// above the chunks, what made it believed: the text the chunks carried.
	Chunked string `json:"chunked,omitempty"`
}

// Count gives usage.completion_tokens, else the server's
// timings.predicted_n, else the content-bearing chunks; a count above
// max_tokens, or above what the text the stream carried can hold, is not
// believed and the next one is taken. Several tokens a chunk is a serve's
// right when the text carries them: a count more than SpecialTokens above the
// chunks needs ChunkedTokenBytes of text for each token but those.
func (r *Reply) Count() Count {
	var doubts []string
	if r.CompletionTokens != nil {
		n := *r.CompletionTokens
		why := r.implausible(n)
		if why == "" {
			return Count{N: n, Source: SourceUsage, Chunked: r.chunked(n)}
		}
		doubts = append(doubts, fmt.Sprintf("usage.completion_tokens %d %s", n, why))
	}
	if r.Server != nil && r.Server.PredictedN > 0 {
		n := r.Server.PredictedN
		why := r.implausible(n)
		if why == "" {
			return Count{N: n, Source: SourceServer, Doubt: doubt(doubts, n, SourceServer), Chunked: r.chunked(n)}
		}
		doubts = append(doubts, fmt.Sprintf("timings.predicted_n %d %s", n, why))
	}
	return Count{N: r.Chunks, Source: SourceChunks, Doubt: doubt(doubts, r.Chunks, SourceChunks)}
}

// Tokens is Count's number and source.
func (r *Reply) Tokens() (n int, source string) {
	c := r.Count()
	return c.N, c.Source
}

// implausible says why n tokens cannot be what the reply generated, or "".
// A reply recorded without its max_tokens (a reply file from before the
// probe kept it) is taken as it was then.
func (r *Reply) implausible(n int) string {
	if r.MaxTokens <= 0 {
		return ""
	}
	if n > r.MaxTokens {
		return fmt.Sprintf("is above max_tokens %d", r.MaxTokens)
	}
	if r.Truncated {
		return "" // the text kept is not all the stream carried
	}
	text := len(r.Content) + len(r.Reasoning)
	if n > text+SpecialTokens {
		return fmt.Sprintf("is more than the %s of text the stream carried can hold", plural(text, "byte"))
	}
	if n > r.Chunks+SpecialTokens && text < ChunkedTokenBytes*(n-SpecialTokens) {
		return fmt.Sprintf("is more than the %s it came in, and their %s of text are %s (%d but the %d that may carry none; a serve sending several tokens a chunk sends %d bytes a token or more)",
			plural(r.Chunks, "chunk"), plural(text, "byte"), perToken(text, n), n, SpecialTokens, ChunkedTokenBytes)
	}
	return ""
}

// perToken is text bytes over the n tokens but SpecialTokens, as the rule
// that holds them to ChunkedTokenBytes reads them: "2.9 a token over 11
// tokens". The figure is cut, not rounded, to one decimal, so a text short of
// ChunkedTokenBytes a token never reads as enough. n is more than
// SpecialTokens.
func perToken(text, n int) string {
	each := math.Floor(10*float64(text)/float64(n-SpecialTokens)) / 10
	return fmt.Sprintf("%.1f a token over %s", each, plural(n-SpecialTokens, "token"))
}

// chunked is what makes n tokens, a count implausible did not doubt, believed
// when it is more than SpecialTokens above the chunks: their text, "" when
// the count needs no such evidence (or was not checked).
func (r *Reply) chunked(n int) string {
	if r.MaxTokens <= 0 || r.Truncated || n <= r.Chunks+SpecialTokens {
		return ""
	}
	text := len(r.Content) + len(r.Reasoning)
	return fmt.Sprintf("%d tokens in %s with %s of text, %s (%d but the %d that may carry none)",
		n, plural(r.Chunks, "chunk"), plural(text, "byte"), perToken(text, n), n, SpecialTokens)
}

func doubt(doubts []string, n int, source string) string {
	if len(doubts) == 0 {
		return ""
	}
	s := doubts[0]
	for _, d := range doubts[1:] {
		s += "; " + d
	}
	what := "the serve's timings.predicted_n"
	if source == SourceChunks {
		what = "the chunks with content"
	}
	return fmt.Sprintf("%s: not believed; counted %d from %s instead", s, n, what)
}
