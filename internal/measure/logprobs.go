package measure

import (
	"fmt"
	"strings"
	"unicode"
)

// Token is one generated token as the serve reported it when asked for
// logprobs (OpenAI's logprobs.content[]): its text, its id where the serve
// gives one (llama.cpp's server does), its log-probability in nats, and the
// most likely tokens at its position, most likely first (top_logprobs).
type Token struct {
	Text    string  `json:"text"`
	ID      *int    `json:"id,omitempty"`
	Logprob float64 `json:"logprob"`
	Top     []Alt   `json:"top,omitempty"`
}

// Alt is one of the most likely tokens at a position.
type Alt struct {
	Text    string  `json:"text"`
	ID      *int    `json:"id,omitempty"`
	Logprob float64 `json:"logprob"`
}

// What became of asking for logprobs, in Reply.Logprobs.
const (
	LogprobsSent    = "sent"    // the serve sent them, in Reply.Generated
	LogprobsNone    = "none"    // asked; the serve sent none
	LogprobsRefused = "refused" // the serve rejected the fields: asked again without them
	LogprobsGarbage = "garbage" // the serve sent logprobs that cannot be believed: none kept
)

// TokensNotText says why r's tokens (Generated) are not the text it
// streamed, or "" when they are: their texts, joined, are its content, after
// what it streamed before the content when it streamed reasoning (think tags
// and whitespace around the reasoning) and before one trailing end token
// ("<|im_end|>", "</s>": a tag the content does not end with). Tokens that
// are merged, longer than the text or left out are not the text; an empty
// token joins to nothing (where the other side has a word there, the
// comparison sees the two tokens differ). The
// tokens and the content are the serve's: nothing of them is quoted.
func (r *Reply) TokensNotText() string {
	if r.Truncated {
		return "its text was cut at the probe's bound"
	}
	var b strings.Builder
	for _, t := range r.TextTokens() {
		b.WriteString(t.Text)
	}
	all := b.String()
	before, ok := strings.CutSuffix(all, r.Content)
	if !ok {
		return fmt.Sprintf("its tokens, joined (%s), do not end in its content (%s)", plural(len(all), "byte"), plural(len(r.Content), "byte"))
	}
	if before == "" {
		return ""
	}
	if r.Reasoning == "" {
		return fmt.Sprintf("its tokens hold %s before its content, and it streamed no reasoning", plural(len(before), "byte"))
	}
	pre, post, found := strings.Cut(before, r.Reasoning)
	if !found || !onlyTags(pre) || !onlyTags(post) {
		return fmt.Sprintf("its tokens hold %s before its content that are not its reasoning between tags", plural(len(before), "byte"))
	}
	return ""
}

// TextTokens are r's tokens (Generated) less one trailing end token: a
// tag ("<|im_end|>", "</s>") listed after the text, which the content does
// not end with. The serve ended there; the tag is no token of its text, and
// a serve that lists it agrees with one that does not.
func (r *Reply) TextTokens() []Token {
	g := r.Generated
	if n := len(g); n > 0 && isTag(g[n-1].Text) && !strings.HasSuffix(r.Content, g[n-1].Text) {
		return g[:n-1]
	}
	return g
}

// isTag reports whether s is one tag: "<", a name without spaces or angle
// brackets, ">" ("<think>", "</s>", "<|eot_id|>").
func isTag(s string) bool {
	return len(s) >= 3 && s[0] == '<' && s[len(s)-1] == '>' && !strings.ContainsAny(s[1:len(s)-1], "<> \t\r\n")
}

// onlyTags reports whether s is tags and whitespace alone.
func onlyTags(s string) bool {
	for {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		if s == "" {
			return true
		}
		// Up to the first '>': none (-1) leaves "", no tag.
		end := strings.IndexByte(s, '>')
		if !isTag(s[:end+1]) {
			return false
		}
		s = s[end+1:]
	}
}
