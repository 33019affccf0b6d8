package witness

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakellm"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

// tensor is one tensor info of a GGUF the tests write.
type tensor struct {
	name   string
	dims   []uint64
	typ    uint32
	offset uint64
}

// gguf is a GGUF header: version, metadata written by kv, tensors; the
// file is then sized to hold data bytes after the header's alignment.
type gguf struct {
	version uint32
	kv      func(h []byte) ([]byte, uint64) // appends pairs, says how many
	tensors []tensor
	data    int64
	align   int64
	count   uint64 // tensor count written, when not len(tensors)
}

func gstr(h []byte, s string) []byte {
	h = binary.LittleEndian.AppendUint64(h, uint64(len(s)))
	return append(h, s...)
}

func (g gguf) write(t *testing.T, path string) {
	t.Helper()
	h := []byte("GGUF")
	h = binary.LittleEndian.AppendUint32(h, g.version)
	var kv []byte
	var nkv uint64
	if g.kv != nil {
		kv, nkv = g.kv(nil)
	}
	count := uint64(len(g.tensors))
	if g.count != 0 {
		count = g.count
	}
	h = binary.LittleEndian.AppendUint64(h, count)
	h = binary.LittleEndian.AppendUint64(h, nkv)
	h = append(h, kv...)
	for _, tn := range g.tensors {
		h = gstr(h, tn.name)
		h = binary.LittleEndian.AppendUint32(h, uint32(len(tn.dims)))
		for _, d := range tn.dims {
			h = binary.LittleEndian.AppendUint64(h, d)
		}
		h = binary.LittleEndian.AppendUint32(h, tn.typ)
		h = binary.LittleEndian.AppendUint64(h, tn.offset)
	}
	align := g.align
	if align == 0 {
		align = 32
	}
	start := (int64(len(h)) + align - 1) / align * align
	if err := os.WriteFile(path, h, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, start+g.data); err != nil {
		t.Fatal(err)
	}
}

// llamaKV is metadata as a converted model has: strings, an array of
// strings (the tokenizer's tokens), an array of floats, integers.
func llamaKV(h []byte) ([]byte, uint64) {
	h = gstr(h, "general.architecture")
	h = binary.LittleEndian.AppendUint32(h, 8)
	h = gstr(h, "llama")
	h = gstr(h, "tokenizer.ggml.tokens")
	h = binary.LittleEndian.AppendUint32(h, 9)
	h = binary.LittleEndian.AppendUint32(h, 8)
	h = binary.LittleEndian.AppendUint64(h, 3)
	for _, s := range []string{"<s>", "a", "b"} {
		h = gstr(h, s)
	}
	h = gstr(h, "tokenizer.ggml.scores")
	h = binary.LittleEndian.AppendUint32(h, 9)
	h = binary.LittleEndian.AppendUint32(h, 6)
	h = binary.LittleEndian.AppendUint64(h, 3)
	h = append(h, make([]byte, 12)...)
	h = gstr(h, "llama.block_count")
	h = binary.LittleEndian.AppendUint32(h, 4)
	h = binary.LittleEndian.AppendUint32(h, 2)
	h = gstr(h, "general.file_type")
	h = binary.LittleEndian.AppendUint32(h, 10)
	h = binary.LittleEndian.AppendUint64(h, 15)
	h = gstr(h, "general.flag")
	h = binary.LittleEndian.AppendUint32(h, 7)
	h = append(h, 1)
	return h, 6
}

// A Q4_K_M model's tensors: Q4_K 4096x4096 (9,437,184 bytes: 65,536
// blocks of 256 elements in 144 bytes), Q6_K 4096x32000 (107,520,000:
// 512,000 blocks of 210), F32 4096 (16,384), F16 4096x8 (65,536).
var q4km = []tensor{
	{"blk.0.attn_q.weight", []uint64{4096, 4096}, 12, 0},
	{"output.weight", []uint64{4096, 32000}, 14, 9437184},
	{"output_norm.weight", []uint64{4096}, 0, 9437184 + 107520000},
	{"blk.0.x.weight", []uint64{4096, 8}, 1, 9437184 + 107520000 + 16384},
}

const q4kmBytes = 9437184 + 107520000 + 16384 + 65536

func TestWeightsGGUF(t *testing.T) {
	dir := wintest.TempDir(t)
	file := func(name string, g gguf) string {
		p := filepath.Join(dir, name)
		g.write(t, p)
		return p
	}
	alignKV := func(a uint32) func(h []byte) ([]byte, uint64) {
		return func(h []byte) ([]byte, uint64) {
			h = gstr(h, "general.alignment")
			h = binary.LittleEndian.AppendUint32(h, 4)
			return binary.LittleEndian.AppendUint32(h, a), 1
		}
	}
	tests := []struct {
		name  string
		argv  func() []string
		bytes int64
		from  string
		why   string
	}{
		{"llama-server -m: the tensors' bytes by type", func() []string {
			return []string{"llama-server", "-m", file("m.gguf", gguf{version: 3, kv: llamaKV, tensors: q4km, data: q4kmBytes})}
		}, q4kmBytes, `"m.gguf": GGUF tensor data, 4 tensors`, ""},
		{"--model=, version 2, alignment 64", func() []string {
			return []string{"llama-server", "--model=" + file("v2.gguf", gguf{version: 2, kv: alignKV(64), align: 64, tensors: q4km[:1], data: 9437184})}
		}, 9437184, `"v2.gguf": GGUF tensor data, 1 tensors`, ""},
		{"env words before: --model", func() []string {
			return []string{"env", "A=1", "llama-server", "--model", file("e.gguf", gguf{version: 3, tensors: []tensor{{"n", []uint64{4096}, 0, 0}}, data: 16384})}
		}, 16384, `"e.gguf": GGUF tensor data, 1 tensors`, ""},
		{"a data section short of its tensors: not sized", func() []string {
			return []string{"llama-server", "-m", file("short.gguf", gguf{version: 3, kv: llamaKV, tensors: q4km, data: q4kmBytes - 1})}
		}, 0, "", "past the data section's"},
		{"more tensors claimed than listed: the zeros after read as none", func() []string {
			return []string{"llama-server", "-m", file("more.gguf", gguf{version: 3, tensors: q4km, count: 5, data: 0})}
		}, 0, "", `tensor "" has 0 dimensions (1 to 4)`},
		{"a header cut short", func() []string {
			return []string{"llama-server", "-m", file("cut.gguf", gguf{version: 3, kv: func(h []byte) ([]byte, uint64) {
				h = gstr(h, "general.name")
				h = binary.LittleEndian.AppendUint32(h, 8)
				return append(binary.LittleEndian.AppendUint64(h, 100), "ab"...), 1
			}})}
		}, 0, "", "the header ends before its tensor infos do"},
		{"an unknown type", func() []string {
			return []string{"llama-server", "-m", file("type.gguf", gguf{version: 3, tensors: []tensor{{"x", []uint64{32}, 4, 0}}, data: 32})}
		}, 0, "", `tensor "x" has type 4, not known`},
		{"five dimensions", func() []string {
			return []string{"llama-server", "-m", file("dims.gguf", gguf{version: 3, tensors: []tensor{{"x", []uint64{1, 1, 1, 1, 1}, 0, 0}}, data: 4})}
		}, 0, "", `tensor "x" has 5 dimensions (1 to 4)`},
		{"dimensions that overflow", func() []string {
			return []string{"llama-server", "-m", file("huge.gguf", gguf{version: 3, tensors: []tensor{{"x", []uint64{1 << 40, 1 << 40}, 0, 0}}, data: 4})}
		}, 0, "", "more than 2^50 elements"},
		{"not whole blocks", func() []string {
			return []string{"llama-server", "-m", file("blocks.gguf", gguf{version: 3, tensors: []tensor{{"x", []uint64{33}, 2, 0}}, data: 64})}
		}, 0, "", "not whole blocks of 32"},
		{"2^60 tensors claimed", func() []string {
			return []string{"llama-server", "-m", file("many.gguf", gguf{version: 3, count: 1 << 60})}
		}, 0, "", "1152921504606846976 tensors"},
		{"version 1", func() []string {
			return []string{"llama-server", "-m", file("v1.gguf", gguf{version: 1})}
		}, 0, "", "GGUF version 1, not 2 or 3"},
		{"alignment not a power of two", func() []string {
			return []string{"llama-server", "-m", file("align.gguf", gguf{version: 3, kv: alignKV(48)})}
		}, 0, "", "general.alignment 48"},
		{"a string of a terabyte", func() []string {
			return []string{"llama-server", "-m", file("str.gguf", gguf{version: 3, kv: func(h []byte) ([]byte, uint64) {
				return binary.LittleEndian.AppendUint64(h, 1<<40), 1
			}})}
		}, 0, "", "a string of 1099511627776 bytes"},
		{"not a GGUF", func() []string {
			p := filepath.Join(dir, "text.gguf")
			os.WriteFile(p, []byte("hello"), 0o644)
			return []string{"llama-server", "-m", p}
		}, 0, "", "not a GGUF file"},
		{"no such file", func() []string { return []string{"llama-server", "-m", filepath.Join(dir, "gone.gguf")} }, 0, "", `gone.gguf": ` + notFound(t)},
		{"no model named (Ollama)", func() []string { return []string{"env", "OLLAMA_HOST=x", "ollama", "serve"} }, 0, "", "the serve command names no model file"},
		{"a directory with no safetensors", func() []string { return []string{"vllm", "serve", dir + "/none"} }, 0, "", "a directory with no *.safetensors file"},
		{"-m twice (llama.cpp loads the last): not sized", func() []string {
			small := file("small.gguf", gguf{version: 3, tensors: []tensor{{"n", []uint64{4096}, 0, 0}}, data: 16384})
			return []string{"llama-server", "-m", small, "-m", file("big.gguf", gguf{version: 3, kv: llamaKV, tensors: q4km, data: q4kmBytes})}
		}, 0, "", "the serve command names the model more than once"},
		{"--model, then -m: not sized", func() []string {
			return []string{"llama-server", "--model", filepath.Join(dir, "small.gguf"), "-m", filepath.Join(dir, "big.gguf")}
		}, 0, "", `names the model more than once ("`},
		{"vllm serve DIR and --model (vLLM loads DIR): not sized", func() []string {
			return []string{"vllm", "serve", dir + "/none", "--model=" + filepath.Join(dir, "small.gguf")}
		}, 0, "", "names the model more than once"},
		{"the same file named twice: sized", func() []string {
			p := filepath.Join(dir, "small.gguf")
			return []string{"llama-server", "-m", p, "--model=" + p}
		}, 16384, `"small.gguf": GGUF tensor data, 1 tensors`, ""},
	}
	os.Mkdir(filepath.Join(dir, "none"), 0o755)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := Weights(tc.argv())
			if m.WeightsBytes != tc.bytes || m.WeightsFrom != tc.from || !strings.Contains(m.NoWeights, tc.why) || (tc.why == "") != (m.NoWeights == "") {
				t.Errorf("Weights = %d %q %q; want %d %q, not sized %q", m.WeightsBytes, m.WeightsFrom, m.NoWeights, tc.bytes, tc.from, tc.why)
			}
		})
	}
}

// TestWeightsSplits: a GGUF split in files (llama.cpp's gguf-split names
// them -00001-of-00003.gguf) is the weights of every split; one missing
// is not sized.
func TestWeightsSplits(t *testing.T) {
	dir := wintest.TempDir(t)
	for i, n := range []int64{16384, 9437184} {
		tn := q4km[2-2*i]
		tn.offset = 0
		gguf{version: 3, tensors: []tensor{tn}, data: n}.write(t, filepath.Join(dir, "m-0000"+string(rune('1'+i))+"-of-00002.gguf"))
	}
	m := Weights([]string{"llama-server", "-m", filepath.Join(dir, "m-00001-of-00002.gguf")})
	if m.WeightsBytes != 16384+9437184 || m.WeightsFrom != `"m-00001-of-00002.gguf": GGUF tensor data, 2 tensors in 2 splits` {
		t.Errorf("Weights of 2 splits = %+v", m)
	}
	os.Remove(filepath.Join(dir, "m-00002-of-00002.gguf"))
	m = Weights([]string{"llama-server", "-m", filepath.Join(dir, "m-00001-of-00002.gguf")})
	if !strings.Contains(m.NoWeights, `"m-00002-of-00002.gguf": `+notFound(t)) {
		t.Errorf("Weights of a split missing = %+v", m)
	}
}

func writeSafetensors(t *testing.T, path string, hdr any, data int64) {
	t.Helper()
	j, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(j)))
	if err := os.WriteFile(path, append(b, j...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, int64(8+len(j))+data); err != nil {
		t.Fatal(err)
	}
}

func TestWeightsSafetensors(t *testing.T) {
	dir := wintest.TempDir(t)
	model := filepath.Join(dir, "Qwen3-0.6B")
	os.Mkdir(model, 0o755)
	writeSafetensors(t, filepath.Join(model, "model-00001-of-00002.safetensors"), map[string]any{
		"__metadata__": map[string]string{"format": "pt"},
		"a":            map[string]any{"dtype": "BF16", "shape": []int{4, 4}, "data_offsets": []int{0, 32}},
		"b":            map[string]any{"dtype": "BF16", "shape": []int{8}, "data_offsets": []int{32, 48}},
	}, 48)
	writeSafetensors(t, filepath.Join(model, "model-00002-of-00002.safetensors"), map[string]any{
		"c": map[string]any{"dtype": "F32", "shape": []int{1000}, "data_offsets": []int{0, 4000}},
	}, 4000)
	bad := filepath.Join(dir, "bad.safetensors")
	tests := []struct {
		name  string
		argv  []string
		write func()
		bytes int64
		from  string
		why   string
	}{
		{"vllm serve DIR: every shard", []string{"vllm", "serve", model, "--port", "1"}, nil, 48 + 4000, `"Qwen3-0.6B": safetensors data, 2 files`, ""},
		{"python -m MODULE --model FILE", []string{"python3", "-m", "vllm.entrypoints.openai.api_server", "--model", filepath.Join(model, "model-00002-of-00002.safetensors")}, nil, 4000, `"model-00002-of-00002.safetensors": safetensors data`, ""},
		{"python -m MODULE names no model", []string{"python3", "-m", "vllm.entrypoints.openai.api_server"}, nil, 0, "", "names no model file"},
		{"offsets past the data", []string{"x", "--model", bad}, func() {
			writeSafetensors(t, bad, map[string]any{"a": map[string]any{"data_offsets": []int{0, 33}}}, 32)
		}, 0, "", `tensor "a": data_offsets that are not [begin, end] within the file's 32 bytes of data`},
		{"offsets reversed", []string{"x", "--model", bad}, func() {
			writeSafetensors(t, bad, map[string]any{"a": map[string]any{"data_offsets": []int{8, 4}}}, 32)
		}, 0, "", "data_offsets that are not"},
		{"a header longer than the file", []string{"x", "--model", bad}, func() {
			os.WriteFile(bad, binary.LittleEndian.AppendUint64(nil, 1<<20), 0o644)
		}, 0, "", "a header of 1048576 bytes"},
		{"a header past the format's bound", []string{"x", "--model", bad}, func() {
			os.WriteFile(bad, binary.LittleEndian.AppendUint64(nil, MaxSafetensorsHeader+1), 0o644)
			os.Truncate(bad, MaxSafetensorsHeader+100)
		}, 0, "", "a header of 100000001 bytes"},
		{"not JSON", []string{"x", "--model", bad}, func() {
			os.WriteFile(bad, append(binary.LittleEndian.AppendUint64(nil, 2), "[]"...), 0o644)
		}, 0, "", "not a JSON object"},
		{"shorter than its length", []string{"x", "--model", bad}, func() { os.WriteFile(bad, []byte{1, 2}, 0o644) }, 0, "", "shorter than a safetensors header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.write != nil {
				tc.write()
			}
			m := Weights(tc.argv)
			if m.WeightsBytes != tc.bytes || m.WeightsFrom != tc.from || !strings.Contains(m.NoWeights, tc.why) || (tc.why == "") != (m.NoWeights == "") {
				t.Errorf("Weights = %d %q %q; want %d %q, not sized %q", m.WeightsBytes, m.WeightsFrom, m.NoWeights, tc.bytes, tc.from, tc.why)
			}
		})
	}
}

// TestSimulatedModel: the simulated serve's model file (fakellm gguf) is
// sized as written, a GiB of weights in a sparse file.
func TestSimulatedModel(t *testing.T) {
	p := filepath.Join(wintest.TempDir(t), "sim.gguf")
	if err := fakellm.WriteGGUF(p, 2<<30+5); err != nil {
		t.Fatal(err)
	}
	want := route.Memory{WeightsBytes: 2<<30 + 5, WeightsFrom: `"sim.gguf": GGUF tensor data, 3 tensors`}
	if diff := cmp.Diff(want, Weights([]string{"fakellm", "--model", p})); diff != "" {
		t.Errorf("Weights (-want +got):\n%s", diff)
	}
}

// notFound is the system's own words for a file that is not there ("no
// such file or directory" on Linux).
func notFound(t *testing.T) string {
	_, err := os.Open(filepath.Join(wintest.TempDir(t), "not-here"))
	if err == nil {
		t.Fatal("a file that is not there opened")
	}
	return errors.Unwrap(err).Error()
}
