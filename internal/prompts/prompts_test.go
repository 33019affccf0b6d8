package prompts

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

func TestParse(t *testing.T) {
	in := `# a comment

What is the capital of France?
{"prompt": "Name a prime", "expect": "\\d+"}
  spaced prompt  
`
	got, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Prompt{
		{Prompt: "What is the capital of France?"},
		{Prompt: "Name a prime", Expect: `\d+`},
		{Prompt: "spaced prompt"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse() (-want +got):\n%s", diff)
	}
}

func TestParseByteOrderMark(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Prompt
	}{
		{"JSON first line", "\uFEFF{\"prompt\": \"Name a prime\", \"expect\": \"\\\\d+\"}\nsecond\n", []Prompt{{Prompt: "Name a prime", Expect: `\d+`}, {Prompt: "second"}}},
		{"plain first line", "\uFEFFhello\n", []Prompt{{Prompt: "hello"}}},
		{"a comment first", "\uFEFF# prompts\nhello\n", []Prompt{{Prompt: "hello"}}},
	}
	for _, tt := range tests {
		got, err := Parse(strings.NewReader(tt.in))
		if err != nil {
			t.Errorf("%s: Parse(%q) error = %v", tt.name, tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: Parse(%q) (-want +got):\n%s", tt.name, tt.in, diff)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"empty", "\n# only a comment\n", []string{"no prompts in it"}},
		{"bad json and bad pattern, both named", "{\"prompt\": \"x\"\nok\n{\"prompt\": \"y\", \"expect\": \"(\"}\n", []string{"line 1: not a JSON prompt", `line 3: expect "(" is not a valid RE2 pattern`}},
		{"unknown field", `{"promt": "x"}`, []string{"line 1: not a JSON prompt", "unknown field"}},
		{"empty prompt", `{"prompt": "  "}`, []string{`line 1: "prompt" is empty`}},
		{"junk after the JSON", "first\n{\"prompt\": \"x\", \"expect\": \"y\"} trailing\n", []string{`line 2: "trailing" follows the JSON prompt`}},
		{"a second object after the JSON", `{"prompt": "x"}{"prompt": "y"}`, []string{`line 1: "{\"prompt\": \"y\"}" follows the JSON prompt`}},
	}
	for _, tt := range tests {
		_, err := Parse(strings.NewReader(tt.in))
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Parse() error = %v, want it to contain %q", tt.name, err, w)
			}
		}
	}
}

func TestLoad(t *testing.T) {
	dir := wintest.TempDir(t)
	p := filepath.Join(dir, "p.txt")
	if err := os.WriteFile(p, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := Load(p); err != nil || len(got) != 1 || got[0].Prompt != "hello" {
		t.Errorf("Load(%s) = %v, %v, want one prompt", p, got, err)
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "--prompts") {
		t.Errorf("Load(missing) error = %v, want one naming --prompts", err)
	}
	bad := filepath.Join(dir, "bad.txt")
	os.WriteFile(bad, []byte("{\n"), 0o644)
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("Load(bad) error = %v, want one naming the file", err)
	}
	junk := filepath.Join(dir, "junk.txt")
	os.WriteFile(junk, []byte("one\n{\"prompt\": \"two\"},\n"), 0o644)
	if _, err := Load(junk); err == nil || !strings.Contains(err.Error(), junk+": line 2: \",\" follows the JSON prompt") {
		t.Errorf("Load(junk) error = %v, want one naming the file and line 2", err)
	}
}

func TestBuiltin(t *testing.T) {
	b := Builtin()
	if len(b) != 5 {
		t.Errorf("len(Builtin()) = %d, want 5", len(b))
	}
	seen := map[string]bool{}
	for _, p := range b {
		if seen[p.Prompt] || p.Prompt == "" {
			t.Errorf("Builtin() has an empty or repeated prompt %q", p.Prompt)
		}
		seen[p.Prompt] = true
	}
}

func TestWarmupAndForReply(t *testing.T) {
	builtin := Builtin()
	w := Warmup(builtin)
	for _, p := range builtin {
		if p.Prompt == w.Prompt || strings.Fields(p.Prompt)[0] == strings.Fields(w.Prompt)[0] {
			t.Errorf("Warmup() = %q: it must differ from the judged %q from its first word", w.Prompt, p.Prompt)
		}
	}
	if w2 := Warmup([]Prompt{w}); w2.Prompt == w.Prompt {
		t.Errorf("Warmup of a file holding the warm-up prompt = %q, want another", w2.Prompt)
	}

}

func TestAsked(t *testing.T) {
	a, b := Prompt{Prompt: "alpha", Expect: "A"}, Prompt{Prompt: "beta"}
	tests := []struct {
		ps       []Prompt
		i, round int
		want     Prompt
	}{
		{[]Prompt{a, b}, 0, 1, a},
		{[]Prompt{a, b}, 1, 1, b},
		{[]Prompt{a, b}, 0, 2, Prompt{Prompt: "Request 2.1: alpha", Expect: "A"}},
		{[]Prompt{a, b}, 1, 3, Prompt{Prompt: "Request 3.2: beta"}},
		{[]Prompt{a}, 0, 1, a},
		{[]Prompt{a, b, a}, 2, 1, Prompt{Prompt: "Request 1.3: alpha", Expect: "A"}},
		{[]Prompt{a, b, b}, 1, 1, b},
	}
	for _, tt := range tests {
		if got := Asked(tt.ps, tt.i, tt.round); got != tt.want {
			t.Errorf("Asked(%v, %d, %d) = %+v, want %+v", tt.ps, tt.i, tt.round, got, tt.want)
		}
	}
}

// Each round asks every prompt once, in an order of its own drawn from the
// seed: the same seed, the same order; the k-th asking of a prompt reads
// the same whatever the seed; and no two requests of a run ask the same.
func TestOrder(t *testing.T) {
	builtin := Builtin()
	w := Warmup(builtin)
	const rounds = 4
	asked := func(seed uint64) []string {
		var texts []string
		o := NewOrder(builtin, seed)
		for n := 1; n <= rounds*len(builtin); n++ {
			texts = append(texts, o.Request(n).Prompt)
		}
		return texts
	}
	runs := map[uint64][]string{}
	for _, seed := range []uint64{0, 1, 2, 42, MaxSeed} {
		texts := asked(seed)
		runs[seed] = texts
		seen := map[string]bool{w.Prompt: true}
		for n, p := range texts {
			if seen[p] {
				t.Errorf("seed %d: request %d = %q, asked before", seed, n+1, p)
			}
			seen[p] = true
		}
		// Round r asks exactly Asked(ps, i, r) for every i.
		for r := 1; r <= rounds; r++ {
			var want, got []string
			for i := range builtin {
				want = append(want, Asked(builtin, i, r).Prompt)
			}
			got = append(got, texts[(r-1)*len(builtin):r*len(builtin)]...)
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(want, got) {
				t.Errorf("seed %d, round %d asks %q, want %q in some order", seed, r, got, want)
			}
		}
	}
	if !slices.Equal(asked(42), runs[42]) {
		t.Errorf("seed 42 asked two orders")
	}
	// The seeds shuffle: not every seed gives the file's order, nor one
	// order for all rounds.
	firstRound := map[string]bool{}
	for _, texts := range runs {
		firstRound[strings.Join(texts[:len(builtin)], "|")] = true
	}
	if len(firstRound) < 3 {
		t.Errorf("5 seeds gave %d first rounds, want them shuffled", len(firstRound))
	}
	o := NewOrder(builtin, 7)
	if slices.Equal(o.Round(1), o.Round(2)) && slices.Equal(o.Round(2), o.Round(3)) {
		t.Errorf("seed 7: rounds 1-3 in one order %v", o.Round(1))
	}
	// Every position of a round is reached: over many seeds each prompt
	// comes first at least once (a shuffle that never moves the last
	// element fails).
	first := map[int]bool{}
	last := map[int]bool{}
	for seed := range uint64(200) {
		r := NewOrder(builtin, seed).Round(1)
		first[r[0]], last[r[len(r)-1]] = true, true
	}
	if len(first) != len(builtin) || len(last) != len(builtin) {
		t.Errorf("200 seeds put %d prompts first and %d last, want all %d", len(first), len(last), len(builtin))
	}
}

func TestNewSeed(t *testing.T) {
	seen := map[uint64]bool{}
	for range 100 {
		s := NewSeed()
		if s > MaxSeed {
			t.Errorf("NewSeed() = %d, above MaxSeed", s)
		}
		seen[s] = true
	}
	if len(seen) < 99 {
		t.Errorf("100 seeds drawn, %d different", len(seen))
	}
}

func TestBuiltinDifferFromTheFirstWord(t *testing.T) {
	first := map[string]string{}
	for _, p := range Builtin() {
		w := strings.Fields(p.Prompt)[0]
		if q, ok := first[w]; ok {
			t.Errorf("built-in prompts %q and %q start alike: a prompt cache would share their opening", q, p.Prompt)
		}
		first[w] = p.Prompt
	}
}
