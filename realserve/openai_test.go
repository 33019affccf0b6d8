package realserve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// seed is the seed every request of these tests asks for.
const seed = 42

// openaiReply is one reply from Ollama's OpenAI-compatible endpoint, asked
// as the gate asks it (temperature 0, a seed, streamed, usage at the end),
// with logprobs when topK > 0: the reply as the gate records it (content,
// tokens with their logprobs), and what the stream cost.
type openaiReply struct {
	measure.Reply
	Bytes   int     // bytes of the response body
	FirstMS float64 // first content chunk after the request was sent
	Rate    float64 // (chunks-1)/(last-first) over content chunks, tokens/s
}

// chunk is what these tests read of one streamed chat completion chunk.
type chunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
		Logprobs     *struct {
			Content []struct {
				Token       string  `json:"token"`
				Logprob     float64 `json:"logprob"`
				TopLogprobs []struct {
					Token   string  `json:"token"`
					Logprob float64 `json:"logprob"`
				} `json:"top_logprobs"`
			} `json:"content"`
		} `json:"logprobs"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// chatOpenAI asks prompt of model on /v1/chat/completions, maxTokens tokens,
// with top_logprobs topK (0: logprobs not asked for).
func (s *ollamaServe) chatOpenAI(model, prompt string, maxTokens, topK int) (openaiReply, error) {
	req := map[string]any{
		"model":          model,
		"messages":       []map[string]string{{"role": "user", "content": prompt}},
		"stream":         true,
		"stream_options": map[string]bool{"include_usage": true},
		"temperature":    0,
		"seed":           seed,
		"max_tokens":     maxTokens,
	}
	if topK > 0 {
		req["logprobs"] = true
		req["top_logprobs"] = topK
	}
	body, err := json.Marshal(req)
	if err != nil {
		return openaiReply{}, err
	}
	sd := int64(seed)
	r := openaiReply{Reply: measure.Reply{Prompt: prompt, MaxTokens: maxTokens, Seed: &sd, TopLogprobs: topK}}
	t0 := time.Now()
	resp, err := http.Post(s.base.JoinPath("v1/chat/completions").String(), "application/json", bytes.NewReader(body))
	if err != nil {
		return r, fmt.Errorf("ollama /v1/chat/completions: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return r, fmt.Errorf("ollama /v1/chat/completions: %s: %q", resp.Status, b)
	}
	var content strings.Builder
	var first, last time.Time
	chunks := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	done := false
	for sc.Scan() {
		line := sc.Bytes()
		r.Bytes += len(line) + 1
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			done = true
			break
		}
		var c chunk
		if err := json.Unmarshal(data, &c); err != nil {
			return r, fmt.Errorf("ollama /v1/chat/completions: a chunk that is not JSON (%v): %q", err, data)
		}
		if c.Usage != nil {
			n := c.Usage.CompletionTokens
			r.CompletionTokens = &n
		}
		for _, ch := range c.Choices {
			if ch.FinishReason != nil {
				r.FinishReason = *ch.FinishReason
			}
			if ch.Delta.Content != "" {
				now := time.Now()
				if chunks == 0 {
					first = now
				}
				last = now
				chunks++
				content.WriteString(ch.Delta.Content)
			}
			if ch.Logprobs == nil {
				continue
			}
			for _, lp := range ch.Logprobs.Content {
				tok := measure.Token{Text: lp.Token, Logprob: lp.Logprob}
				for _, a := range lp.TopLogprobs {
					tok.Top = append(tok.Top, measure.Alt{Text: a.Token, Logprob: a.Logprob})
				}
				r.Generated = append(r.Generated, tok)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return r, fmt.Errorf("ollama /v1/chat/completions: reading the stream: %w", err)
	}
	if !done {
		return r, fmt.Errorf("ollama /v1/chat/completions: the stream ended without [DONE]")
	}
	r.Content = content.String()
	r.Chunks = chunks
	if topK > 0 {
		r.Logprobs = measure.LogprobsNone
		if len(r.Generated) > 0 {
			r.Logprobs = measure.LogprobsSent
		}
	}
	if chunks == 0 {
		return r, fmt.Errorf("ollama /v1/chat/completions: no content")
	}
	r.FirstMS = ms(first.Sub(t0))
	if chunks > 1 {
		r.Rate = float64(chunks-1) / last.Sub(first).Seconds()
	}
	return r, nil
}
