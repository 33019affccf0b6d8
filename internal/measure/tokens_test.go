package measure

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCount(t *testing.T) {
	text := strings.Repeat("word ", 20) // 100 bytes
	tests := []struct {
		name string
		r    Reply
		want Count
	}{
		{"usage first", Reply{CompletionTokens: ptr(40), Server: &ServerTimings{PredictedN: 39}, Chunks: 38, Content: text}, Count{N: 40, Source: SourceUsage}},
		{"usage of zero is still usage", Reply{CompletionTokens: ptr(0), Chunks: 3}, Count{N: 0, Source: SourceUsage}},
		{"server when no usage", Reply{Server: &ServerTimings{PredictedN: 39}, Chunks: 38, Content: text}, Count{N: 39, Source: SourceServer}},
		{"chunks when the server sent no count", Reply{Server: &ServerTimings{PredictedPerSecond: 80}, Chunks: 38}, Count{N: 38, Source: SourceChunks}},
		{"chunks when nothing else", Reply{Chunks: 7}, Count{N: 7, Source: SourceChunks}},
		{"several tokens a chunk, within max_tokens, is honest", Reply{CompletionTokens: ptr(30), Chunks: 10, MaxTokens: 32, Content: text},
			Count{N: 30, Source: SourceUsage, Chunked: "30 tokens in 10 chunks with 100 bytes of text, 3.8 a token over 26 tokens (30 but the 4 that may carry none)"}},
		{"exactly max_tokens", Reply{CompletionTokens: ptr(32), Chunks: 32, MaxTokens: 32, Content: text}, Count{N: 32, Source: SourceUsage}},
		{"above max_tokens: the chunks", Reply{CompletionTokens: ptr(1000), Chunks: 10, MaxTokens: 32, Content: text},
			Count{N: 10, Source: SourceChunks, Doubt: "usage.completion_tokens 1000 is above max_tokens 32: not believed; counted 10 from the chunks with content instead"}},
		{"one above max_tokens", Reply{CompletionTokens: ptr(33), Chunks: 10, MaxTokens: 32, Content: text},
			Count{N: 10, Source: SourceChunks, Doubt: "usage.completion_tokens 33 is above max_tokens 32: not believed; counted 10 from the chunks with content instead"}},
		{"usage not believed, the server's count is", Reply{CompletionTokens: ptr(1000), Server: &ServerTimings{PredictedN: 12}, Chunks: 10, MaxTokens: 32, Content: text},
			Count{N: 12, Source: SourceServer, Doubt: "usage.completion_tokens 1000 is above max_tokens 32: not believed; counted 12 from the serve's timings.predicted_n instead"}},
		{"neither believed", Reply{CompletionTokens: ptr(1000), Server: &ServerTimings{PredictedN: 500}, Chunks: 10, MaxTokens: 32, Content: text},
			Count{N: 10, Source: SourceChunks, Doubt: "usage.completion_tokens 1000 is above max_tokens 32; timings.predicted_n 500 is above max_tokens 32: not believed; counted 10 from the chunks with content instead"}},
		{"more than the text can hold", Reply{CompletionTokens: ptr(30), Chunks: 10, MaxTokens: 64, Content: "0123456789", Reasoning: "abcdefghij"},
			Count{N: 10, Source: SourceChunks, Doubt: "usage.completion_tokens 30 is more than the 20 bytes of text the stream carried can hold: not believed; counted 10 from the chunks with content instead"}},
		{"the text and the special tokens, exactly", Reply{CompletionTokens: ptr(24), Chunks: 20, MaxTokens: 64, Content: "0123456789", Reasoning: "abcdefghij"}, Count{N: 24, Source: SourceUsage}},
		{"one byte of text", Reply{CompletionTokens: ptr(6), Chunks: 1, MaxTokens: 64, Content: "x"},
			Count{N: 1, Source: SourceChunks, Doubt: "usage.completion_tokens 6 is more than the 1 byte of text the stream carried can hold: not believed; counted 1 from the chunks with content instead"}},
		// A count above the chunks it came in needs text for its tokens:
		// 3 bytes a token beyond the special ones.
		{"four more than the chunks, on its own", Reply{CompletionTokens: ptr(14), Chunks: 10, MaxTokens: 64, Content: "0123456789"}, Count{N: 14, Source: SourceUsage}},
		{"five more than the chunks, the text holds them", Reply{CompletionTokens: ptr(15), Chunks: 10, MaxTokens: 64, Content: strings.Repeat("x", 33)},
			Count{N: 15, Source: SourceUsage, Chunked: "15 tokens in 10 chunks with 33 bytes of text, 3.0 a token over 11 tokens (15 but the 4 that may carry none)"}},
		{"five more than the chunks, the text a byte short", Reply{CompletionTokens: ptr(15), Chunks: 10, MaxTokens: 64, Content: strings.Repeat("x", 32)},
			Count{N: 10, Source: SourceChunks, Doubt: "usage.completion_tokens 15 is more than the 10 chunks it came in, and their 32 bytes of text are 2.9 a token over 11 tokens (15 but the 4 that may carry none; a serve sending several tokens a chunk sends 3 bytes a token or more): not believed; counted 10 from the chunks with content instead"}},
		{"a byte short of 3 a token: the figure is not rounded up to it", Reply{CompletionTokens: ptr(104), Chunks: 10, MaxTokens: 128, Content: strings.Repeat("x", 299)},
			Count{N: 10, Source: SourceChunks, Doubt: "usage.completion_tokens 104 is more than the 10 chunks it came in, and their 299 bytes of text are 2.9 a token over 100 tokens (104 but the 4 that may carry none; a serve sending several tokens a chunk sends 3 bytes a token or more): not believed; counted 10 from the chunks with content instead"}},
		{"3 a token exactly: believed, said as 3.0", Reply{CompletionTokens: ptr(104), Chunks: 10, MaxTokens: 128, Content: strings.Repeat("x", 300)},
			Count{N: 104, Source: SourceUsage, Chunked: "104 tokens in 10 chunks with 300 bytes of text, 3.0 a token over 100 tokens (104 but the 4 that may carry none)"}},
		{"a counter that lies within the text's bound", Reply{CompletionTokens: ptr(32), Chunks: 10, MaxTokens: 64, Content: " ab ab ab ab ab ab ab ab ab ab"},
			Count{N: 10, Source: SourceChunks, Doubt: "usage.completion_tokens 32 is more than the 10 chunks it came in, and their 30 bytes of text are 1.0 a token over 28 tokens (32 but the 4 that may carry none; a serve sending several tokens a chunk sends 3 bytes a token or more): not believed; counted 10 from the chunks with content instead"}},
		{"the reasoning is text too", Reply{CompletionTokens: ptr(15), Chunks: 10, MaxTokens: 64, Content: strings.Repeat("x", 16), Reasoning: strings.Repeat("y", 17)},
			Count{N: 15, Source: SourceUsage, Chunked: "15 tokens in 10 chunks with 33 bytes of text, 3.0 a token over 11 tokens (15 but the 4 that may carry none)"}},
		{"the server's count, its text said", Reply{Server: &ServerTimings{PredictedN: 30}, Chunks: 10, MaxTokens: 64, Content: text},
			Count{N: 30, Source: SourceServer, Chunked: "30 tokens in 10 chunks with 100 bytes of text, 3.8 a token over 26 tokens (30 but the 4 that may carry none)"}},
		{"usage doubted, the server's count believed on its text", Reply{CompletionTokens: ptr(1000), Server: &ServerTimings{PredictedN: 30}, Chunks: 10, MaxTokens: 64, Content: text},
			Count{N: 30, Source: SourceServer, Chunked: "30 tokens in 10 chunks with 100 bytes of text, 3.8 a token over 26 tokens (30 but the 4 that may carry none)",
				Doubt: "usage.completion_tokens 1000 is above max_tokens 64: not believed; counted 30 from the serve's timings.predicted_n instead"}},
		{"several a chunk, cut text: not checked, nothing said", Reply{CompletionTokens: ptr(30), Chunks: 10, MaxTokens: 64, Truncated: true, Content: "x"}, Count{N: 30, Source: SourceUsage}},
		{"the server's count alike", Reply{Server: &ServerTimings{PredictedN: 32}, Chunks: 10, MaxTokens: 64, Content: " ab ab ab ab ab ab ab ab ab ab"},
			Count{N: 10, Source: SourceChunks, Doubt: "timings.predicted_n 32 is more than the 10 chunks it came in, and their 30 bytes of text are 1.0 a token over 28 tokens (32 but the 4 that may carry none; a serve sending several tokens a chunk sends 3 bytes a token or more): not believed; counted 10 from the chunks with content instead"}},
		{"cut text is not a bound", Reply{CompletionTokens: ptr(30), Chunks: 10, MaxTokens: 64, Truncated: true, Content: "0123456789"}, Count{N: 30, Source: SourceUsage}},
		{"no max_tokens recorded: an older reply file, taken as it was", Reply{CompletionTokens: ptr(90), Chunks: 90, Content: "x"}, Count{N: 90, Source: SourceUsage}},
		{"no max_tokens recorded, several a chunk: taken as it was, nothing said", Reply{CompletionTokens: ptr(30), Chunks: 10, Content: "x"}, Count{N: 30, Source: SourceUsage}},
	}
	for _, tt := range tests {
		got := tt.r.Count()
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: Count() (-want +got):\n%s", tt.name, diff)
		}
		if n, src := tt.r.Tokens(); n != tt.want.N || src != tt.want.Source {
			t.Errorf("%s: Tokens() = %d, %q, want %d, %q", tt.name, n, src, tt.want.N, tt.want.Source)
		}
	}
}
