package realserve

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ollama/ollama/fs/ggml"
)

// TestTinyModelReadsBack reads the written file with ollama's own decoder:
// the keys llama.cpp needs for a llama model, and every tensor.
func TestTinyModelReadsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := WriteTinyModel(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := ggml.Decode(f, -1)
	if err != nil {
		t.Fatalf("ggml.Decode(%s): %v", path, err)
	}
	kv := m.KV()
	got := map[string]any{
		"architecture": kv.Architecture(),
		"blocks":       kv.BlockCount(),
		"embedding":    kv.EmbeddingLength(),
		"heads":        kv.HeadCountMax(),
		"context":      kv.ContextLength(),
		"tokenizer":    kv.String("tokenizer.ggml.model"),
		"tensors":      len(m.Tensors().Items()),
	}
	want := map[string]any{
		"architecture": "llama",
		"blocks":       uint64(layers),
		"embedding":    uint64(embd),
		"heads":        uint64(heads),
		"context":      uint64(ctxTrain),
		"tokenizer":    "llama",
		"tensors":      3 + 9*layers,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the tiny model read back (-want +got):\n%s", diff)
	}
}

// TestTinyModelSaysWordsInOrder follows the model's last step for every
// token (its embedding through the final norm and the output layer, which
// is what the model computes once the layers' small additions are left out):
// after any token the most likely next one is a word, and after a word the
// word after it, so a greedy decode never samples a byte or control token
// and never repeats one token.
func TestTinyModelSaysWordsInOrder(t *testing.T) {
	v := newVocab()
	ts := tensors(v, rand.New(rand.NewPCG(8, 7)))
	var embed, out []float32
	for _, tn := range ts {
		w := tn.WriterTo.(f32s)
		switch tn.Name {
		case "token_embd.weight":
			embed = w
		case "output.weight":
			out = w
		}
	}
	firstWord := len(v.tokens) - len(words)
	for tok := range v.tokens {
		x := embed[tok*embd : (tok+1)*embd]
		var ss float64
		for _, e := range x {
			ss += float64(e) * float64(e)
		}
		rms := math.Sqrt(ss / embd)
		best, bestLogit := -1, math.Inf(-1)
		for next := range v.tokens {
			var logit float64
			for i := range embd {
				logit += float64(out[next*embd+i]) * float64(x[i]) / rms
			}
			if logit > bestLogit {
				best, bestLogit = next, logit
			}
		}
		if !v.sampled[best] {
			t.Errorf("after %q the most likely token is %q, want a word", v.tokens[tok], v.tokens[best])
		}
		if tok >= firstWord {
			want := firstWord + (tok-firstWord+1)%len(words)
			if best != want {
				t.Errorf("after %q the most likely token is %q, want %q", v.tokens[tok], v.tokens[best], v.tokens[want])
			}
		}
	}
}

// TestTinyVariants reads each variant back with ollama's own decoder: the
// same tensors, the matrices F16 in the F16 variant and nowhere else, and
// only blk.1.ffn_down different in the perturbed one (by PerturbScale).
func TestTinyVariants(t *testing.T) {
	read := func(v Variant) (ggml.KV, map[string]*ggml.Tensor, []byte) {
		t.Helper()
		path := filepath.Join(t.TempDir(), v.String()+".gguf")
		if err := WriteTinyVariant(path, v); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ggml.Decode(bytes.NewReader(b), -1)
		if err != nil {
			t.Fatalf("ggml.Decode(%s): %v", path, err)
		}
		ts := map[string]*ggml.Tensor{}
		for _, tn := range m.Tensors().Items() {
			ts[tn.Name] = tn
		}
		return m.KV(), ts, b[m.Tensors().Offset:]
	}
	_, ref, refData := read(F32)
	data := func(ts map[string]*ggml.Tensor, all []byte, name string) []byte {
		tn := ts[name]
		return all[tn.Offset : tn.Offset+tn.Size()]
	}
	for _, v := range []Variant{F16, Perturbed} {
		kv, ts, all := read(v)
		if len(ts) != len(ref) {
			t.Fatalf("%s: %d tensors, want %d", v, len(ts), len(ref))
		}
		if want := map[Variant]uint32{F16: 1, Perturbed: 0}[v]; kv.Uint("general.file_type") != want {
			t.Errorf("%s: general.file_type %d, want %d (0 all F32, 1 mostly F16)", v, kv.Uint("general.file_type"), want)
		}
		for name, r := range ref {
			tn := ts[name]
			if tn == nil {
				t.Fatalf("%s: no tensor %s", v, name)
			}
			if fmt.Sprint(tn.Shape) != fmt.Sprint(r.Shape) {
				t.Errorf("%s: %s shape %v, want %v", v, name, tn.Shape, r.Shape)
			}
			wantKind := uint32(0)
			if v == F16 && len(r.Shape) == 2 {
				wantKind = 1
			}
			if tn.Kind != wantKind {
				t.Errorf("%s: %s kind %d, want %d", v, name, tn.Kind, wantKind)
			}
			if v != Perturbed {
				continue
			}
			same := bytes.Equal(data(ts, all, name), data(ref, refData, name))
			if perturbed := name == "blk.1.ffn_down.weight"; same == perturbed {
				t.Errorf("%s: %s equal to the model's: %v, want %v", v, name, same, !perturbed)
			}
		}
	}
}
