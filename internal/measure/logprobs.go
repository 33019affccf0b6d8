package measure

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
