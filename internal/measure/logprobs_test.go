package measure

import "testing"

// TestTokensNotText: a reply's tokens are its streamed text, joined, with
// only think tags around its reasoning before and one end token after.
func TestTokensNotText(t *testing.T) {
	toks := func(texts ...string) []Token {
		out := make([]Token, len(texts))
		for i, s := range texts {
			out[i] = Token{Text: s, ID: ptr(i)}
		}
		return out
	}
	tests := []struct {
		name string
		r    Reply
		want string
	}{
		{"the content exactly", Reply{Content: " The capital is Paris", Generated: toks(" The", " capital", " is", " Paris")}, ""},
		{"no tokens, no content", Reply{}, ""},
		{"an empty token among them still joins to the content", Reply{Content: "ab", Generated: toks("a", "", "b")}, ""},
		{"a trailing end token", Reply{Content: "Paris.", Generated: toks("Paris", ".", "<|im_end|>")}, ""},
		{"a trailing </s>", Reply{Content: "Paris", Generated: toks("Paris", "</s>")}, ""},
		{"an end token alone, no content", Reply{Generated: toks("<|eot_id|>")}, ""},
		{"a content ending in a tag: the tag is the content's", Reply{Content: "a<br>", Generated: toks("a", "<br>")}, ""},
		{"a content ending in a tag, its token missing", Reply{Content: "a<br>", Generated: toks("a")},
			"its tokens, joined (1 byte), do not end in its content (5 bytes)"},
		{"two end tokens: one is allowed", Reply{Content: "a", Generated: toks("a", "</s>", "</s>")},
			"its tokens, joined (5 bytes), do not end in its content (1 byte)"},
		{"a trailing token that is not a tag", Reply{Content: "a", Generated: toks("a", "<end of turn>")},
			"its tokens, joined (14 bytes), do not end in its content (1 byte)"},
		{"the reference's tokens, other text streamed", Reply{Content: " //////", Generated: toks(" The", " capital", " is", " Paris")},
			"its tokens, joined (21 bytes), do not end in its content (7 bytes)"},
		{"tokens that only contain the content", Reply{Content: "Paris", Generated: toks("Paris", " and more")},
			"its tokens, joined (14 bytes), do not end in its content (5 bytes)"},
		{"a token left out", Reply{Content: " The capital is Paris", Generated: toks(" The", " capital", " Paris")},
			"its tokens, joined (18 bytes), do not end in its content (21 bytes)"},
		{"no token for the content", Reply{Content: "Paris"}, "its tokens, joined (0 bytes), do not end in its content (5 bytes)"},
		{"text before the content without reasoning", Reply{Content: "Paris", Generated: toks("Rome ", "Paris")},
			"its tokens hold 5 bytes before its content, and it streamed no reasoning"},
		{"reasoning between think tags", Reply{Reasoning: "hm", Content: " Paris", Generated: toks("<think>", "hm", "</think>\n\n", " Paris")}, ""},
		{"reasoning without tags", Reply{Reasoning: "hm", Content: " Paris", Generated: toks("hm", " Paris")}, ""},
		{"tokens for the content only, reasoning streamed", Reply{Reasoning: "hm", Content: " Paris", Generated: toks(" Paris")}, ""},
		{"reasoning and its tags, with an end token", Reply{Reasoning: "hm", Content: "P", Generated: toks("<think>", "hm", "</think>", "P", "<|im_end|>")}, ""},
		{"text besides the reasoning before the content", Reply{Reasoning: "hm", Content: " Paris", Generated: toks("<think>", "hm", "</think>", "Rome", " Paris")},
			"its tokens hold 21 bytes before its content that are not its reasoning between tags"},
		{"text before the reasoning", Reply{Reasoning: "hm", Content: " Paris", Generated: toks("x", "hm", " Paris")},
			"its tokens hold 3 bytes before its content that are not its reasoning between tags"},
		{"tokens before the content without the reasoning", Reply{Reasoning: "hm", Content: " Paris", Generated: toks("<think>", "hx", "</think>", " Paris")},
			"its tokens hold 17 bytes before its content that are not its reasoning between tags"},
		{"an unclosed tag after the reasoning", Reply{Reasoning: "hm", Content: " Paris", Generated: toks("hm", "</think", " Paris")},
			"its tokens hold 9 bytes before its content that are not its reasoning between tags"},
		{"a tag with a space in it is not a tag", Reply{Reasoning: "hm", Content: " Paris", Generated: toks("< b>", "hm", " Paris")},
			"its tokens hold 6 bytes before its content that are not its reasoning between tags"},
		{"an empty tag is not a tag", Reply{Reasoning: "hm", Content: " Paris", Generated: toks("<>", "hm", " Paris")},
			"its tokens hold 4 bytes before its content that are not its reasoning between tags"},
		{"cut at the probe's bound", Reply{Content: "Paris", Truncated: true, Generated: toks("Paris")}, "its text was cut at the probe's bound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.TokensNotText(); got != tt.want {
				t.Errorf("TokensNotText() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestIsTag(t *testing.T) {
	for s, want := range map[string]bool{
		"<s>": true, "</s>": true, "<|im_end|>": true, "<think>": true,
		"<>": false, "<": false, "": false, "s>": false, "<s": false, "<a b>": false, "<a\tb>": false,
		"<a\nb>": false, "<a\rb>": false, "<<s>": false, "<s>>": false, "x<s>": false,
	} {
		if got := isTag(s); got != want {
			t.Errorf("isTag(%q) = %v, want %v", s, got, want)
		}
	}
}
