package witness

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/quote"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
)

// Bounds of reading a model file's header. The file is the one the serve
// command names: the user's, but read as untrusted all the same (a file
// that claims 2^60 tensors, strings of a terabyte, dimensions whose
// product overflows).
const (
	// MaxGGUFHeader is how much of a GGUF file's header (its metadata
	// and tensor infos) is read: a tokenizer of 256,000 tokens and as many
	// merges is some 10 MiB.
	MaxGGUFHeader = 256 << 20
	// MaxTensors is the most tensor infos a GGUF file may list (a large
	// MoE model lists tens of thousands), MaxKV its metadata's pairs,
	// MaxString one string's bytes, MaxArray one array's elements.
	MaxTensors = 1 << 20
	MaxKV      = 1 << 16
	MaxString  = 64 << 20
	MaxArray   = 1 << 26
	// MaxSafetensorsHeader is the most a safetensors header may be: the
	// format's own limit (safetensors' MAX_HEADER_SIZE, 100 MB).
	MaxSafetensorsHeader = 100_000_000
	// MaxModelFiles is the most files of one model summed (the splits of
	// a GGUF, the shards of a safetensors directory).
	MaxModelFiles = 4096
)

// Weights is the size of the weights the serve command argv asks the
// serve to load: the model file it names (llama-server's -m/--model, a
// vLLM serve's model directory), its tensor data read from the file's
// header, or why it could not be sized.
func Weights(argv []string) route.Memory {
	name, err := modelFile(argv)
	if err != nil {
		return route.Memory{NoWeights: err.Error()}
	}
	b, from, err := sizeModel(name)
	if err != nil {
		return route.Memory{NoWeights: fmt.Sprintf("%s: %s", quote.Cut(name, 200), short(err))}
	}
	return route.Memory{WeightsBytes: b, WeightsFrom: fmt.Sprintf("%s: %s", quote.Cut(filepath.Base(name), 120), from)}
}

// modelFile is the model file or directory argv names: the word after
// -m or --model (or joined to --model= or -m=), or the word after vLLM's
// serve subcommand. A command that names more than one (-m twice, where
// llama.cpp loads the last; vllm serve DIR with --model, where vLLM
// loads DIR) is not sized: which one the serve loads is its own rule,
// and the weights of another are no measure of its.
func modelFile(argv []string) (string, error) {
	var names []string
	for i, w := range argv {
		if v, ok := strings.CutPrefix(w, "--model="); ok {
			names = append(names, v)
		}
		if w == "--model" && i+1 < len(argv) {
			names = append(names, argv[i+1])
		}
		if v, ok := strings.CutPrefix(w, "-m="); ok {
			names = append(names, v)
		}
		// python -m names a module, not a model
		if w == "-m" && i+1 < len(argv) && (i == 0 || !strings.HasPrefix(filepath.Base(argv[i-1]), "python")) {
			names = append(names, argv[i+1])
		}
		if filepath.Base(w) == "vllm" && i+2 < len(argv) && argv[i+1] == "serve" && !strings.HasPrefix(argv[i+2], "-") {
			names = append(names, argv[i+2])
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) > 1 {
		q := make([]string, 0, 3)
		for _, n := range names[:min(len(names), 3)] {
			q = append(q, quote.Cut(n, 120))
		}
		return "", fmt.Errorf("the serve command names the model more than once (%s): which one it loads is the serve's own rule", strings.Join(q, ", "))
	}
	if len(names) == 0 || names[0] == "" {
		return "", errors.New("the serve command names no model file (-m, --model, vllm serve DIR): the model's size is unknown")
	}
	return names[0], nil
}

// short is why a model file could not be sized: a file system's error
// without the path, which the caller names.
func short(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Err != nil {
		return pe.Err.Error()
	}
	return err.Error()
}

// splitName is llama.cpp's name for one of a GGUF's splits
// (llama_split_path: "%s-%05d-of-%05d.gguf").
var splitName = regexp.MustCompile(`^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// sizeModel is the size of the weights in name: a GGUF file (and its
// other splits), a safetensors file, or a directory of safetensors
// files; and where the figure comes from.
func sizeModel(name string) (int64, string, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return 0, "", err
	}
	if fi.IsDir() {
		files, err := filepath.Glob(filepath.Join(name, "*.safetensors"))
		if err != nil || len(files) == 0 {
			return 0, "", errors.New("a directory with no *.safetensors file")
		}
		if len(files) > MaxModelFiles {
			return 0, "", fmt.Errorf("%d safetensors files, more than %d", len(files), MaxModelFiles)
		}
		var sum int64
		for _, f := range files {
			b, err := safetensorsSize(f)
			if err != nil {
				return 0, "", fmt.Errorf("%s: %s", quote.Cut(filepath.Base(f), 120), short(err))
			}
			sum += b
		}
		return sum, fmt.Sprintf("safetensors data, %d files", len(files)), nil
	}
	if !fi.Mode().IsRegular() {
		return 0, "", errors.New("not a regular file")
	}
	if strings.HasSuffix(name, ".safetensors") {
		b, err := safetensorsSize(name)
		return b, "safetensors data", err
	}
	files := []string{name}
	if m := splitName.FindStringSubmatch(name); m != nil {
		n, _ := strconv.Atoi(m[3])
		if n < 1 || n > MaxModelFiles {
			return 0, "", fmt.Errorf("a split of %d files", n)
		}
		files = files[:0]
		for i := 1; i <= n; i++ {
			files = append(files, fmt.Sprintf("%s-%05d-of-%05d.gguf", m[1], i, n))
		}
	}
	var sum int64
	tensors := 0
	for _, f := range files {
		b, n, err := ggufSize(f)
		if err != nil {
			if len(files) > 1 {
				err = fmt.Errorf("%s: %s", quote.Cut(filepath.Base(f), 120), short(err))
			}
			return 0, "", err
		}
		sum += b
		tensors += n
	}
	from := fmt.Sprintf("GGUF tensor data, %d tensors", tensors)
	if len(files) > 1 {
		from += fmt.Sprintf(" in %d splits", len(files))
	}
	return sum, from, nil
}

// ggmlType is a ggml tensor type's block: elements a block, bytes a
// block (ggml/src/ggml.c, type_traits; ggml/include/ggml.h, enum
// ggml_type). Types that were removed are absent: a file naming one is
// not sized.
type ggmlType struct{ block, size int64 }

var ggmlTypes = map[uint32]ggmlType{
	0: {1, 4}, 1: {1, 2}, // F32, F16
	2: {32, 18}, 3: {32, 20}, // Q4_0, Q4_1
	6: {32, 22}, 7: {32, 24}, // Q5_0, Q5_1
	8: {32, 34}, 9: {32, 36}, // Q8_0, Q8_1
	10: {256, 84}, 11: {256, 110}, 12: {256, 144}, // Q2_K, Q3_K, Q4_K
	13: {256, 176}, 14: {256, 210}, 15: {256, 292}, // Q5_K, Q6_K, Q8_K
	16: {256, 66}, 17: {256, 74}, 18: {256, 98}, // IQ2_XXS, IQ2_XS, IQ3_XXS
	19: {256, 50}, 20: {32, 18}, 21: {256, 110}, // IQ1_S, IQ4_NL, IQ3_S
	22: {256, 82}, 23: {256, 136}, // IQ2_S, IQ4_XS
	24: {1, 1}, 25: {1, 2}, 26: {1, 4}, 27: {1, 8}, 28: {1, 8}, // I8, I16, I32, I64, F64
	29: {256, 56}, 30: {1, 2}, // IQ1_M, BF16
	34: {256, 54}, 35: {256, 66}, // TQ1_0, TQ2_0
	39: {32, 17}, // MXFP4
}

// ggufReader reads a GGUF header, counting what it read against
// MaxGGUFHeader.
type ggufReader struct {
	br   *bufio.Reader
	read int64
	err  error
}

func (g *ggufReader) need(n int64) bool {
	if g.err != nil {
		return false
	}
	if n < 0 || g.read+n > MaxGGUFHeader {
		g.err = fmt.Errorf("a header of more than %d MiB: not read", MaxGGUFHeader>>20)
		return false
	}
	g.read += n
	return true
}

func (g *ggufReader) u32() uint32 {
	var b [4]byte
	if g.need(4) {
		_, g.err = io.ReadFull(g.br, b[:])
	}
	return binary.LittleEndian.Uint32(b[:])
}

func (g *ggufReader) u64() uint64 {
	var b [8]byte
	if g.need(8) {
		_, g.err = io.ReadFull(g.br, b[:])
	}
	return binary.LittleEndian.Uint64(b[:])
}

func (g *ggufReader) skip(n uint64) {
	if n > MaxGGUFHeader || !g.need(int64(n)) {
		if g.err == nil {
			g.err = fmt.Errorf("a header of more than %d MiB: not read", MaxGGUFHeader>>20)
		}
		return
	}
	_, g.err = g.br.Discard(int(n))
}

// str reads a string: its bytes kept when keep, else skipped.
func (g *ggufReader) str(keep bool) string {
	n := g.u64()
	if g.err != nil {
		return ""
	}
	if n > MaxString {
		g.err = fmt.Errorf("a string of %d bytes (at most %d)", n, MaxString)
		return ""
	}
	if !keep {
		g.skip(n)
		return ""
	}
	if !g.need(int64(n)) {
		return ""
	}
	b := make([]byte, n)
	_, g.err = io.ReadFull(g.br, b)
	return string(b)
}

// ggufScalar is the bytes of each GGUF metadata value type of fixed size
// (gguf.h, enum gguf_type): 8 is a string, 9 an array.
var ggufScalar = map[uint32]uint64{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

// value reads a metadata value of type t, returning it when it is an
// integer (general.alignment is one).
func (g *ggufReader) value(t uint32, depth int) uint64 {
	if size, ok := ggufScalar[t]; ok {
		switch size {
		case 4:
			return uint64(g.u32())
		case 8:
			return g.u64()
		}
		g.skip(size)
		return 0
	}
	switch t {
	case 8:
		g.str(false)
	case 9:
		et, n := g.u32(), g.u64()
		if g.err != nil {
			return 0
		}
		if n > MaxArray || depth > 0 {
			g.err = fmt.Errorf("an array of %d elements (at most %d, not nested)", n, MaxArray)
			return 0
		}
		if size, ok := ggufScalar[et]; ok {
			g.skip(n * size)
			return 0
		}
		for i := uint64(0); i < n && g.err == nil; i++ {
			g.value(et, depth+1)
		}
	default:
		if g.err == nil {
			g.err = fmt.Errorf("a metadata value of type %d, not known", t)
		}
	}
	return 0
}

// ggufSize reads a GGUF file's header (gguf.cpp, gguf_init_from_file):
// "GGUF", its version (2 or 3), the counts of tensors and of metadata
// pairs, the metadata, then each tensor's name, dimensions, type and
// offset into the data section. The weights' size is the tensors' bytes,
// each within the data section the file holds.
func ggufSize(name string) (int64, int, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	g := &ggufReader{br: bufio.NewReaderSize(f, 1<<20)}
	var magic [4]byte
	if _, err := io.ReadFull(g.br, magic[:]); err != nil || string(magic[:]) != "GGUF" {
		return 0, 0, errors.New("not a GGUF file (no GGUF magic)")
	}
	g.read = 4
	version := g.u32()
	if g.err == nil && version != 2 && version != 3 {
		return 0, 0, fmt.Errorf("GGUF version %d, not 2 or 3", version)
	}
	nTensors, nKV := g.u64(), g.u64()
	if g.err == nil && (nTensors > MaxTensors || nKV > MaxKV) {
		return 0, 0, fmt.Errorf("%d tensors and %d metadata pairs (at most %d and %d)", nTensors, nKV, MaxTensors, MaxKV)
	}
	align := uint64(32) // GGUF_DEFAULT_ALIGNMENT
	for i := uint64(0); i < nKV && g.err == nil; i++ {
		key := g.str(true)
		t := g.u32()
		v := g.value(t, 0)
		if key == "general.alignment" && (t == 4 || t == 10) {
			align = v
		}
	}
	if g.err == nil && (align == 0 || align&(align-1) != 0 || align > 1<<20) {
		return 0, 0, fmt.Errorf("general.alignment %d is not a power of two up to 1 MiB", align)
	}
	type info struct {
		bytes, offset uint64
	}
	infos := make([]info, 0, min(nTensors, 4096))
	for i := uint64(0); i < nTensors && g.err == nil; i++ {
		tname := g.str(true)
		nd := g.u32()
		if g.err == nil && (nd == 0 || nd > 4) { // GGML_MAX_DIMS
			return 0, 0, fmt.Errorf("tensor %s has %d dimensions (1 to 4)", quote.Cut(tname, 80), nd)
		}
		ne := uint64(1)
		for range nd {
			d := g.u64()
			hi, lo := bits.Mul64(ne, d)
			if hi != 0 || lo > 1<<50 {
				return 0, 0, fmt.Errorf("tensor %s has more than 2^50 elements", quote.Cut(tname, 80))
			}
			ne = lo
		}
		t, off := g.u32(), g.u64()
		if g.err != nil {
			break
		}
		tt, ok := ggmlTypes[t]
		if !ok {
			return 0, 0, fmt.Errorf("tensor %s has type %d, not known", quote.Cut(tname, 80), t)
		}
		if ne%uint64(tt.block) != 0 {
			return 0, 0, fmt.Errorf("tensor %s has %d elements, not whole blocks of %d", quote.Cut(tname, 80), ne, tt.block)
		}
		infos = append(infos, info{ne / uint64(tt.block) * uint64(tt.size), off})
	}
	if g.err != nil {
		if errors.Is(g.err, io.EOF) || errors.Is(g.err, io.ErrUnexpectedEOF) {
			return 0, 0, errors.New("the header ends before its tensor infos do")
		}
		return 0, 0, g.err
	}
	start := (uint64(g.read) + align - 1) / align * align
	if start > uint64(fi.Size()) {
		return 0, 0, errors.New("the data section starts past the file's end")
	}
	data := uint64(fi.Size()) - start
	var sum uint64
	for _, in := range infos {
		if in.offset > data || in.bytes > data-in.offset {
			return 0, 0, fmt.Errorf("a tensor of %d bytes at %d, past the data section's %d bytes (a file cut short?)", in.bytes, in.offset, data)
		}
		sum += in.bytes
		if sum > route.MaxMemoryBytes {
			return 0, 0, fmt.Errorf("tensors of more than %d bytes", int64(route.MaxMemoryBytes))
		}
	}
	return int64(sum), len(infos), nil
}

// safetensorsSize reads a safetensors file's header: 8 bytes of its
// length, then JSON naming each tensor's data_offsets [begin, end) in
// the data that follows (huggingface/safetensors, docs: "the byte
// buffer"). The size is the tensors' bytes, each within the file.
func safetensorsSize(name string) (int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	var lenb [8]byte
	if _, err := io.ReadFull(f, lenb[:]); err != nil {
		return 0, errors.New("shorter than a safetensors header")
	}
	n := binary.LittleEndian.Uint64(lenb[:])
	if n > MaxSafetensorsHeader || n > uint64(fi.Size())-8 {
		return 0, fmt.Errorf("a header of %d bytes (at most %d, and within the file)", n, MaxSafetensorsHeader)
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return 0, errors.New("the header ends before its length")
	}
	var tensors map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &tensors); err != nil {
		return 0, errors.New("a header that is not a JSON object")
	}
	data := uint64(fi.Size()) - 8 - n
	var sum uint64
	keys := make([]string, 0, len(tensors))
	for k := range tensors {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k == "__metadata__" {
			continue
		}
		var t struct {
			Offsets []uint64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(tensors[k], &t); err != nil || len(t.Offsets) != 2 || t.Offsets[0] > t.Offsets[1] || t.Offsets[1] > data {
			return 0, fmt.Errorf("tensor %s: data_offsets that are not [begin, end] within the file's %d bytes of data", quote.Cut(k, 80), data)
		}
		sum += t.Offsets[1] - t.Offsets[0]
		if sum > route.MaxMemoryBytes {
			return 0, fmt.Errorf("tensors of more than %d bytes", int64(route.MaxMemoryBytes))
		}
	}
	return int64(sum), nil
}
