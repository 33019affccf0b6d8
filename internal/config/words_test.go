package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"   ", nil},
		{"llama-server -m {model} --port {port}", []string{"llama-server", "-m", "{model}", "--port", "{port}"}},
		{"  a\t b\n c ", []string{"a", "b", "c"}},
		{`a 'b c' "d e"`, []string{"a", "b c", "d e"}},
		{`'it''s'`, []string{"its"}},
		{`"a \"quoted\" \\ \$HOME \x"`, []string{`a "quoted" \ $HOME \x`}},
		{`a\ b c`, []string{"a b", "c"}},
		{"a \\\n b", []string{"a", "b"}},
		{`''`, []string{""}},
		{`x "" y`, []string{"x", "", "y"}},
		{`$HOME $(rm -rf /) ; | && *`, []string{"$HOME", "$(rm", "-rf", "/)", ";", "|", "&&", "*"}},
		{`--chat-template '{% if x %}'`, []string{"--chat-template", "{% if x %}"}},
		{`pre"mid"'post'`, []string{"premidpost"}},
		{`"é ü"`, []string{"é ü"}},
	}
	for _, tt := range tests {
		got, err := SplitWords(tt.in)
		if err != nil {
			t.Errorf("SplitWords(%q) error = %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("SplitWords(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestSplitWordsErrors(t *testing.T) {
	for in, want := range map[string]string{
		`serve 'unclosed`:    "single quote",
		`serve "unclosed`:    "double quote",
		`serve "a\"`:         "double quote",
		`serve \`:            "lone backslash",
		`serve 'a' "b" 'c`:   "single quote",
		`serve "it's" "open`: "double quote",
	} {
		if _, err := SplitWords(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("SplitWords(%q) error = %v, want one naming the %s", in, err, want)
		}
	}
}

func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{`a 'b c' "d\" e"`, `x\ y`, `"`, "a\\\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := SplitWords(s)
		if err != nil {
			return
		}
		// Quoting the words and splitting again gives the same words.
		line := QuoteWords(words...)
		again, err := SplitWords(line)
		if err != nil {
			t.Fatalf("SplitWords(QuoteWords(...) = %q) error = %v", line, err)
		}
		if diff := cmp.Diff(words, again); diff != "" {
			t.Fatalf("round trip of %q (-first +again):\n%s", s, diff)
		}
	})
}

func TestQuoteWords(t *testing.T) {
	words := []string{"/opt/my serve/bin", "--port", "{port}", "it's", "", "$HOME", `a"b`}
	line := QuoteWords(words...)
	if want := `'/opt/my serve/bin' --port {port} 'it'\''s' '' '$HOME' 'a"b'`; line != want {
		t.Errorf("QuoteWords(%q) = %s, want %s", words, line, want)
	}
	got, err := SplitWords(line)
	if err != nil || !cmp.Equal(words, got) {
		t.Errorf("SplitWords(QuoteWords(%q)) = %q, %v", words, got, err)
	}
}
