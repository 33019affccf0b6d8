// Package realserve runs the gate against real serves: a tiny model with
// random weights, written as GGUF, served by a real Ollama on the CPU.
package realserve

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/ollama/ollama/fs/ggml"
)

// The tiny model's shape: llama architecture, 128 wide, 2 layers. Its wide
// feed-forward makes a token cost about what it costs a serve the gate is
// for: on one CPU thread it decodes at about a hundred tokens a second (a
// 256-wide one, at 1500, streams a token every 0.7 ms, which a reader on a
// loaded machine sees arrive in bursts).
const (
	embd     = 128
	layers   = 2
	heads    = 4
	ff       = 8192
	ctxTrain = 2048
)

// Token types of llama.cpp's vocabulary (llama-vocab.h).
const (
	tokenNormal  = 1
	tokenUnknown = 2
	tokenControl = 3
	tokenByte    = 6
)

// words are what the model can say. Its other tokens (control, byte and
// single-character ones) are there so any prompt tokenizes, and are never
// sampled: a byte token alone would be invalid UTF-8, which the serve's
// chat parser rejects, and one character repeated is no content.
var words = strings.Fields(`the of and to in is was for on that with as by at from
it his an were are which this be has had not but they their one first new two
after who its also or been more have other time into all over only most three
years can when out year may up some would her she world state made about many
city later during between under while through then there such used what than
where school since both before well four known part area found being long them
each game like him season north south east west family high name day house light
sea river stone cloud paper green blue red bright quiet small large early late
open clear warm cold fast slow strong soft round deep wide near far old young
happy busy simple plain rich kind brave calm eager fair gentle proud wise`)

// vocab is the model's vocabulary, in id order: unknown, BOS, EOS, the 256
// byte tokens, the sentencepiece space, printable ASCII, then "▁word" for
// each word. It tokenizes any text: ASCII as characters, the rest as bytes.
type vocab struct {
	tokens []string
	types  []int32
	// sampled marks the tokens the model may say: the words.
	sampled []bool
}

func newVocab() vocab {
	var v vocab
	add := func(tok string, typ int32, sampled bool) {
		v.tokens = append(v.tokens, tok)
		v.types = append(v.types, typ)
		v.sampled = append(v.sampled, sampled)
	}
	add("<unk>", tokenUnknown, false)
	add("<s>", tokenControl, false)
	add("</s>", tokenControl, false)
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), tokenByte, false)
	}
	add("▁", tokenNormal, false)
	for c := byte('!'); c <= '~'; c++ {
		add(string(c), tokenNormal, false)
	}
	for _, w := range words {
		add("▁"+w, tokenNormal, true)
	}
	return v
}

// WriteTinyModel writes a llama-architecture GGUF with random weights (seeded,
// so the file is the same every time) to path. Its output layer gives every
// token but the words a logit hundreds below theirs, so whatever it samples
// is plain words: valid UTF-8, never an end of sequence, never one character.
func WriteTinyModel(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	v := newVocab()
	scores := make([]float32, len(v.tokens))
	kv := ggml.KV{
		"general.architecture":                   "llama",
		"general.name":                           "tiny random llama",
		"general.file_type":                      uint32(0), // all F32
		"llama.vocab_size":                       uint32(len(v.tokens)),
		"llama.context_length":                   uint32(ctxTrain),
		"llama.embedding_length":                 uint32(embd),
		"llama.block_count":                      uint32(layers),
		"llama.feed_forward_length":              uint32(ff),
		"llama.attention.head_count":             uint32(heads),
		"llama.attention.head_count_kv":          uint32(heads),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"llama.rope.dimension_count":             uint32(embd / heads),
		"llama.rope.freq_base":                   float32(10000),
		"tokenizer.ggml.model":                   "llama",
		"tokenizer.ggml.tokens":                  v.tokens,
		"tokenizer.ggml.scores":                  scores,
		"tokenizer.ggml.token_type":              v.types,
		"tokenizer.ggml.unknown_token_id":        uint32(0),
		"tokenizer.ggml.bos_token_id":            uint32(1),
		"tokenizer.ggml.eos_token_id":            uint32(2),
		"tokenizer.ggml.add_bos_token":           true,
		"tokenizer.ggml.add_eos_token":           false,
	}
	rng := rand.New(rand.NewPCG(8, 7))
	err = ggml.WriteGGUF(f, kv, tensors(v, rng))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing the tiny model %s: %w", path, err)
	}
	return nil
}

// tensors are the model's weights. Shapes are rows × columns (ollama's
// writer reverses them into ggml's order, the contiguous dimension first).
//
// Every token's embedding holds 1 in dimension 0 and small random values
// elsewhere; the layers add far smaller values, so the last position's
// hidden state is, after the final norm, its own token's embedding. The
// output row of each word holds the embedding of the word before it in
// words, so the model says the words in order, one after the other, and
// never one token thirty times in a row (Ollama ends a stream that does).
// The rows of the tokens that must never be sampled hold −100 in dimension
// 0, the words' rows 0: their logits are hundreds apart.
func tensors(v vocab, rng *rand.Rand) []ggml.Tensor {
	n := len(v.tokens)
	gauss := func(rows, cols int, std float64) []float32 {
		w := make([]float32, rows*cols)
		for i := range w {
			w[i] = float32(rng.NormFloat64() * std)
		}
		return w
	}
	ones := func(k int) []float32 {
		w := make([]float32, k)
		for i := range w {
			w[i] = 1
		}
		return w
	}
	embed := gauss(n, embd, 0.1)
	out := gauss(n, embd, 0.1)
	prev := -1 // the last word's id: the first word follows it
	for t := range n {
		if v.sampled[t] {
			prev = t
		}
	}
	for t := range n {
		embed[t*embd] = 1
		if !v.sampled[t] {
			out[t*embd] = -100
			continue
		}
		copy(out[t*embd:(t+1)*embd], embed[prev*embd:(prev+1)*embd])
		out[t*embd] = 0
		prev = t
	}
	ts := []ggml.Tensor{
		tensor("token_embd.weight", embed, n, embd),
		tensor("output_norm.weight", ones(embd), embd),
		tensor("output.weight", out, n, embd),
	}
	std := 1 / math.Sqrt(embd)
	for l := range layers {
		p := fmt.Sprintf("blk.%d.", l)
		ts = append(ts,
			tensor(p+"attn_norm.weight", ones(embd), embd),
			tensor(p+"attn_q.weight", gauss(embd, embd, std), embd, embd),
			tensor(p+"attn_k.weight", gauss(embd, embd, std), embd, embd),
			tensor(p+"attn_v.weight", gauss(embd, embd, std), embd, embd),
			tensor(p+"attn_output.weight", gauss(embd, embd, 0.001), embd, embd),
			tensor(p+"ffn_norm.weight", ones(embd), embd),
			tensor(p+"ffn_gate.weight", gauss(ff, embd, std), ff, embd),
			tensor(p+"ffn_up.weight", gauss(ff, embd, std), ff, embd),
			tensor(p+"ffn_down.weight", gauss(embd, ff, 0.001*math.Sqrt(256.0/ff)), embd, ff),
		)
	}
	return ts
}

func tensor(name string, data []float32, shape ...int) ggml.Tensor {
	s := make([]uint64, len(shape))
	for i, d := range shape {
		s[i] = uint64(d)
	}
	return ggml.Tensor{Name: name, Kind: 0, Shape: s, WriterTo: f32s(data)}
}

// f32s writes float32s little-endian.
type f32s []float32

func (w f32s) WriteTo(dst io.Writer) (int64, error) {
	if err := binary.Write(dst, binary.LittleEndian, []float32(w)); err != nil {
		return 0, err
	}
	return int64(4 * len(w)), nil
}
