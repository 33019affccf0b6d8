package logscan

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

func matcher(t testing.TB) *route.Matcher {
	m, err := route.NewMatcher(route.DefaultFast, route.DefaultSlow)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func scan(t testing.TB, log string) Result {
	t.Helper()
	res, err := Scan(strings.NewReader(log), matcher(t))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestTerminal: the log as a terminal shows it, line by line.
func TestTerminal(t *testing.T) {
	tests := []struct {
		name string
		log  string
		want []string
	}{
		{"plain lines", "a\nb\n", []string{"a", "b"}},
		{"no final line feed", "a\nb", []string{"a", "b"}},
		{"CRLF is one break", "a\r\nb\r\n", []string{"a", "b"}},
		{"a progress bar's steps are lines", "10%\r50%\r100%\ndone\n", []string{"10%", "50%", "100%", "done"}},
		{"a lone carriage return at the end", "a\r", []string{"a"}},
		{"empty lines stay", "a\n\nb\n", []string{"a", "", "b"}},
		{"SGR colour", "\x1b[1;31mper-op\x1b[0m forward\n", []string{"per-op forward"}},
		{"CSI with private parameters and intermediates", "a\x1b[?25lb\x1b[2 qc\n", []string{"abc"}},
		{"erase line and cursor moves", "\x1b[2K\x1b[1Gline\x1b[K\n", []string{"line"}},
		{"OSC ended by BEL", "\x1b]0;title\x07text\n", []string{"text"}},
		{"OSC ended by ST", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n", []string{"link"}},
		{"an open OSC ends at the line break", "\x1b]0;title\nper-op forward\n", []string{"", "per-op forward"}},
		{"DCS, APC, PM, SOS", "\x1bPq#0\x1b\\a\x1b_x\x1b\\b\x1b^y\x07c\x1bXz\x07d\n", []string{"abcd"}},
		{"charset designation", "\x1b(Bab\x1b)0c\x1b#8\n", []string{"abc"}},
		{"single ESC x", "\x1b7a\x1b8b\x1bMc\x1b=\n", []string{"abc"}},
		{"ESC ESC", "\x1b\x1b[31ma\n", []string{"a"}},
		{"ESC then a line break", "a\x1b\nb\n", []string{"a", "b"}},
		{"CSI cut by a line break", "a\x1b[31\nb\n", []string{"a", "b"}},
		{"other controls are not shown", "a\x00b\x07c\x7fd\te\n", []string{"abcd\te"}},
		{"backspace removes a character", "abx\bc\n", []string{"abc"}},
		{"backspace after a wide character", "aé\bb\n", []string{"ab"}},
		{"UTF-8 and bytes over 0x7f after ESC", "\x1bé!\n", []string{"é!"}},
		{"zero-width space and soft hyphen are not shown", "per-op\u200b forward\nper-\u00adop\n", []string{"per-op forward", "per-op"}},
		{"word joiner, BOM, bidi controls are not shown", "\ufeffa\u2060b\u202ec\u2066d\n", []string{"abcd"}},
		{"other characters stay", "é€😀\u0664\n", []string{"é€😀\u0664"}},
		{"a cut character before a line break is shown as it is", "a\xe2\x80\nb\n", []string{"a\xe2\x80", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewScanner(matcher(t))
			s.Write([]byte(tt.log))
			s.Result()
			if diff := cmp.Diff(tt.want, s.shown.all()); diff != "" {
				t.Errorf("Scan(%q), as shown (-want +got):\n%s", tt.log, diff)
			}
			// The same log written a byte at a time reads the same.
			s = NewScanner(matcher(t))
			for i := range len(tt.log) {
				s.Write([]byte{tt.log[i]})
			}
			s.Result()
			if diff := cmp.Diff(tt.want, s.shown.all()); diff != "" {
				t.Errorf("Scan(%q) a byte at a time: Tail (-want +got):\n%s", tt.log, diff)
			}
		})
	}
}

// TestRouteAsShown: slow lines a serve really prints are found: colour
// inside the phrase, after a progress bar longer than a window, far into a
// long line, across a window's cut.
func TestRouteAsShown(t *testing.T) {
	bar := strings.Repeat("\rloading "+strings.Repeat("#", 50), 4000) // 240 KB of steps, no line feed
	long := strings.Repeat("z", 3*route.MaxLine+123)
	tests := []struct {
		name      string
		log       string
		slowLine  int
		fast      bool
		longLines int
	}{
		{"colour inside the phrase", "ready on the private route dx\nno kernel; \x1b[33mper-op\x1b[0m \x1b[1mforward\x1b[0m\n", 2, true, 0},
		{"after a long progress bar", "ready on the private route dx\n" + bar + "\rper-op forward\n", 2, true, 0},
		{"past 64 KiB into a line", "ready on the private route dx\n" + long + " per-op forward\n", 2, true, 1},
		{"across the cut of a window", "x" + strings.Repeat("y", route.MaxLine-8) + "per-op forward" + strings.Repeat("y", 10) + "\n", 1, false, 1},
		{"line numbers count line feeds, not carriage returns", "a\rb\rc\nper-op forward\n", 2, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := scan(t, tt.log).Route
			if ev.Slow == nil || ev.Slow.Line != tt.slowLine || !strings.Contains(ev.Slow.Text, "per-op forward") {
				t.Errorf("Route.Slow = %+v, want line %d quoting the phrase", ev.Slow, tt.slowLine)
			}
			if (ev.Fast != nil) != tt.fast {
				t.Errorf("Route.Fast = %+v, want found %v", ev.Fast, tt.fast)
			}
			if ev.LongLines != tt.longLines {
				t.Errorf("Route.LongLines = %d, want %d", ev.LongLines, tt.longLines)
			}
			if len(ev.Slow.Text) > 1000 {
				t.Errorf("Route.Slow.Text is %d bytes; want an excerpt", len(ev.Slow.Text))
			}
		})
	}
}

func TestAnchoredPatternsAndWindows(t *testing.T) {
	m, err := route.NewMatcher([]string{`^ready$`}, []string{`^slow`, `end$`})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("q", route.MaxLine-2) + "slow" + strings.Repeat("q", 10) + "end" + strings.Repeat("q", route.MaxLine)
	res, err := Scan(strings.NewReader(long+"\nready\n"), m)
	if err != nil {
		t.Fatal(err)
	}
	if res.Route.Slow != nil {
		t.Errorf("Route.Slow = %+v: an anchored pattern matched at a window's cut, not at a line's start or end", res.Route.Slow)
	}
	if res.Route.Fast == nil || res.Route.Fast.Line != 2 {
		t.Errorf("Route.Fast = %+v, want line 2", res.Route.Fast)
	}
}

func TestTailAndBytes(t *testing.T) {
	var b strings.Builder
	b.WriteString(strings.Repeat("x", route.MaxLine+10) + "\n")
	for i := range 50 {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	b.WriteString("no final newline")
	res := scan(t, b.String())
	var want []string
	for i := 11; i < 50; i++ {
		want = append(want, fmt.Sprintf("line %d", i))
	}
	want = append(want, "no final newline")
	if diff := cmp.Diff(want, res.Tail); diff != "" {
		t.Errorf("Tail (-want +got):\n%s", diff)
	}
	if res.Bytes != int64(b.Len()) {
		t.Errorf("Bytes = %d, want %d", res.Bytes, b.Len())
	}
	if res.Route.Lines != 52 {
		t.Errorf("Route.Lines = %d, want 52", res.Route.Lines)
	}
	// The tail is the log as written: escapes kept for the report to show
	// escaped, a line's final carriage return dropped.
	res = scan(t, "\x1b[31mred\x1b[0m\r\nx\ry\nlast")
	if diff := cmp.Diff([]string{"\x1b[31mred\x1b[0m", "x\ry", "last"}, res.Tail); diff != "" {
		t.Errorf("Tail as written (-want +got):\n%s", diff)
	}
	long := strings.Repeat("y", route.MaxLine*2)
	res = scan(t, long+"\n")
	if diff := cmp.Diff([]string{long[:TailLineMax]}, res.Tail); diff != "" {
		t.Errorf("Tail of a long line (-want +got):\n%s", diff)
	}
}

func TestScanFileMissing(t *testing.T) {
	if _, err := ScanFile(wintest.TempDir(t)+"/nope.log", matcher(t)); err == nil {
		t.Error("ScanFile of a missing file: no error")
	}
}

// FuzzScan: whatever a serve prints before it, a slow line after a line
// break is found; the scan reads the same however the stream is cut; what
// it shows holds no escape or control character.
func FuzzScan(f *testing.F) {
	for _, s := range []string{"", "a\nb", "\x1b[31mred\x1b[0m", "\x1b]0;t\x07", "\x1b]8;;u\x1b\\", "\x1bP", "\x1b(", "\r\r\n", "x\b\by", "\x1b[", "é\x1b\xc3\xa9", strings.Repeat("w", 70000)} {
		f.Add(s, uint16(3))
	}
	f.Fuzz(func(t *testing.T, noise string, cut uint16) {
		log := noise + "\nper-op forward\n"
		whole := scan(t, log)
		if whole.Route.Slow == nil {
			t.Fatalf("Scan(%q): the slow line after the noise was not found", log)
		}
		s := NewScanner(matcher(t))
		k := int(cut) % (len(log) + 1)
		s.Write([]byte(log[:k]))
		s.Write([]byte(log[k:]))
		if diff := cmp.Diff(whole, s.Result()); diff != "" {
			t.Fatalf("Scan(%q) cut at %d (-whole +cut):\n%s", log, k, diff)
		}
		shown := NewScanner(matcher(t))
		shown.Write([]byte(log))
		shown.Result()
		for _, l := range shown.shown.all() {
			if i := bytes.IndexFunc([]byte(l), func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }); i >= 0 {
				t.Fatalf("Scan(%q): tail line %q holds a control character", log, l)
			}
		}
	})
}

// logReader serves n bytes of serve-like log lines without holding them.
type logReader struct {
	left int64
	line []byte
	off  int
}

func (r *logReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && r.left > 0 {
		c := copy(p[n:], r.line[r.off:])
		if int64(c) > r.left {
			c = int(r.left)
		}
		n += c
		r.left -= int64(c)
		r.off = (r.off + c) % len(r.line)
	}
	return n, nil
}

// BenchmarkScan reads a 256 MiB log; B/op shows the memory stays bounded
// whatever the log's size.
func BenchmarkScan(b *testing.B) {
	const size = 256 << 20
	line := []byte("slot update_slots: id  0 | task 12 | prompt processing progress, n_past = 512, n_tokens = 512, progress = 0.5\n")
	b.SetBytes(size)
	for b.Loop() {
		if _, err := Scan(&logReader{left: size, line: line}, matcher(b)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScanColour reads 256 MiB of coloured lines with progress-bar
// carriage returns.
func BenchmarkScanColour(b *testing.B) {
	const size = 256 << 20
	line := []byte("\x1b[32mINFO\x1b[0m 11-30 02:10:00 [loader.py:42] \x1b[1mloading\x1b[0m shards: 42%|\x1b[36m####      \x1b[0m| 5/12\r\n")
	b.SetBytes(size)
	for b.Loop() {
		if _, err := Scan(&logReader{left: size, line: line}, matcher(b)); err != nil {
			b.Fatal(err)
		}
	}
}

// A serve on Windows ends its lines with "\r\n": the route is read from
// them as from the same log with "\n" alone, the same lines at the same
// numbers, quoted without the carriage return.
func TestRouteCRLF(t *testing.T) {
	log := "loading\nready on the private route dx\n\x1b[31mno kernel: per-op forward\x1b[0m\nserving\n"
	lf := scan(t, log)
	crlf := scan(t, strings.ReplaceAll(log, "\n", "\r\n"))
	if lf.Route.Slow == nil || lf.Route.Fast == nil {
		t.Fatalf("Route of the log with line feeds = %+v, want both routes' lines", lf.Route)
	}
	if diff := cmp.Diff(lf.Route, crlf.Route); diff != "" {
		t.Errorf("Route (-lines ending \\n +lines ending \\r\\n):\n%s", diff)
	}
	if crlf.Route.Slow.Text != "no kernel: per-op forward" || crlf.Route.Slow.Line != 3 {
		t.Errorf("Route.Slow of the \\r\\n log = %+v, want line 3 quoted without colour or carriage return", crlf.Route.Slow)
	}
}
