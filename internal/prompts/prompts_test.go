package prompts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
	dir := t.TempDir()
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
