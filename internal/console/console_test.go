package console

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// runnerReads reports whether a GitHub Actions runner would read line as a
// workflow command, by its two rules (actions/runner, ActionCommand.cs):
// TryParseV2, "::" after leading white space and a second "::" later; and
// TryParse, "##[" anywhere with a "]" after it.
func runnerReads(line string) bool {
	v2 := strings.TrimLeftFunc(line, unicode.IsSpace)
	if strings.HasPrefix(v2, "::") && strings.Contains(v2[2:], "::") {
		return true
	}
	if i := strings.Index(line, "##["); i >= 0 && strings.Contains(line[i:], "]") {
		return true
	}
	return false
}

// hostile is text from elsewhere as an attacker writes it.
var hostile = []string{
	"::error::x",
	"::add-mask::hunter2",
	"::stop-commands::t",
	"  \t::warning file=a::b",
	"\u00a0::notice::nbsp",
	"##[add-mask]secret",
	"ok ##[error]mid-line",
	"\x1b[31mred\x1b[0m\x1b]0;title\x07",
	"two\n::error::lines",
	"cr\r::error::return",
	"nel\u0085::error::x",
	"sep\u2028::error::x",
	"bad utf-8 \xff\xfe",
	"\x9b31m c1 csi",
	"bidi \u202eexe.txt\u202c \u2066isolate\u2069 \u200bzero\u200dwidth \ufeffbom \U000e0041tag",
}

// rawControl reports whether s holds a byte or rune a terminal acts on.
func rawControl(s string) bool {
	return !utf8.ValidString(s) || strings.ContainsFunc(s, func(c rune) bool {
		return unicode.IsControl(c) || unicode.Is(unicode.Cf, c) || c == '\u2028' || c == '\u2029'
	})
}

func TestText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text: std::vector, [::1]:8080", "plain text: std::vector, [::1]:8080"},
		{"::error::x", `\x3a:error::x`},
		{"  ::add-mask::y", `  \x3a:add-mask::y`},
		{"##[add-mask]secret", `##\[add-mask]secret`},
		{"a\x1b[31mb", `a\x1b[31mb`},
		{"two\nlines", `two\nlines`},
		{"\n::error::after a break", `\n::error::after a break`},
		{"sep\u2028x", `sep\u2028x`},
		{"ok \u202eevil.exe\u2066 x\u200by", `ok \u202eevil.exe\u2066 x\u200by`},
		{"\u00adsoft \u200e\u200f \u061c \ufeff", `\u00adsoft \u200e\u200f \u061c \ufeff`},
		{"\U000e0041", `\U000e0041`},
		{"accents é ñ 中文 👍", "accents é ñ 中文 👍"},
		{"bytes \xff\x9b and \ufffd", `bytes \xff\x9b and ` + "\ufffd"},
	}
	for _, tt := range tests {
		if got := Text(tt.in); got != tt.want {
			t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTextHostile(t *testing.T) {
	for _, s := range hostile {
		got := Text(s)
		if rawControl(got) || strings.ContainsAny(got, "\r\n") {
			t.Errorf("Text(%q) = %q holds a raw control", s, got)
		}
		if runnerReads(got) || runnerReads("prefix "+got) {
			t.Errorf("Text(%q) = %q reads as a workflow command", s, got)
		}
		if again := Text(got); again != got {
			t.Errorf("Text(Text(%q)) = %q, want it unchanged %q", s, again, got)
		}
	}
}

var stopLine = regexp.MustCompile(`^::stop-commands::(npu-serve-smoke-[0-9a-f]{32})$`)

func TestCommandsStop(t *testing.T) {
	var b bytes.Buffer
	c := &Commands{}
	resume := c.Stop(&b)
	if !c.Stopped() {
		t.Errorf("Stopped() = false after Stop")
	}
	if inner := c.Stop(&b); inner != nil {
		inner() // a stop inside a stop writes nothing
	}
	resume()
	if c.Stopped() {
		t.Errorf("Stopped() = true after resume")
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	m := stopLine.FindStringSubmatch(lines[0])
	if len(lines) != 2 || m == nil || lines[1] != "::"+m[1]+"::" {
		t.Fatalf("Stop wrote %q, want stop-commands with a random token, then the token to resume", lines)
	}
	b.Reset()
	c.Stop(&b)()
	if strings.Contains(b.String(), m[1]) {
		t.Errorf("the token %s was used twice", m[1])
	}
}

func TestCommandsNil(t *testing.T) {
	var b bytes.Buffer
	var c *Commands
	c.Stop(&b)()
	if b.Len() != 0 || c.Stopped() {
		t.Errorf("nil Commands: Stop wrote %q, Stopped() = %v; want nothing and false", b.String(), c.Stopped())
	}
}

func TestPrinterOutsideActions(t *testing.T) {
	var b bytes.Buffer
	p := NewPrinter(&b, nil)
	for _, s := range hostile {
		p.Printf("serve: %s", s)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(hostile) {
		t.Fatalf("Printf printed %d lines for %d calls:\n%s", len(lines), len(hostile), b.String())
	}
	for _, l := range lines {
		if rawControl(l) || runnerReads(l) {
			t.Errorf("Printf printed %q", l)
		}
	}
	b.Reset()
	p.Write([]byte("usage:\n  two lines\n::error::x\x1b[2J\n"))
	if want := "usage:\n  two lines\n\\x3a:error::x\\x1b[2J\n"; b.String() != want {
		t.Errorf("Write printed %q, want %q", b.String(), want)
	}
}

func TestPrinterInActions(t *testing.T) {
	var b bytes.Buffer
	c := &Commands{}
	p := NewPrinter(&b, c)

	// While the runner reads commands, a line gets a stop of its own.
	p.Printf("error: %s", "::error::x")
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	m := stopLine.FindStringSubmatch(lines[0])
	if len(lines) != 3 || m == nil || lines[1] != "error: ::error::x" || lines[2] != "::"+m[1]+"::" {
		t.Errorf("Printf outside a stop printed %q, want the line between a stop and its resume", lines)
	}

	// Inside the gate's stop, lines are printed bare.
	b.Reset()
	resume := c.Stop(&b)
	b.Reset()
	p.Printf("serve: %s", "\x1b[31m::add-mask::y")
	p.Write([]byte("RESULT: FAIL\n"))
	resume()
	lines = strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 || lines[0] != `serve: \x1b[31m::add-mask::y` || lines[1] != "RESULT: FAIL" || !strings.HasPrefix(lines[2], "::npu-serve-smoke-") {
		t.Errorf("inside the stop printed %q", lines)
	}

	// A partial line is ended before a stop-commands, which must start a line.
	b.Reset()
	p.Write([]byte("no line break"))
	p.Printf("next")
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, "::stop-commands::") && !strings.HasPrefix(l, "::stop-commands::") {
			t.Errorf("a stop-commands inside a line: %q", b.String())
		}
	}
}

func BenchmarkText(b *testing.B) {
	for name, s := range map[string]string{
		"plain":   strings.Repeat("llama_model_loader: loaded meta data with 29 key-value pairs ", 4),
		"hostile": strings.Repeat("\x1b[31m::error::x ##[add-mask]y\n", 8),
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				Text(s)
			}
		})
	}
}
