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
	"github.com/x448/float16"
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

// Variant is one of the tiny model's variants, for the agreement tests: the
// model itself, and two others with the same weights changed.
type Variant int

const (
	// F32 is the model itself, every weight in F32.
	F32 Variant = iota
	// F16 is the model with its matrices rounded to F16 (the norms stay
	// F32, as in llama.cpp's own F16 files): right, but rounded.
	F16
	// Perturbed is the model with one layer's weights wrong: blk.1's
	// feed-forward output matrix (ffn_down) scaled by PerturbScale, as a
	// kernel with a wrong scale would compute it. Wrong.
	Perturbed
)

// PerturbScale is what Perturbed multiplies blk.1.ffn_down.weight by: enough
// to change the model's next word at some positions, not at every one.
const PerturbScale = 24

func (v Variant) String() string {
	switch v {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case Perturbed:
		return "perturbed"
	}
	return fmt.Sprintf("Variant(%d)", int(v))
}

// WriteTinyModel writes a llama-architecture GGUF with random weights (seeded,
// so the file is the same every time) to path. Its output layer gives every
// token but the words a logit hundreds below theirs, so whatever it samples
// is plain words: valid UTF-8, never an end of sequence, never one character.
func WriteTinyModel(path string) error {
	return WriteTinyVariant(path, F32)
}

// WriteTinyVariant writes the tiny model's variant to path: the same seeded
// weights as WriteTinyModel's, rounded or changed as the variant says.
func WriteTinyVariant(path string, variant Variant) error {
	fileType := uint32(0) // all F32
	switch variant {
	case F32, Perturbed:
	case F16:
		fileType = 1 // mostly F16
	default:
		return fmt.Errorf("the tiny model has no variant %d", int(variant))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	v := newVocab()
	scores := make([]float32, len(v.tokens))
	kv := ggml.KV{
		"general.architecture":                   "llama",
		"general.name":                           "tiny random llama",
		"general.file_type":                      fileType,
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
	ts := tensors(v, rng)
	vary(ts, variant)
	err = ggml.WriteGGUF(f, kv, ts)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing the tiny model %s: %w", path, err)
	}
	return nil
}

// vary makes the model's weights the variant's: matrices to F16, or one
// layer's feed-forward output scaled.
func vary(ts []*ggml.Tensor, variant Variant) {
	for _, t := range ts {
		switch {
		case variant == F16 && len(t.Shape) == 2:
			t.Kind = 1 // F16
			t.WriterTo = f16s(t.WriterTo.(f32s))
		case variant == Perturbed && t.Name == "blk.1.ffn_down.weight":
			w := t.WriterTo.(f32s)
			for i := range w {
				w[i] *= PerturbScale
			}
		}
	}
}

// tensors are the model's weights. Shapes are given rows × columns and
// written in ggml's order, the contiguous dimension (columns) first.
//
// Every token's embedding holds 1 in dimension 0 and small random values
// elsewhere; the layers add far smaller values, so the last position's
// hidden state is, after the final norm, its own token's embedding. The
// output row of each word holds the embedding of the word before it in
// words, so the model says the words in order, one after the other, and
// never one token thirty times in a row (Ollama ends a stream that does).
// The rows of the tokens that must never be sampled hold −100 in dimension
// 0, the words' rows 0: their logits are hundreds apart.
func tensors(v vocab, rng *rand.Rand) []*ggml.Tensor {
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
	ts := []*ggml.Tensor{
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

func tensor(name string, data []float32, shape ...int) *ggml.Tensor {
	s := make([]uint64, len(shape))
	for i, d := range shape {
		s[len(shape)-1-i] = uint64(d)
	}
	return &ggml.Tensor{Name: name, Kind: 0, Shape: s, WriterTo: f32s(data)}
}

// f32s writes float32s little-endian.
type f32s []float32

func (w f32s) WriteTo(dst io.Writer) (int64, error) {
	if err := binary.Write(dst, binary.LittleEndian, []float32(w)); err != nil {
		return 0, err
	}
	return int64(4 * len(w)), nil
}

// f16s writes float32s rounded to IEEE half precision (to nearest, ties to
// even), little-endian.
type f16s []float32

func (w f16s) WriteTo(dst io.Writer) (int64, error) {
	b := make([]uint16, len(w))
	for i, x := range w {
		b[i] = uint16(float16.Fromfloat32(x))
	}
	if err := binary.Write(dst, binary.LittleEndian, b); err != nil {
		return 0, err
	}
	return int64(2 * len(w)), nil
}
